"""A damaged gzip capture: every reader reports the damage at the same byte and keeps what came
before it (issue 40, item 4).

The captures are made here: a sample (rhea_protonc, a capture we did not write) decompressed and
gzipped again, then damaged

* in a deflate block far into the stream (a byte flipped so that zlib itself refuses the block:
  "invalid block type"),
* in the gzip header (a reserved flag set: nothing can be decompressed),
* in the trailer's CRC, and in its size field (the data all decompress; the check at the end fails),
* cut short inside the last block.

Readers: ``report`` (text and ``-j 2``), ``frames``, ``deliveries``, ``split``.  They agree on the line
that says where the damage is (the decompressed byte and the compressed bytes), exit 5 (4 when
nothing could be decompressed), and what they analysed is every record that ends before that byte.
Oracles: zlib fed the damaged stream in small pieces (how far good data goes), and the record
boundaries of the plain capture, read here from its record headers.
"""

from __future__ import annotations

import gzip
import os
import re
import struct
import zlib

import pytest

from amqp_dissect.cli.main import EXIT_DAMAGED, EXIT_FORMAT, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "samples", "twins", "rhea_protonc.pcap.gz")
WHERE = re.compile(r"gzip data (corrupt|truncated) at byte (\d+) of the decompressed stream \(.*\(compressed bytes "
                   r"(\d+) (?:to (\d+)|and on are missing)\)\)")


def plain_capture() -> bytes:
    with open(SAMPLE, "rb") as f:
        return gzip.decompress(f.read())


def record_ends(plain: bytes) -> list[int]:
    """The byte after each record of a little-endian pcap file (its record headers read here)."""
    ends, pos = [], 24
    while pos + 16 <= len(plain):
        caplen = struct.unpack_from("<I", plain, pos + 8)[0]
        pos += 16 + caplen
        if pos > len(plain):
            break
        ends.append(pos)
    return ends


def good_prefix(damaged: bytes, step: int = 16):
    """(decompressed bytes zlib gives before it refuses the stream, compressed offset of the refusal)."""
    z = zlib.decompressobj(31)
    out = 0
    for i in range(0, len(damaged), step):
        try:
            out += len(z.decompress(damaged[i:i + step]))
        except zlib.error:
            return out, i
    return out, None


def damaged_block(gz: bytes) -> bytes:
    """``gz`` with one byte flipped past 60% of it, where zlib refuses a block before the trailer."""
    for pos in range(len(gz) * 6 // 10, len(gz) - 400):
        b = bytearray(gz)
        b[pos] ^= 0xFF
        _, refused = good_prefix(bytes(b), 256)
        if refused is not None and refused < len(gz) - 300:
            return bytes(b)
    raise AssertionError("no byte of the later blocks makes zlib refuse the stream")


def flipped(gz: bytes, pos: int, bits: int) -> bytes:
    b = bytearray(gz)
    b[pos] ^= bits
    return bytes(b)


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    plain = plain_capture()
    gz = gzip.compress(plain, 6, mtime=0)
    folder = tmp_path_factory.mktemp("gzip-damage")
    made = {"block": damaged_block(gz), "header": flipped(gz, 3, 0x80), "crc": flipped(gz, len(gz) - 6, 0x01),
            "size": flipped(gz, len(gz) - 2, 0x01), "cut": gz[: len(gz) - 700],
            "tiny": gzip.compress(plain[:3], mtime=0)[:-8]}  # (3 bytes, then the stream ends: no trailer)
    paths = {}
    for name, data in made.items():
        paths[name] = folder / f"{name}.pcap.gz"
        paths[name].write_bytes(data)
    return plain, paths, folder


def readers(path, folder):
    return {"report": ["report", path], "report -j 2": ["report", "-j", "2", path],
            "frames": ["frames", "-T", "jsonl", path], "deliveries": ["deliveries", "-T", "csv", path],
            "split": ["split", path, "--out", folder / "parts", "--force", "--packets", "1000000"]}


def run(capsys, args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("damage", ["block", "crc", "size", "cut"])
def test_every_reader_stops_at_the_same_byte_and_keeps_what_came_before(capsys, captures, damage):
    plain, paths, folder = captures
    path = paths[damage]
    seen = {}
    for name, args in readers(path, folder).items():
        rc, out, err = run(capsys, args)
        assert rc == EXIT_DAMAGED, (name, rc, err)
        where = WHERE.search(err)
        assert where, (name, err)
        seen[name] = where.groups()
        if name == "frames":
            frames = out
        if name == "split":
            written = int(out.split(" records")[0])
    assert len(set(seen.values())) == 1, seen  # (one place, said the same way by every reader)
    at = int(seen["report"][1])
    ends = record_ends(plain)
    whole = sum(1 for e in ends if e <= at)
    assert written == whole, (written, whole)
    # what frames shows: the frames of the plain capture's records before the damage
    before = folder / f"{damage}-before.pcap"
    before.write_bytes(plain[: ends[whole - 1]])
    rc, expected, _ = run(capsys, ["frames", "-T", "jsonl", before])
    assert frames == expected
    kept, refused = good_prefix(path.read_bytes())
    assert at <= kept  # (nothing past what zlib gives is used)
    if damage == "block":
        assert at > len(plain) // 2 and kept - at < 1 << 16, (at, kept)  # (before: "byte 4, in the pcap header")
        assert int(seen["report"][2]) <= refused <= int(seen["report"][3])
    elif damage == "cut":  # (all but the last piece's data)
        assert len(plain) - at < 1 << 16, (at, len(plain))
    else:  # (a wrong trailer: every byte of the data was decompressed and kept)
        assert at == len(plain) and whole == len(ends), (at, len(plain), whole)


@pytest.mark.parametrize("damage,said_first", [
    ("header", "gzip data corrupt at byte 0 "),
    # (found by the gzip-damage fuzz kind: the capture reader said byte 0, split byte 3)
    ("tiny", "gzip data truncated at byte 3 "),
])
def test_damage_before_the_capture_begins_is_said_the_same_by_every_reader(capsys, captures, damage, said_first):
    _, paths, folder = captures
    said = set()
    for name, args in readers(paths[damage], folder).items():
        rc, out, err = run(capsys, args)
        assert rc == EXIT_FORMAT, (name, rc, err)
        assert err.count("\n") == 1 and said_first in err, (name, err)
        said.add(err.split(": ", 2)[2])
    assert len(said) == 1, said


def test_the_report_analyses_what_came_before_the_damage(capsys, captures):
    # the deliveries the report counts on the damaged capture are those of the records before the damage
    _, paths, _ = captures
    rc, out, _ = run(capsys, ["deliveries", "-T", "csv", paths["block"]])
    assert rc == EXIT_DAMAGED
    assert out.count("\n") > 10
