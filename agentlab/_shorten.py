"""Text cut to fit a width, by one rule everywhere the lab shows text.

A cut is never silent and never ends mid-word without saying so: what fits is kept (up to the last
word boundary when one is near), then ``… (+N chars)`` says how much was left out. Reprs, panel
text, terminal reports, legends and error details all use it, so a reader can always tell a summary
from the whole.
"""

from __future__ import annotations

SUFFIX = "… (+{:,} chars)"


def shorten(text: object, width: int, *, flat: bool = False) -> str:
    """``text`` if it fits in ``width`` characters, else its start and a note of what was cut.

    ``flat`` first joins all whitespace into single spaces (one-line displays).
    """
    s = " ".join(str(text).split()) if flat else str(text)
    if len(s) <= width:
        return s
    keep = max(1, width - len(SUFFIX.format(len(s))))
    head = s[:keep]
    space = head.rfind(" ")
    if space >= keep * 2 // 3:  # a word boundary near the end: cut there, not inside a word
        head = head[:space]
    head = head.rstrip()
    return head + SUFFIX.format(len(s) - len(head))


def shorten_middle(text: object, width: int) -> str:
    """An identifier that fits in ``width`` characters, cut in the middle: ``258c7280-ae…d-seg1``.

    Ids of one session share their start and differ at the end (a segment or
    repeat number), so cut at the end two of them would read the same. The
    ellipsis marks the cut; the whole id is wherever the label came from.
    """
    s = str(text)
    if len(s) <= width:
        return s
    tail = max(1, min(8, (width - 1) // 2))
    return s[: max(0, width - 1 - tail)] + "…" + s[-tail:]
