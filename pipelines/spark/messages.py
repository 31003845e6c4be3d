"""The messages table on Spark: ``read_captures(spark, paths, tables=[..., "messages"])["messages"]``.

The single process's rules (:mod:`amqp_dissect.results.messages`) as DataFrame operations on the
deliveries, links and connections DataFrames: the deliveries with a key (message-id with its
type, else the bare message's digest) take their side from the links table, a connection whose
client is a broker (its container-id is the server's of another connection) makes its
deliveries' role unknown; the producer is the earliest publish of a key (a window), the
consumers are grouped by consumer link, then by key; no delivery leaves the executors but a
broker annotation's evidence, read by a small function of the single process (only for
deliveries that carry annotations or properties).

Differences from the single process: Spark's times are microseconds (the durations are those of
the microsecond times; a nanosecond capture's times in ``consumer_deliveries`` have six digits),
``consumer_deliveries`` is compact JSON (the same values), and no key is bounded to 64 kept
deliveries (``untracked`` is 0: the rows are spread over the executors).
"""

from __future__ import annotations

from amqp_dissect.results.messages import (CLOCK_STEP_NOTE, DEAD, DELIVERED, MAX_LISTED, MAX_PACKETS, PUBLISH_MISSING, PUBLISHED,
                                           TWICE, UNKNOWN, deadletter_evidence)

_KEYS = ["matched_by", "kt", "k_id"]


def _dead(ma, ap):
    return deadletter_evidence({"message_annotations": ma, "application_properties": ap})


def _secs(a, b):
    """(a - b) in seconds, from the microsecond timestamps (null when either is)."""
    from pyspark.sql import functions as F

    return (F.unix_micros(a) - F.unix_micros(b)) / F.lit(1e6)


def _iso(ts, tz: str):
    """A timestamp as the single process's ISO text (six digits, UTC)."""
    from pyspark.sql import functions as F

    return F.concat(F.date_format(F.to_utc_timestamp(ts, tz), "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"), F.lit("Z"))


def _epoch(packet, steps):
    """The epoch of the capture clock at ``packet`` (the steps at or before it; 0 when null): times
    compare within an epoch (amqp_dissect.clock.ClockWatch.epoch)."""
    from pyspark.sql import functions as F

    e = F.lit(0)
    for p in steps:
        e = e + F.when(packet >= F.lit(p), 1).otherwise(0)
    return e


def _spans(a, b, steps):
    """Whether a step of the capture clock lies between packets ``a`` and ``b`` (ClockWatch.spans)."""
    from pyspark.sql import functions as F

    lo, hi = F.least(a, b), F.greatest(a, b)
    out = F.lit(False)
    for p in steps:
        out = out | ((lo < F.lit(p)) & (hi >= F.lit(p)))
    return a.isNotNull() & b.isNotNull() & out


def messages_frame(spark, deliveries, links, connections, clock_steps=()):
    """The messages DataFrame (the registry's columns and Spark types, in the single process's row
    order) of the deliveries, links and connections DataFrames of ``read_captures``;
    ``clock_steps``: the capture's (``CaptureTables.clock_steps``): "earliest" goes by the
    capture's order across a step, a residence or end to end across one is null."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from amqp_dissect.results.tables import spark_schema

    tz = spark.conf.get("spark.sql.session.timeZone")
    col = F.col
    steps = sorted(st["packet"] for st in clock_steps or ())
    dead_udf = F.udf(_dead, T.StringType())
    mid, dig = col("message_id"), col("bare_digest")
    d = deliveries.where(mid.isNotNull() | dig.isNotNull()).select(
        F.when(mid.isNotNull(), F.lit("message-id")).otherwise(F.lit("digest")).alias("matched_by"),
        F.when(mid.isNotNull(), col("message_id_type")).alias("k_type"),
        F.coalesce(F.when(mid.isNotNull(), col("message_id_type")), F.lit("")).alias("kt"),
        F.coalesce(mid, dig).alias("k_id"),
        "connection", "link", "link_index", "address", col("sender_side").alias("d_side"),
        col("first_time").alias("ft"), col("first_packet").alias("fp"),
        F.when(col("outcome") != "", col("outcome")).alias("outcome"),
        col("outcome_time").alias("ot"), col("outcome_packet").alias("op"),
        col("header_delivery_count").alias("dc"),
        _epoch(col("first_packet"), steps).alias("fe"), _epoch(col("outcome_packet"), steps).alias("oe"),
        F.when(col("message_annotations").isNotNull() | col("application_properties").isNotNull(),
               dead_udf(col("message_annotations"), col("application_properties"))).alias("dead"))
    # the side of each delivery: the links table's, else the delivery's
    lk = links.select("connection", "link_index", F.coalesce(
        col("sender_side"), F.when(col("role") == "sender", "client").when(col("role") == "receiver", "server")
    ).alias("l_side"))
    # connections whose client is a broker: its container-id is the server's of another connection
    idx = connections.withColumn("_i", F.monotonically_increasing_id())
    servers = (idx.where(col("container_id_server").isNotNull() & (col("container_id_server") != ""))
               .groupBy(col("container_id_server").alias("cid"))
               .agg(F.min_by("connection", "_i").alias("other")))
    brokers = (idx.select("connection", col("container_id_client").alias("cid"))
               .join(servers, "cid").where(col("other") != col("connection"))
               .select("connection", F.concat(
                   F.lit("connection "), col("connection"), F.lit(": its client (container-id '"), col("cid"),
                   F.lit("') is the server of connection "), col("other"), F.lit(": broker to broker")
               ).alias("broker")))
    d = d.join(lk, ["connection", "link_index"], "left").join(F.broadcast(brokers), "connection", "left")
    side = F.coalesce(col("l_side"), col("d_side"))
    d = d.withColumn("role", F.when(col("broker").isNotNull(), "unknown").when(side == "client", "producer")
                     .when(side == "server", "consumer").otherwise("unknown"))
    d = d.withColumn("why", F.when(col("broker").isNotNull(), col("broker")).when(
        col("role") == "unknown", F.concat(F.lit("link '"), col("link"), F.lit("' of "), col("connection"),
                                           F.lit(": the sending side is not known (its attach was not seen)"))))
    d = d.cache()

    # the producer: the earliest publish of the key
    by_time = Window.partitionBy(*_KEYS).orderBy(col("ft").isNull(), col("fe"), col("ft").asc_nulls_last(),
                                                 col("fp").asc_nulls_last())
    prod = (d.where(col("role") == "producer")
            .withColumn("_n", F.row_number().over(by_time))
            .withColumn("publishes", F.count(F.lit(1)).over(Window.partitionBy(*_KEYS)))
            .where(col("_n") == 1)
            .select(*_KEYS, "publishes", col("connection").alias("p_conn"), col("link").alias("p_link"),
                    col("link_index").alias("p_lidx"), col("address").alias("p_addr"), col("ft").alias("p_time"),
                    col("fp").alias("p_pkt"), col("fe").alias("p_fe"), col("outcome").alias("p_outcome"), col("ot").alias("p_otime")))

    # the consumer links of each key
    cons = d.where(col("role") == "consumer")
    rel = col("outcome").isin("released", "modified")
    min_rel = cons.groupBy(*_KEYS).agg(F.min(F.when(rel & col("ot").isNotNull(), F.struct(col("oe"), col("ot"))))
                                       .alias("min_rel"))
    groups = (cons.groupBy(*_KEYS, "connection", "link_index").agg(
        F.count(F.lit(1)).alias("n"),
        F.min(F.struct(col("fe"), col("ft"), col("fp"), col("link"), col("address"))).alias("first"),
        F.max(F.struct(col("fe"), col("ft"), col("fp"), col("outcome"), col("op"))).alias("last"),
        F.max(F.when(col("ot").isNotNull(), F.struct(col("fe"), col("ft"), col("fp"), col("ot"), col("op"),
                                                     col("oe")))).alias("fin"))
        .join(prod.select(*_KEYS, "publishes"), _KEYS, "left"))
    allowed = F.when(col("matched_by") == "digest", F.greatest(F.lit(1), F.coalesce(col("publishes"), F.lit(0))))
    entry = F.struct(
        col("first.address").alias("address"), col("connection").alias("connection"), col("n").alias("deliveries"),
        col("first.fp").alias("first_packet"), _iso(col("first.ft"), tz).alias("first_time"),
        col("first.link").alias("link"), col("link_index").alias("link_index"),
        col("last.outcome").alias("outcome"), col("last.op").alias("outcome_packet"))
    per_key = groups.groupBy(*_KEYS).agg(
        F.count(F.lit(1)).alias("consumers"),
        F.sum("n").alias("deliveries"),
        F.min(F.when(col("first.ft").isNotNull(), col("first"))).alias("fc"),
        F.max(F.when(col("first.ft").isNotNull(), col("first"))).alias("lc"),
        F.min(F.struct(col("first.fe"), col("first.ft"), col("first.fp"), col("fin.ot").alias("ot"),
                       col("fin.op").alias("op"))).alias("first_group"),
        F.max(F.when(col("fin").isNotNull(), F.struct(col("fin.oe"), col("fin.ot").alias("ot"),
                                                      col("fin.op").alias("op")))).alias("max_o"),
        F.sum(F.greatest(col("n") - F.coalesce(allowed, F.lit(1)), F.lit(0))).alias("repeats"),
        F.sort_array(F.collect_list(F.struct(col("first.fe"), col("first.ft"), col("first.fp"), entry.alias("e"))))
        .alias("listed"))
    cons_key = cons.join(min_rel, _KEYS).groupBy(*_KEYS).agg(
        F.max("dc").alias("max_dc"),
        F.sum(rel.cast("long")).alias("rel_mod"),
        F.sum((col("min_rel").isNotNull() & (F.struct(col("fe"), col("ft")) >= col("min_rel")))
              .cast("long")).alias("after_release"),
        F.min(F.struct(col("fe"), col("ft"), col("fp"), col("address"))).alias("c_first"))
    rank = F.when(col("role") == "consumer", 0).when(col("role") == "producer", 1).otherwise(2)
    every = d.groupBy(*_KEYS).agg(
        F.first("k_type", ignorenulls=True).alias("k_type"),
        F.min(F.when(col("ft").isNotNull(), F.struct(col("fe"), col("ft")))).ft.alias("first_time"),
        F.min("fp").alias("first_packet"),
        F.min(F.struct(col("fe"), col("ft"), col("fp"), col("address"))).alias("any_first"),
        F.min(F.when(col("dead").isNotNull(), F.struct(rank.alias("r"), col("fe"), col("ft"), col("fp"), col("dead"))))
        .alias("dead"),
        F.sum((col("role") == "unknown").cast("long")).alias("unknown_role"),
        F.sort_array(F.collect_list(F.struct(col("fe"), col("ft"), col("fp")))).alias("pk"),
        F.sort_array(F.collect_list(F.when(col("why").isNotNull(), F.struct(col("fe"), col("ft"), col("fp"),
                                                                            col("why")))))
        .alias("whys"))
    m = every.join(prod, _KEYS, "left").join(per_key, _KEYS, "left").join(cons_key, _KEYS, "left")

    pub = F.coalesce(col("publishes"), F.lit(0))
    ncons = F.coalesce(col("consumers"), F.lit(0))
    repeats = F.coalesce(col("repeats"), F.lit(0))
    after = F.coalesce(col("after_release"), F.lit(0))
    twice = F.concat_ws("; ",
                        F.when(repeats > 0, F.concat(repeats.cast("string"), F.lit(" repeat(s) to the same consumer"))),
                        F.when(col("max_dc") > 0, F.concat(F.lit("header delivery-count "), col("max_dc").cast("string"))),
                        F.when(after > 0, F.concat(after.cast("string"),
                                                   F.lit(" delivery(ies) after a released / modified outcome"))))
    whys = F.array_distinct(F.transform(col("whys"), lambda s: s["why"]))
    why_text = F.when(F.size(whys) > 0, F.array_join(whys, "; "))
    has_cons, has_prod = ncons > 0, pub > 0
    state = (F.when(col("dead").isNotNull(), DEAD).when(~has_prod & ~has_cons, UNKNOWN)
             .when(~has_prod, PUBLISH_MISSING).when(~has_cons, PUBLISHED).when(twice != "", TWICE)
             .otherwise(DELIVERED))
    evidence = (F.when(col("dead").isNotNull(), col("dead.dead")).when(~has_prod & ~has_cons, why_text)
                .when(~has_prod | ~has_cons, F.lit(None)).when(twice != "", twice))
    both = has_cons & col("p_time").isNotNull()
    fct, lct = col("fc.ft"), col("lc.ft")
    across = [_spans(col("p_pkt"), col(pk), steps) & col(t).isNotNull()
              for t, pk in (("fc.ft", "fc.fp"), ("lc.ft", "lc.fp"), ("first_group.ot", "first_group.op"),
                            ("max_o.ot", "max_o.op"))]
    listed = F.transform(F.slice(col("listed"), 1, MAX_LISTED), lambda s: s["e"])
    listed_json = F.when(has_cons, F.concat(
        F.regexp_replace(F.to_json(col("_listed"), {"ignoreNullFields": "false"}), r"\]$", ""),
        F.when(col("consumers") > MAX_LISTED, F.concat(F.lit(', {"more": '), (col("consumers") - MAX_LISTED)
                                                       .cast("string"), F.lit("}"))).otherwise(F.lit("")),
        F.lit("]"))).otherwise(F.lit("[]"))
    pk = F.filter(F.transform(col("pk"), lambda s: s["fp"]), lambda x: x.isNotNull())
    packets = F.concat(F.lit("["), F.array_join(F.transform(F.slice(pk, 1, MAX_PACKETS), lambda x: x.cast("string")),
                                                ", "),
                       F.when(F.size(pk) > MAX_PACKETS, F.lit(', "..."')).otherwise(F.lit("")), F.lit("]"))
    note = F.concat_ws("; ",
                       F.when(both & (F.struct(col("fc.fe"), fct) < F.struct(col("p_fe"), col("p_time"))),
                              F.lit("a consumer's transfer came before the publish (the id was used again?)")),
                       F.when(both & (across[0] | across[1] | across[2] | across[3]), F.lit(CLOCK_STEP_NOTE)),
                       F.when(pub > 1, F.concat(F.lit("published "), pub.cast("string"), F.lit(" times"),
                                                F.when(col("matched_by") == "digest", F.lit(
                                                    " (identical bare messages without message-id are one row)"))
                                                .otherwise(F.lit("")))))
    m = m.withColumn("_listed", listed)
    out = m.select(
        F.when(col("matched_by") == "message-id", col("k_id")).alias("message_id"),
        col("k_type").alias("message_id_type"),
        F.when(col("matched_by") == "digest", col("k_id")).alias("bare_digest"),
        "matched_by",
        state.alias("state"),
        evidence.alias("state_evidence"),
        F.when(col("p_conn").isNotNull(), col("p_addr")).when(has_cons, col("c_first.address"))
        .otherwise(col("any_first.address")).alias("address"),
        "first_time", "first_packet",
        col("p_conn").alias("producer_connection"), col("p_link").alias("producer_link"),
        col("p_lidx").alias("producer_link_index"), col("p_addr").alias("producer_address"),
        col("p_time").alias("producer_time"), col("p_pkt").alias("producer_packet"),
        col("p_outcome").alias("producer_outcome"), col("p_otime").alias("producer_outcome_time"),
        pub.alias("publishes"), ncons.alias("consumers"), F.coalesce(col("deliveries"), F.lit(0)).alias("deliveries"),
        listed_json.alias("consumer_deliveries"),
        fct.alias("first_consumer_time"),
        F.when(both & ~across[0], _secs(fct, col("p_time"))).alias("residence"),
        F.when(both & ~across[1], _secs(lct, col("p_time"))).alias("residence_max"),
        F.when(both & ~across[2], _secs(col("first_group.ot"), col("p_time"))).alias("end_to_end"),
        F.when(both & ~across[3], _secs(col("max_o.ot"), col("p_time"))).alias("end_to_end_max"),
        col("max_dc").alias("redeliveries_by_count"),
        repeats.alias("redeliveries_by_repeat"),
        F.coalesce(col("rel_mod"), F.lit(0)).alias("released_or_modified"),
        col("unknown_role"),
        why_text.alias("role_evidence"),
        F.lit(0).alias("untracked"),
        packets.alias("packets"),
        F.when(note != "", note).alias("note"),
        col("kt").alias("_kt"),
        _epoch(col("first_packet"), steps).alias("_fe"),
    ).orderBy(col("first_time").isNull(), "_fe", col("first_time").asc_nulls_last(), col("first_packet").asc_nulls_last(), "matched_by", "_kt",
              F.coalesce(col("message_id"), col("bare_digest")))
    schema = spark_schema("messages")
    return out.select(*[col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
