"""A new delivery's fields, compiled and pure (the compiled ``_init`` leaves the fields a new extension
object already holds: None in the object fields, 0 in the C ones)."""

from amqp_dissect.model.delivery import DeliveryRecord

EXPECTED = {
    "link": "L", "session": "S", "direction": 1, "delivery_id": 7, "tag": b"t", "first_ts": 5_000, "first_packet": 3,
    "last_ts": 5_000, "last_packet": 3, "frames": 0, "size": 0, "complete": False, "presettled": False,
    "aborted": False, "resumed": False, "folded": False, "seq": 0, "disp0": 0, "disp1": 0, "live_at": 0,
}


def _check(x):
    for name in DeliveryRecord.__slots__ if hasattr(DeliveryRecord, "__slots__") else EXPECTED:
        want = EXPECTED.get(name)
        got = getattr(x, name)
        assert got == want and type(got) is type(want), (name, got, want)


def test_every_field_of_a_new_delivery():
    names = set(getattr(DeliveryRecord, "__slots__", ())) or set(EXPECTED)
    assert set(EXPECTED) <= names
    _check(DeliveryRecord("L", "S", 1, 7, b"t", 5_000, 3))
    x = DeliveryRecord.__new__(DeliveryRecord)
    x._init("L", "S", 1, 7, b"t", 5_000, 3)
    _check(x)
    assert x.dispositions == [0, 0]
