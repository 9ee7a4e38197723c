"""Tools are plain typed functions; ``@tool`` adds what the loop needs to know.

The name, description and JSON input schema come from the signature, type
hints and docstring (pydantic builds the schema and validates arguments;
docstring-parser, already under ``anthropic``, reads per-argument help). The
decorated object is still callable exactly like the function, so a tool stays
testable as a function.

``mode`` says whether a tool reads or writes the world. Reads may run
concurrently; writes run alone, in order. Undeclared means ``"write"``: the
safe default is to serialize.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_type_hints, overload

from .errors import ToolError

if TYPE_CHECKING:
    import pydantic  # imported when the first tool is made: a run without tools never pays for it

Mode = Literal["read", "write"]


@dataclass(frozen=True, slots=True)
class Retry:
    """Per-tool retry settings; ``None`` fields fall back to the run's Policy."""

    max_attempts: int | None = None
    base_delay: float | None = None
    max_delay: float | None = None


class Tool:
    """A function plus its schema, mode and limits. Call it like the function."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        mode: Mode = "write",
        timeout: float | None = None,
        retry: Retry | None = None,
        max_calls: int | None = None,
        approve: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"tool: expected a function, got {type(fn).__name__}")
        if mode not in ("read", "write"):
            raise ValueError(f"tool {name or fn.__name__!r}: mode must be 'read' or 'write', got {mode!r}")
        if timeout is not None and (not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout <= 0):
            raise ValueError(f"tool {name or fn.__name__!r}: timeout must be a number of seconds > 0")
        if max_calls is not None and (not isinstance(max_calls, int) or max_calls < 1):
            raise ValueError(f"tool {name or fn.__name__!r}: max_calls must be an int >= 1")
        self.fn = fn
        self.name = name or fn.__name__
        self.mode: Mode = mode
        self.timeout = timeout
        self.retry = retry
        self.max_calls = max_calls
        self.approve = bool(approve)
        """Ask a human before each call (see :mod:`agentlab.approval`)."""
        self.is_async = inspect.iscoroutinefunction(fn)
        self._model, doc = _arguments_model(fn, self.name)
        self.description = description or doc or self.name
        self.input_schema = _clean_schema(self._model.model_json_schema())
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name} ({self.mode})>"

    def definition(self) -> dict[str, Any]:
        """The tool as the Messages API wants it."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Checked, coerced keyword arguments, or a recoverable :class:`ToolError`.

        The message names each bad field and what was expected, so the model
        can correct the call.
        """
        import pydantic

        try:
            parsed = self._model.model_validate(args)
        except pydantic.ValidationError as exc:
            problems = []
            for err in exc.errors():
                where = ".".join(str(p) for p in err["loc"]) or "arguments"
                problems.append(f"'{where}': {err['msg']}")
            raise ToolError(
                f"Invalid arguments for {self.name}: " + "; ".join(problems) + ".",
                hint=f"call {self.name} again with arguments matching its input schema.",
            ) from None
        return {k: getattr(parsed, k) for k in type(parsed).model_fields}


def _arguments_model(fn: Callable[..., Any], name: str) -> tuple[type[pydantic.BaseModel], str]:
    import docstring_parser
    import pydantic

    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    param_help = {p.arg_name: p.description for p in doc.params if p.description}
    try:
        hints = get_type_hints(fn)
    except Exception:  # unresolvable forward refs: fall back to raw annotations
        hints = {}
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args/**kwargs cannot be described to a model; name each argument")
        annotation = hints.get(pname, param.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, pydantic.Field(default, description=param_help.get(pname)))
    model = pydantic.create_model(
        f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
    )
    description = "\n\n".join(x for x in (doc.short_description, doc.long_description) if x)
    return model, description


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without pydantic's titles (noise to the model), always an object."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    schema["type"] = "object"
    return schema


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    mode: Mode = "write",
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    retry: Retry | None = None,
    max_calls: int | None = None,
    approve: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Make a function a tool: ``@tool`` or ``@tool(mode="read", timeout=5)``."""
    if fn is not None:
        return Tool(fn, **options)
    return lambda f: Tool(f, **options)


def as_tools(tools: Iterable[Tool | Callable[..., Any]] | dict[str, Any] | None) -> dict[str, Tool]:
    """A name → Tool registry; plain functions become write tools. Duplicates are an error."""
    if tools is None:
        return {}
    if isinstance(tools, dict):
        tools = list(tools.values())
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise TypeError(f"tools must be a list of tools or functions, got {type(tools).__name__}")
    registry: dict[str, Tool] = {}
    for item in tools:
        t = item if isinstance(item, Tool) else Tool(item)
        if t.name in registry:
            raise ValueError(f"tools: two tools are named {t.name!r}; tool names must be unique")
        registry[t.name] = t
    return registry


def result_text(value: Any) -> str:
    """What the model sees of a tool's return value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    try:
        import json

        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


class SchemaTool(Tool):
    """A tool described by an explicit JSON schema rather than a Python signature.

    For tools that live elsewhere (an MCP server): ``fn`` receives the
    model's arguments as keywords and checks them itself (the remote side
    validates and answers with an error the model can read).
    """

    def __init__(
        self, fn: Callable[..., Any], *, name: str, description: str, input_schema: dict[str, Any],
        mode: Mode = "write", timeout: float | None = None, retry: Retry | None = None, max_calls: int | None = None,
        approve: bool = False,
    ) -> None:
        if not isinstance(input_schema, dict):
            raise TypeError(f"tool {name!r}: input_schema must be a JSON schema object (a dict)")
        super().__init__(lambda: None, name=name, description=description or name, mode=mode, timeout=timeout,
                         retry=retry, max_calls=max_calls, approve=approve)
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.input_schema = _clean_schema(json.loads(json.dumps(input_schema)))
        self.__doc__ = description
        self.__wrapped__ = fn

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(args, dict):
            raise ToolError(f"Invalid arguments for {self.name}: expected an object, got {type(args).__name__}.")
        return dict(args)
