"""``amqp-dissect compare``: Wireshark's side (:mod:`.pdml`: tshark's PDML rebuilt into frame
records) and the cross-check of our frames against it (:mod:`.compare`)."""
