"""A message scan whose bare-message digest is in progress pickles (an archive run's checkpoint keeps
it) when the run keeps the digested bytes (:func:`keep_digested_bytes`, :class:`HeldDigest`), and
goes on after loading to the same BLAKE2b-128 as one scan of the whole message: the oracle is
hashlib's BLAKE2b of the bare bytes, computed here.  Without it (the default) such a scan refuses to
pickle, and so does a HeldDigest past its cap."""

from __future__ import annotations

import hashlib
import pickle

import pytest

from amqp_dissect.amqp import message as M

HEADER = bytes([0x00, 0x53, 0x70, 0xc0, 0x02, 0x01, 0x41])  # header: list8 [durable=true] (not bare)
PROPERTIES = bytes([0x00, 0x53, 0x73, 0xc0, 0x05, 0x01, 0xa1, 0x02]) + b"id"  # properties: [message-id "id"]
BODY = bytes(range(256)) * 40
DATA = bytes([0x00, 0x53, 0x75, 0xb0]) + len(BODY).to_bytes(4, "big") + BODY  # data (vbin32)
MESSAGE = HEADER + PROPERTIES + DATA
BARE_DIGEST = hashlib.blake2b(PROPERTIES + DATA, digest_size=16).hexdigest()


@pytest.fixture
def keep():
    M.keep_digested_bytes(True)
    yield
    M.keep_digested_bytes(False)


def _scan(frames: list, pickled_after: int | None = None):
    s = M.MessageScan()
    for i, f in enumerate(frames):
        s.feed(f)
        if i == pickled_after:
            s = pickle.loads(pickle.dumps(s, 5))
    s.end()
    return s


def _frames(cuts: list) -> list:
    edges = [0, *cuts, len(MESSAGE)]
    return [MESSAGE[a:b] for a, b in zip(edges, edges[1:])]


def test_the_plain_scan_digests_the_bare_message():
    s = _scan(_frames([100, 5000]))
    assert s.status == "read" and s.digest == BARE_DIGEST


@pytest.mark.parametrize("cut", [len(HEADER) + 3, len(HEADER) + len(PROPERTIES) + 2, 100, 6000, len(MESSAGE) - 1])
def test_a_scan_pickled_mid_message_goes_on_to_the_same_digest(keep, cut):
    one = _scan(_frames([cut]))
    again = _scan(_frames([cut]), pickled_after=0)
    assert one.digest == again.digest == BARE_DIGEST
    assert again.cells() == one.cells()
    assert again.digest.__class__ is str  # (the bytes are freed at the end: the hex text is kept)


def test_without_keeping_the_bytes_a_scan_mid_message_refuses_to_pickle():
    s = M.MessageScan()
    s.feed(MESSAGE[:500])
    with pytest.raises(pickle.PicklingError, match="in progress"):
        pickle.dumps(s)


def test_a_held_digest_past_its_cap_refuses_to_pickle(keep, monkeypatch):
    monkeypatch.setattr(M, "HELD_DIGEST_CAP", 1000)
    s = M.MessageScan()
    s.feed(MESSAGE[:2000])
    with pytest.raises(pickle.PicklingError, match="more than 1000 bytes"):
        pickle.dumps(s)
    s.feed(MESSAGE[2000:])
    s.end()
    assert s.digest == BARE_DIGEST  # (the digest itself goes on)
