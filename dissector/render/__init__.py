"""What the results look like to a reader: text lines, the report, the HTML page."""


def escape(text: str, quote: bool = True) -> str:
    """:func:`html.escape`, imported when first called: only the HTML page escapes, and the html
    package costs the start of every text report a millisecond (its entity table)."""
    from html import escape as _escape

    return _escape(text, quote)
