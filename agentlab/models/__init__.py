"""Models: anything that turns a request into a Messages-API-shaped reply."""

from .base import Model, ModelRequest
from .offline import FunctionModel, ScriptedModel, reply

__all__ = ["FunctionModel", "Model", "ModelRequest", "ScriptedModel", "reply"]
