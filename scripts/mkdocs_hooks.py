"""MkDocs hooks for the docs site (``mkdocs.yml`` names this file; ``make docs`` runs it).

Three pages are made from the sources instead of copied, so they cannot drift:

- ``index.md`` is README.md, its links rewritten for the site (``docs/x.md`` -> ``x.md``);
- ``notebooks/*.ipynb`` are the repository's notebooks, rendered by mkdocs-jupyter from
  their saved outputs (they are executed by the tests, not by the docs build);
- ``reference.md`` documents every name in ``agentlab.__all__`` (grouped below) and the
  modules reached as ``al.<module>``; a public name without a docstring fails the build.

A notebook page renders its saved widgets (the panel) with the widget manager served from the site
(:data:`WIDGET_MANAGER`), never from a CDN: a page that would still load a script from elsewhere fails the build.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]

GROUPS: dict[str, list[str]] = {
    "Running the loop": [
        "run",
        "arun",
        "Run",
        "Done",
        "Stopped",
        "StepRecord",
        "Budget",
        "BudgetSnapshot",
        "Event",
        "FakeClock",
    ],
    "Models": ["AnthropicModel", "FunctionModel", "ScriptedModel", "ReplayModel", "reply", "resolve_model", "Prices"],
    "Tools and failures": [
        "tool",
        "Tool",
        "Retry",
        "mcp_tools",
        "ToolError",
        "RetryableError",
        "FatalError",
        "PermissionDenied",
        "AuthenticationFailed",
        "ModelError",
        "Policy",
    ],
    "Traces, records, replay and fork": [
        "Trace",
        "Traces",
        "load_run",
        "load_runs",
        "load_recorded",
        "import_recorded",
        "replay",
        "fork",
    ],
    "Experiments": ["Experiment", "ExperimentResult", "grid"],
    "The lab": ["Lab"],
}
"""The reference's sections. A name in ``__all__`` missing here gets a section of its own ("More")."""

MODULES = ["plots", "analysis", "datasets", "otel", "shop", "scenarios", "testing"]
"""Modules a user reaches as ``al.<module>`` (``agentlab.__getattr__`` loads them), documented whole."""


WIDGET_MANAGER = "assets/widgets/html-manager-1.0.15/embed.js"
"""The pinned widget manager the notebook pages load (docs/assets/widgets/.../NOTICE.txt says where it is from)."""
CDN_WIDGET_SCRIPTS = re.compile(
    r"""(["'])https?://[^"']*(?:@jupyter-widgets/html-manager|@jupyter-js-widgets)[^"']*\1"""
)
"""The widget-manager addresses nbconvert writes into a page (an unpinned ``@*`` version on a CDN)."""
OFFSITE_SCRIPT = re.compile(r"""<script[^>]*\ssrc=["']https?://|(?:Src|src)\s*=\s*["']https?://[^"']*\.js""")
"""A script the page would load from another site (an ``<script src>``, or an address a page script loads)."""


def serve_widget_manager(html: str, page_url: str) -> str:
    """A notebook page pointed at the site's own widget manager; an error if any script is still off-site."""
    from mkdocs.utils import get_relative_url

    local = get_relative_url(WIDGET_MANAGER, page_url)
    html = CDN_WIDGET_SCRIPTS.sub(lambda m: f"{m.group(1)}{local}{m.group(1)}", html)
    offsite = OFFSITE_SCRIPT.search(html)
    if offsite:
        raise PluginError(f"{page_url} loads a script from another site: {html[offsite.start() : offsite.end() + 80]}")
    return html


def _public(module: Any) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(module).items()
            if not n.startswith("_")
            and getattr(v, "__module__", None) == module.__name__
            and (inspect.isfunction(v) or inspect.isclass(v))
        ]
    return list(names)


def _members(cls: type) -> list[tuple[str, Any]]:
    """A class's own public methods and properties (what the reference lists under it)."""
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        target = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if isinstance(value, property) or inspect.isfunction(target):
            out.append((name, target))
    return out


def missing_docstrings() -> list[str]:
    """Every public name (and public method or property of a public class) with no docstring."""
    import agentlab

    missing = []
    spaces = [("agentlab", agentlab, list(agentlab.__all__))]
    for mod in MODULES:
        module = importlib.import_module(f"agentlab.{mod}")
        spaces.append((f"agentlab.{mod}", module, _public(module)))
        if not inspect.getdoc(module):
            missing.append(f"agentlab.{mod}")
    for prefix, space, names in spaces:
        for name in names:
            obj = getattr(space, name)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and not (obj.__doc__ or "").strip():
                missing.append(f"{prefix}.{name}")
            if inspect.isclass(obj):
                missing += [
                    f"{prefix}.{name}.{m}" for m, f in _members(obj) if not (getattr(f, "__doc__", None) or "").strip()
                ]
    return sorted(set(missing))


def reference_page() -> str:
    """The API reference: one mkdocstrings directive per public name, at the path it is defined."""
    import agentlab

    listed = [n for names in GROUPS.values() for n in names]
    unknown = sorted(set(listed) - set(agentlab.__all__))
    if unknown:
        raise PluginError(f"the reference lists names agentlab.__all__ does not export: {unknown}")
    groups = {**GROUPS}
    rest = [n for n in agentlab.__all__ if n not in listed]
    if rest:
        groups["More"] = rest
    lines = [
        "# API reference",
        "",
        "Everything below is importable from `agentlab` (`import agentlab as al`; `al.run`, `al.Lab`...),",
        "whatever module defines it. The modules at the end are reached as `al.plots`, `al.analysis`...",
        "",
    ]
    for title, names in groups.items():
        lines += [f"## {title}", ""]
        for name in names:
            obj = getattr(agentlab, name)
            lines += [f"::: {obj.__module__}.{obj.__qualname__}", "    options:", f"      heading: {name}", ""]
    lines += ["## Modules", ""]
    for mod in MODULES:
        lines += [
            f"::: agentlab.{mod}",
            "    options:",
            "      show_root_full_path: true",
            "      heading_level: 3",
            f"      members: {_public(importlib.import_module(f'agentlab.{mod}'))}",
            "",
        ]
    return "\n".join(lines)


def readme_as_index() -> str:
    """README.md with its links pointing where the site has the pages."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"\]\(docs/", "](", text)
    return text


def on_pre_build(config: Any) -> None:
    missing = missing_docstrings()
    if missing:
        raise PluginError("public names without a docstring (say what each is for):\n  " + "\n  ".join(missing))


@event_priority(100)  # before mkdocs-jupyter looks for notebooks among the files
def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "index.md", content=readme_as_index()))
    files.append(File.generated(config, "reference.md", content=reference_page()))
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(
            File(
                f"notebooks/{notebook.name}",
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def code_is_not_math(html: str) -> str:
    """A notebook page whose hidden copies of its code cells (what mkdocs-jupyter's Copy button copies) carry
    the class every MathJax skips: ``f"${a} of ${b}"`` in a cell is code, and typeset it would be copied as
    garbage. The visible code is in ``<pre>``, which MathJax skips already."""
    from agentlab._safe_text import NO_MATH

    return html.replace('class="clipboard-copy-txt"', f'class="clipboard-copy-txt {NO_MATH}"')


def on_post_page(output: str, page: Any, config: Any) -> str:
    if page.file.src_uri.endswith(".ipynb"):
        return serve_widget_manager(code_is_not_math(output), page.url)
    return output
