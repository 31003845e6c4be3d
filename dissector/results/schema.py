"""The column registry: every column of every result table, with one fixed type and its meaning.

Plain data only (no pandas / pyarrow / pyspark here): :mod:`amqp_dissect.results.tables` turns it
into the pandas dtypes, the Arrow/Parquet schema and the Spark schema, and
``python -m amqp_dissect.results.schema --markdown`` renders the column tables of docs/tables.md.

Types (``Column.type``), with what they become in pandas / Parquet (Arrow) / Spark:

=====================  ======================  =======================  ==================
type                   pandas                  Parquet (Arrow)          Spark
=====================  ======================  =======================  ==================
``string``             ``string``              ``string``               ``StringType``
``int64``              ``Int64``               ``int64``                ``LongType``
``uint64``             ``UInt64``              ``uint64``               ``DecimalType(20,0)``
``bool``               ``boolean``             ``bool``                 ``BooleanType``
``float64``            ``float64``             ``double``               ``DoubleType``
``timestamp[ns, UTC]`` ``datetime64[ns, UTC]`` ``timestamp[ns, UTC]``   ``TimestampType``
``json``               ``string`` (JSON text)  ``string`` (JSON text)   ``StringType``
=====================  ======================  =======================  ==================

Every type is nullable.  Durations and latencies are ``float64`` seconds, computed as the
difference of two integer times, then divided once (so 796 µs is ``0.000796``).  The analyzer's
rows (:mod:`amqp_dissect.results.analytics`) carry times as integer nanoseconds since the epoch,
exactly as the capture holds them; the typed layer makes them UTC timestamps with nanosecond
resolution (the years 1677 to 2262; a time outside them is null, and the text table writes its
raw epoch seconds).  Spark's ``TimestampType`` holds microseconds: a nanosecond capture's times
lose their last three digits there.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

STRING, INT, UINT64, BOOL, FLOAT, TIME, JSON = (
    "string", "int64", "uint64", "bool", "float64", "timestamp[ns, UTC]", "json")
TYPES = (STRING, INT, UINT64, BOOL, FLOAT, TIME, JSON)


class Column(NamedTuple):
    name: str
    type: str
    meaning: str

    @property
    def categorical(self) -> bool:
        """A text column whose values repeat over the rows (a closed set of words, or one value per
        connection, link or peer): a pandas categorical in the Python API (amqp_dissect.analyze),
        other text columns are Arrow-backed strings.  Decided by the name, in CATEGORICAL."""
        return self.type == STRING and self.name in CATEGORICAL


#: the text columns that are categoricals in the Python API (by name, in every table that has them)
CATEGORICAL = frozenset({
    "connection", "link", "sender", "receiver", "address", "source", "target", "client", "server",  # per link / peer
    "sender_side", "side", "initiator", "role", "settled_by", "outcome", "outcome_by", "outcome_error",
    "snd_settle_mode", "rcv_settle_mode", "unsettled_at", "kind", "waiting_evidence", "ended_by", "detached_by",
    "closed_by", "terminated", "state_client", "state_server", "transport_end", "negotiation", "sasl_mechanism",
    "sasl_outcome", "tls_version", "tls_cipher", "severity", "origin", "scope", "condition", "coordinator",
    "declare_outcome", "discharge_outcome", "state", "close_error", "end_error", "detach_error", "declare_error",
    "discharge_error",
})


def _cols(*specs: tuple[str, str, str]) -> tuple[Column, ...]:
    return tuple(Column(*s) for s in specs)


def _pair(name: str, typ: str, meaning: str) -> tuple[tuple[str, str, str], ...]:
    """``name_client`` and ``name_server`` with one meaning ("... of the client / server")."""
    return ((f"{name}_client", typ, meaning.replace("{side}", "client")),
            (f"{name}_server", typ, meaning.replace("{side}", "server")))


_CONN = ("connection", STRING, "connection id: client-server endpoints ('#n' when a 4-tuple is reused)")
_CHANNEL = ("channel", INT, "the session's channel as the client numbers it (the server's if the client's is unknown)")
_SESSION = ("session", INT, "0-based index of the session in its connection, in order of first sight")
_LINK_INDEX = ("link_index", INT, "0-based index of the link in its connection, in order of first sight")

CONNECTIONS = _cols(
    _CONN,
    ("client", STRING, "ip:port of the TCP client (the initiator)"),
    ("server", STRING, "ip:port of the TCP server"),
    ("syn_seen", BOOL, "the TCP handshake was captured"),
    ("mid_connection", BOOL, "the capture did not see the connection start"),
    ("lossy", BOOL, "a TCP gap or resynchronisation lost bytes"),
    ("missing_direction", STRING, "one direction captured: the side none of whose packets the capture holds "
     "(client or server: the other side's ACKs acknowledge its bytes, or it sent none by the end); null when "
     "both were captured"),
    ("tls", BOOL, "the connection carries TLS"),
    ("tls_undecrypted_bytes", INT, "TLS bytes not decrypted (no key for the connection, no key log, or records "
     "that failed authentication); null when none"),
    ("tls_note", STRING, "why TLS bytes were not decrypted, e.g. \"TLS, no keys for client random …\""),
    ("tls_version", STRING, "TLS version of the handshake, e.g. \"TLS 1.3\"; null when not known (no TLS, or no "
     "key log given: the handshake is then not parsed)"),
    ("tls_cipher", STRING, "cipher suite the server chose, e.g. \"TLS_AES_256_GCM_SHA384\"; null when not known"),
    ("websocket", BOOL, "the AMQP stream is carried over a WebSocket (an HTTP upgrade with subprotocol amqp)"),
    ("ws_path", STRING, "path of the WebSocket upgrade request, e.g. \"/amqp\"; null without a WebSocket"),
    *_pair("protocol_headers", JSON, "list of the protocol headers the {side} sent, e.g. [\"SASL 1.0.0\", \"AMQP 1.0.0\"]"),
    ("negotiation", STRING, "text when the two sides' protocol headers differed, else null"),
    ("sasl", BOOL, "a SASL layer was used"),
    ("sasl_mechanisms", JSON, "list of the SASL mechanisms the server offered"),
    ("sasl_mechanism", STRING, "SASL mechanism chosen in sasl-init"),
    ("sasl_hostname", STRING, "hostname of sasl-init"),
    ("sasl_outcome", STRING, "sasl-outcome code name: ok, auth, sys, sys-perm, sys-temp"),
    ("sasl_outcome_code", INT, "sasl-outcome code number"),
    *_pair("sasl_frames", INT, "SASL frames the {side} sent"),
    *_pair("container_id", STRING, "container-id of the {side}'s open"),
    ("hostname", STRING, "hostname of the client's open"),
    ("max_frame_size_client", INT, "max-frame-size of the client's open (spec default applied when absent)"),
    ("max_frame_size_client_default", BOOL, "true: the field was absent and the spec default 4294967295 applied"),
    ("max_frame_size_server", INT, "max-frame-size of the server's open (spec default applied when absent)"),
    ("max_frame_size_server_default", BOOL, "true: the field was absent and the spec default 4294967295 applied"),
    ("channel_max_client", INT, "channel-max of the client's open (spec default applied when absent)"),
    ("channel_max_client_default", BOOL, "true: the field was absent and the spec default 65535 applied"),
    ("channel_max_server", INT, "channel-max of the server's open (spec default applied when absent)"),
    ("channel_max_server_default", BOOL, "true: the field was absent and the spec default 65535 applied"),
    *_pair("idle_time_out", INT, "idle-time-out of the {side}'s open, milliseconds (null when absent)"),
    ("open_time", TIME, "time of the first open"),
    *_pair("open_time", TIME, "time of the {side}'s open"),
    ("close_time", TIME, "time of the first close"),
    *_pair("close_time", TIME, "time of the {side}'s close"),
    ("closed_by", STRING, "side of the first close: client, server, unknown (the other side's close may have "
                          "been lost in a capture gap before it), or empty"),
    ("close_error", STRING, "condition of the first close carrying an error"),
    ("close_description", STRING, "description of that error"),
    ("errors", JSON, "list of {condition, description, scope, side, channel, link} of every close / end / detach "
                     "error on the connection"),
    ("sessions", INT, "sessions on the connection"),
    ("links", INT, "links on the connection"),
    ("deliveries", INT, "deliveries on the connection"),
    *_pair("frames", INT, "AMQP frames the {side} sent, heartbeats included"),
    *_pair("frame_counts", JSON, "{performative: frames} of every frame the {side} sent, SASL included "
                                 "(\"empty\" for heartbeats)"),
    *_pair("heartbeats", INT, "empty frames (heartbeats) the {side} sent"),
    ("state", JSON, "{\"client\": state, \"server\": state}: the final connection endpoint states"),
    *_pair("state", STRING, "final connection endpoint state of the {side} (spec name, or UNKNOWN)"),
    ("transport_end", STRING, "how TCP ended: fin (both FINs), rst, idle, or null"),
    ("transport_end_time", TIME, "time the TCP connection ended"),
    ("first_time", TIME, "time of the connection's first packet"),
    ("last_time", TIME, "time of its last packet"),
    ("first_packet", INT, "capture record number (1-based) of the first packet"),
    ("last_packet", INT, "capture record number of the last packet"),
    ("violations", INT, "protocol violations on the connection"),
    ("stalls", INT, "stalls on the connection (idle periods not counted)"),
    ("unknown", JSON, "list of what the capture could not show (e.g. \"open (client)\", \"sasl\")"),
    *_pair("gaps", INT, "TCP gaps in the bytes the {side} sent: holes the capture lost (found by the peer's ACKs, "
                        "a FIN or RST past them, or the end of the capture)"),
    *_pair("gap_bytes", INT, "bytes the {side} sent that the capture lost (the sizes of its gaps)"),
    *_pair("undecoded_bytes", INT, "bytes of the {side} not decoded: skipped to find the next frame header "
                                   "(after a gap, a bad frame header or a mid-stream start), or held by a frame "
                                   "the capture never completed"),
    ("inferred", JSON, "list of what the frames after a loss or a mid-stream start showed that lost frames had set "
                       "up, e.g. \"session 0: the server's begin on channel 0 (from its attach), answering ...\""),
    *_pair("not_captured_bytes", INT, "bytes the {side} sent that the capture's snap length cut off (on the wire, "
                                      "not captured: not loss, never a gap)"),
    ("snap_length", INT, "the capture length of the packets the snap length cut (null: none was cut)"),
)

SESSIONS = _cols(
    _CONN,
    _SESSION,
    _CHANNEL,
    *_pair("channel", INT, "outgoing channel of the {side} (the local <-> remote channel mapping)"),
    ("initiator", STRING, "side whose begin had no remote-channel"),
    ("begin_time", TIME, "time of the first begin"),
    ("begin_packet", INT, "capture record number of the first begin"),
    *_pair("begin_time", TIME, "time of the {side}'s begin"),
    *_pair("next_outgoing_id", INT, "next-outgoing-id of the {side}'s begin"),
    *_pair("incoming_window", INT, "incoming-window of the {side}'s begin"),
    *_pair("outgoing_window", INT, "outgoing-window of the {side}'s begin"),
    *_pair("handle_max", INT, "handle-max of the {side}'s begin (spec default applied when absent)"),
    ("handle_max_client_default", BOOL, "true: handle-max was absent from the client's begin (default applied)"),
    ("handle_max_server_default", BOOL, "true: handle-max was absent from the server's begin (default applied)"),
    *_pair("next_outgoing_id_final", INT, "the {side}'s next-outgoing-id tracked to the end"),
    *_pair("incoming_window_last", INT, "incoming-window of the {side}'s last begin or flow"),
    *_pair("outgoing_window_last", INT, "outgoing-window of the {side}'s last begin or flow"),
    *_pair("remote_incoming_window", INT, "final remote-incoming-window of the {side} as sender (null: unknown)"),
    *_pair("transfers", INT, "transfer frames the {side} sent"),
    *_pair("flows", INT, "flow frames the {side} sent"),
    ("end_time", TIME, "time of the first end"),
    *_pair("end_time", TIME, "time of the {side}'s end"),
    ("ended_by", STRING, "side of the first end: client, server, unknown (the other side's end may have been "
                         "lost in a capture gap before it), or empty"),
    ("end_error", STRING, "condition of the first end carrying an error"),
    ("end_description", STRING, "description of that error"),
    ("terminated", STRING, "how the session ended: end, close, transport, \"end (lost)\" (its end was lost in a gap: inferred "
                           "from a new begin on its channel), or null"),
    *_pair("state", STRING, "final session endpoint state of the {side} (spec name, or UNKNOWN)"),
    ("links", INT, "links on the session"),
    ("deliveries", INT, "deliveries on the session"),
    ("unsettled", INT, "deliveries never settled"),
    ("unseen_dispositions", INT, "delivery-ids in dispositions whose transfer was before the capture"),
    ("late_dispositions", INT, "delivery-ids in dispositions of deliveries already settled and folded (see the definitions: memory)"),
    ("deliveries_lost_whole", INT, "deliveries (of either sender) whose every transfer the capture lost, counted from the "
                                   "delivery-ids around the gaps; not in deliveries (see the definitions: lost packets)"),
    ("unknown", JSON, "list of what the capture could not show"),
    ("deliveries_not_captured", INT, "deliveries (of either sender) whose every transfer the capture's snap length cut off "
                                     "(not loss), counted from the delivery-ids around the cuts and from dispositions "
                                     "naming them; not in deliveries"),
    ("not_captured_outcomes", JSON, "outcomes the receiver's settling dispositions gave delivery-ids whose transfers "
                                    "the snap length cut off whole, by outcome name (null: none)"),
)

_LAT = "settlement latency (first transfer to settlement), {q}, seconds; percentiles by linear interpolation"
_OLAT = "outcome latency (first transfer to terminal outcome), {q}, seconds"

LINKS = _cols(
    ("connection", STRING, "connection id"),
    _CHANNEL,
    ("name", STRING, "link name"),
    ("sender", STRING, "ip:port of the peer sending transfers on the link"),
    ("source", STRING, "source address (as described by the sender's attach; the other attach when missing)"),
    ("target", STRING, "target address (as described by the receiver's attach; the other attach when missing)"),
    ("snd_settle_mode", STRING, "unsettled, settled or mixed (spec default applied when absent)"),
    ("rcv_settle_mode", STRING, "first or second (spec default applied when absent)"),
    ("deliveries", INT, "deliveries on the link"),
    ("accepted", INT, "deliveries with outcome accepted"),
    ("rejected", INT, "deliveries with outcome rejected"),
    ("released", INT, "deliveries with outcome released"),
    ("modified", INT, "deliveries with outcome modified"),
    ("unsettled", INT, "deliveries still unsettled at the end"),
    ("latency_p50", FLOAT, _LAT.format(q="p50")),
    ("latency_p90", FLOAT, _LAT.format(q="p90")),
    ("latency_p99", FLOAT, _LAT.format(q="p99")),
    ("latency_max", FLOAT, _LAT.format(q="max")),
    ("stalls", INT, "credit / window / drain stalls on the link (idle periods not counted)"),
    ("stalled_seconds", FLOAT, "total stalled time, seconds (open stalls up to the end of the capture; idle "
                               "periods not counted)"),
    _SESSION,
    _LINK_INDEX,
    ("handle", INT, "handle of the sending side (the one on transfers)"),
    *_pair("handle", INT, "handle the {side} chose"),
    ("role", STRING, "role of the client's endpoint: sender or receiver (null: unknown)"),
    ("sender_side", STRING, "client or server: the side sending the transfers"),
    ("receiver", STRING, "ip:port of the peer receiving the transfers"),
    ("address", STRING, "the node at the server: target address when the client sends, source address when it "
                        "receives (falls back to the other terminus)"),
    ("source_terminus", JSON, "the source: {type, address, durable, expiry_policy, timeout, dynamic, filter, "
                              "capabilities, ...}; null if null"),
    ("target_terminus", JSON, "the target, likewise"),
    ("coordinator", BOOL, "the target is a transaction coordinator"),
    ("refused", BOOL, "the answering attach had a null terminus: the link was refused"),
    ("snd_settle_mode_default", BOOL, "true: snd-settle-mode was absent (default mixed applied)"),
    ("rcv_settle_mode_default", BOOL, "true: rcv-settle-mode was absent (default first applied)"),
    ("initial_delivery_count", INT, "initial-delivery-count of the sender's attach"),
    ("delivery_count", INT, "final delivery-count"),
    ("link_credit", INT, "final link-credit of the sender"),
    ("available", INT, "available of the last flow"),
    ("drain", BOOL, "drain of the last flow"),
    ("echo", BOOL, "echo of the last flow"),
    ("max_message_size", UINT64, "max-message-size (ulong) of the receiver's attach (the sender's if missing)"),
    ("attach_time", TIME, "time of the first attach"),
    ("attached_time", TIME, "time both sides were attached"),
    ("detach_time", TIME, "time of the first detach"),
    ("detached_by", STRING, "side of the first detach: client, server, unknown (the other side's detach may "
                            "have been lost in a capture gap before it), or empty"),
    ("detach_closed", BOOL, "closed flag of the first detach"),
    ("detach_error", STRING, "condition of the first detach carrying an error"),
    ("detach_description", STRING, "description of that error"),
    ("terminated", STRING, "how the link ended: detach, end, close, transport, \"detach (lost)\" (its detach was lost in a "
                           "gap: inferred from a new attach on its handle), or null"),
    *_pair("state", STRING, "final link endpoint state of the {side} (spec name, or UNKNOWN)"),
    ("transfers", INT, "transfer frames on the link"),
    ("messages_bytes", INT, "payload bytes of all deliveries"),
    ("declared", INT, "deliveries with outcome declared"),
    ("no_outcome", INT, "deliveries without a terminal outcome"),
    ("presettled", INT, "deliveries settled by a transfer frame"),
    ("aborted", INT, "aborted deliveries"),
    ("resumed", INT, "resumed deliveries"),
    ("deliveries_lost_whole", INT, "deliveries of the link whose every transfer the capture lost, counted from the "
                                   "delivery-ids around the gaps when they say it was this link; not in deliveries "
                                   "(the session's deliveries_lost_whole counts those of no known link too)"),
    ("deliveries_not_captured", INT, "deliveries of the link whose every transfer the capture's snap length cut off "
                                     "(not loss), counted like deliveries_lost_whole; not in deliveries"),
    ("outcome_latency_p50", FLOAT, _OLAT.format(q="p50")),
    ("outcome_latency_p90", FLOAT, _OLAT.format(q="p90")),
    ("outcome_latency_p99", FLOAT, _OLAT.format(q="p99")),
    ("outcome_latency_max", FLOAT, _OLAT.format(q="max")),
    ("unknown", JSON, "list of what the capture could not show (e.g. [\"attach\", \"name\", \"address\"])"),
)

DELIVERIES = _cols(
    _CONN,
    ("channel", INT, "the session's channel as the client numbers it (sessions: channel_client / channel_server)"),
    ("link", STRING, "link name"),
    ("handle", INT, "link handle on the sender's side"),
    ("delivery_id", INT, "delivery-id (serial number)"),
    ("delivery_tag", STRING, "delivery-tag, hex"),
    ("sender", STRING, "ip:port of the peer sending the transfers"),
    ("first_time", TIME, "time of the first transfer frame"),
    ("last_time", TIME, "time of the last transfer frame"),
    ("frames", INT, "transfer frames of the delivery"),
    ("message_size", INT, "bytes of the message over all its frames"),
    ("presettled", BOOL, "sent settled (settled=true on the transfer)"),
    ("aborted", BOOL, "aborted by the sender"),
    ("settled_by", STRING, "sender, receiver, both, or empty"),
    ("settled_time", TIME, "time of the first frame settling the delivery (see Definitions)"),
    ("outcome", STRING, "terminal outcome: accepted, rejected, released, modified, declared, or empty"),
    ("settlement_latency", FLOAT, "settled_time - first_time, seconds"),
    _SESSION,
    _LINK_INDEX,
    ("receiver", STRING, "ip:port of the peer receiving the transfers"),
    ("sender_side", STRING, "client or server"),
    ("address", STRING, "the link's address (see links)"),
    ("first_packet", INT, "capture record number of the first transfer frame"),
    ("last_packet", INT, "capture record number of the last transfer frame"),
    ("complete", BOOL, "the last frame was seen with more=false, not aborted"),
    ("resumed", BOOL, "resumed delivery"),
    ("settled_packet", INT, "capture record number of the settling frame"),
    ("sender_settled_time", TIME, "time the sender settled"),
    ("receiver_settled_time", TIME, "time the receiver settled"),
    ("outcome_by", STRING, "receiver, sender, or empty"),
    ("outcome_time", TIME, "time of the receiver's first disposition with a terminal outcome"),
    ("outcome_packet", INT, "capture record number of that disposition"),
    ("outcome_error", STRING, "error condition of a rejected outcome"),
    ("outcome_description", STRING, "error description of a rejected outcome"),
    ("delivery_failed", BOOL, "delivery-failed of a modified outcome (default applied)"),
    ("undeliverable_here", BOOL, "undeliverable-here of a modified outcome (default applied)"),
    ("received_state", STRING, "\"section N offset M\" of a received state"),
    ("txn_id", STRING, "transaction id, hex"),
    ("rcv_settle_mode", STRING, "per-transfer rcv-settle-mode override"),
    ("dispositions_sender", INT, "dispositions the sender sent for the delivery"),
    ("dispositions_receiver", INT, "dispositions the receiver sent for the delivery"),
    ("outcome_latency", FLOAT, "outcome_time - first_time, seconds"),
    ("unsettled_at", STRING, "null when settled, else detach, end, close, transport, capture-end, or "
                             "lost-in-capture (outcome unknown: bytes lost after its first transfer may have "
                             "settled it; no error row), or one-direction-captured (outcome unknown: the "
                             "connection's other direction is not in the capture; no error row), or not-captured "
                             "(outcome unknown: the snap length cut off bytes after its first transfer that may "
                             "have settled it, no gap did: not loss; no error row)"),
    # the message (read only when asked: null when not; see the definitions: message fields)
    ("message_id", STRING, "message-id of the properties section: a ulong in decimal, a uuid in its canonical "
                           "form, binary in hex, a string as it is"),
    ("message_id_type", STRING, "type of message_id: ulong, uuid, binary, string (another AMQP type: its name)"),
    ("correlation_id", STRING, "correlation-id of the properties section, written as message_id"),
    ("correlation_id_type", STRING, "type of correlation_id: ulong, uuid, binary, string"),
    ("user_id", STRING, "user-id of the properties section, hex"),
    ("to", STRING, "to (address) of the properties section"),
    ("subject", STRING, "subject of the properties section"),
    ("reply_to", STRING, "reply-to (address) of the properties section"),
    ("content_type", STRING, "content-type of the properties section"),
    ("content_encoding", STRING, "content-encoding of the properties section"),
    ("absolute_expiry_time", TIME, "absolute-expiry-time of the properties section"),
    ("creation_time", TIME, "creation-time of the properties section"),
    ("group_id", STRING, "group-id of the properties section"),
    ("group_sequence", INT, "group-sequence of the properties section"),
    ("reply_to_group_id", STRING, "reply-to-group-id of the properties section"),
    ("durable", BOOL, "durable of the header (spec default applied when absent: see header_defaults)"),
    ("priority", INT, "priority of the header (spec default applied when absent)"),
    ("ttl", INT, "ttl of the header, milliseconds (null when absent: no default)"),
    ("first_acquirer", BOOL, "first-acquirer of the header (spec default applied when absent)"),
    ("header_delivery_count", INT, "delivery-count of the header: earlier unsuccessful deliveries (spec default "
                                   "applied when absent)"),
    ("header_defaults", JSON, "list of the header fields absent or null (or no header section) whose spec "
                              "default was applied, e.g. [\"first-acquirer\", \"delivery-count\"]"),
    ("delivery_annotations", JSON, "the delivery-annotations section as an object (bounded: see \"@cut\")"),
    ("message_annotations", JSON, "the message-annotations section as an object (bounded: see \"@cut\")"),
    ("application_properties", JSON, "the application-properties section as an object (bounded: see \"@cut\")"),
    ("body_kind", STRING, "data, amqp-sequence, amqp-value, or none (no body section)"),
    ("body_size", INT, "bytes of the body sections (encoded, descriptors included)"),
    ("message_sections", JSON, "list of the section names present, in order"),
    ("bare_digest", STRING, "BLAKE2b-128 of the bare message's bytes (properties, application-properties, body), "
                            "hex: matches a message across a broker"),
    ("message_read", STRING, "read, truncated (a section beyond the first 64 KiB not read), lost (bytes lost in a "
                             "capture gap), aborted, incomplete (its last frame not in the capture), "
                             "malformed: <why>; null when the message fields were not asked for"),
)

STALLS = _cols(
    ("connection", STRING, "connection id"),
    ("channel", INT, "the session's channel as the client numbers it"),
    ("link", STRING, "link name (null for session-window stalls without a link)"),
    ("kind", STRING, "link-credit, initial-credit, session-window or drain"),
    ("start", TIME, "time the stall began: the last frame of the delivery that used up the credit, or the "
                    "sender's flow that first showed a message waiting, whichever is later"),
    ("end", TIME, "time it ended (null while still open at the end of the capture)"),
    ("duration", FLOAT, "seconds (up to the end of the capture for open stalls)"),
    ("waiting", BOOL, "the sender had messages waiting; null: nothing shows it (evidence in waiting_evidence)"),
    ("waiting_evidence", STRING, "available (the sender's available), transfer (its next transfer came at once "
                                 "after the end) or none"),
    ("idle", BOOL, "an idle period, not a stall: nothing waiting, or (nothing showing) ended at detach, end, "
                   "close, transport end or capture end with no transfer after it; not in stall counts and totals"),
    ("credit_exhausted_at", TIME, "time of the frame that used up the link-credit (or session window)"),
    _SESSION,
    _LINK_INDEX,
    ("handle", INT, "the sender's handle"),
    ("sender_side", STRING, "client or server: the side that could not send"),
    ("sender", STRING, "ip:port of that side"),
    ("start_packet", INT, "capture record number where the stall began"),
    ("credit_exhausted_packet", INT, "capture record number of the frame that used up the credit"),
    ("end_packet", INT, "capture record number where it ended"),
    ("ended_by", STRING, "flow, transfer, attach, cancelled, detach, end, close, transport; null while open"),
    ("open", BOOL, "still open at the end of the capture"),
)

TRANSACTIONS = _cols(
    _CONN,
    _SESSION,
    _CHANNEL,
    ("coordinator", STRING, "name of the coordinator link"),
    ("txn_id", STRING, "transaction id, hex"),
    ("global_id", JSON, "global-id of the declare"),
    ("declare_delivery_id", INT, "delivery-id of the declare"),
    ("declare_time", TIME, "time of the declare transfer"),
    ("declare_packet", INT, "capture record number of the declare"),
    ("declare_outcome", STRING, "outcome of the declare (declared, rejected, ...)"),
    ("declared_time", TIME, "time of the declared outcome"),
    ("declared_packet", INT, "capture record number of the declared outcome"),
    ("declare_error", STRING, "error condition of a failed declare"),
    ("discharge_delivery_id", INT, "delivery-id of the discharge"),
    ("discharge_time", TIME, "time of the discharge transfer"),
    ("discharge_packet", INT, "capture record number of the discharge"),
    ("fail", BOOL, "true: rollback requested"),
    ("discharge_outcome", STRING, "outcome of the discharge"),
    ("discharge_error", STRING, "error condition of a failed discharge"),
    ("discharged_time", TIME, "time of the discharge's outcome"),
    ("state", STRING, "declaring, declared, declare-failed, discharging, committed, rolled-back, discharge-failed, "
                      "or unknown (txn-id only seen in transactional-states)"),
    ("deliveries", INT, "deliveries enlisted"),
    ("enlisted", JSON, "list of {link, delivery_id, how: transfer or disposition}"),
)

VIOLATIONS = _cols(
    _CONN,
    ("packet", INT, "capture record number"),
    ("time", TIME, "time of the offending frame (or of the check)"),
    ("channel", INT, "channel of the frame"),
    ("kind", STRING, "state, credit, session-window, unknown-channel, unknown-handle, unknown-delivery, "
                     "unknown-transaction, channel-in-use, handle-in-use, channel-max, handle-max, role, "
                     "idle-timeout, frame-size, drain, protocol, malformed, protocol-header, budget (a frame body or a "
                     "disposition range past its cost budget, not decoded or not applied), internal-error, delivery-tag (a "
                     "delivery-tag repeated among a link's unsettled deliveries: one row per link and tag, count the "
                     "repeats)"),
    ("severity", STRING, "expert-note severity (warn, error, ...)"),
    ("message", STRING, "what is wrong"),
    ("side", STRING, "peer that sent the offending frame"),
    ("link", STRING, "link name"),
    ("handle", INT, "link handle"),
    ("delivery_id", INT, "delivery-id"),
    ("origin", STRING, "state (the state layer), framing (an expert note of the framing layer) or analyzer "
                       "(an internal error)"),
    ("count", INT, "findings the row stands for: 1, or more in a row that adds up a flood of findings "
                   "(after the first 100 alike, or past the capture's first 50,000 distinct ones)"),
)

ERRORS = _cols(
    _CONN,
    _SESSION,
    ("channel", INT, "channel of the frame (null for connection scope)"),
    ("link", STRING, "link name"),
    ("handle", INT, "link handle"),
    ("delivery_id", INT, "delivery-id (delivery scope)"),
    ("scope", STRING, "connection, session, link or delivery"),
    ("condition", STRING, "error condition, or derived: unsettled-at-detach, unsettled-at-end, "
                          "unsettled-at-close, unsettled-at-transport-end, unsettled-at-capture-end"),
    ("description", STRING, "error description"),
    ("info", JSON, "info map of the error"),
    ("packet", INT, "capture record number"),
    ("time", TIME, "time of the frame"),
    ("side", STRING, "side that sent the frame"),
    ("source", STRING, "frame (the error field of a close / end / detach) or analysis (derived)"),
    ("count", INT, "deliveries concerned (derived rows)"),
)

FRAMES = _cols(
    ("packet", INT, "capture record number"),
    ("time", TIME, "time of the packet"),
    ("src", STRING, "ip:port of the sender"),
    ("dst", STRING, "ip:port of the receiver"),
    _CONN,
    ("channel", INT, "channel"),
    ("type", STRING, "header, amqp, sasl, heartbeat or note"),
    ("performative", STRING, "performative name"),
    ("size", INT, "frame size, bytes"),
    ("payload_size", INT, "payload bytes of a transfer"),
    ("delivery_frames", INT, "frames of the delivery (on its last transfer)"),
    ("message_size", INT, "message bytes (on its last transfer)"),
    ("json", STRING, "the whole `frames --format jsonl` line"),
)

MESSAGES = _cols(
    ("message_id", STRING, "message-id of the message, as text (binary as hex); null when matched by digest"),
    ("message_id_type", STRING, "AMQP type of the message-id: ulong, uuid, binary or string (a ulong 5 and a "
                                "string \"5\" are two messages)"),
    ("bare_digest", STRING, "digest of the bare message: the key of a message without message-id"),
    ("matched_by", STRING, "message-id or digest: how the deliveries of the message were matched"),
    ("state", STRING, "delivered, delivered twice, \"published, never delivered in the capture\", \"delivered, "
                      "publish not in the capture\", \"dead-lettered / expired\" or unknown (see definitions)"),
    ("state_evidence", STRING, "why: the broker annotation or property of a dead-lettered / expired message, what "
                               "made it delivered twice, or the roles not known"),
    ("address", STRING, "the producer's link address (else the first consumer's)"),
    ("first_time", TIME, "time of the message's first transfer frame in the capture"),
    ("first_packet", INT, "capture record number of that frame"),
    ("producer_connection", STRING, "connection id of the producer's delivery (the earliest publish)"),
    ("producer_link", STRING, "link name of the producer's delivery"),
    ("producer_link_index", INT, "0-based index of that link in its connection"),
    ("producer_address", STRING, "address of the producer's link"),
    ("producer_time", TIME, "time of the producer's first transfer frame"),
    ("producer_packet", INT, "capture record number of that frame"),
    ("producer_outcome", STRING, "outcome of the producer's delivery (the broker's)"),
    ("producer_outcome_time", TIME, "time of that outcome"),
    ("publishes", INT, "deliveries of the message from producers (above 1: published again)"),
    ("consumers", INT, "consumer links that received the message (fan-out)"),
    ("deliveries", INT, "deliveries of the message to consumers, redeliveries included"),
    ("consumer_deliveries", JSON, "list of {connection, link, link_index, address, first_time, first_packet, "
                                  "outcome, outcome_packet, deliveries} per consumer link (at most 16, then "
                                  "{more: n})"),
    ("first_consumer_time", TIME, "time of the first consumer's first transfer frame"),
    ("residence", FLOAT, "broker residence: first consumer's first transfer - producer's first transfer, seconds"),
    ("residence_max", FLOAT, "the largest residence over the consumers, seconds"),
    ("end_to_end", FLOAT, "first consumer's outcome (of its last delivery) - producer's first transfer, seconds"),
    ("end_to_end_max", FLOAT, "the largest end to end over the consumers, seconds"),
    ("redeliveries_by_count", INT, "largest header delivery-count of a consumer delivery (null when none carried one)"),
    ("redeliveries_by_repeat", INT, "deliveries to a consumer link that already had the message"),
    ("released_or_modified", INT, "consumer deliveries with outcome released or modified"),
    ("unknown_role", INT, "deliveries of the message whose role (producer or consumer) is unknown"),
    ("role_evidence", STRING, "why their role is unknown (broker to broker, sending side not known)"),
    ("untracked", INT, "deliveries of the message past the 64 kept per message (counted only)"),
    ("packets", JSON, "list of the capture record numbers of the first transfer of each delivery (at most 32)"),
    ("note", STRING, "what else was seen: published several times, a consumer before the publish, ..."),
)

REQUESTS = _cols(
    ("request_id", STRING, "message-id of the request, as text (binary as hex); its AMQP type in request_id_type"),
    ("request_id_type", STRING, "AMQP type of the request's message-id: ulong, uuid, binary or string"),
    ("request_correlation_id", STRING, "correlation-id the request itself carried, as text"),
    ("request_correlation_id_type", STRING, "its AMQP type"),
    ("correlation_id", STRING, "correlation-id of the reply, as text"),
    ("correlation_id_type", STRING, "its AMQP type"),
    ("matched_by", STRING, "how the reply was matched: message-id (the reply's correlation-id is the request's "
                           "message-id) or correlation-id (it is the request's correlation-id); null without reply"),
    ("status", STRING, "answered, no reply in the capture, reply without request, or answered twice"),
    ("replies", INT, "replies seen for the request (as they reached the requester)"),
    ("service", STRING, "$management or $cbs when the request went to that service node, else null"),
    ("operation", STRING, "application property operation of the request (e.g. READ, put-token)"),
    ("operation_type", STRING, "application property type of the request (a $cbs put-token: the token type)"),
    ("operation_name", STRING, "application property name of the request (a $cbs put-token: the audience)"),
    ("locales", STRING, "application property locales of the request"),
    ("status_code", INT, "status code of the reply (application property statusCode or status-code)"),
    ("status_description", STRING, "status description of the reply (statusDescription or status-description)"),
    ("request_address", STRING, "the node the request was sent to: its link's address, else its to"),
    ("reply_to", STRING, "reply-to of the request"),
    ("reply_address", STRING, "the address the reply came on: the request's reply-to when its link's source, "
                              "target or to is it, else the reply's link address"),
    ("request_connection", STRING, "connection id of the request's first transfer (its publisher's when seen)"),
    ("request_link", STRING, "link name of that transfer"),
    ("request_link_index", INT, "0-based index of that link in its connection"),
    ("responder_connection", STRING, "connection id where a broker passed the request on to its responder"),
    ("reply_connection", STRING, "connection id of the reply's transfer counted (to the requester when seen)"),
    ("reply_link", STRING, "link name of that transfer"),
    ("reply_link_index", INT, "0-based index of that link in its connection"),
    ("request_time", TIME, "time of the request's first transfer frame (its publisher's)"),
    ("reply_time", TIME, "time of the reply's last transfer frame (the one reaching the requester)"),
    ("round_trip", FLOAT, "reply_time - request_time, seconds"),
    ("request_packet", INT, "capture record number of the request's first transfer frame"),
    ("reply_packet", INT, "capture record number of the reply's last transfer frame"),
    ("reply_packets", JSON, "list of the capture record numbers of every reply counted in replies"),
    ("request_outcome", STRING, "outcome of the request's delivery"),
    ("request_properties", JSON, "application properties of the request (never its body)"),
    ("reply_properties", JSON, "application properties of the reply"),
    ("token_type", STRING, "$cbs put-token: token type (e.g. jwt, servicebus.windows.net:sastoken); the token "
                           "itself is never read nor stored"),
    ("token_audience", STRING, "$cbs put-token: audience (application property name)"),
    ("token_expiry_time", TIME, "$cbs put-token: expiration (see definitions: seconds or milliseconds)"),
    ("token_size", INT, "$cbs put-token: bytes of the body holding the token"),
    ("token_refused", BOOL, "$cbs put-token: refused (status 400 or more, its $cbs link refused, or no reply); "
                            "null when nothing shows it"),
    ("token_outlived", BOOL, "$cbs put-token: a link to the audience's node was still attached, or transferring, "
                             "after the expiry, and no newer put-token for the audience came before it"),
    ("token_links", JSON, "list of {link, link_index, address, evidence} of the links that outlived the token"),
    ("token_note", STRING, "the put-token's line: refused and why, or outlived by which links"),
    ("note", STRING, "what was inferred (a publisher's transfer not in the capture ...) and the token's line"),
)

#: table -> its columns, in output order.  ``frames``: ``Analysis.frames`` and ``archive --frames``.
REGISTRY: dict[str, tuple[Column, ...]] = {
    "connections": CONNECTIONS,
    "sessions": SESSIONS,
    "links": LINKS,
    "deliveries": DELIVERIES,
    "stalls": STALLS,
    "transactions": TRANSACTIONS,
    "violations": VIOLATIONS,
    "errors": ERRORS,
    "messages": MESSAGES,
    "requests": REQUESTS,
    "frames": FRAMES,
}

#: the analysis tables (one CLI command and one ``amqp_dissect.pipelines.runs.local.Analysis`` attribute each)
TABLES = ("connections", "sessions", "links", "deliveries", "stalls", "transactions", "violations", "errors")
#: the tables made from the deliveries' message fields across connections (one CLI command each, and
#: ``amqp_dissect.analyze(..., tables=...)``; they read the messages, so only when asked for)
MESSAGE_TABLES = ("messages", "requests")

_INTRO = {
    "connections": "One row per connection: negotiation, open/close, counts.",
    "sessions": "One row per session: channel mapping, windows, end.",
    "links": "One row per link: peers, addresses, settle modes, outcomes, latency, stalls.",
    "deliveries": "One row per delivery: outcome, settlement, latency.",
    "stalls": "One row per credit / session-window / drain stall, idle periods included (`idle`).",
    "transactions": "One row per transaction: declare, discharge, enlisted deliveries.",
    "violations": "Protocol violations found by the state layer.",
    "errors": "Errors: close / end / detach errors and unsettled deliveries.",
    "messages": "One row per message, matched across connections: producer, consumers (fan-out), residence, "
                "end to end, state.",
    "requests": "One row per request: its reply, round trip, $management and $cbs operations.",
    "frames": "One row per AMQP frame: `Analysis.frames`, and `archive --frames` writes it.",
}


def columns(table: str) -> tuple[Column, ...]:
    """The columns of ``table`` in output order (KeyError for an unknown table)."""
    return REGISTRY[table]


def names(table: str) -> list[str]:
    return [c.name for c in REGISTRY[table]]


def time_columns(table: str) -> list[str]:
    return [c.name for c in REGISTRY[table] if c.type == TIME]


def markdown() -> str:
    """The column tables of docs/tables.md (between the ``columns:begin`` / ``columns:end`` markers)."""
    out = []
    for table, cols in REGISTRY.items():
        out.append(f"**{table}** ({len(cols)} columns). {_INTRO[table]}")
        out.append("")
        out.append("| column | type | meaning |")
        out.append("| --- | --- | --- |")
        for c in cols:
            meaning = c.meaning.replace("|", "\\|")
            out.append(f"| `{c.name}` | {c.type} | {meaning} |")
        out.append("")
    return "\n".join(out)


BEGIN, END = "<!-- columns:begin -->", "<!-- columns:end -->"


def readme_section(text: str) -> str:
    """The part of a page between the markers (without them)."""
    i, j = text.index(BEGIN), text.index(END)
    return text[i + len(BEGIN):j].strip("\n") + "\n"


def update_readme(text: str) -> str:
    i, j = text.index(BEGIN), text.index(END)
    return text[:i + len(BEGIN)] + "\n" + markdown() + text[j:]


def _check() -> None:
    for table, cols in REGISTRY.items():
        seen = set()
        for c in cols:
            assert c.type in TYPES, (table, c)
            assert c.name not in seen, (table, c.name)
            assert c.meaning, (table, c.name)
            seen.add(c.name)


_check()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m amqp_dissect.results.schema",
                                 description="Render the column registry (the column tables of docs/tables.md).")
    ap.add_argument("--markdown", action="store_true", help="print the column tables of docs/tables.md")
    ap.add_argument("--update", "--update-readme", dest="update_readme", metavar="PAGE",
                    help="rewrite the tables between the markers of PAGE (docs/tables.md) in place")
    a = ap.parse_args(argv)
    if a.update_readme:
        with open(a.update_readme, encoding="utf-8") as f:
            text = f.read()
        new = update_readme(text)
        if new != text:
            with open(a.update_readme, "w", encoding="utf-8") as f:
                f.write(new)
        return 0
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
