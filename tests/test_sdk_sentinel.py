"""The sentinel for the next SDK: every usage field and create parameter of the installed ``anthropic`` is classified.

CI installs the newest SDK the package allows (``anthropic>=2.0``, no upper bound), so a release that adds a
usage field (a new count, iteration type or credit) or a request parameter fails here, naming the field, before
a user's bill is wrong. The classification is one table, :data:`agentlab.usage_fields.FIELDS` (priced, shown, or
ignored with its reason); the docs' list of supported fields is made from it.

Walked: ``anthropic.types.Usage`` and ``MessageDeltaUsage``, ``anthropic.types.beta.BetaUsage`` and
``BetaMessageDeltaUsage`` (with every ``BetaIterationsUsage`` member, ``BetaServerToolUsage``,
``BetaOutputTokensDetails``, ``BetaCacheCreation`` and ``BetaFallbackCreditUsage`` under them), and the keys of
``message_create_params.MessageCreateParamsBase`` (plain and beta).
"""

from __future__ import annotations

import typing
from pathlib import Path

import pydantic
from anthropic.types import MessageDeltaUsage, Usage
from anthropic.types import message_create_params as plain_params
from anthropic.types.beta import BetaMessageDeltaUsage, BetaUsage
from anthropic.types.beta import message_create_params as beta_params

from agentlab.usage_fields import BY_PATH, END, START, fields_markdown

ROOT = Path(__file__).resolve().parents[1]


def _models_in(annotation: typing.Any) -> tuple[list[type[pydantic.BaseModel]], bool]:
    """The pydantic models an annotation holds, and whether it is a list of them."""
    found: list[type[pydantic.BaseModel]] = []
    listed = False
    stack = [annotation]
    while stack:
        a = stack.pop()
        if isinstance(a, type) and issubclass(a, pydantic.BaseModel):
            found.append(a)
            continue
        if typing.get_origin(a) in (list, typing.List):  # noqa: UP006 (the SDK's own spelling)
            listed = True
        stack.extend(typing.get_args(a))
    return found, listed


def walk(model: type[pydantic.BaseModel], prefix: str, out: set[str]) -> set[str]:
    for name, info in model.model_fields.items():
        path = f"{prefix}.{name}"
        out.add(path)
        inner, listed = _models_in(info.annotation)
        for m in inner:
            walk(m, f"{path}[]" if listed else path, out)
    return out


def sdk_fields() -> set[str]:
    out: set[str] = set()
    for model in (Usage, MessageDeltaUsage, BetaUsage, BetaMessageDeltaUsage):
        walk(model, "usage", out)
    for params in (plain_params.MessageCreateParamsBase, beta_params.MessageCreateParamsBase):
        out |= {f"request.{k}" for k in typing.get_type_hints(params)}
    return out


def test_every_usage_field_and_create_parameter_of_the_installed_sdk_is_classified():
    found = sdk_fields()
    assert "usage.iterations[].model" in found and "usage.fallback_credit.status.reason" in found  # the walk reaches
    missing = sorted(found - set(BY_PATH))
    assert not missing, (
        f"the installed anthropic SDK has fields agentlab has not classified: {missing}. Add each to "
        "agentlab.usage_fields.FIELDS as priced (and price it), shown, or ignored with the reason, then run "
        "`python -m agentlab.usage_fields docs/claude.md`"
    )


def test_the_table_names_no_usage_field_the_sdk_lacks():
    stale = sorted(p for p in BY_PATH if p.startswith("usage.") and p not in sdk_fields())
    assert not stale, f"agentlab.usage_fields.FIELDS classifies usage fields the SDK does not have: {stale}"


def test_every_field_says_why():
    assert all(f.why.strip() and f.kind in ("priced", "shown", "ignored") for f in BY_PATH.values())


def test_the_docs_list_of_supported_fields_is_made_from_the_table():
    page = (ROOT / "docs" / "claude.md").read_text()
    between = page.split(START, 1)[1].split(END, 1)[0].strip()
    assert between == fields_markdown(), "run `python -m agentlab.usage_fields docs/claude.md` to regenerate it"
