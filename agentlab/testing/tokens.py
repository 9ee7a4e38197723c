"""Tokenizers and the token-counting endpoint of the local Messages API server.

:class:`agentlab.testing.MessagesServer` counts every request with one
tokenizer, for ``usage`` and for ``POST /v1/messages/count_tokens`` alike,
as the real API does. Two are built in:

* ``"plain"``: about three characters per token, as agentlab's own estimate
  counts (the estimate is then right, which most tests want);
* ``"dense"``: about 1.7 bytes per token, what real tokenizers give for code,
  JSON, logs, base64 and non-English text. The estimate is then ~2x short:
  the case the hard cost guard must survive.

A tokenizer never yields a token shorter than one byte (the bound the cost
guard relies on when it has no count): :func:`dense_tokens` stays above 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..messages import estimate_tokens

Tokenizer = Callable[[str], int]

DENSE_BYTES_PER_TOKEN = 1.7


def plain_tokens(text: str) -> int:
    """Tokens of ``text`` at agentlab's estimate (characters / 3)."""
    return estimate_tokens(text)


def dense_tokens(text: str) -> int:
    """Tokens of ``text`` at about 1.7 UTF-8 bytes per token."""
    return max(1, math.ceil(len(text.encode()) / DENSE_BYTES_PER_TOKEN))


TOKENIZERS: dict[str, Tokenizer] = {"plain": plain_tokens, "dense": dense_tokens}


def tokenizer_for(spec: str | Tokenizer) -> Tokenizer:
    """A tokenizer by name (``"plain"``, ``"dense"``) or a function ``(text) -> tokens`` as is."""
    if callable(spec):
        return spec
    if spec not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {sorted(TOKENIZERS)} or a function (text) -> int, got {spec!r}")
    return TOKENIZERS[spec]


def validate_count_request(body: Any) -> str | None:
    """What the API would refuse in a ``count_tokens`` request (it takes no ``max_tokens``)."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if "max_tokens" in body:
        return "max_tokens: Extra inputs are not permitted"
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return "messages: at least one message is required"
    return None


def count_segments(segments: list[str], tokenizer: Tokenizer) -> int:
    """Input tokens of a request split into its blocks' canonical texts."""
    return sum(tokenizer(s) for s in segments)


def cap_output(
    content: list[dict[str, Any]], max_tokens: int, tokenizer: Tokenizer
) -> tuple[list[dict[str, Any]], int, bool]:
    """The reply as the API would send it under ``max_tokens``: (content, output tokens, cut off?).

    A reply longer than ``max_tokens`` is cut: the blocks that fit are kept,
    a text block is shortened to fit, the rest (a half-written tool call) is
    dropped, and the output is exactly ``max_tokens``.
    """
    import json

    def size(x: Any) -> int:
        return tokenizer(json.dumps(x, separators=(",", ":"), ensure_ascii=False))

    whole = size(content) if content else 0
    if whole <= max_tokens:
        return content, whole, False
    kept: list[dict[str, Any]] = []
    left = max_tokens
    for block in content:
        n = size(block)
        if n <= left:
            kept.append(block)
            left -= n
            continue
        if block.get("type") == "text" and left > 0:
            kept.append({**block, "text": str(block.get("text", ""))[:left]})
        break
    return kept, max_tokens, True
