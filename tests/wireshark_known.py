"""Known disagreements between our decoder and Wireshark's AMQP 1.0 dissector.

Data for ``tests/test_wireshark.py``.  Every disagreement that test finds between
our frames and what tshark (through pyshark) shows must match one entry here, and
every entry here must match at least one disagreement (a stale entry fails the
test).  An entry is a rule, not a list of packet numbers, when the disagreement
follows from how Wireshark works (packet numbers change whenever the samples are
regenerated).

Keys of an entry:

``id``
    short name, used in failure messages.
``samples``
    fnmatch pattern on the sample name (file stem), ``"*"`` for every sample.
``packets``
    ``None``, or the exact packet numbers the disagreement occurs in (each must
    occur).
``frames``
    which frames the rule covers, from the vocabulary of ``FRAME_CONDITIONS`` in
    the test:

    * ``"any"``: every frame;
    * ``"first-fragment"``: the first transfer frame of a delivery that spans
      several transfer frames (``more=true`` on all but the last);
    * ``"continuation-fragment"``: the other transfer frames of such a delivery
      (including the last one, ``more=false``).
``paths``
    fnmatch patterns on the disagreeing path of the normalised frame record
    (``fields.<spec field name>...``, ``message.<section>...``, ``@errors`` =
    Wireshark/ours reported a malformed frame or an error-level expert item,
    ``@frames`` = not the same number of AMQP frames in a packet).
``ws_errors``
    optional list of fnmatch patterns: Wireshark's error messages on the frame
    that the rule explains; an ``@errors`` disagreement is covered only if every
    one of Wireshark's messages on that frame matches one of them.
``every_frame``
    if true, every frame the ``frames`` condition selects (in the samples the
    entry applies to) must actually show a disagreement covered by the entry;
    otherwise at least one disagreement must match.
``why``
    the reason, checked by hand against the captures and tshark 4.0.17.
"""

# Wireshark 4.0 decodes the payload of each transfer frame on its own, as if it
# were a complete message: it does not reassemble a delivery split over several
# transfer frames (the spec's ``more`` flag).  We reassemble the delivery and show
# its message once, attributed (for this comparison) to the delivery's first frame.

KNOWN = [
    {
        "id": "ws-first-fragment-cut-section",
        "samples": "*",
        "packets": None,
        "frames": "first-fragment",
        "paths": [
            "@errors",
            "message.data*",
            "message.amqp-value*",
            "message.amqp-sequence*",
            "message.footer*",
        ],
        "ws_errors": ["Malformed Packet (Exception occurred)"],
        "every_frame": True,
        "why": (
            "First transfer frame of a multi-frame delivery (more=true): Wireshark decodes the frame's "
            "payload as a whole message. The sections that fit in the frame (header, annotations, "
            "properties) are decoded correctly and are compared with our reassembled message, but the "
            "body section runs past the end of the frame, so Wireshark throws, omits the body and marks "
            "the packet '[Malformed Packet: AMQP]'. We show the whole body from the reassembled delivery."
        ),
    },
    {
        "id": "ws-continuation-fragment-as-message",
        "samples": "*",
        "packets": None,
        "frames": "continuation-fragment",
        "paths": ["@errors", "message", "message.*"],
        "ws_errors": [
            "Unknown AMQP type * of field *",
            "Malformed Packet (Exception occurred)",
            "Odd number of map items: *",
            "Number of list elements (*) bigger than list size (*)",
            "Number of list elements (*) not matching number of decoded elements (*)",
            "Number of array elements (*) not matching number of decoded elements (*)",
            "*failed assertion*",
        ],
        "every_frame": True,
        "why": (
            "Second and later transfer frames of a multi-frame delivery: their payload is the middle or "
            "end of a data section, not the start of a message. Wireshark still decodes it as message "
            "sections, so it shows garbage top-level 'list-item' values of whatever type the fragment's "
            "bytes happen to name, with expert errors 'Unknown AMQP type N of field \"list-item\"', "
            "'Odd number of map items', 'Number of list elements ... bigger than list size', "
            "'[Malformed Packet: AMQP]' and even a dissector bug (tvbuff.c failed assertion \"len > 0\"). "
            "These frames carry no message of their own: we reassemble the fragments and report the "
            "message once for the whole delivery."
        ),
    },
]
