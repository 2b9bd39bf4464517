"""Analysis of the run folders written by the bench.

The run-folder contract is :mod:`adaptive_po.harness.contract` (file names, columns and their
meaning, condition naming, markers, atomic writes; shown in ``runs/README.md``). Analysis reads
only the contract's files (``config.json``, ``progress.csv``, ``eval.csv``, ``summary.json`` and
the ``COMPLETE``/``FAILED`` markers) and imports nothing of the training package but that
torch-free module, so results copied from another machine can be analysed as they are.

* :mod:`analysis.load`: :func:`load_runs` -> :class:`LoadedRuns` (tidy eval / progress / finals frames)
* :mod:`analysis.stats`: IQM, bootstrap and stratified bootstrap CIs, probability of improvement,
  normalization, interpolation onto a step grid, AUC
* :mod:`analysis.tables`: per-condition table, normalization references, aggregate table, Markdown
* :mod:`analysis.plots`: learning curves, staleness and noise ablations, ESS over training
* :mod:`analysis.report`: :func:`make_report` and the ``python -m analysis`` command
* :mod:`analysis.paper`: the paper's analysis over several suites (externally normalized IQM vs
  condition, staleness and mismatch level, performance profiles, the tuning tax and the retuning
  cost) and the ``python -m analysis.paper ROOT... --out DIR`` command
"""

from .load import CONDITION_KEYS, RUN_KEYS, LoadedRuns, LoadWarning, load_runs
from .stats import (
    CI,
    auc,
    bootstrap_ci,
    common_grid,
    interpolate_to_grid,
    iqm,
    iqm_ci,
    mean_ci_over_runs,
    normalize_score,
    probability_of_improvement,
    probability_of_improvement_ci,
    stratified_bootstrap_ci,
)

__all__ = [
    "CONDITION_KEYS",
    "RUN_KEYS",
    "LoadedRuns",
    "LoadWarning",
    "load_runs",
    "CI",
    "auc",
    "bootstrap_ci",
    "common_grid",
    "interpolate_to_grid",
    "iqm",
    "iqm_ci",
    "mean_ci_over_runs",
    "normalize_score",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "stratified_bootstrap_ci",
    "make_report",
]


def make_report(*args, **kwargs):
    """Lazy alias of :func:`analysis.report.make_report` (keeps ``import analysis`` free of matplotlib)."""
    from .report import make_report as _make_report

    return _make_report(*args, **kwargs)
