"""amqp-dissect's sans-IO core: bytes and timestamps in, AMQP 1.0 events out.

Layers: :mod:`~dissector.capture` (pcap/pcapng records from a file object),
:mod:`~dissector.netparse` (link/IP/TCP fast path), :mod:`~dissector.tcp`
(stream reassembly), :mod:`~dissector.amqp` (framing), :mod:`~dissector.codec`
(type system), tied together by :class:`~dissector.dissect.Dissector`.
"""

__version__ = "0.1.0"
