"""Text from a run, made inert for where it is shown: HTML, markdown, a terminal (pure, no I/O).

Everything a record or a tool can set (a result, an error, a tool's name, a
run id, a ``mode`` read back from a shared or imported trace) is foreign
text. Shown raw, it is code: ``<img onerror>`` runs in a notebook,
``![m](http://host/leak?...)`` is fetched the moment a markdown cell
renders, ``[j](javascript:...)`` runs on a click, and ``ESC ] 52`` writes the
clipboard of whoever runs ``agentlab report``. This module is the one owner
of those rules: each output context has one function here, and
links, images and markup come only from the project's own templates around
what these functions return. It also owns how a dollar amount is shown where
MathJax runs (:func:`usd_html`, :func:`no_math_html`, :func:`no_math_markdown`):
two amounts in one output would otherwise be typeset as LaTeX.

Unpaired surrogates (text cut from a UTF-16 source) cannot be encoded as
UTF-8 and would crash the write of a notebook or a ``print``; every function
here shows them as U+FFFD, the way the trace writer keeps them readable.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")

_MD_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|~:=^$])")
"""Backslash-escaped in markdown (CommonMark escapes any ASCII punctuation): no emphasis, no link,
no image, no heading, no table cell break, no math. ``& < > " '`` become entities instead."""

NO_MATH = "tex2jax_ignore mathjax_ignore"
"""The class every front end's MathJax skips: ``mathjax_ignore`` is MathJax 3's ``ignoreHtmlClass`` (JupyterLab 4,
Notebook 7), ``tex2jax_ignore`` MathJax 2's (nbconvert's HTML, mkdocs-jupyter's pages). pandas marks a table with
the same two when ``display.html.use_mathjax`` is off."""

_CODE = re.compile(r"^(?P<fence>`{3,}|~{3,}).*?^(?P=fence)[ \t]*$|(?P<ticks>`+).+?(?<!`)(?P=ticks)(?!`)", re.M | re.S)
"""A fenced code block or an inline code span: dollars in code are shown as written by every renderer."""

_DOLLAR = re.compile(r"\\?\$")

_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline (ESC starts CSI, OSC 0/52, DCS...), DEL, the C1 controls (8-bit
CSI and OSC), and the bidirectional overrides that make a line read differently from what it holds."""


def clean(value: Any) -> str:
    """``str(value)`` with every unpaired surrogate shown as U+FFFD, so the text encodes as UTF-8."""
    text = value if isinstance(value, str) else str(value)
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def html_text(value: Any) -> str:
    """Text for HTML, in an element or a quoted attribute: no tag, no entity, no attribute break.

    ``$`` becomes ``&#36;`` too, so a dollar amount next to another is not typeset as math.
    """
    return html.escape(clean(value), quote=True).replace("$", "&#36;")


def md_text(value: Any) -> str:
    """Text for inline markdown (a paragraph, a list item, a heading): shown as written, nothing else.

    Every markdown punctuation mark is backslash-escaped and ``& < > " '``
    become HTML entities, so no emphasis, link, image, autolink, raw HTML or
    math can form, in JupyterLab's renderer as in nbconvert's. Newlines
    become spaces: the text cannot start a block of its own.
    """
    text = " ".join(clean(value).split())
    text = _MD_PUNCTUATION.sub(r"\\\1", text)  # also breaks GFM's bare-URL links: ``http\://``, ``www\.``
    return html.escape(text, quote=True)


def no_math_html(fragment: str) -> str:
    """An HTML output (already escaped) in one element no MathJax typesets: a dollar amount stays money.

    JupyterLab typesets the text of an HTML output between two ``$`` as LaTeX (``$0.04 of $0.50`` reads
    ``0.04of0.50`` in italics), whether the page holds ``$`` or ``&#36;``: MathJax reads the text, not the
    markup. The one thing each front end's MathJax honours is the class :data:`NO_MATH` on an ancestor.
    """
    return f'<div class="{NO_MATH}">{fragment}</div>'


def usd(x: float | None) -> str:
    """Dollars as text: ``$0.0123`` under a dollar (four decimals), ``$1,234.50`` from one up, ``$?`` unknown.

    For a terminal or a plain-text repr; in HTML use :func:`usd_html`.
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "$?"
    sign, x = ("-" if x < 0 else ""), abs(x)
    return f"{sign}${x:,.2f}" if x >= 1 else f"{sign}${x:.4f}"


def usd_html(x: float | None) -> str:
    """:func:`usd` as HTML that no front end typesets as math, however many amounts share the output.

    The sign is written ``&#36;`` and the amount sits in a span of class :data:`NO_MATH`: the one way
    every MathJax (JupyterLab's, nbconvert's, the docs site's) is told to leave it alone.
    """
    return f'<span class="{NO_MATH}">{html_text(usd(x))}</span>'


def no_math_markdown(markdown: str) -> str:
    """Markdown (a notebook cell, a ``text/markdown`` output) whose dollars every front end shows as written.

    JupyterLab takes ``$...$`` out of markdown before rendering it, so a ``\\$`` escape or an ``&#36;``
    written where the page has ``$`` are typeset all the same. Here every ``$`` outside code becomes
    ``&#36;`` (no renderer sees a delimiter in the source, so the markdown between two amounts renders
    as markdown) and the whole text sits in a block of class :data:`NO_MATH` (MathJax skips the page's
    ``$``). Code spans and fences keep their ``$``: no MathJax looks inside code. Text with no ``$``
    comes back unchanged.
    """
    if "$" not in markdown:
        return markdown
    out, at = [], 0
    for code in _CODE.finditer(markdown):
        out += [_DOLLAR.sub("&#36;", markdown[at : code.start()]), code.group()]
        at = code.end()
    out.append(_DOLLAR.sub("&#36;", markdown[at:]))
    return f'<div class="{NO_MATH}">\n\n{"".join(out).strip()}\n\n</div>'


def md_code(value: Any) -> str:
    """Text as one inline code span (a markdown table cell): literal, one line, ``|`` kept in the cell."""
    text = " ".join(clean(value).split()).replace("|", "\\|")
    if not text:
        return ""
    ticks = "`"
    while ticks in text:
        ticks += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def terminal_text(value: Any) -> str:
    """Text for a terminal: every control character but tab and newline shown as ``\\xNN``.

    With its ESC (or 8-bit introducer) made visible, no sequence can move
    the cursor, retitle the window (OSC 0), write the clipboard (OSC 52) or
    rewrite a line (a carriage return); the reader sees what was sent.
    """
    text = clean(value)
    return _TERMINAL.sub(_visible, text) if _TERMINAL.search(text) else text


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


class TerminalStream:
    """A text stream that writes through :func:`terminal_text`: what the CLI prints to a terminal."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding...: the stream's own
        return getattr(self._stream, name)


def for_terminal(stream: Any) -> Any:
    """``stream``, wrapped so control sequences cannot reach the terminal (once: a wrapped stream is kept)."""
    return stream if isinstance(stream, TerminalStream) else TerminalStream(stream)


def without_lone_surrogates(obj: Any) -> Any:
    """``obj`` (JSON-like) with every unpaired surrogate in its strings shown as U+FFFD.

    For what is sent as UTF-8 (a request to the Messages API): the SDK cannot
    encode a lone surrogate and the call would fail on every retry. Returned
    as is, with no copy, when there is none (orjson refuses exactly those).
    """
    import orjson

    try:
        orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS)
        return obj
    except TypeError:
        pass
    return _deep_clean(obj)


def _deep_clean(obj: Any) -> Any:
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, dict):
        return {_deep_clean(k): _deep_clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_deep_clean(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_deep_clean(v) for v in obj)
    return obj
