"""(tests/data/compare/README.md: how qpid_types.pcap and qpid_selector.pcap were made; run by hand, not by the tests.)
Client: a sender of the type messages (all sent at once, so several transfers share a TCP segment),
then receivers whose sources carry filter sets with described values (selector filters)."""
import sys
import uuid
from proton import (Message, symbol, Described, ulong, char, timestamp, ubyte, ushort, uint, byte, short, int32,
                    float32, decimal32, decimal64, decimal128, Array, Data, UNDESCRIBED)
from proton.handlers import MessagingHandler
from proton.reactor import Container, Filter, Selector

ADDR, WHAT = sys.argv[1], sys.argv[2]


def every_type():
    return {
        "null": None, "true": True, "false": False, "ubyte": ubyte(255), "ushort": ushort(65535),
        "uint": uint(4294967295), "ulong": ulong(2**64 - 1), "byte": byte(-128), "short": short(-32768),
        "int": int32(-2**31), "long": -2**63, "float": float32(1.5), "double": 3.141592653589793,
        "decimal32": decimal32(0x22500001), "decimal64": decimal64(0x2238000000000001),
        "decimal128": decimal128(b"\x22\x08" + b"\x00" * 13 + b"\x01"), "char": char("\u00e9"),
        "timestamp": timestamp(1_700_000_000_123), "uuid": uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
        "binary": b"\x00\x01\xfe\xff", "string": "hello", "empty-string": "", "symbol": symbol("sym"),
        "empty-symbol": symbol(""),
        "empty-binary": b"",
    }


def body_values():
    return [
        [1, "two", None, True], {symbol("k"): 1, "s": "v"}, Array(UNDESCRIBED, Data.INT, 1, 2, 3),
        Array(UNDESCRIBED, Data.STRING, "a", "b"), Described(symbol("example:described"), "value"),
        Described(ulong(0x0000468C00000004), [1, 2]), decimal64(0x2238000000000001), char("x"),
        timestamp(0), uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), "", {}, [],
    ]


class Client(MessagingHandler):
    def __init__(self):
        super().__init__()
        self.outstanding = 0
        self.expected = 0

    def on_start(self, event):
        self.conn = event.container.connect(ADDR)
        if WHAT == "types":
            self.sender = event.container.create_sender(self.conn, "types")
        else:
            c = event.container
            c.create_receiver(self.conn, "orders", name="selector-string", options=Selector("colour = 'red'"))
            c.create_receiver(self.conn, "orders", name="selector-ulong", options=Filter(
                {symbol("jms-selector"): Described(ulong(0x0000468C00000004), "price > 10")}))
            self.expected = 4

    def on_sendable(self, event):
        if WHAT != "types" or getattr(self, "_sent", False):
            return
        self._sent = True
        msgs = [Message(body=v, properties={"i": i}) for i, v in enumerate(body_values())]
        msgs.append(Message(body="all types", properties=every_type()))  # (its empty binary comes last)
        msgs += [Message(body=f"after {i}") for i in range(3)]
        for m in msgs:
            event.sender.send(m)
        self.outstanding = len(msgs)

    def on_settled(self, event):
        self.outstanding -= 1
        if self.outstanding == 0:
            event.connection.close()

    def on_message(self, event):
        self.expected -= 1
        if self.expected == 0:
            event.connection.close()


Container(Client()).run()
