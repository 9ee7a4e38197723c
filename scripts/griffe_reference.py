"""A Griffe extension for the API reference (``mkdocs.yml`` loads it into mkdocstrings): what ``help()`` says,
the way a reader of the site needs it.

- A default written as ``DEFAULTS.max_cost`` in the source is shown as its value (``0.5``), read from the one
  table of run options (:mod:`agentlab._options`).
- A function or class decorated ``@documented`` gets the run options ``help()`` lists (the decorator appends them
  at import time, which a static reading of the source does not see).
- A Sphinx role (``:func:`agentlab.run```, ``:class:`~.trace.Trace```) becomes a link when its target has a page
  anchor, and plain code otherwise: no raw role marker reaches the page.
"""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from griffe import Extension, Object

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const|type):`(~?)([^`<]*?)(?:\s*<([^`>]+)>)?`")
"""``:role:`target```, ``:role:`~target``` and ``:role:`title <target>```."""


def _anchors() -> dict[str, str]:
    """Every name a reference may use for an object the reference page renders -> its anchor (the object's path).

    The page (scripts/mkdocs_hooks.py) renders each name of ``agentlab.__all__`` at the module that defines it,
    with its public members, and the modules of ``MODULES`` with their public names.
    """
    import importlib
    import inspect
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import mkdocs_hooks

    import agentlab

    anchors: dict[str, str] = {}

    def add(anchor: str, *names: str) -> None:
        for name in names:
            anchors.setdefault(name, anchor)

    for name in agentlab.__all__:
        obj = getattr(agentlab, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        path = f"{obj.__module__}.{obj.__qualname__}"
        add(path, path, f"agentlab.{name}", name)
        if inspect.isclass(obj):
            for member, _ in mkdocs_hooks._members(obj):
                add(f"{path}.{member}", f"{path}.{member}", f"agentlab.{name}.{member}", f"{name}.{member}")
    for mod in mkdocs_hooks.MODULES:
        module = importlib.import_module(f"agentlab.{mod}")
        add(f"agentlab.{mod}", f"agentlab.{mod}")
        for name in mkdocs_hooks._public(module):
            add(f"agentlab.{mod}.{name}", f"agentlab.{mod}.{name}")
    return anchors


def _absolute(target: str, module: str) -> str:
    """``.trace.Trace`` written in ``agentlab.experiments.cells`` -> ``agentlab.experiments.trace.Trace``."""
    if not target.startswith("."):
        return target
    dots = len(target) - len(target.lstrip("."))
    base = module.split(".")[: len(module.split(".")) - dots + 1] if dots > 1 else module.split(".")[:-1]
    if dots == 1 and module.count(".") == 0:
        base = [module]
    return ".".join([*base, target.lstrip(".")])


def link_roles(text: str, module: str, anchors: dict[str, str]) -> str:
    """Each role in ``text`` as an autorefs link (target known) or inline code (not rendered anywhere)."""

    def one(m: re.Match[str]) -> str:
        tilde, first, explicit = m.group(1), m.group(2).strip(), m.group(3)
        target = (explicit or first).strip().lstrip("~")
        shown = first if explicit else (target.rsplit(".", 1)[-1] if tilde else target.lstrip("."))
        full = _absolute(target, module)
        anchor = anchors.get(full) or anchors.get(target) or anchors.get(target.rsplit(".", 1)[-1])
        return f"[`{shown}`][{anchor}]" if anchor else f"`{shown}`"

    return ROLE.sub(one, text)


def options_markdown() -> str:
    """The run options ``help(agentlab.run)`` lists, as a list with each default's value."""
    from agentlab._options import RunOptions

    lines = ["", "**Run options** (every way of starting a run takes these):", ""]
    for f in fields(RunOptions):
        default = "()" if f.default == () else repr(f.default)
        lines.append(f"- `{f.name}` (default `{default}`): {f.metadata['doc']}")
    return "\n".join(lines) + "\n"


class AgentlabReference(Extension):
    """Real defaults, the run options, and links for Sphinx roles, in every docstring the reference renders."""

    def __init__(self) -> None:
        super().__init__()
        self._anchors: dict[str, str] | None = None

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if self._anchors is None:
            self._anchors = _anchors()
        from agentlab._options import DEFAULTS

        for param in getattr(obj, "parameters", None) or ():
            text = str(param.default) if param.default is not None else ""
            if text.startswith("DEFAULTS."):
                param.default = repr(getattr(DEFAULTS, text.removeprefix("DEFAULTS.")))
        documented = any(str(d.value).split(".")[-1] == "documented" for d in getattr(obj, "decorators", None) or ())
        if obj.docstring is not None:
            if documented and "Run options" not in obj.docstring.value:
                obj.docstring.value += "\n" + options_markdown()
            module = obj.module.path if hasattr(obj, "module") else obj.path
            obj.docstring.value = link_roles(obj.docstring.value, module, self._anchors)
