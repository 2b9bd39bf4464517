"""Analysis of the run folders written by the bench.

The run-folder contract is :mod:`adaptive_po.harness.contract` (file names, columns and their
meaning, condition naming, markers, atomic writes; shown in ``runs/README.md``). Analysis reads
only the contract's files (``config.json``, ``progress.csv``, ``eval.csv``, ``summary.json`` and
the ``COMPLETE``/``FAILED`` markers) and imports nothing of the training package but that
torch-free module, so results copied from another machine can be analysed as they are.

* :mod:`analysis.load`: :func:`load_runs` -> :class:`LoadedRuns` (tidy eval / progress / finals frames)
* :mod:`analysis.stats`: the one bootstrap primitive (:func:`bootstrap`) and every interval built
  on it (IQM, stratified, IQM difference, performance profile, probability of improvement, curve
  bands), the one normalization, interpolation onto a step grid, AUC
* :mod:`analysis.conditions`: the data-condition vocabulary (fresh data, headline conditions)
* :mod:`analysis.labels`: the one order and the names of algorithms, conditions and levels
* :mod:`analysis.tables`: per-condition table, normalization references, aggregate table, Markdown
* :mod:`analysis.plots`: every figure (suite report and paper report)
* :mod:`analysis.report`: :func:`make_report`, the ``python -m analysis`` command and the one
  way outputs are saved (:func:`analysis.report.save_figure`, :func:`analysis.report.save_csv`)
* :mod:`analysis.paper_data`, :mod:`analysis.comparisons`, :mod:`analysis.tuning`,
  :mod:`analysis.paper_report`: the paper's analysis over several suites (loading and external
  normalization; IQM per level and verdicts; the tuning tax; the report as a list of sections)
* :mod:`analysis.paper`: their public names and the ``python -m analysis.paper ROOT... --out DIR``
  command
"""

from .load import CONDITION_KEYS, RUN_KEYS, LoadedRuns, LoadWarning, load_runs
from .stats import (
    CI,
    Bootstrap,
    auc,
    bootstrap,
    bootstrap_ci,
    common_grid,
    interpolate_to_grid,
    iqm,
    iqm_ci,
    iqm_difference_ci,
    mean_ci_over_runs,
    normalize_score,
    performance_profile,
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
    "Bootstrap",
    "auc",
    "bootstrap",
    "bootstrap_ci",
    "common_grid",
    "interpolate_to_grid",
    "iqm",
    "iqm_ci",
    "iqm_difference_ci",
    "mean_ci_over_runs",
    "normalize_score",
    "performance_profile",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "stratified_bootstrap_ci",
    "make_report",
]


def make_report(*args, **kwargs):
    """Lazy alias of :func:`analysis.report.make_report` (keeps ``import analysis`` free of matplotlib)."""
    from .report import make_report as _make_report

    return _make_report(*args, **kwargs)
