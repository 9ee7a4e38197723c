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
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

from ._checks import is_seconds, is_whole
from .errors import ToolError

if TYPE_CHECKING:
    import pydantic  # imported when the first tool is made: a run without tools never pays for it

Mode = Literal["read", "write"]

NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""The Messages API's rule for tool names."""
MAX_RESULT_CHARS = 1_000_000
"""Default cap on the text of one tool result (the model sees a notice when it is cut)."""


@dataclass(frozen=True, slots=True)
class Retry:
    """Per-tool retry settings; ``None`` fields fall back to the run's Policy."""

    max_attempts: int | None = None
    base_delay: float | None = None
    max_delay: float | None = None

    def __post_init__(self) -> None:
        m = self.max_attempts
        if m is not None and not is_whole(m, 1):
            raise ValueError(f"Retry: max_attempts must be an int >= 1 (1 = no retry) or None, got {m!r}")
        for field in ("base_delay", "max_delay"):
            v = getattr(self, field)
            if v is not None and not is_seconds(v):
                raise ValueError(f"Retry: {field} must be a finite number of seconds >= 0 or None, got {v!r}")


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
        max_result_chars: int | None = MAX_RESULT_CHARS,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"tool: expected a function, got {type(fn).__name__}")
        name = _checked_name(fn, name)
        if mode not in ("read", "write"):
            raise ValueError(f"tool {name!r}: mode must be 'read' or 'write', got {mode!r}")
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn) or _generator_call(fn):
            raise TypeError(
                f"tool {name!r}: a generator cannot be a tool (its result would be an unfinished iterator); "
                "return a list or a string instead"
            )
        if timeout is not None:
            if not is_seconds(timeout) or timeout <= 0:
                raise ValueError(
                    f"tool {name!r}: timeout must be a finite number of seconds > 0 or None, got {timeout!r}"
                )
            timeout = float(timeout)
        if max_calls is not None and not is_whole(max_calls, 1):
            raise ValueError(f"tool {name!r}: max_calls must be an int >= 1, got {max_calls!r}")
        if retry is not None and not isinstance(retry, Retry):
            raise TypeError(f"tool {name!r}: retry must be a Retry(...) or None, got {type(retry).__name__}")
        if max_result_chars is not None and not is_whole(max_result_chars, 1):
            raise ValueError(f"tool {name!r}: max_result_chars must be an int >= 1 or None, got {max_result_chars!r}")
        self.fn = fn
        self.name = name
        self.mode: Mode = mode
        self.timeout = timeout
        self.retry = retry
        self.max_calls = max_calls
        self.max_result_chars = max_result_chars
        self.approve = bool(approve)
        """Ask a human before each call (see :mod:`agentlab.approval`)."""
        self.is_async = inspect.iscoroutinefunction(fn)
        self._model, doc = _arguments_model(fn, self.name)
        self._plan = _simple_plan(self._model)
        self.description = description or doc or self.name
        self.input_schema = _clean_schema(self._model.model_json_schema())
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        """``@tool`` on a method: ``instance.method`` is a tool bound to that instance."""
        if obj is None or inspect.ismethod(self.fn):
            return self
        return Tool(
            self.fn.__get__(obj, owner),
            name=self.name,
            description=self.description,
            mode=self.mode,
            timeout=self.timeout,
            retry=self.retry,
            max_calls=self.max_calls,
            max_result_chars=self.max_result_chars,
            approve=self.approve,
        )

    def result_text(self, value: Any) -> str:
        """What the model sees of this tool's return value, cut to ``max_result_chars``."""
        return result_text(value, self.max_result_chars)

    def result_content(self, value: Any) -> str | list[dict[str, Any]]:
        """The ``tool_result`` content for this return value: content blocks as they are (text, image,
        document: the shapes ``tool_result.content`` accepts), anything else as :meth:`result_text`."""
        cap = self.max_result_chars
        if type(value) is str and (cap is None or len(value) <= cap):  # the usual result: the text as it is
            return value
        blocks = result_blocks(value)
        return blocks if blocks is not None else self.result_text(value)

    def __repr__(self) -> str:
        return f"<tool {self.name} ({self.mode})>"

    def definition(self) -> dict[str, Any]:
        """The tool as the Messages API wants it."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Checked, coerced keyword arguments, or a recoverable :class:`ToolError`.

        The message names each bad field and what was expected, so the model
        can correct the call. Arguments that are already what the tool's
        fields ask for, exactly (see :func:`_simple_plan`), are taken as they
        are: what pydantic would return, without building its model.
        """
        plan = self._plan
        if plan is not None and type(args) is dict:
            kwargs = _planned(plan, args)
            if kwargs is not None:
                return kwargs
        try:
            parsed = self._model.model_validate(args)
        except Exception as exc:
            import pydantic

            if not isinstance(exc, pydantic.ValidationError):
                raise
            problems = []
            for err in exc.errors():
                where = ".".join(str(p) for p in err["loc"]) or "arguments"
                problems.append(f"'{where}': {err['msg']}")
            raise ToolError(
                f"Invalid arguments for {self.name}: " + "; ".join(problems) + ".",
                hint=f"call {self.name} again with arguments matching its input schema.",
            ) from None
        # Its fields by name (extra="forbid": nothing else is in it), read at once rather than one getattr each.
        return dict(parsed.__dict__)


def _arguments_model(fn: Callable[..., Any], name: str) -> tuple[type[pydantic.BaseModel], str]:
    import docstring_parser
    import pydantic

    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    param_help = {p.arg_name: p.description for p in doc.params if p.description}
    try:
        hints = get_type_hints(fn, include_extras=True)  # keep Annotated[..., Field(...)]: its limits and description
    except Exception:  # unresolvable forward refs: fall back to raw annotations
        hints = {}
    fields: dict[str, Any] = {}
    params = list(inspect.signature(fn).parameters.items())
    if params and params[0][0] in ("self", "cls") and _defined_in_class(fn):
        params = params[1:]  # a method decorated in its class: bound later, never shown to the model
    for pname, param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args/**kwargs cannot be described to a model; name each argument")
        annotation = hints.get(pname, param.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        fields[pname] = _field(annotation, param.default, param_help.get(pname))
    model = pydantic.create_model(f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    description = "\n\n".join(x for x in (doc.short_description, doc.long_description) if x)
    return model, description


_SIMPLE: dict[str, type | None] = {"str": str, "int": int, "float": float, "bool": bool, "any": None}
"""The core schemas a field may have for :func:`_planned` (``None``: any value; each may also be ``nullable``,
``X | None``), and the Python type each takes as it is. pydantic returns such a value unchanged: the same
``str`` (surrogates too), ``int``, ``float`` (NaN and infinities too: ``allow_inf_nan`` is on by default),
``bool``, or any object for ``Any``."""
Plan = tuple[tuple[str, tuple[type, ...] | None, Any], ...]
"""Each field's name, the types its value may have exactly (``None``: any), and its default (or ``_REQUIRED``)."""
_I64 = 2**63
"""Ints within ±2**63 only: larger ones go to pydantic, whose big-int path may refuse them."""
_REQUIRED = object()


def _simple_plan(model: type[pydantic.BaseModel]) -> Plan | None:
    """Issue 27: the tool's fields as ``(name, types, default)`` when pydantic's validation of them is a type check.

    That is when the model's core schema is nothing but fields of the plain types in :data:`_SIMPLE` (no
    constraint, alias, strictness, validator or default factory; a default only of an immutable scalar) and the
    config only forbids extra fields: then pydantic, given a dict whose values have exactly those types, returns
    them as they are, and the defaults for the fields missing. ``None`` (pydantic validates every call) for
    anything else, or a schema read in a way this pydantic does not lay out. Read from the core schema, the one
    pydantic itself validates by, so a field this does not know never passes as simple.
    """
    try:
        schema = model.__pydantic_core_schema__
        inner = schema["schema"]
        if (
            schema["type"] != "model"
            or set(schema) - {"type", "cls", "schema", "config", "ref", "metadata", "custom_init", "root_model"}
            or schema.get("custom_init")
            or schema.get("root_model")
            or set(schema.get("config", {})) - {"extra_fields_behavior", "title"}
            or schema.get("config", {}).get("extra_fields_behavior") != "forbid"
            or inner["type"] != "model-fields"
            or set(inner) - {"type", "fields", "model_name", "computed_fields"}
            or inner.get("computed_fields")
        ):
            return None
        plan = []
        for name, field in inner["fields"].items():
            if set(field) - {"type", "schema", "metadata"} or field["type"] != "model-field":
                return None
            value, default = field["schema"], _REQUIRED
            if value["type"] == "default":
                if set(value) != {"type", "schema", "default"} or type(value["default"]) not in _DEFAULTS:
                    return None
                value, default = value["schema"], value["default"]
            nullable = value["type"] == "nullable" and set(value) == {"type", "schema"}
            if nullable:  # ``str | None``: None, or a value of the type
                value = value["schema"]
            if set(value) != {"type"} or value["type"] not in _SIMPLE:
                return None
            kind = _SIMPLE[value["type"]]
            plan.append((name, None if kind is None else (kind, type(None)) if nullable else (kind,), default))
    except (AttributeError, KeyError, TypeError):
        return None
    return tuple(plan)


_DEFAULTS = (type(None), bool, int, float, str)


def _planned(plan: Plan, args: dict[str, Any]) -> dict[str, Any] | None:
    """``args`` as pydantic would return them under ``plan`` (fields in their order, defaults filled in), or
    ``None`` when a value is not exactly of its field's type, a required field is missing or a key is unknown:
    pydantic then coerces or refuses, naming what is wrong."""
    kwargs = {}
    given = 0
    for name, kinds, default in plan:
        value = args.get(name, _REQUIRED)
        if value is _REQUIRED:
            if default is _REQUIRED:
                return None
            kwargs[name] = default
            continue
        if kinds is not None:
            if type(value) not in kinds or (type(value) is int and not -_I64 <= value < _I64):
                return None
        kwargs[name] = value
        given += 1
    return kwargs if given == len(args) else None


def _field(annotation: Any, default: Any, docstring_help: str | None) -> tuple[Any, Any]:
    """One argument for ``create_model``, with everything pydantic expresses in the parameter.

    ``Annotated[int, Field(gt=0, description=...)]`` and ``= Field(5, ...)``
    reach both the schema sent to the model and validation; the docstring's
    help is the description only where no ``Field`` gives one (pydantic lets
    later metadata win, so it goes first).
    """
    import pydantic
    from pydantic.fields import FieldInfo

    if docstring_help:
        if get_origin(annotation) is Annotated:
            base, *meta = get_args(annotation)
            annotation = Annotated.__class_getitem__((base, pydantic.Field(description=docstring_help), *meta))
        else:
            annotation = Annotated[annotation, pydantic.Field(description=docstring_help)]
    if isinstance(default, FieldInfo):
        return annotation, default
    return annotation, ... if default is inspect.Parameter.empty else default


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


RESULT_BLOCK_TYPES = frozenset({"text", "image", "document", "search_result"})
"""Block types a ``tool_result``'s content may hold (the Messages API's ``ToolResultBlockParam.content``)."""


def result_blocks(value: Any) -> list[dict[str, Any]] | None:
    """``value`` as ``tool_result`` content blocks when it is a list of them, else ``None``.

    A text block needs its ``text``; an image or a document its ``source``.
    """
    if not isinstance(value, (list, tuple)) or not value:
        return None
    for block in value:
        if not isinstance(block, dict) or block.get("type") not in RESULT_BLOCK_TYPES:
            return None
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            return None
        if block["type"] in ("image", "document") and not isinstance(block.get("source"), dict):
            return None
    return [dict(b) for b in value]


def result_summary(content: str | list[dict[str, Any]]) -> str:
    """A tool result as text for the trace's ``tool_finished`` event: text blocks, and a marker per other block."""
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] if b.get("type") == "text" else f"[{b.get('type')} block]" for b in content)


def result_text(value: Any, max_chars: int | None = MAX_RESULT_CHARS) -> str:
    """What the model sees of a tool's return value; longer than ``max_chars``, it is cut with a notice."""
    if isinstance(value, str):
        text = value
    elif value is None:
        text = "(no output)"
    else:
        try:
            import json

            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(value)
    if max_chars is not None and len(text) > max_chars:
        text = (
            text[:max_chars]
            + f"\n[agentlab: this result was cut to its first {max_chars:,} of {len(text):,} characters "
            "(the tool's max_result_chars). Next step: ask for less, e.g. a narrower query or one page at a time.]"
        )
    return text


def _checked_name(fn: Callable[..., Any], name: Any) -> str:
    """The tool's name, checked against the API's rule now rather than failing at the first request."""
    if name is None:
        name = getattr(fn, "__name__", None)
        if name is None:
            raise TypeError(f"tool: {type(fn).__name__} objects have no __name__; pass name=")
    if not isinstance(name, str):
        raise TypeError(f"tool name must be a string, got {type(name).__name__} {name!r}")
    if not NAME_RULE.match(name):
        why = (
            "a lambda has no usable name; pass name="
            if name == "<lambda>"
            else (f"{len(name)} characters, at most 64" if len(name) > 64 else "only letters, digits, '_' and '-'")
        )
        raise ValueError(f"tool name {name!r} breaks the API's rule ^[a-zA-Z0-9_-]{{1,64}}$ ({why})")
    return name


def _generator_call(fn: Any) -> bool:
    call = inspect.getattr_static(type(fn), "__call__", None)
    return (
        not inspect.isfunction(fn)
        and not inspect.ismethod(fn)
        and (inspect.isgeneratorfunction(call) or inspect.isasyncgenfunction(call))
    )


def _defined_in_class(fn: Callable[..., Any]) -> bool:
    parts = getattr(fn, "__qualname__", "").split(".")
    return inspect.isfunction(fn) and len(parts) >= 2 and parts[-2] != "<locals>"


class SchemaTool(Tool):
    """A tool described by an explicit JSON schema rather than a Python signature.

    For tools that live elsewhere (an MCP server): ``fn`` receives the
    model's arguments as keywords and checks them itself (the remote side
    validates and answers with an error the model can read).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str,
        description: str,
        input_schema: dict[str, Any],
        mode: Mode = "write",
        timeout: float | None = None,
        retry: Retry | None = None,
        max_calls: int | None = None,
        approve: bool = False,
    ) -> None:
        if not isinstance(input_schema, dict):
            raise TypeError(f"tool {name!r}: input_schema must be a JSON schema object (a dict)")
        super().__init__(
            lambda: None,
            name=name,
            description=description or name,
            mode=mode,
            timeout=timeout,
            retry=retry,
            max_calls=max_calls,
            approve=approve,
        )
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.input_schema = _clean_schema(json.loads(json.dumps(input_schema)))
        self.__doc__ = description
        self.__wrapped__ = fn

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(args, dict):
            raise ToolError(f"Invalid arguments for {self.name}: expected an object, got {type(args).__name__}.")
        return dict(args)
