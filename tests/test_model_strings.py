"""A model string is named for what it is (a Claude id, another provider's id the price table knows, unknown), the
close known strings are suggested, and every suggestion runs as written; "offline" means one thing everywhere."""

from __future__ import annotations

import io
import re

import pytest

import agentlab as al
from agentlab.cli import main
from agentlab.models.resolve import MissingAPIKey, ModelNotCallable, model_id_kind, resolve_model

BAD = ["ofline", "offlne", "gpt-4o", "gemini-2.5-pro", "claud-sonet-4-5", "claude-haiku-45", "offline:ofline", "xyz"]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


def refusal(spec: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ModelNotCallable) as caught:
        resolve_model(spec, environ={} if environ is None else environ)
    return str(caught.value)


@pytest.mark.parametrize(
    ("spec", "kind", "provider"),
    [
        ("claude-haiku-4-5", "claude", "Anthropic"),
        ("claude-opus-9-9", "claude", "Anthropic"),  # newer than the table: still a Claude id
        ("gpt-4o", "other", "OpenAI"),
        ("gemini-2.5-pro", "other", "Google"),
        ("ofline", "unknown", None),
    ],
)
def test_a_model_string_is_named_for_what_it_is(spec, kind, provider):
    assert model_id_kind(spec)[:2] == (kind, provider)


@pytest.mark.parametrize(("spec", "provider"), [("gpt-4o", "OpenAI"), ("gemini-2.5-pro", "Google")])
def test_another_providers_id_is_not_called_a_claude_model(spec, provider, tmp_path):
    message = refusal(spec)
    assert f"{provider}'s models" in message and "is a Claude model" not in message
    assert "ANTHROPIC_API_KEY is set" not in refusal(spec, {"ANTHROPIC_API_KEY": "sk-ant-x"})  # a key cannot help
    code, out, err = cli("run", "hello", "--tools", "none", "--model", spec, "--runs", str(tmp_path))
    assert code == 2 and out == "" and f"{provider}'s models" in err and "is a Claude model" not in err


def test_a_typo_of_offline_suggests_offline():
    assert "Did you mean 'offline'?" in refusal("ofline")


def test_a_missing_key_names_the_real_claude_id_when_the_given_one_has_no_price():
    message = refusal("claude-haiku-45")
    assert isinstance(pytest.raises(MissingAPIKey, resolve_model, "claude-haiku-45", environ={}).value, MissingAPIKey)
    assert "'offline:claude-haiku-45'" not in message and "'offline:claude-haiku-4-5'" in message


@pytest.mark.parametrize("spec", BAD)
def test_every_string_a_refusal_suggests_runs_as_written(spec, tmp_path):
    suggested = set(re.findall(r"'(offline[^'\s]*)'", refusal(spec))) - {spec}  # (the string itself, echoed)
    assert suggested, "a refusal names at least one string that runs"
    for s in suggested:
        assert resolve_model(s, environ={}).model.model
        code, _, err = cli("run", "hello", "--tools", "none", "--model", s, "--runs", str(tmp_path / s))
        assert code in (0, 1), err  # the run ran (exit 1 is a run that stopped, not a refusal)
    code, _, err = cli("run", "hello", "--tools", "none", "--model", spec, "--runs", str(tmp_path / "bad"))
    for s in set(re.findall(r"--model (offline\S*?)[),.;:]?(?:\s|$)", err)) - {spec}:
        assert resolve_model(s, environ={}).model.model, err


def test_offline_is_one_reply_without_tools_in_python_and_on_the_command_line(tmp_path):
    from agentlab.shop import Shop

    shop = Shop(tmp_path / "shop.sqlite")
    result = al.run("Why was order 1042 late?", shop.tools(), model="offline", trace=False)
    assert result.steps == 1 and result.text.startswith("(offline model: no real model answered")
    code, out, err = cli(
        "run", "Why was order 1042 late?", "--tools", "shop", "--model", "offline", "--runs", str(tmp_path)
    )
    assert code == 0 and "offline model: no real model answered" in out and "storm" not in out


def test_offline_shop_is_the_command_lines_shop_assistant_and_python_says_where_it_is(tmp_path):
    code, out, err = cli("run", "Why was order 1042 late?", "--model", "offline-shop", "--runs", str(tmp_path))
    assert code == 0 and "storm" in out
    code, _, err = cli("run", "hi", "--tools", "none", "--model", "offline-shop", "--runs", str(tmp_path))
    assert code == 2 and "needs --tools shop" in err
    assert "--tools shop --model offline-shop" in refusal("offline-shop")


def test_a_claude_like_id_the_table_does_not_know_is_not_called_a_claude_model_and_its_likely_meaning_is_named(
    monkeypatch,
):
    message = refusal("claude-sonet-4-5")
    assert "is a Claude model" not in message
    assert "looks like a Claude id but is not one the price table knows" in message
    assert "a typo of 'claude-sonnet-4-5'" in message
    assert "is a Claude model, and no" in refusal("claude-sonnet-4-5")  # a known id is named as one
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")  # with a key it would be sent: the price check says why not
    with pytest.raises(
        ValueError, match=r"no price is known for model 'claude-sonet-4-5' \(did you mean 'claude-sonnet-4-5'"
    ):
        al.run("hi", model="claude-sonet-4-5", trace=False)
    with pytest.raises(
        ValueError, match=r"no price is known for model 'claude-experimental-neptune': pass"
    ):  # nothing close
        al.run("hi", model="claude-experimental-neptune", trace=False)


def test_a_refused_model_leaves_no_example_shop_behind(tmp_path):
    code, out, err = cli("run", "Why was order 1042 late?", "--model", "ofline", "--runs", str(tmp_path / "runs"))
    assert code == 2 and out == "" and err.startswith("agentlab run: model='ofline' is not a model id")
    assert not (tmp_path / "runs").exists() and "tools:" not in err
    code, _, err = cli("run", "Why was order 1042 late?", "--model", "offline-shop", "--runs", str(tmp_path / "runs"))
    assert code == 0 and "tools: the example shop (7 tools)" in err and (tmp_path / "runs" / "shop.sqlite").exists()
