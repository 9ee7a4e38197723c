"""Exact input counts from the Messages API's free ``count_tokens`` endpoint.

The hard cost guard asks for one only when a call could cross ``max_cost``
(see :mod:`agentlab.budget`). The request counted is the one about to be
sent, built by the same :meth:`AnthropicModel.build_params`, cache
breakpoints included; failures map to agentlab's three kinds exactly as a
call's do, so the engine retries them within the deadline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ModelError, RetryableError
from ..netguard import NetworkBlocked, check_url
from .base import ModelRequest

if TYPE_CHECKING:
    from .anthropic import AnthropicModel

COUNTED_PARAMS = frozenset({
    "model", "messages", "system", "tools", "tool_choice", "thinking", "cache_control", "output_config",
    "mcp_servers", "context_management",
})
"""The ``messages.create`` arguments ``count_tokens`` accepts (max_tokens, temperature... change no input)."""


def count_params(params: dict[str, Any]) -> dict[str, Any]:
    """The ``count_tokens`` arguments of a ``messages.create`` request."""
    return {k: v for k, v in params.items() if k in COUNTED_PARAMS}


async def count_input_tokens(model: AnthropicModel, request: ModelRequest) -> int:
    """Input tokens of ``request`` as the API will bill them (all of it: uncached, cache write and read)."""
    import anthropic

    from .anthropic import api_error, scrub_secrets

    check_url(str(model.client.base_url))
    client = model.client_here()
    timeout = model.timeout if request.timeout is None else max(request.timeout, 0.001)
    secrets = tuple(s for s in (getattr(model.client, "api_key", None), getattr(model.client, "auth_token", None)) if s)
    err: Exception
    try:
        counted = await client.messages.count_tokens(**count_params(model.build_params(request)), timeout=timeout)
    except anthropic.APIStatusError as exc:
        err = api_error(exc.response.status_code, exc.response.headers, exc.body, secrets=secrets)
    except anthropic.APITimeoutError:
        err = RetryableError(f"no token count from the Messages API within {timeout:.1f}s")
    except anthropic.APIConnectionError as exc:
        cause = exc.__cause__
        if isinstance(cause, NetworkBlocked):
            raise NetworkBlocked(str(cause)) from None
        why = f"{type(cause).__name__}: {cause}" if cause else str(exc)
        err = RetryableError(scrub_secrets(f"connection to the token-counting endpoint failed ({why})", secrets))
    else:
        n = getattr(counted, "input_tokens", None)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ModelError(f"the token-counting endpoint answered without a usable input_tokens: {counted!r}")
        return n
    raise err  # outside the except block: no SDK exception (and its auth headers) chained
