"""The generated protocol tables against the AMQP 1.0 XML they come from.

``dissector/_spec.py`` must be exactly what ``dissector.specgen`` renders, the
XML in ``dissector/spec/`` must be the shared copy, and the tables must agree
with the XML as read *here*, with ElementTree and this file's own small
conversions -- not by calling the generator's helpers.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dissector import _spec, spec, specgen

REPO = Path(__file__).resolve().parents[1]
XML_DIR = REPO / "dissector" / "spec"
SHARED_XML = REPO.parent / "shared" / "amqp-spec" / "xml"
NS = "{http://www.amqp.org/schema/amqp.xsd}"
XML_FILES = ("types", "transport", "messaging", "security", "transactions")
INT_TYPES = {"ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"}


# --------------------------------------------------------------------------- generator output


def test_render_reproduces_the_committed_module_byte_for_byte():
    committed = (REPO / "dissector" / "_spec.py").read_bytes()
    rendered = specgen.render().encode("utf-8")
    assert rendered == committed, "dissector/_spec.py is stale: run python -m dissector.specgen"


def test_check_mode_accepts_the_committed_module(tmp_path, capsys):
    assert specgen.main(["--check"]) == 0
    stale = tmp_path / "_spec.py"
    stale.write_text(specgen.render() + "# edited by hand\n")
    assert specgen.main(["--check", "--out", str(stale)]) == 1
    assert "stale" in capsys.readouterr().err


def test_render_is_deterministic():
    assert specgen.render() == specgen.render()


def test_spec_xml_is_the_shared_copy():
    if not SHARED_XML.is_dir():
        message = (
            f"the shared AMQP XML is not at {SHARED_XML} (expected shared/amqp-spec/xml "
            "next to the repository clone); cannot check that dissector/spec/ is a copy of it"
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
            f"dissector/spec/{name} differs from {SHARED_XML / name}"
        )
    assert specgen.render(SHARED_XML) == specgen.render()


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
