"""agentlab: the agent loop you can watch, pause, measure and teach.

An agent is a loop: call the model, run the tools it asks for, hand back the results, repeat. ``run`` drives
that loop under three budgets (steps, dollars, seconds) and returns ``Done`` or ``Stopped`` with the reason;
every step goes to a trace on disk. Offline, with a scripted model and no key:

>>> import agentlab as al
>>> @al.tool(mode="read")
... def get_order(order_id: int) -> dict:
...     \"\"\"Fetch one order by its number.\"\"\"
...     return {"id": order_id, "status": "delayed at the depot"}
>>> model = al.ScriptedModel([al.reply(None, ("get_order", {"order_id": 1042})),
...                           al.reply("Order 1042 was held at the depot.")])
>>> al.run("Why was order 1042 late?", [get_order], model=model, max_steps=8, max_cost=0.50, trace=False)
Done('Order 1042 was held at the depot.', steps=2, tokens=248 in / 48 out, spent=$0.0015, ...)

With ``ANTHROPIC_API_KEY`` set, ``model="claude-sonnet-4-5"`` runs the same loop with Claude (``model="offline"``
answers once, without tools, and needs no key). Where to go next:

- ``al.Lab(task, tools, model=...)``: the same run with a live panel in a notebook (Step, Run, Pause, Stop);
- ``al.Experiment(tasks, al.grid(...), max_total_cost=...)``: many runs under one total budget;
- ``al.load_run(run_id)`` / ``al.load_recorded(path)``: a trace (yours, or a Claude Code session) as DataFrames;
- ``al.scenarios``: the article's lessons as offline runs; ``agentlab demo`` on the command line plays them all.

``help(al.run)`` lists every run option. Importing this package does nothing but define names; widgets, plots
and the Anthropic client load when first used.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._facades import arun, run
from ._notebook import notebook
from .budget import Budget, BudgetSnapshot
from .clock import FakeClock
from .errors import (
    AuthenticationFailed,
    FatalError,
    ModelError,
    PermissionDenied,
    Policy,
    RetryableError,
    ToolError,
)
from .events import Event
from .loop import Run
from .models import FunctionModel, ScriptedModel, reply
from .pricing import Prices
from .results import Done, StepRecord, Stopped
from .tools import Retry, Tool, tool

if _TYPE_CHECKING:  # the lazily loaded names, typed for editors and mypy (``__getattr__`` loads them)
    from . import (  # noqa: F401 (submodules loaded on first use)
        analysis,
        costs,
        datasets,
        experiments,
        mcp,
        otel,
        plots,
        recorded,
        scenarios,
        shop,
        testing,
    )
    from .experiments import Experiment, ExperimentResult
    from .experiments.grid import grid
    from .forking import fork, replay
    from .lab import Lab
    from .mcp import mcp_tools
    from .models.anthropic import AnthropicModel
    from .models.replay import ReplayModel
    from .models.resolve import resolve_model
    from .recorded import import_recorded, load_recorded
    from .trace import Trace, Traces, load_run, load_runs

__all__ = [
    "AnthropicModel",
    "AuthenticationFailed",
    "Experiment",
    "ExperimentResult",
    "Budget",
    "BudgetSnapshot",
    "Done",
    "Event",
    "FakeClock",
    "FatalError",
    "FunctionModel",
    "ModelError",
    "PermissionDenied",
    "Policy",
    "Prices",
    "Retry",
    "RetryableError",
    "Lab",
    "ReplayModel",
    "Run",
    "ScriptedModel",
    "StepRecord",
    "Stopped",
    "Tool",
    "ToolError",
    "Trace",
    "Traces",
    "arun",
    "fork",
    "grid",
    "import_recorded",
    "load_recorded",
    "load_run",
    "load_runs",
    "mcp_tools",
    "notebook",
    "replay",
    "reply",
    "resolve_model",
    "run",
    "sql",
    "tool",
]


def __getattr__(name: str) -> object:
    """Heavy public names load on first use, so ``import agentlab`` stays light."""
    if name == "__version__":  # package metadata is read only when asked for
        from ._version import installed_version

        return installed_version()
    if name in ("Trace", "Traces", "load_run", "load_runs", "sql"):  # the trace package loads when first used
        from . import trace

        return getattr(trace, name)
    if name == "Lab":
        from .lab import Lab

        return Lab
    if name in ("Experiment", "ExperimentResult", "grid"):
        from . import experiments

        return getattr(experiments, name)
    if name == "AnthropicModel":
        from .models.anthropic import AnthropicModel

        return AnthropicModel
    if name == "resolve_model":
        from .models.resolve import resolve_model

        return resolve_model
    if name == "mcp_tools":
        from .mcp import mcp_tools

        return mcp_tools
    if name in ("load_recorded", "import_recorded"):
        from . import recorded

        return getattr(recorded, name)
    if name in ("fork", "replay"):
        from . import forking

        return getattr(forking, name)
    if name == "ReplayModel":
        from .models.replay import ReplayModel

        return ReplayModel
    if name in _SUBMODULES:  # ``agentlab.plots.cost_curve(...)`` without a separate import
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'agentlab' has no attribute {name!r}")


_SUBMODULES = (
    "analysis",
    "costs",
    "datasets",
    "experiments",
    "mcp",
    "otel",
    "plots",
    "recorded",
    "scenarios",
    "shop",
    "testing",
)


def __dir__() -> list[str]:
    """Every public name, loaded or not, so tab completion in a notebook finds ``Lab`` before first use."""
    return sorted({*globals(), *__all__, *_SUBMODULES, "__version__"})
