"""What the rule rooms tell their owner besides findings: the hooks a tracker may override.

The settlement room calls :meth:`Hooks._on_fold` when a delivery is final (the Analyzer makes its
table row), the link room :meth:`Hooks._on_credit` after every frame that may change a link's
credit, the session room :meth:`Hooks._on_window` after every announcement of a session window
(the HTML report's series).  The tracker is a :class:`Hooks` and hands itself to the rooms as such:
the rooms see these three methods of it, nothing else, and import no tracker.
"""

from __future__ import annotations


class Hooks:
    """No-ops: a subclass overrides what it wants to hear of."""

    def _on_fold(self, dlv) -> None:
        """``dlv`` is final and about to be forgotten."""

    def _on_credit(self, link, f) -> None:
        """Frame ``f`` was checked against ``link``'s credit (attach, flow, transfer)."""

    def _on_window(self, s, sender, f) -> None:
        """The peer receiving from ``sender`` announced session ``s``'s window in frame ``f``."""
