"""The per-transfer shortcuts of the model, against what they stand for (compiled and pure):

* ``LinkCredit.left_sign`` (the credit stall's and ``beyond``'s test, on C integers) says what
  ``LinkCredit.left`` says: unknown, credit left, none;
* ``Link.untag`` (one dict operation) frees a settled delivery's tag as a multiset of the
  link's unsettled (tag, delivery-id) pairs would;
* ``Session.transfers`` (two C counters) counts a session's transfer frames per sender, as the
  frames the Dissector produced say, on captures of several client stacks.
"""

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from amqp_dissect.amqp.framing import Frame
from amqp_dissect.model.credit import LinkCredit
from amqp_dissect.model.entities import Link
from amqp_dissect.model.tracker import StateTracker
from eventkeys import run_pipeline

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

serial = st.one_of(st.integers(0, 40), st.integers(2**31 - 40, 2**31 + 40), st.integers(2**32 - 40, 2**32 - 1),
                   st.integers(0, 2**32 - 1))


@settings(max_examples=600, deadline=None)
@given(count=st.one_of(st.none(), serial), limit=st.one_of(st.none(), serial),
       g0=st.one_of(st.none(), serial), g1=st.one_of(st.none(), serial), r=st.sampled_from([-1, 0, 1]))
def test_left_sign_says_what_left_says(count, limit, g0, g1, r):
    lcr = LinkCredit()
    lcr.count = count
    lcr.limit = limit
    lcr.grants = [g0, g1]
    left = lcr.left(r)
    assert lcr.left_sign(r) == (-1 if left is None else 1 if left > 0 else 0)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]), st.integers(0, 5), st.booleans()), max_size=40))
def test_untag_frees_a_tag_as_a_multiset_would(ops):
    """``ops``: (tag, delivery-id, add?).  Added as TransferRules.tag_check adds (one id, then a list of
    the ids that repeat the tag); removed by Link.untag.  The oracle: a list of the pairs held."""
    link = Link.__new__(Link)
    link.tags = {}
    held = []
    for tag, did, add in ops:
        if add:
            h = link.tags.get(tag)
            if h is None:
                link.tags[tag] = did
            elif type(h) is list:
                h.append(did)
            else:
                link.tags[tag] = [h, did]
            held.append((tag, did))
        else:
            link.untag(tag, did)
            if (tag, did) in held:
                held.remove((tag, did))
        got = sorted((t, x) for t, v in link.tags.items() for x in (v if type(v) is list else [v]))
        assert got == sorted(held)
        assert all(v != [] for v in link.tags.values())


# proton (python), rhea, the Azure SDK, a lossy twin (transfers lost in gaps), real kernel loss
CAPTURES = ["outcomes.pcap", "multiframe_credit_one.pcap", "multi_session.pcap", "messages/rhea_request_reply.pcap",
            "messages/azure_cbs.pcap", "twins/rhea_protonc.lossy.pcap.gz", "loss/kernel_loss.pcap"]


@pytest.mark.parametrize("name", CAPTURES)
def test_session_transfers_count_the_transfer_frames(name):
    """Oracle: the transfer frames the Dissector produced, counted apart from the tracker, per
    connection, sender and the sender's channel."""
    path = SAMPLES / name
    data = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    events = run_pipeline(data)
    want: dict = {}
    for ev in events:
        if type(ev) is Frame and ev.pname == "transfer":
            key = (ev.conn, ev.direction, ev.channel)
            want[key] = want.get(key, 0) + 1
    t = StateTracker()
    for ev in events:
        t.feed(ev)
    t.finish()
    got: dict = {}
    for c in t.connections.values():
        for s in getattr(c, "sessions", ()):
            for d in (0, 1):
                if s.transfers[d]:
                    got[(c.id, d, s.channel[d])] = got.get((c.id, d, s.channel[d]), 0) + s.transfers[d]
            assert s.transfers == [s.transfers0, s.transfers1]
    assert want, name
    assert got == want, name
