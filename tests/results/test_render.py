"""JSON value conventions and choice names, as documented in docs/filters.md (JSON lines)."""

from __future__ import annotations

import json
import math
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

from proton import Data, symbol

from amqp_dissect.amqp.codec import decode
from amqp_dissect.amqp.values import json_value
from amqp_dissect.amqp.spec import choice_name

XML = Path(__file__).resolve().parents[2] / "dissector" / "amqp" / "spec"
NS = "{http://www.amqp.org/schema/amqp.xsd}"


def _encode(put):
    d = Data()
    put(d)
    return d.encode()


def test_choice_names_come_from_the_xml_and_respect_bool_vs_int():
    for f in XML.glob("*.xml"):
        for t in ET.parse(f).getroot().iter(f"{NS}type"):
            for c in t.findall(f"{NS}choice"):
                value = c.attrib["value"]
                if t.attrib["source"] == "boolean":
                    wire = value == "true"
                elif t.attrib["source"] in ("ubyte", "uint", "ushort"):
                    wire = int(value)
                else:
                    wire = value
                assert choice_name(t.attrib["name"], wire) == c.attrib["name"]
    assert choice_name("role", 1) is None  # an int is not a boolean role
    assert choice_name("sender-settle-mode", True) is None  # True == 1 in Python, not on the wire


def test_json_conventions():
    v = decode(_encode(lambda d: (
        d.put_map(), d.enter(),
        d.put_symbol(symbol("bin")), d.put_binary(b"\x00\xff"),
        d.put_symbol(symbol("ts")), d.put_timestamp(1700000000123),
        d.put_symbol(symbol("uuid")), d.put_uuid(uuid.UUID(int=5)),
        d.put_symbol(symbol("nan")), d.put_double(math.nan),
        d.put_ulong(7), d.put_string("ulong key"),
        d.put_symbol(symbol("desc")), d.put_described(), d.enter(), d.put_symbol(symbol("x:y")), d.put_int(3), d.exit(),
        d.exit(),
    )))
    j = json_value(v)
    text = json.dumps(j, allow_nan=False)  # strict JSON
    assert j["bin"] == "00ff"
    assert j["ts"] == 1700000000123
    assert j["uuid"] == str(uuid.UUID(int=5))
    assert j["nan"] == "NaN"
    assert j["7"] == "ulong key"
    assert j["desc"] == {"@descriptor": "x:y", "@value": 3}
    assert json.loads(text) == j


def test_nested_composite_has_type_and_present_fields_only():
    # source composite with address only: absent fields are left out
    v = decode(_encode(lambda d: (
        d.put_described(), d.enter(), d.put_ulong(0x28), d.put_list(), d.enter(), d.put_string("q"), d.exit(), d.exit()
    )))
    assert json_value(v) == {"@type": "source", "address": "q"}


def test_defaults_in_the_detail_tree_show_the_fields_declared_type():
    # header with every field absent: each default is shown with the type the XML declares
    from amqp_dissect.render.frames import composite_lines

    v = decode(_encode(lambda d: (d.put_described(), d.enter(), d.put_ulong(0x70), d.put_list(), d.exit())))
    lines = "\n".join(composite_lines(v, 0))
    declared = {
        f.attrib["name"]: f.attrib["type"]
        for t in ET.parse(XML / "messaging.xml").getroot().iter(f"{NS}type")
        if t.attrib["name"] == "header"
        for f in t.findall(f"{NS}field")
    }
    assert "priority (ubyte): 4 [default]" in lines and declared["priority"] == "ubyte"
    assert "delivery-count (uint): 0 [default]" in lines and declared["delivery-count"] == "uint"


def test_summaries_without_bodies_are_the_full_decode_summaries():
    """``frames`` (one line a frame) keeps no encoded bodies or payloads: its lines equal those
    made from the full decode of every frame and reassembled message, on every sample."""
    import glob
    import os

    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.dissect import Dissector
    from amqp_dissect.render.frames import SummaryLines

    paths = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "samples", "*.pcap*")))
    assert paths
    reassembled = 0
    for path in paths:
        texts = []
        for messages in (True, "summary"):
            d = Dissector(messages=messages)
            evs = []
            with open(path, "rb") as f:
                for r in open_capture(f):
                    evs += d.feed(r)
            evs += d.finish()
            lines = SummaryLines(min(e.ts for e in evs if getattr(e, "ts", None) is not None))
            texts.append([lines.line(e) for e in evs])
        assert texts[0] == texts[1], path
        reassembled += sum("[message reassembled" in (t or "") for t in texts[0])
    assert reassembled > 0  # the multi-frame deliveries' sizes come from the payloads' lengths
