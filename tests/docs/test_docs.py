"""The README and the pages of docs/: every relative link reaches a file that exists, and every
``#anchor`` a heading of that page (GitHub's heading ids); the README stays a front door.

The reference lives in docs/ (issue 25); the README links into it, and the pages link into each
other by heading.  A heading renamed or a page moved breaks links silently on GitHub: this test
finds them.  Links inside code spans and fenced code blocks are not links; absolute URLs are not
checked (no network).
"""

from __future__ import annotations

import glob
import os
import re

import pytest

# the docs against the code's registries and sources: no hot module runs (CI's pure pass leaves them out)
pytestmark = pytest.mark.no_twin


def _root() -> str:
    d = os.path.dirname(os.path.abspath(__file__))
    while not os.path.isfile(os.path.join(d, "pyproject.toml")):
        parent = os.path.dirname(d)
        assert parent != d, "no pyproject.toml above the tests"
        d = parent
    return d


ROOT = _root()
PAGES = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
README_MAX_LINES = 400  # issue 25: "README as a front door (at most about 400 lines)"

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str):
    """(line number, line without code spans) of the lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, _CODE_SPAN.sub("", line)


def slug(heading: str) -> str:
    """GitHub's id for a heading: its text without markup, lower case, punctuation dropped but
    hyphens and underscores, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set:
    """The ids of a page's headings, read as written (a heading keeps its code spans in its id; a
    repeated one gets -1, -2, ... as on GitHub)."""
    seen: dict = {}
    out = set()
    fence = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is not None:
            continue
        h = _HEADING.match(line)
        if not h:
            continue
        base = slug(h.group(2))
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.add(base if k == 0 else f"{base}-{k}")
    return out


def broken_links(path: str, text: str) -> list:
    """(line, target, why) of every relative link of ``text`` (the page at ``path``) that does
    not resolve."""
    here = os.path.dirname(path)
    own = None
    bad = []
    for n, line in _prose_lines(text):
        for m in _LINK.finditer(line):
            target = m.group(1)
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto: ...
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(here, file)) if file else path
            if not os.path.exists(dest):
                bad.append((n, target, "no such file"))
                continue
            if anchor:
                if not dest.endswith(".md"):
                    bad.append((n, target, "an anchor into a file that is not a page"))
                    continue
                if dest == path:
                    own = own if own is not None else anchors(text)
                    ids = own
                else:
                    with open(dest, encoding="utf-8") as f:
                        ids = anchors(f.read())
                if anchor not in ids:
                    bad.append((n, target, "no such heading"))
    return bad


def test_the_pages_exist():
    names = {os.path.relpath(p, ROOT) for p in PAGES}
    assert {"README.md", os.path.join("docs", "index.md"), os.path.join("docs", "manual.md"),
            os.path.join("docs", "tables.md")} <= names


@pytest.mark.parametrize("path", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_resolves(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert broken_links(path, text) == []


def test_every_page_is_linked_from_the_index():
    with open(os.path.join(ROOT, "docs", "index.md"), encoding="utf-8") as f:
        index = f.read()
    linked = {m.group(1).partition("#")[0] for _, line in _prose_lines(index) for m in _LINK.finditer(line)}
    pages = {os.path.basename(p) for p in PAGES if os.path.dirname(p) == os.path.join(ROOT, "docs")} - {"index.md"}
    assert pages <= linked, pages - linked


def test_the_readme_is_a_front_door():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert len(lines) <= README_MAX_LINES, len(lines)


def test_the_checker_finds_what_is_broken(tmp_path):
    """The link checker itself: a missing file, a missing heading, a heading id with code and
    punctuation, a repeated heading, links in code that are not links."""
    (tmp_path / "other.md").write_text("# Other\n\n## `amqp-dissect frames CAPTURE...`\n\n## Dup\n\n## Dup\n",
                                       encoding="utf-8")
    page = tmp_path / "page.md"
    text = "\n".join([
        "# Page",
        "## Here, and there",
        "[ok](other.md) [ok](other.md#amqp-dissect-frames-capture) [ok](#here-and-there)",
        "[ok](other.md#dup-1) [ok](https://example.org/nowhere) ![img](other.md)",
        "[missing file](nowhere.md) [missing heading](other.md#nope) [own](#nope-here)",
        "[dup beyond](other.md#dup-2) `[in code](nowhere.md)`",
        "```",
        "[in a block](nowhere.md)",
        "```",
    ])
    page.write_text(text, encoding="utf-8")
    got = [(n, target) for n, target, _ in broken_links(str(page), text)]
    assert got == [(5, "nowhere.md"), (5, "other.md#nope"), (5, "#nope-here"), (6, "other.md#dup-2")]
    assert slug("amqp-dissect deliveries | links | stalls") == "amqp-dissect-deliveries--links--stalls"
    assert slug("JSON lines (`--format jsonl`)") == "json-lines---format-jsonl"


# A count of the compiled modules in prose: the version line's "compiled (N modules)", "N compiled
# modules", "N hot modules", "N modules compiled".  Issue 42: the pages gave 11, 34 and 39 while
# dissector/_hot.py listed 40; every such figure is now checked against that one list.
_MODULE_COUNT = re.compile(r"compiled \((\d+) modules?\)|\b(\d+) (?:compiled|hot) modules?\b|\b(\d+) modules? compiled\b")


def _hot_module_count() -> int:
    import runpy

    return len(runpy.run_path(os.path.join(ROOT, "dissector", "_hot.py"))["HOT_MODULES"])


def module_counts(text: str):
    """(line number, figure) of every count of compiled modules in a page's text."""
    found = []
    for n, line in enumerate(text.split("\n"), 1):
        for m in _MODULE_COUNT.finditer(line):
            found.append((n, int(next(g for g in m.groups() if g is not None))))
    return found


@pytest.mark.parametrize("path", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_count_of_compiled_modules_is_the_hot_list(path):
    with open(path, encoding="utf-8") as f:
        counts = module_counts(f.read())
    want = _hot_module_count()
    assert [(n, c) for n, c in counts if c != want] == [], f"dissector/_hot.py lists {want} modules"


def test_the_pages_give_the_count_of_compiled_modules():
    """The figure is said (README's version line at least), and the finder finds each way of saying it."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        assert module_counts(f.read()), "README no longer shows the version line with its module count"
    text = "`amqp-dissect 0.1.0, compiled (34 modules)`\nthe 37 compiled modules' start\n" \
           "2 hot modules, 1 module compiled; 12 modules in all"
    assert module_counts(text) == [(1, 34), (2, 37), (3, 2), (3, 1)]
