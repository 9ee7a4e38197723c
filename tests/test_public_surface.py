"""The public surface agrees with itself: ``__all__``, ``dir(agentlab)``, the API reference and
what README.md and docs/ use are the same names, each documented."""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import types
from pathlib import Path

import agentlab

ROOT = Path(__file__).resolve().parents[1]


def _hooks() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mkdocs_hooks", module)
    spec.loader.exec_module(module)
    return module


def test_every_name_in_all_resolves_and_tab_completion_lists_it():
    for name in agentlab.__all__:
        assert getattr(agentlab, name) is not None, name
    assert set(agentlab.__all__) <= set(dir(agentlab))
    assert len(agentlab.__all__) == len(set(agentlab.__all__))


def test_dir_shows_no_public_name_that_all_leaves_out():
    """Besides submodules and ``__version__``, what ``dir(agentlab)`` offers is exactly ``__all__``."""
    extra = {
        n for n in dir(agentlab) if not n.startswith("_") and not isinstance(getattr(agentlab, n), types.ModuleType)
    }
    assert extra == set(agentlab.__all__)
    assert "__version__" in dir(agentlab) and isinstance(agentlab.__version__, str)


def test_the_api_reference_documents_exactly_all_and_every_name_has_a_docstring():
    hooks = _hooks()
    page = hooks.reference_page()
    headings = re.findall(r"^::: (\S+)\n    options:\n      heading: (\w+)$", page, flags=re.M)
    assert sorted(h for _, h in headings) == sorted(agentlab.__all__)
    for path, name in headings:  # each directive points at the object agentlab exports
        module, _, qualname = path.rpartition(".")
        assert getattr(importlib.import_module(module), qualname) is getattr(agentlab, name), path
    assert hooks.missing_docstrings() == []


def test_the_docstring_check_catches_a_public_name_without_one(monkeypatch):
    hooks = _hooks()

    def undocumented() -> None:
        pass

    class Thing:
        """Documented."""

        def method(self) -> None:
            pass

    monkeypatch.setattr(agentlab, "undocumented", undocumented, raising=False)
    monkeypatch.setattr(agentlab, "Thing", Thing, raising=False)
    monkeypatch.setattr(agentlab, "__all__", [*agentlab.__all__, "undocumented", "Thing"])
    assert {"agentlab.undocumented", "agentlab.Thing.method"} <= set(hooks.missing_docstrings())


def _code_blocks() -> str:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(
        b for d in docs for b in re.findall(r"```python\n(.*?)```", d.read_text(encoding="utf-8"), flags=re.S)
    )


def test_every_agentlab_name_the_readme_and_docs_use_exists():
    """``al.X`` / ``agentlab.X`` in a code block, and ``from agentlab.M import N``, all resolve."""
    code = _code_blocks()
    used = set(re.findall(r"\b(?:al|agentlab)\.([A-Za-z_]\w*)", code))
    assert used, "no names found: the pattern is wrong"
    missing = [n for n in sorted(used) if not hasattr(agentlab, n)]
    assert missing == []
    for module, names in re.findall(r"^from (agentlab(?:\.\w+)*) import ([\w, ]+)$", code, flags=re.M):
        imported = importlib.import_module(module)
        assert all(hasattr(imported, n.strip()) for n in names.split(",")), (module, names)


def test_every_top_level_class_and_function_is_documented_where_it_is_defined():
    for name in agentlab.__all__:
        obj = getattr(agentlab, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name
