"""Analysis of the run folders written by the bench.

The run-folder contract is :mod:`adaptive_po.contract` (file names, columns and their
meaning, condition naming, markers, atomic writes; shown in ``runs/README.md``). Analysis reads
only the contract's files (``config.json``, ``progress.csv``, ``eval.csv``, ``summary.json`` and
the ``COMPLETE``/``FAILED`` markers) and imports nothing of the training package but that
torch-free module, so results copied from another machine can be analysed as they are.

* :mod:`adaptive_po.analysis.load`: :func:`load_runs` -> :class:`LoadedRuns` (tidy eval / progress / finals frames)
* :mod:`adaptive_po.analysis.stats`: the one bootstrap primitive (:func:`bootstrap`) and every interval built
  on it (IQM, stratified, IQM difference, performance profile, probability of improvement, curve
  bands), the one normalization, interpolation onto a step grid, AUC
* :mod:`adaptive_po.analysis.conditions`: the data-condition vocabulary (fresh data, headline conditions)
* :mod:`adaptive_po.analysis.labels`: the one order and the names of algorithms, conditions and levels
* :mod:`adaptive_po.analysis.tables`: per-condition table, normalization references, aggregate table, Markdown
* :mod:`adaptive_po.analysis.plots`: every figure (suite report and paper report)
* :mod:`adaptive_po.analysis.report`: :func:`make_report`, the ``python -m adaptive_po.analysis`` command and the one
  way outputs are saved (:func:`adaptive_po.analysis.report.save_figure`, :func:`adaptive_po.analysis.report.save_csv`)
* :mod:`adaptive_po.analysis.paper_data`, :mod:`adaptive_po.analysis.comparisons`, :mod:`adaptive_po.analysis.tuning`,
  :mod:`adaptive_po.analysis.paper_report`: the paper's analysis over several suites (loading and external
  normalization; IQM per level and verdicts; the tuning tax; the report as a list of sections)
* :mod:`adaptive_po.analysis.paper`: their public names and the ``python -m adaptive_po.analysis.paper ROOT... --out DIR``
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
    """Lazy alias of :func:`adaptive_po.analysis.report.make_report` (keeps ``import analysis`` free of matplotlib)."""
    from .report import make_report as _make_report

    return _make_report(*args, **kwargs)
