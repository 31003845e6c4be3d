"""The generated protocol tables against the AMQP 1.0 XML they come from.

``dissector/amqp/_spec.py`` must be exactly what ``amqp_dissect.amqp.specgen`` renders, the
XML in ``dissector/amqp/spec/`` must be the shared copy, and the tables must agree
with the XML as read *here*, with ElementTree and this file's own small
conversions -- not by calling the generator's helpers -- and with the type
definitions printed in the specification's text (shared/amqp-spec/seeds beside
the clone), read with regular expressions.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from amqp_dissect.amqp import _spec, spec, specgen

# the generator and the tables it wrote (amqp/specgen.py, _spec.py, spec.py) are no hot module: CI's
# pure pass leaves these out (no_twin)
pytestmark = pytest.mark.no_twin

REPO = Path(__file__).resolve().parents[2]
XML_DIR = REPO / "dissector" / "amqp" / "spec"
SHARED_XML = REPO.parent / "shared" / "amqp-spec" / "xml"
NS = "{http://www.amqp.org/schema/amqp.xsd}"
XML_FILES = ("types", "transport", "messaging", "security", "transactions")
INT_TYPES = {"ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"}


# --------------------------------------------------------------------------- generator output


def test_render_reproduces_the_committed_module_byte_for_byte():
    committed = (REPO / "dissector" / "amqp" / "_spec.py").read_bytes()
    rendered = specgen.render().encode("utf-8")
    assert rendered == committed, "dissector/amqp/_spec.py is stale: run python -m amqp_dissect.amqp.specgen"


def test_check_mode_accepts_the_committed_module(tmp_path, capsys):
    assert specgen.main(["--check"]) == 0
    stale = tmp_path / "_spec.py"
    stale.write_text(specgen.render() + "# edited by hand\n")
    assert specgen.main(["--check", "--out", str(stale)]) == 1
    assert "stale" in capsys.readouterr().err


def test_generator_run_writes_the_committed_module(tmp_path):
    """The generator's command, run on the XML into a fresh file, writes dissector/amqp/_spec.py byte for byte."""
    out = tmp_path / "_spec.py"
    assert specgen.main(["--xml", str(XML_DIR), "--out", str(out)]) == 0
    assert out.read_bytes() == (REPO / "dissector" / "amqp" / "_spec.py").read_bytes(), (
        "dissector/amqp/_spec.py is not what python -m amqp_dissect.amqp.specgen writes"
    )


def test_spec_xml_is_the_shared_copy():
    if not SHARED_XML.is_dir():
        message = (
            f"the shared AMQP XML is not at {SHARED_XML} (expected shared/amqp-spec/xml "
            "next to the repository clone); cannot check that dissector/amqp/spec/ is a copy of it"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        print(message)
        pytest.skip(message)
    ours = sorted(p.name for p in XML_DIR.glob("*.xml"))
    shared = sorted(p.name for p in SHARED_XML.glob("*.xml"))
    assert ours == shared
    assert ours == sorted(f"{n}.xml" for n in XML_FILES)
    for name in ours:
        assert (XML_DIR / name).read_bytes() == (SHARED_XML / name).read_bytes(), (
            f"dissector/amqp/spec/{name} differs from {SHARED_XML / name}"
        )
    # generated from the shared XML itself, the module is the committed one
    assert specgen.render(SHARED_XML).encode("utf-8") == (REPO / "dissector" / "amqp" / "_spec.py").read_bytes()


# --------------------------------------------------------------------------- the XML, read here


def _roots() -> dict[str, ET.Element]:
    return {n: ET.parse(XML_DIR / f"{n}.xml").getroot() for n in XML_FILES}


ROOTS = _roots()
TYPES: dict[str, tuple[str, ET.Element]] = {}  # name -> (document name, element)
for _doc, _root in ROOTS.items():
    for _t in _root.iter(f"{NS}type"):
        assert _t.get("name") not in TYPES, f"type {_t.get('name')} defined twice"
        TYPES[_t.get("name")] = (_doc, _t)


def _of_class(cls: str) -> dict[str, ET.Element]:
    return {n: t for n, (_, t) in TYPES.items() if t.get("class") == cls}


def _code(text: str) -> int:
    domain, ident = text.split(":")
    return int(domain, 16) * 2**32 + int(ident, 16)


def _primitive(name: str) -> str:
    while name in TYPES and TYPES[name][1].get("class") == "restricted":
        name = TYPES[name][1].get("source")
    return name


def _convert(text: str, primitive: str):
    if primitive == "boolean":
        return {"true": True, "false": False}[text]
    if primitive in INT_TYPES:
        return int(text, 0)
    return text


def _default(field: ET.Element):
    text = field.get("default")
    if text is None:
        return None
    t = field.get("type")
    while t in TYPES and TYPES[t][1].get("class") == "restricted":
        for c in TYPES[t][1].findall(f"{NS}choice"):
            if c.get("name") == text:
                return _convert(c.get("value"), _primitive(field.get("type")))
        t = TYPES[t][1].get("source")
    return _convert(text, _primitive(field.get("type")))


def _provides(t: ET.Element) -> set[str]:
    return {p.strip() for p in (t.get("provides") or "").split(",") if p.strip()}


# --------------------------------------------------------------------------- cross-checks


def test_every_encoding_of_types_xml_is_in_the_constructor_table():
    expected = {}
    for t in ROOTS["types"].iter(f"{NS}type"):
        if t.get("class") != "primitive":
            continue
        for e in t.findall(f"{NS}encoding"):
            code = int(e.get("code"), 16)
            assert code not in expected, f"code 0x{code:02x} twice in types.xml"
            name = t.get("name")
            expected[code] = (name, e.get("name") or name, e.get("category"), int(e.get("width")))
    assert len(expected) == 39
    assert len(_spec.CONSTRUCTORS) == 256
    for code in range(256):
        assert _spec.CONSTRUCTORS[code] == expected.get(code), f"constructor 0x{code:02x}"
    # spot checks against the text of the specification (section 1.6)
    assert expected[0x53] == ("ulong", "smallulong", "fixed", 1)
    assert expected[0xA3] == ("symbol", "sym8", "variable", 1)
    assert expected[0xD0] == ("list", "list32", "compound", 4)
    assert expected[0xF0] == ("array", "array32", "array", 4)


def test_composites_match_the_xml():
    xml = _of_class("composite")
    assert set(spec.COMPOSITES) == set(xml)
    for name, t in xml.items():
        c = spec.COMPOSITES[name]
        d = t.find(f"{NS}descriptor")
        assert (c.descriptor_code, c.descriptor_symbol) == (_code(d.get("code")), d.get("name")), name
        assert c.provides == tuple(p.strip() for p in (t.get("provides") or "").split(",") if p.strip())
        assert c.section == f"{ROOTS[TYPES[name][0]].get('name')}/" + next(
            s.get("name") for s in ROOTS[TYPES[name][0]].iter(f"{NS}section") if t in list(s)
        )
        fields = t.findall(f"{NS}field")
        assert [f.name for f in c.fields] == [f.get("name") for f in fields], name
        for fs, f in zip(c.fields, fields):
            where = f"{name}.{f.get('name')}"
            assert fs.type == f.get("type"), where
            assert fs.primitive == (_primitive(f.get("type")) if f.get("type") != "*" else "*"), where
            assert fs.requires == f.get("requires"), where
            assert fs.mandatory is (f.get("mandatory") == "true"), where
            assert fs.multiple is (f.get("multiple") == "true"), where
            assert fs.has_default is (f.get("default") is not None), where
            want = _default(f)
            assert fs.default == want and type(fs.default) is type(want), (where, fs.default, want)
        assert c.index == {f.get("name"): i for i, f in enumerate(fields)}


def test_defaults_read_from_the_xml_by_hand():
    """A few defaults spelled out from the spec text, so the converter above is checked too."""
    by_field = {(n, f.name): f.default for n, c in spec.COMPOSITES.items() for f in c.fields}
    assert by_field[("open", "max-frame-size")] == 4294967295
    assert by_field[("open", "channel-max")] == 65535
    assert by_field[("attach", "snd-settle-mode")] == 2  # "mixed"
    assert by_field[("attach", "rcv-settle-mode")] == 0  # "first"
    assert by_field[("header", "priority")] == 4
    assert by_field[("header", "durable")] is False
    assert by_field[("source", "expiry-policy")] == "session-end"
    assert by_field[("source", "durable")] == 0  # "none"
    assert by_field[("open", "hostname")] is None


def test_restricted_types_match_the_xml():
    xml = _of_class("restricted")
    assert set(spec.RESTRICTED) == set(xml)
    for name, t in xml.items():
        r = spec.RESTRICTED[name]
        assert r.source == t.get("source"), name
        assert r.primitive == _primitive(name), name
        d = t.find(f"{NS}descriptor")
        if d is None:
            assert (r.descriptor_code, r.descriptor_symbol) == (None, None), name
        else:
            assert (r.descriptor_code, r.descriptor_symbol) == (_code(d.get("code")), d.get("name")), name
        choices = {
            _convert(c.get("value"), _primitive(name)): c.get("name") for c in t.findall(f"{NS}choice")
        }
        assert r.choices == choices, name


def test_every_descriptor_is_looked_up_by_code_and_by_symbol():
    seen = 0
    for name, (_, t) in TYPES.items():
        d = t.find(f"{NS}descriptor")
        if d is None:
            continue
        seen += 1
        assert spec.BY_DESCRIPTOR[_code(d.get("code"))].name == name
        assert spec.BY_DESCRIPTOR[d.get("name")].name == name
        assert spec.descriptor_name(_code(d.get("code"))) == name
    assert len(spec.BY_DESCRIPTOR) == 2 * seen


def test_performatives_sasl_frames_and_sections():
    performatives = ["open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end", "close"]
    sasl = ["sasl-mechanisms", "sasl-init", "sasl-challenge", "sasl-response", "sasl-outcome"]
    sections = [
        "header", "delivery-annotations", "message-annotations", "properties",
        "application-properties", "data", "amqp-sequence", "amqp-value", "footer",
    ]  # fmt: skip
    xml_frames = {n for n, (_, t) in TYPES.items() if "frame" in _provides(t)}
    xml_sasl = {n for n, (_, t) in TYPES.items() if "sasl-frame" in _provides(t)}
    xml_sections = {n for n, (_, t) in TYPES.items() if "section" in _provides(t)}
    assert xml_frames == set(performatives)
    assert xml_sasl == set(sasl)
    assert xml_sections == set(sections)
    assert len(spec.PERFORMATIVES) == 9 and set(spec.PERFORMATIVES) == set(performatives)
    assert len(spec.SASL_FRAMES) == 5 and set(spec.SASL_FRAMES) == set(sasl)
    assert len(spec.SECTIONS) == 9 and set(spec.SECTIONS) == set(sections)
    for i, name in enumerate(performatives):
        assert spec.COMPOSITES[name].descriptor_code == 0x10 + i
        assert spec.COMPOSITES[name].descriptor_symbol == f"amqp:{name}:list"
    for i, name in enumerate(sasl):
        assert spec.COMPOSITES[name].descriptor_code == 0x40 + i
    for i, name in enumerate(sections):
        table = spec.COMPOSITES if name in ("header", "properties") else spec.RESTRICTED
        assert table[name].descriptor_code == 0x70 + i, name


def test_definitions_match_the_xml():
    xml = {d.get("name"): d.get("value") for r in ROOTS.values() for d in r.iter(f"{NS}definition")}
    assert spec.DEFINITIONS == xml
    assert (spec.AMQP_PORT, spec.AMQPS_PORT, spec.MIN_MAX_FRAME_SIZE) == (5672, 5671, 512)


def test_providers_match_the_xml():
    expected: dict[str, set[str]] = {}
    for name, (_, t) in TYPES.items():
        for p in _provides(t):
            expected.setdefault(p, set()).add(name)
    assert {k: set(v) for k, v in spec.PROVIDERS.items()} == expected


# --------------------------------------------------------------------------- the spec TEXT, a second source
#
# The transport and messaging documents of the specification (text renderings in
# shared/amqp-spec/seeds beside the clone, like shared/amqp-spec/xml) print every type
# definition inline.  They are read here with regular expressions, not ElementTree, and
# compared with the generated tables: a second, independent source for descriptor codes,
# field names and their order, types, defaults and choices.

SEEDS = REPO.parent / "shared" / "amqp-spec" / "seeds"
SPEC_TEXTS = {"transport": "amqp-core-transport-v1.0.txt", "messaging": "amqp-core-messaging-v1.0.txt"}
_ATTR = re.compile(r'([\w-]+)="([^"]*)"')
_TYPE = re.compile(r"<type\b([^>]*?)(?:/>|>(.*?)</type>)", re.S)


def _seed(name: str) -> str:
    path = SEEDS / name
    if not path.is_file():
        message = (
            f"the spec text {path} is not beside this clone (expected shared/amqp-spec/seeds next to "
            "the repository, as CI has it)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path.read_text(encoding="utf-8")


def _text_types(doc: str) -> dict[str, dict]:
    """name -> {attrs, descriptor, fields, choices} of every <type> printed in one spec document."""
    out = {}
    for m in _TYPE.finditer(_seed(SPEC_TEXTS[doc])):
        attrs = dict(_ATTR.findall(m.group(1)))
        body = m.group(2) or ""
        desc = re.search(r"<descriptor\b([^>]*)/>", body)
        assert attrs["name"] not in out, f"{attrs['name']} printed twice in the {doc} text"
        out[attrs["name"]] = {
            "attrs": attrs,
            "descriptor": dict(_ATTR.findall(desc.group(1))) if desc else None,
            "fields": [dict(_ATTR.findall(f)) for f in re.findall(r"<field\b([^>]*)/>", body)],
            "choices": [dict(_ATTR.findall(c)) for c in re.findall(r"<choice\b([^>]*)/>", body)],
        }
    return out


@pytest.fixture(scope="module")
def text_types() -> dict[str, tuple[str, dict]]:
    """name -> (document, definition) over the transport and messaging texts."""
    out = {}
    for doc in SPEC_TEXTS:
        for name, t in _text_types(doc).items():
            assert name not in out
            out[name] = (doc, t)
    return out


def _text_primitive(name: str, types: dict) -> str:
    """Follow restricted sources through the text's own definitions down to a primitive name."""
    while name in types and types[name][1]["attrs"]["class"] == "restricted":
        name = types[name][1]["attrs"]["source"]
    return name


def _text_value(text: str, primitive: str):
    if primitive == "boolean":
        return {"true": True, "false": False}[text]
    if primitive in INT_TYPES:
        assert re.fullmatch(r"[0-9]+", text), text
        return int(text)
    return text


def _text_default(field: dict, types: dict):
    """A field's default as its wire value: a choice name becomes the choice's value."""
    text = field["default"]
    t = field["type"]
    while t in types:
        for c in types[t][1]["choices"]:
            if c["name"] == text:
                return _text_value(c["value"], _text_primitive(t, types))
        t = types[t][1]["attrs"].get("source")
    return _text_value(text, _text_primitive(field["type"], types))


def _text_code(code: str) -> int:
    # "0x00000000:0x00000010" is a 64-bit ulong written as two 32-bit halves
    hi, lo = code.split(":")
    assert len(hi) == len(lo) == 10, code
    return int(hi[2:] + lo[2:], 16)


def test_spec_text_prints_the_documents_types(text_types):
    composites = {n for n, (_, t) in text_types.items() if t["attrs"]["class"] == "composite"}
    restricted = {n for n, (_, t) in text_types.items() if t["attrs"]["class"] == "restricted"}
    assert len(composites) == 10 + 13 and len(restricted) == 16 + 19
    for name, (doc, _) in text_types.items():
        table = spec.COMPOSITES if name in composites else spec.RESTRICTED
        assert name in table, name
        assert table[name].section.split("/")[0] == doc, name
    # and nothing the generator put in these two documents is missing from the text
    for table in (spec.COMPOSITES, spec.RESTRICTED):
        ours = {n for n, c in table.items() if c.section.split("/")[0] in SPEC_TEXTS}
        assert ours == {n for n in text_types if n in table}


def test_composites_match_the_spec_text(text_types):
    checked = 0
    for name, (_, t) in text_types.items():
        a = t["attrs"]
        if a["class"] != "composite":
            continue
        c = spec.COMPOSITES[name]
        assert (c.source, c.provides) == (a["source"], tuple(re.split(r",\s*", a["provides"])) if "provides" in a
                                          else ()), name
        assert (c.descriptor_code, c.descriptor_symbol) == (_text_code(t["descriptor"]["code"]),
                                                            t["descriptor"]["name"]), name
        assert [f.name for f in c.fields] == [f["name"] for f in t["fields"]], name
        for fs, f in zip(c.fields, t["fields"]):
            where = f"{name}.{f['name']}"
            assert fs.type == f["type"], where
            assert fs.requires == f.get("requires"), where
            assert fs.mandatory is (f.get("mandatory") == "true"), where
            assert fs.multiple is (f.get("multiple") == "true"), where
            assert fs.has_default is ("default" in f), where
            if "default" in f:
                want = _text_default(f, text_types)
                assert fs.default == want and type(fs.default) is type(want), (where, fs.default, want)
            else:
                assert fs.default is None, where
        checked += 1
    assert checked == 23


def test_performatives_read_from_the_spec_text(text_types):
    """Descriptor code and field order of every performative, as section 2.7 of the text prints them."""
    frames = {n: t for n, (doc, t) in text_types.items()
              if doc == "transport" and t["attrs"].get("provides") == "frame"}
    assert sorted(frames, key=lambda n: _text_code(frames[n]["descriptor"]["code"])) == list(spec.PERFORMATIVES)
    for name, t in frames.items():
        c = spec.BY_DESCRIPTOR[_text_code(t["descriptor"]["code"])]
        assert c is spec.BY_DESCRIPTOR[t["descriptor"]["name"]] is spec.COMPOSITES[name]
        assert list(c.index) == [f["name"] for f in t["fields"]]
        assert [f.name for f in c.fields if f.mandatory] == [f["name"] for f in t["fields"] if f.get("mandatory")]


def test_restricted_types_match_the_spec_text(text_types):
    for name, (_, t) in text_types.items():
        a = t["attrs"]
        if a["class"] != "restricted":
            continue
        r = spec.RESTRICTED[name]
        assert r.source == a["source"], name
        assert r.provides == (tuple(re.split(r",\s*", a["provides"])) if "provides" in a else ()), name
        if t["descriptor"] is None:
            assert (r.descriptor_code, r.descriptor_symbol) == (None, None), name
        else:
            assert (r.descriptor_code, r.descriptor_symbol) == (_text_code(t["descriptor"]["code"]),
                                                                t["descriptor"]["name"]), name
        prim = _text_primitive(name, text_types)
        assert r.choices == {_text_value(c["value"], prim): c["name"] for c in t["choices"]}, name


def test_outcomes_and_sections_read_from_the_spec_text(text_types):
    def providing(what):
        return {n for n, (_, t) in text_types.items()
                if what in re.split(r",\s*", t["attrs"].get("provides", ""))}

    # 3.4: the messaging layer's outcomes; the transactions document (not in the seeds) adds "declared"
    assert providing("outcome") == {"accepted", "rejected", "released", "modified"}
    assert set(spec.PROVIDERS["outcome"]) == providing("outcome") | {"declared"}
    assert set(spec.PROVIDERS["delivery-state"]) >= providing("delivery-state") | {"received"}
    assert set(spec.SECTIONS) == providing("section")
    assert set(spec.PERFORMATIVES) == providing("frame")
    for what in ("error-condition", "source", "target", "message-id", "lifetime-policy", "distribution-mode"):
        assert set(spec.PROVIDERS[what]) >= providing(what), what


def test_constant_definitions_read_from_the_spec_text():
    """'PORT5672the IANA ...': the text runs name and value together at the start of a line."""
    found = {}
    for fname in SPEC_TEXTS.values():
        text = _seed(fname)
        for heading in re.findall(r"^\d\.\d+\.\d+ Constant Definitions$", text, re.M):
            # the section body (not the table of contents): from the heading line to the next heading
            body = text[text.index("\n" + heading + "\n") + len(heading) + 2:]
            nxt = re.search(r"^\d+\.\d+(\.\d+)? [A-Z]", body, re.M)
            body = body[: nxt.start()] if nxt else body
            for name, value in re.findall(r"^([A-Z][A-Z-]*[A-Z])(\d+)\D", body, re.M):
                found[name] = value
    assert set(found) == {"PORT", "SECURE-PORT", "MAJOR", "MINOR", "REVISION", "MIN-MAX-FRAME-SIZE",
                          "MESSAGE-FORMAT"}
    for name, value in found.items():
        assert spec.DEFINITIONS[name] == value, name


def test_scan_layouts_are_the_xml_fields_of_the_scanned_performatives():
    assert specgen.SCANNED_PERFORMATIVES == ("transfer", "flow", "disposition")
    assert tuple(_spec.SCAN_LAYOUTS) == specgen.SCANNED_PERFORMATIVES
    for name, (dcode, dsym, nfields, fields) in _spec.SCAN_LAYOUTS.items():
        doc, t = TYPES[name]
        assert t.get("class") == "composite" and "frame" in _provides(t)
        d = t.find(f"{NS}descriptor")
        assert (dcode, dsym) == (_code(d.get("code")), d.get("name"))
        xml_fields = t.findall(f"{NS}field")
        assert nfields == len(xml_fields) == len(fields)
        for i, (row, f) in enumerate(zip(fields, xml_fields)):
            fname, index, ftype, prim, requires, mandatory, multiple, default = row
            where = f"{name}.{fname}"
            assert (fname, index, ftype) == (f.get("name"), i, f.get("type")), where
            assert prim == (_primitive(f.get("type")) if f.get("type") != "*" else "*"), where
            assert requires == f.get("requires"), where
            assert mandatory is (f.get("mandatory") == "true"), where
            assert multiple is (f.get("multiple") == "true"), where
            want = _default(f)
            assert default == want and type(default) is type(want), where
    # spelled out from the spec text (section 2.7)
    transfer = _spec.SCAN_LAYOUTS["transfer"]
    assert transfer[:3] == (0x14, "amqp:transfer:list", 11)
    assert [f[0] for f in transfer[3]][:3] == ["handle", "delivery-id", "delivery-tag"]
    assert transfer[3][7][:5] == ("state", 7, "*", "*", "delivery-state")
    assert _spec.SCAN_LAYOUTS["disposition"][3][0][2:4] == ("role", "boolean")


# --------------------------------------------------------------------------- named field indices and descriptors


def _upper(*parts: str) -> str:
    return "_".join(parts).replace("-", "_").upper()


def _generated_constants() -> dict[str, int]:
    """The module-level upper-case ints of _spec (the named constants; the tables are dicts/tuples)."""
    return {k: v for k, v in vars(_spec).items() if k.isupper() and type(v) is int}


def test_field_constants_are_the_xml_field_order():
    """Every field of every composite of the XML (read here with ElementTree) has a constant
    <TYPE>_<FIELD> equal to its position in the XML, and there is no other field constant."""
    want = {}
    for name, t in _of_class("composite").items():
        for i, f in enumerate(t.findall(f"{NS}field")):
            cname = _upper(name, f.get("name"))
            assert cname not in want, f"{cname} named twice"
            want[cname] = i
    descriptors = {}
    for name, (_, t) in TYPES.items():
        d = t.find(f"{NS}descriptor")
        if d is not None:
            descriptors[_upper("descriptor", name)] = _code(d.get("code"))
    assert not set(want) & set(descriptors)
    got = _generated_constants()
    assert {k: v for k, v in got.items() if k in want} == want
    assert {k: v for k, v in got.items() if k in descriptors} == descriptors
    assert set(got) == set(want) | set(descriptors), "a constant the XML does not define (stale?)"
    assert len(want) == sum(len(c.fields) for c in spec.COMPOSITES.values())


def test_field_constants_spelled_out_from_the_spec_text():
    """A few positions as the printed specification lists them (2.7.5, 2.7.4, 2.7.6, 2.7.3, 3.2.1)."""
    assert (_spec.TRANSFER_HANDLE, _spec.TRANSFER_DELIVERY_ID, _spec.TRANSFER_DELIVERY_TAG, _spec.TRANSFER_MORE,
            _spec.TRANSFER_STATE, _spec.TRANSFER_ABORTED, _spec.TRANSFER_BATCHABLE) == (0, 1, 2, 5, 7, 9, 10)
    assert (_spec.FLOW_NEXT_INCOMING_ID, _spec.FLOW_HANDLE, _spec.FLOW_LINK_CREDIT, _spec.FLOW_ECHO,
            _spec.FLOW_PROPERTIES) == (0, 4, 6, 9, 10)
    assert (_spec.DISPOSITION_ROLE, _spec.DISPOSITION_FIRST, _spec.DISPOSITION_STATE) == (0, 1, 4)
    assert (_spec.ATTACH_NAME, _spec.ATTACH_HANDLE, _spec.ATTACH_SOURCE, _spec.ATTACH_TARGET) == (0, 1, 5, 6)
    assert (_spec.HEADER_DURABLE, _spec.HEADER_DELIVERY_COUNT) == (0, 4)
    assert (_spec.DESCRIPTOR_TRANSFER, _spec.DESCRIPTOR_ACCEPTED, _spec.DESCRIPTOR_AMQP_VALUE) == (0x14, 0x24, 0x77)


def test_field_constants_match_the_spec_text(text_types):
    """The second source: the field order of every composite the specification's text prints."""
    for name, (_, t) in text_types.items():
        if t["attrs"]["class"] != "composite":
            continue
        for i, f in enumerate(t["fields"]):
            assert getattr(_spec, _upper(name, f["name"])) == i, (name, f["name"])
        assert getattr(_spec, _upper("descriptor", name)) == _text_code(t["descriptor"]["code"]), name


def test_a_constant_made_twice_is_an_error():
    """transfer-delivery.id would be TRANSFER_DELIVERY_ID too: the generator refuses, it does not shadow."""
    tables = specgen.build_tables()
    tables["COMPOSITES"] = dict(tables["COMPOSITES"])
    tables["COMPOSITES"]["transfer-delivery"] = (
        "transfer-delivery", "list", (), "x/y", "x:transfer-delivery:list", 0x7777,
        (("id", "uint", "uint", None, False, False, False, None),))
    with pytest.raises(ValueError, match="TRANSFER_DELIVERY_ID"):
        specgen.build_constants(tables)
    assert specgen.constant_name("sasl-outcome", "additional-data") == "SASL_OUTCOME_ADDITIONAL_DATA"
