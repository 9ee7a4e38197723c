"""agentlab: the agent loop you can watch, pause, measure and teach.

Importing this package does nothing but define names; widgets, plots and the
Anthropic client load when first used.
"""

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
from .loop import Run, arun, run
from .models import FunctionModel, ScriptedModel, reply
from .pricing import Prices
from .results import Done, StepRecord, Stopped
from .tools import Retry, Tool, tool

__all__ = [
    "AnthropicModel", "AuthenticationFailed", "Experiment", "ExperimentResult", "Budget", "BudgetSnapshot", "Done", "Event", "FakeClock", "FatalError",
    "FunctionModel", "ModelError", "PermissionDenied", "Policy", "Prices", "Retry", "RetryableError",
    "Lab", "ReplayModel", "Run", "ScriptedModel", "StepRecord", "Stopped", "Tool", "ToolError", "Trace", "Traces", "arun", "fork", "grid", "import_recorded", "load_recorded", "load_run", "load_runs", "mcp_tools", "replay", "reply", "resolve_model", "run", "sql", "tool",
]


def __getattr__(name: str) -> object:
    """Heavy public names load on first use, so ``import agentlab`` stays light."""
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
    if name in ("analysis", "datasets", "experiments", "mcp", "otel", "plots", "recorded", "scenarios", "shop", "testing"):  # ``agentlab.plots.cost_curve(...)`` without a separate import
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'agentlab' has no attribute {name!r}")
