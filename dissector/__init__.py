"""amqp-dissect's sans-IO core: bytes and timestamps in, AMQP 1.0 events out.

Layers: :mod:`~amqp_dissect.capture.pcap` (pcap/pcapng records from a file object),
:mod:`~amqp_dissect.capture.netparse` (link/IP/TCP fast path), :mod:`~amqp_dissect.capture.tcp`
(stream reassembly), :mod:`~amqp_dissect.amqp.framing` (framing), :mod:`~amqp_dissect.amqp.codec`
(type system), tied together by :class:`~amqp_dissect.dissect.Dissector`.
"""

__version__ = "0.1.0"
