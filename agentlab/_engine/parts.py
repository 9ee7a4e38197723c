"""What the parts of a run (:mod:`.model_call`, :mod:`.publishing`) read of the run they belong to.

:class:`~agentlab.loop.Run` is made of its step (``loop.py``), its model call and its events. Each part
is a class ``Run`` inherits from, and reads the run's state through ``self``; the declarations here say
which state that is and its types, so a part can be read (and type-checked) without ``loop.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._account import Account, Hold
    from ..budget import Budget, BudgetSnapshot
    from ..clock import Clock
    from ..errors import Policy, TraceWriteError
    from ..events import Subscriber
    from ..messages import Message, Usage
    from ..models.base import Model
    from ..pricing import Prices
    from ..results import Result
    from ..tools import Tool
    from .config import RunConfig
    from .input_tracker import InputTracker
    from .state import Halt, Phase
    from .stepping import Stepping


class RunParts:
    """The run's state and methods its parts read (declarations only: ``Run`` defines them)."""

    if TYPE_CHECKING:
        config: RunConfig
        budget: Budget
        account: Account
        messages: list[Message]
        steps: int
        phase: Phase
        result: Result | None
        parent: dict[str, Any] | None
        nudges: int
        last_usage: Usage | None
        _cancel: bool
        _caps: Any
        _input: InputTracker
        _hold: Hold
        _lost: float
        _last_cost: float
        _last_latency: float
        _last_context: dict[str, Any] | None
        _guarded_tools: list[dict[str, Any]]
        _tool_defs: list[dict[str, Any]]
        _now: Callable[[], float]
        _seq: int
        _subscribers: list[Subscriber]
        _called: tuple[Subscriber, ...]
        _stepping: Stepping
        _served: dict[str | None, Prices | None]
        _trace_error: TraceWriteError | None

        @property
        def model(self) -> Model: ...
        @property
        def tools(self) -> Mapping[str, Tool]: ...
        @property
        def task(self) -> str: ...
        @property
        def system(self) -> str | None: ...
        @property
        def max_tokens(self) -> int: ...
        @property
        def policy(self) -> Policy: ...
        @property
        def prices(self) -> Prices | None: ...
        @property
        def clock(self) -> Clock: ...
        @property
        def rng(self) -> random.Random: ...
        @property
        def run_id(self) -> str: ...
        @property
        def finished(self) -> bool: ...
        @property
        def elapsed(self) -> float: ...
        @property
        def spent(self) -> float: ...
        @property
        def model_calls(self) -> int: ...
        @property
        def snapshot(self) -> BudgetSnapshot: ...
        def cancel(self) -> None: ...
        def _append(self, message: Message, tokens: int | None = None) -> None: ...
        def _time_left(self) -> float | None: ...
        def _stop(self, reason: Any, detail: str, error: BaseException | None = None) -> None: ...
        def _limits(self) -> dict[str, Any]: ...
        def _overrun(self) -> dict[str, Any]: ...
        def _report_to_parent(self) -> None: ...
        def _trace_failed(self) -> Halt: ...
        def _emit(self, kind: str, **data: Any) -> None: ...
        def _publish(self, kind: str, data: dict[str, Any], t: float) -> None: ...
