"""Exact input counts from the Messages API's free ``count_tokens`` endpoint.

The hard cost guard asks for one only when a call could cross ``max_cost``
(see :mod:`agentlab._engine.input_tracker`). ``AnthropicModel.count_tokens`` counts the
request about to be sent, built by the same ``build_params`` (cache
breakpoints included); failures map to agentlab's three kinds exactly as a
call's do, so the engine retries them within the deadline. This module does
not import the adapter (the adapter imports it).
"""

from __future__ import annotations

from typing import Any

from .._checks import is_whole
from ..errors import ModelError
from ._errors import sdk_error

COUNTED_PARAMS = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "cache_control",
        "output_config",
        "mcp_servers",
        "context_management",
        "betas",
        "speed",
    }
)
"""The ``messages.create`` arguments ``count_tokens`` accepts (max_tokens, temperature... change no input)."""


def count_params(params: dict[str, Any]) -> dict[str, Any]:
    """The ``count_tokens`` arguments of a ``messages.create`` request."""
    return {k: v for k, v in params.items() if k in COUNTED_PARAMS}


async def count_input_tokens(client: Any, params: dict[str, Any], *, timeout: float, secrets: tuple[str, ...]) -> int:
    """Input tokens of the ``messages.create`` request ``params`` as the API will bill them.

    All of it: uncached, cache write and cache read. Failures map to agentlab's
    kinds by the adapter's one table (:func:`agentlab.models._errors.sdk_error`).
    """
    err: Exception
    try:
        counted = await client.beta.messages.count_tokens(**count_params(params), timeout=timeout)
    except Exception as exc:
        err = sdk_error(exc, secrets=secrets, what="the token-counting endpoint", timeout=timeout)
    else:
        n = getattr(counted, "input_tokens", -1)  # checked on the next line
        if not is_whole(n, 0):
            raise ModelError(f"the token-counting endpoint answered without a usable input_tokens: {counted!r}")
        return n
    raise err  # outside the except block: no SDK exception (and its auth headers) chained
