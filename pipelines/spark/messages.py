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

from amqp_dissect.results.messages import (DEAD, DELIVERED, MAX_LISTED, MAX_PACKETS, PUBLISH_MISSING, PUBLISHED,
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


def messages_frame(spark, deliveries, links, connections):
    """The messages DataFrame (the registry's columns and Spark types, in the single process's row
    order) of the deliveries, links and connections DataFrames of ``read_captures``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from amqp_dissect.results.tables import spark_schema

    tz = spark.conf.get("spark.sql.session.timeZone")
    col = F.col
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
    by_time = Window.partitionBy(*_KEYS).orderBy(col("ft").asc_nulls_last(), col("fp").asc_nulls_last())
    prod = (d.where(col("role") == "producer")
            .withColumn("_n", F.row_number().over(by_time))
            .withColumn("publishes", F.count(F.lit(1)).over(Window.partitionBy(*_KEYS)))
            .where(col("_n") == 1)
            .select(*_KEYS, "publishes", col("connection").alias("p_conn"), col("link").alias("p_link"),
                    col("link_index").alias("p_lidx"), col("address").alias("p_addr"), col("ft").alias("p_time"),
                    col("fp").alias("p_pkt"), col("outcome").alias("p_outcome"), col("ot").alias("p_otime")))

    # the consumer links of each key
    cons = d.where(col("role") == "consumer")
    rel = col("outcome").isin("released", "modified")
    min_rel = cons.groupBy(*_KEYS).agg(F.min(F.when(rel & col("ot").isNotNull(), col("ot"))).alias("min_rel"))
    groups = (cons.groupBy(*_KEYS, "connection", "link_index").agg(
        F.count(F.lit(1)).alias("n"),
        F.min(F.struct(col("ft"), col("fp"), col("link"), col("address"))).alias("first"),
        F.max(F.struct(col("ft"), col("fp"), col("outcome"), col("op"))).alias("last"),
        F.max(F.when(col("ot").isNotNull(), F.struct(col("ft"), col("fp"), col("ot")))).alias("fin"))
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
        F.min("first.ft").alias("first_consumer_time"),
        F.max("first.ft").alias("last_first"),
        F.min(F.struct(col("first.ft"), col("first.fp"), col("fin.ot").alias("ot"))).alias("first_group"),
        F.max("fin.ot").alias("max_ot"),
        F.sum(F.greatest(col("n") - F.coalesce(allowed, F.lit(1)), F.lit(0))).alias("repeats"),
        F.sort_array(F.collect_list(F.struct(col("first.ft"), col("first.fp"), entry.alias("e")))).alias("listed"))
    cons_key = cons.join(min_rel, _KEYS).groupBy(*_KEYS).agg(
        F.max("dc").alias("max_dc"),
        F.sum(rel.cast("long")).alias("rel_mod"),
        F.sum((col("min_rel").isNotNull() & (col("ft") >= col("min_rel"))).cast("long")).alias("after_release"),
        F.min(F.struct(col("ft"), col("fp"), col("address"))).alias("c_first"))
    rank = F.when(col("role") == "consumer", 0).when(col("role") == "producer", 1).otherwise(2)
    every = d.groupBy(*_KEYS).agg(
        F.first("k_type", ignorenulls=True).alias("k_type"),
        F.min("ft").alias("first_time"),
        F.min("fp").alias("first_packet"),
        F.min(F.struct(col("ft"), col("fp"), col("address"))).alias("any_first"),
        F.min(F.when(col("dead").isNotNull(), F.struct(rank.alias("r"), col("ft"), col("fp"), col("dead"))))
        .alias("dead"),
        F.sum((col("role") == "unknown").cast("long")).alias("unknown_role"),
        F.sort_array(F.collect_list(F.struct(col("ft"), col("fp")))).alias("pk"),
        F.sort_array(F.collect_list(F.when(col("why").isNotNull(), F.struct(col("ft"), col("fp"), col("why")))))
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
                       F.when(both & (col("first_consumer_time") < col("p_time")),
                              F.lit("a consumer's transfer came before the publish (the id was used again?)")),
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
        "first_consumer_time",
        F.when(both, _secs(col("first_consumer_time"), col("p_time"))).alias("residence"),
        F.when(both, _secs(col("last_first"), col("p_time"))).alias("residence_max"),
        F.when(both, _secs(col("first_group.ot"), col("p_time"))).alias("end_to_end"),
        F.when(both, _secs(col("max_ot"), col("p_time"))).alias("end_to_end_max"),
        col("max_dc").alias("redeliveries_by_count"),
        repeats.alias("redeliveries_by_repeat"),
        F.coalesce(col("rel_mod"), F.lit(0)).alias("released_or_modified"),
        col("unknown_role"),
        why_text.alias("role_evidence"),
        F.lit(0).alias("untracked"),
        packets.alias("packets"),
        F.when(note != "", note).alias("note"),
        col("kt").alias("_kt"),
    ).orderBy(col("first_time").asc_nulls_last(), col("first_packet").asc_nulls_last(), "matched_by", "_kt",
              F.coalesce(col("message_id"), col("bare_digest")))
    schema = spark_schema("messages")
    return out.select(*[col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
