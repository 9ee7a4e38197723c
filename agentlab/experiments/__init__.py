"""Experiments: many runs (tasks × configs × repeats) under one hard total budget.

``agentlab.grid`` builds configurations, ``agentlab.Experiment`` runs them
(locally or on Ray), and :class:`ExperimentResult` gives one DataFrame out.
See ``docs/experiments.md``.
"""

from .cells import Cell
from .experiment import Experiment
from .experiment_result import ExperimentResult, UnequalSamples, success_of
from .folder import FolderInUse
from .grid import Config, grid
from .ledger import TotalLedger
from .progress import ExperimentEvent, ProgressState, ProgressWidget, TqdmProgress
from .scorers import exact_match, includes, model_graded
from .tasks import Task, load_tasks

__all__ = [
    "Cell",
    "Config",
    "Experiment",
    "ExperimentEvent",
    "ExperimentResult",
    "FolderInUse",
    "ProgressState",
    "ProgressWidget",
    "Task",
    "TotalLedger",
    "TqdmProgress",
    "UnequalSamples",
    "exact_match",
    "grid",
    "includes",
    "load_tasks",
    "model_graded",
    "success_of",
]

for _public in (ExperimentResult, UnequalSamples, success_of):
    _public.__module__ = __name__  # the path users import them from (reprs, pickles, the reference)
