"""Models: anything that turns a request into a Messages-API-shaped reply."""

from .base import Model, ModelRequest
from .offline import FunctionModel, ScriptedModel, reply
from .resolve import Resolved, resolve_model

__all__ = ["FunctionModel", "Model", "ModelRequest", "Resolved", "ScriptedModel", "reply", "resolve_model"]


def __getattr__(name: str) -> object:
    if name == "AnthropicModel":  # loads the SDK only when asked for
        from .anthropic import AnthropicModel

        return AnthropicModel
    raise AttributeError(f"module 'agentlab.models' has no attribute {name!r}")
