"""Row dicts handed out one at a time and counted while they live: how many a writer holds at once."""

from __future__ import annotations


class LiveRows:
    """Copies of ``base``'s rows (round and round) as dicts that count themselves: ``now`` alive,
    ``most`` the most alive at once since the last :meth:`reset`."""

    def __init__(self, base: list):
        self.base = base
        self.now = 0
        self.most = 0
        counter = self

        class CountedRow(dict):
            def __del__(self):
                counter.now -= 1

        self._row = CountedRow

    def reset(self) -> None:
        self.now = self.most = 0

    def rows(self, n: int):
        """``n`` rows, each counted from its making to its freeing."""
        base = self.base
        for i in range(n):
            self.now += 1
            self.most = max(self.most, self.now)
            yield self._row(base[i % len(base)])
