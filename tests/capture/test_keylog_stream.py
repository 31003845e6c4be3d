"""Hostile key logs (issue 29): damaged lines, wrong secrets, huge files, ``/dev/zero``.

Oracles: the secrets a key log holds are those of its valid lines (the same text parsed whole,
in chunks of every size, and byte by byte); a file read as a stream keeps only the randoms looked
up (counted), finds every random wherever it is in the file (no false negative of the region
filters, even merged), and stops on ``/dev/zero`` with bounded memory (tracemalloc's peak, a
generous bound the issue asks for); on real TLS captures (tests/support/tlscap.py, as tests/capture/test_tls.py),
wrong or damaged secrets are a TLS note and an undecrypted connection in every command, never an
internal error.
"""

from __future__ import annotations

import os
import threading
import tracemalloc

import pytest

from amqp_dissect.capture import keylog as K
from amqp_dissect.capture.keylog import KeyLog, LineScanner, RegionIndex
from amqp_dissect.pipelines.keylogfile import KeyLogFile
from test_tls import captures, run  # noqa: F401  (the fixture making TLS captures)


def _line(label, random: bytes, secret: bytes) -> str:
    return f"{label} {random.hex()} {secret.hex()}\n"


def _rand(i: int) -> bytes:
    return i.to_bytes(4, "big") * 8 if i else bytes(32)


SAMPLE = ("# comment\n"
          + _line("CLIENT_RANDOM", _rand(1), b"\x11" * 48)
          + "CLIENT_RANDOM zz 00\n"  # 3: not hex
          + "garbage\n"  # 4: one field
          + _line("CLIENT_RANDOM", _rand(2), b"\x11" * 47)  # 5: master secret of 47 bytes
          + _line("CLIENT_HANDSHAKE_TRAFFIC_SECRET", _rand(2), b"\x22" * 32)
          + "EXPORTER_SECRET " + _rand(2).hex() + " " + "33" * 32 + "\n"  # unused label: not damage
          + "CLIENT_RANDOM " + "ab" * 31 + " " + "11" * 48 + "\n"  # 8: random of 31 bytes
          + "x" * (K.MAX_LINE + 5) + "\n"  # 9: too long
          + "\x00\x01\x02\n"  # 10
          + _line("SERVER_HANDSHAKE_TRAFFIC_SECRET", _rand(2), b"\x44" * 48)
          + _line("CLIENT_TRAFFIC_SECRET_0", _rand(3), b"\x55" * 32))  # no line end at the end
SAMPLE = SAMPLE[:-1]
DAMAGED = [3, 4, 5, 8, 9, 10]


def _scan(data: bytes, size: int) -> tuple:
    sc = LineScanner()
    got = []
    for i in range(0, len(data), size):
        got += sc.feed(data[i:i + size])
    got += sc.end()
    return got, sc.notes


def test_damaged_lines_are_noted_with_their_number_and_the_rest_is_read():
    kl = KeyLog(SAMPLE)
    assert kl.get(_rand(1)) == {"CLIENT_RANDOM": b"\x11" * 48}
    assert kl.get(_rand(2)) == {"CLIENT_HANDSHAKE_TRAFFIC_SECRET": b"\x22" * 32,
                                "SERVER_HANDSHAKE_TRAFFIC_SECRET": b"\x44" * 48}
    assert kl.get(_rand(3)) == {"CLIENT_TRAFFIC_SECRET_0": b"\x55" * 32}
    assert [int(n.split(":")[0].split()[1]) for n in kl.notes] == DAMAGED
    assert all(n.endswith("skipped") for n in kl.notes)
    assert "not hexadecimal" in kl.notes[0] and "47 bytes, not 48" in kl.notes[2]
    assert kl.lines_ignored == len(DAMAGED) + 1  # the exporter line is ignored, not damaged


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1000, 1 << 20])
def test_chunks_of_any_size_give_what_the_whole_text_gives(size):
    data = SAMPLE.encode()
    assert _scan(data, size) == _scan(data, len(data))


def test_dev_zero_like_input_stops_after_max_run_bytes():
    sc = LineScanner()
    fed = 0
    while not sc.stopped:
        sc.feed(bytes(65536))
        fed += 65536
        assert fed <= K.MAX_RUN + 65536
    assert "not a key log" in sc.notes[-1] and len(sc.partial) <= K.MAX_LINE
    assert sc.feed(b"\n" + _line("CLIENT_RANDOM", _rand(1), b"\x11" * 48).encode()) == []


def test_a_run_of_damaged_lines_stops_the_reading():
    sc = LineScanner()
    sc.feed(b"bad line\n" * (K.MAX_DAMAGED_RUN + 5))
    assert sc.stopped and sc.damaged == K.MAX_DAMAGED_RUN
    assert len(sc.notes) == K.NOTED_LINES + 1 and "damaged lines in a row" in sc.notes[-1]
    assert sc.summary()[-1] == f"{K.MAX_DAMAGED_RUN - K.NOTED_LINES:,} more damaged lines skipped"


def _big_keylog(path, n: int, lines_per: int = 1) -> list:
    randoms = [os.urandom(32) for _ in range(n)]
    with open(path, "w") as f:
        for i, r in enumerate(randoms):
            for k in range(lines_per):
                f.write(_line("CLIENT_RANDOM", r, bytes([i % 256]) * 48))
            if i % 97 == 0:
                f.write("damaged line\n")
    return randoms


def test_a_key_log_file_keeps_only_the_randoms_looked_up(tmp_path, monkeypatch):
    monkeypatch.setattr(K, "REGION_BYTES", 4096)  # many regions in a small file
    path = tmp_path / "keys"
    randoms = _big_keylog(path, 3000)
    kl = KeyLogFile(path)
    assert len(kl.index.starts) > 50 and kl.secrets == {}
    asked = randoms[::300] + [randoms[-1]]
    for r in asked:
        i = randoms.index(r)
        assert kl.get(r) == {"CLIENT_RANDOM": bytes([i % 256]) * 48}
        assert r in kl
    for _ in range(20):
        assert kl.get(os.urandom(32)) is None
    assert set(kl.secrets) == set(asked) and len(kl.absent) == 20
    # each look-up read one region, rarely two (a Bloom filter's false positive): not the file
    assert kl.lookups <= len(asked) + 20 + 3
    assert kl.notes[0].startswith("line 2: ") and kl.notes[-1].endswith("more damaged lines skipped")


def test_merged_regions_keep_memory_flat_and_lose_no_random(monkeypatch):
    monkeypatch.setattr(K, "REGION_BYTES", 100)
    monkeypatch.setattr(K, "MAX_REGIONS", 8)
    ix = RegionIndex()
    randoms = [os.urandom(32) for _ in range(5000)]
    for i, r in enumerate(randoms):
        ix.add(i * 150, r)
    ix.end = 5000 * 150
    assert len(ix.starts) <= 8 and ix.nbytes() <= 8 * K.REGION_BITS // 8
    for i, r in enumerate(randoms[::37]):
        at = randoms.index(r) * 150
        assert any(a <= at < b for a, b in ix.regions(r))


def test_a_key_log_that_cannot_be_read_twice_is_copied_valid_lines_only(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text = SAMPLE.encode() * 3

    def writer():
        with open(fifo, "wb") as f:
            f.write(text)

    t = threading.Thread(target=writer)
    t.start()
    kl = KeyLogFile(fifo)
    t.join()
    assert kl.get(_rand(2)) == KeyLog(SAMPLE).get(_rand(2))
    assert kl.get(_rand(3)) == {"CLIENT_TRAFFIC_SECRET_0": b"\x55" * 32}  # (the last copy: the others run into the next copy)
    assert kl.get(_rand(9)) is None


def test_a_key_log_that_grows_is_read_further(tmp_path):
    path = tmp_path / "keys"
    path.write_text(_line("CLIENT_RANDOM", _rand(1), b"\x11" * 48))
    kl = KeyLogFile.from_path(path)
    assert kl.get(_rand(2)) is None
    with open(path, "a") as f:
        f.write(_line("CLIENT_RANDOM", _rand(2), b"\x22" * 48)[:-1])  # still being written
    assert kl.get(_rand(2)) == {"CLIENT_RANDOM": b"\x22" * 48}


def test_dev_zero_ends_quickly_in_bounded_memory():
    tracemalloc.start()
    try:
        kl = KeyLogFile("/dev/zero")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert kl.scanner.stopped and kl.scanner.offset <= K.MAX_RUN + (1 << 20)
    assert "not a key log" in kl.notes[-1]
    assert peak < 16 << 20, peak  # (before: the whole stream read into memory until MemoryError)
    assert kl.get(os.urandom(32)) is None


def test_the_big_key_log_costs_its_index_not_its_size(tmp_path):
    path = tmp_path / "keys"
    randoms = _big_keylog(path, 40000, lines_per=2)  # ~15 MB
    tracemalloc.start()
    try:
        kl = KeyLogFile(path)
        assert kl.get(randoms[20000]) is not None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert os.path.getsize(path) > 10 << 20 and peak < 4 << 20, peak


def test_a_pickled_key_log_file_is_a_plain_key_log_of_its_valid_lines(tmp_path):
    import pickle

    path = tmp_path / "keys"
    path.write_text(SAMPLE)
    back = pickle.loads(pickle.dumps(KeyLogFile(path)))
    assert type(back) is KeyLog and back.secrets == KeyLog(SAMPLE).secrets


def test_a_key_log_file_as_text_holds_every_secret_of_the_file(tmp_path):
    """What the Spark job ships to its executors (``KeyLogFile.text``): the secrets of every valid
    line, not only of the randoms looked up (the plain parser of the whole text is the oracle)."""
    path = tmp_path / "keys"
    path.write_text(SAMPLE)
    kl = KeyLogFile(path)
    assert kl.get(_rand(1)) is not None and len(kl.secrets) == 1  # (one random looked up)
    assert KeyLog(kl.text()).secrets == KeyLog(SAMPLE).secrets and len(KeyLog(SAMPLE)) > 1


def test_from_path_defaults_to_the_file_sslkeylogfile_names(tmp_path, monkeypatch):
    path = tmp_path / "keys"
    path.write_text(SAMPLE)
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)
    assert KeyLogFile.from_path() is None
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "absent"))
    assert KeyLogFile.from_path() is None  # (a variable left set in the shell: no key log, no failure)
    monkeypatch.setenv("SSLKEYLOGFILE", str(path))
    kl = KeyLogFile.from_path()
    assert kl.path == str(path) and kl.get(_rand(2)) == KeyLog(SAMPLE).get(_rand(2))
    with pytest.raises(OSError):  # a path given and missing: the caller says so
        KeyLogFile.from_path(tmp_path / "absent")


# --------------------------------------------------------------------------- real TLS captures


def _wrong(text: str, how: str) -> str:
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or line.startswith("#"):
            out.append(line)
        elif how == "zero":
            out.append(f"{parts[0]} {parts[1]} {'0' * len(parts[2])}")
        elif how == "flip":
            out.append(f"{parts[0]} {parts[1]} {parts[2][:-2]}{int(parts[2][-2:], 16) ^ 1:02x}")
        elif how == "damaged":
            out.append(f"{parts[0]} {parts[1]} {parts[2][:-3]}")
    return "\n".join(out) + "\n"


def _all_commands(cap, keys, capsys):
    from amqp_dissect.cli.main import EXIT_INTERNAL, main

    runs = [["frames"], ["frames", "-V"], ["frames", "--format", "jsonl"], ["report"], ["report", "-T", "json"],
            ["report", "-T", "html"], ["deliveries", "-T", "csv"], ["connections", "-T", "jsonl"]]
    errs = []
    for args in runs:
        rc = main(args + ["--keylog", str(keys), str(cap)])
        out, err = capsys.readouterr()
        assert rc != EXIT_INTERNAL and "internal error" not in err, (args, err)
        errs.append((args, out, err))
    return errs


@pytest.mark.parametrize("name", ["tls13-aes128gcm", "tls12-ecdhe-aes128gcm"])
@pytest.mark.parametrize("how", ["zero", "flip"])
def test_wrong_secrets_are_a_tls_note_and_an_undecrypted_connection(captures, tmp_path, capsys, name, how):  # noqa: F811
    cap = captures(name)
    keys = tmp_path / "wrong.keys"
    keys.write_text(_wrong(cap.keys.read_text(), how))
    for ports in ((), (cap.port,)):
        evs = run(cap.pcap, KeyLogFile(keys), ports=ports)
        notes = [e.note.message for e in evs if hasattr(e, "note") and e.note is not None]
        assert any("wrong secrets" in m and "failed authentication" in m for m in notes), notes
        assert sum("failed authentication" in m for m in notes) == 1  # one note, not one per record
        assert any("not decrypted" in m for m in notes)
    for args, out, err in _all_commands(cap.pcap, keys, capsys):
        if args == ["report"]:
            assert "wrong secrets in the key log" in out and "connections 1," in out


def test_a_wrong_application_secret_of_one_side_leaves_the_other_side_decrypted(captures, tmp_path):  # noqa: F811
    from amqp_dissect.amqp.framing import Frame

    cap = captures("tls13-aes128gcm")
    keys = tmp_path / "wrong.keys"
    lines = cap.keys.read_text().splitlines()
    keys.write_text("\n".join(_wrong(x, "flip").strip() if x.startswith("CLIENT_TRAFFIC_SECRET_0") else x
                              for x in lines) + "\n")
    evs = run(cap.pcap, KeyLogFile(keys), ports=(cap.port,))
    good = run(cap.pcap, KeyLogFile(cap.keys), ports=(cap.port,))
    notes = [e.note.message for e in evs if hasattr(e, "note") and e.note is not None]
    assert sum("failed authentication" in m for m in notes) == 1
    assert any(m.startswith("TLS: the client's first record protected") for m in notes)
    sides = [(e.direction, e.name) for e in evs if type(e) is Frame]
    # the server's frames all decrypted (as with the right key log); none of the client's after its handshake
    assert [x for x in sides if x[0] == 1] == [(e.direction, e.name) for e in good if type(e) is Frame and e.direction == 1]
    assert len([x for x in sides if x[0] == 0]) < len([e for e in good if type(e) is Frame and e.direction == 0])


@pytest.mark.parametrize("name", ["tls13-aes128gcm", "tls12-ecdhe-aes128gcm"])
def test_damaged_secrets_and_a_capture_cut_short(captures, tmp_path, capsys, name):  # noqa: F811
    cap = captures(name)
    keys = tmp_path / "damaged.keys"
    keys.write_text(_wrong(cap.keys.read_text(), "damaged"))
    for args, out, err in _all_commands(cap.pcap, keys, capsys):
        assert "key log line" in err and "skipped" in err
    raw = cap.pcap.read_bytes()
    for cut in (len(raw) // 3, len(raw) // 2, len(raw) - 50):
        short = tmp_path / f"cut{cut}.pcap"
        short.write_bytes(raw[:cut])
        _all_commands(short, cap.keys, capsys)  # the right key log, the capture cut short
