"""What every twin client does (shared by the Python clients; rhea_twin.js mirrors these numbers)."""
from __future__ import annotations

N_SMALL = 1500          # small messages from twin-sender
N_BIG = 12              # messages from twin-big-sender
BIG_SIZE = 3000         # bytes of body: 7 transfer frames at max-frame-size 512
MAX_FRAME_SIZE = 512
WINDOWS = ((800, 500), (1100, 10))  # (deliveries received below this, credit window); then 1
ONE_BY_ONE_FROM = 1100  # deliveries received before the window is 1: releases and modifies happen only then
RELEASE_EVERY = 25      # every 25th first-time small message (by number) is released, then accepted
BIG_RELEASED = (3, 9)  # big messages released once (a 7-frame redelivery)
MODIFY_EVERY = 70       # with modified: every 70th is settled modified(delivery-failed), then accepted
LINKS = (("twin-sender", "sender"), ("twin-big-sender", "sender"), ("twin-receiver", "receiver"))
OUTCOMES = {0x24: "accepted", 0x25: "rejected", 0x26: "released", 0x27: "modified"}


def window(received: int) -> int:
    for below, credit in WINDOWS:
        if received < below:
            return credit
    return 1


def message(link: str, i: int) -> tuple[str, bytes]:
    if link == "twin-sender":
        return f"twin-small-{i}", f"twin {i}".encode()
    return f"twin-big-{i}", bytes((i * 7 + k) & 0xFF for k in range(BIG_SIZE))


def receiver_outcome(message_id: str, redelivered: bool, use_modified: bool, received_before: int) -> str:
    """The outcome the receiver applies.  Only at credit window 1 (one delivery settled at a time: rhea 3
    merges the dispositions of adjacent deliveries into one range with the first one's outcome) and only
    on a first delivery: a redelivered message is always accepted."""
    if redelivered or received_before < ONE_BY_ONE_FROM:
        return "accepted"
    n = int(message_id.rsplit("-", 1)[1])
    if "-big-" in message_id:
        return "released" if n in BIG_RELEASED else "accepted"
    if use_modified and n % MODIFY_EVERY == 0:
        return "modified"
    return "released" if n % RELEASE_EVERY == 0 else "accepted"


def new_truth(stack: str, host: str, port: int, address: str, sasl_mechanism: str = "PLAIN") -> dict:
    return {
        "client_stack": stack, "server": f"{host}:{port}", "address": address, "sasl_mechanism": sasl_mechanism,
        "max_frame_size_requested": MAX_FRAME_SIZE,
        "connections": [{"index": 0, "t_connect": None, "t_closed": None}],
        "links": [{"name": n, "role": r, "session": 0, "messages_sent": 0, "deliveries_received": 0,
                   "credit_grants": [], "outcomes": {"accepted": 0, "rejected": 0, "released": 0, "modified": 0},
                   "deliveries": []} for n, r in LINKS],
        "notes": [],
    }


def finish_truth(truth: dict) -> None:
    links = truth["links"]
    snd = [l for l in links if l["role"] == "sender"]
    rcv = [l for l in links if l["role"] == "receiver"]
    keys = ("accepted", "rejected", "released", "modified")
    truth["totals"] = {
        "messages_sent": sum(l["messages_sent"] for l in snd),
        "deliveries_received": sum(l["deliveries_received"] for l in rcv),
        "sender_outcomes": {k: sum(l["outcomes"].get(k, 0) for l in snd) for k in keys},
        "receiver_outcomes": {k: sum(l["outcomes"].get(k, 0) for l in rcv) for k in keys},
        "credit_grants": sum(len(l["credit_grants"]) for l in rcv),
    }


def tag_hex(dlv) -> str | None:
    """The delivery tag as hex; None when proton cannot decode it (it decodes tags as UTF-8)."""
    try:
        tag = dlv.tag
    except UnicodeDecodeError:
        return None
    return (tag.encode("utf-8") if isinstance(tag, str) else bytes(tag)).hex()
