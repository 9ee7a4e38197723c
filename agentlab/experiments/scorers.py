"""Scorers: ``scorer(result, task) -> float | bool | None`` (``None``: no verdict).

:func:`exact_match` and :func:`includes` compare the answer with the task's
``target``. :func:`model_graded` asks a model; its calls reserve from the
experiment's total budget like every other call, so grading cannot overspend.
"""

from __future__ import annotations

import re
from typing import Any

from .._account import NO_LEDGER, Ledger
from .tasks import Task


def _answer(result: Any) -> str:
    return str(getattr(result, "text", "") or "")


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .!")


def exact_match(result: Any, task: Task) -> bool | None:
    """True when the answer equals the target (case and surrounding spaces ignored)."""
    if task.target is None:
        return None
    return _norm(_answer(result)) == _norm(task.target)


def includes(result: Any, task: Task) -> bool | None:
    """True when the target appears in the answer (case-insensitive)."""
    if task.target is None:
        return None
    return _norm(task.target) in _norm(_answer(result))


GRADER_SYSTEM = (
    "You grade an assistant's answer against a rubric. Reply with one line: PASS or FAIL, or a score between 0 and 1."
)


class ModelGraded:
    """A scorer that asks ``model`` to grade the answer against ``rubric``.

    Its one-step grading run reserves from the experiment's ledger (the
    experiment calls :meth:`ascore` with it) and its cost is the row's
    ``score_cost``. Called plainly as ``scorer(result, task)`` it grades
    without a shared budget.
    """

    uses_ledger = True

    def __init__(
        self, rubric: str, *, model: Any = "claude-haiku-4-5", max_tokens: int = 64, prices: Any = None
    ) -> None:
        if not isinstance(rubric, str) or not rubric.strip():
            raise ValueError("model_graded needs a non-empty rubric")
        self.rubric = rubric
        self.model = model
        self.max_tokens = max_tokens
        self.prices = prices

    def prompt(self, result: Any, task: Task) -> str:
        target = f"\nReference answer: {task.target}" if task.target else ""
        return f"Rubric: {self.rubric}\nTask: {task.input}{target}\nAnswer to grade: {_answer(result)}"

    def grader(
        self, result: Any, task: Task, *, ledger: Ledger = NO_LEDGER, run_id: str = "grade", subscribers: Any = ()
    ) -> Any:
        """The one-step grading run (not started)."""
        from ..loop import Run

        return Run(
            self.prompt(result, task),
            model=self.model,
            max_steps=1,
            max_cost=None,
            deadline_s=60,
            max_tokens=self.max_tokens,
            system=GRADER_SYSTEM,
            prices=self.prices,
            run_id=run_id,
            ledger=ledger,
            subscribers=subscribers,
        )

    async def ascore(
        self,
        result: Any,
        task: Task,
        *,
        ledger: Ledger = NO_LEDGER,
        run_id: str = "grade",
        subscribers: Any = (),
    ) -> tuple[float | None, float]:
        """(score, dollars spent grading); ``subscribers`` see the grading run (the experiment traces it)."""
        return await _graded(self.grader(result, task, ledger=ledger, run_id=run_id, subscribers=subscribers))

    def __call__(self, result: Any, task: Task) -> float | None:
        """Grade from a script or a notebook, on the same driver as :func:`agentlab.run` (Ctrl-C stops the grading)."""
        from .._runtime.driver import run_to_end

        run = self.grader(result, task)
        return run_to_end(_graded(run), cancel=run.cancel, result=lambda: None)[0]


async def _graded(run: Any) -> tuple[float | None, float]:
    verdict = await run.run()
    return parse_grade(getattr(verdict, "text", "")) if verdict.outcome == "done" else None, verdict.spent


def model_graded(
    rubric: str, *, model: Any = "claude-haiku-4-5", max_tokens: int = 64, prices: Any = None
) -> ModelGraded:
    """A scorer that has ``model`` grade each answer against ``rubric`` (spend counts toward the total)."""
    return ModelGraded(rubric, model=model, max_tokens=max_tokens, prices=prices)


def parse_grade(text: str) -> float | None:
    """PASS -> 1.0, FAIL -> 0.0, a number in [0, 1] as is; anything else -> None."""
    t = text.strip().upper()
    if t.startswith("PASS"):
        return 1.0
    if t.startswith("FAIL"):
        return 0.0
    m = re.search(r"\b(0(?:\.\d+)?|1(?:\.0+)?)\b", t)
    return float(m.group(1)) if m else None


BUILT_IN = {"exact_match": exact_match, "includes": includes}
