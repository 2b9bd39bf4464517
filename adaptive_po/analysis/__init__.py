"""Analysis of the run folders written by the bench.

The run-folder contract is :mod:`adaptive_po.contract` (file names, columns and their
meaning, condition naming, markers, atomic writes; shown in ``runs/README.md``). Analysis reads
only the contract's files (``config.json``, ``progress.csv``, ``eval.csv``, ``summary.json`` and
the ``COMPLETE``/``FAILED`` markers) and imports nothing of the training package but that
torch-free module, so results copied from another machine can be analysed as they are.

Two layers. The **core** (the modules of this package) computes; the **reports**
(:mod:`adaptive_po.analysis.reports`, one module per published report) put the core's numbers into
Markdown, figures and tables, each runnable as ``python -m adaptive_po.analysis.reports.<name>``.
A report imports the core, never another report.

Core:

* :mod:`~adaptive_po.analysis.load`: :func:`load_runs` -> :class:`LoadedRuns` (tidy eval / progress / finals frames)
* :mod:`~adaptive_po.analysis.stats`: the one bootstrap primitive (:func:`bootstrap`) and every interval
  built on it (IQM, stratified, IQM difference, performance profile, probability of improvement,
  curve bands), the one normalization, interpolation onto a step grid, AUC
* :mod:`~adaptive_po.analysis.conditions`: the data-condition vocabulary (fresh data, headline conditions)
* :mod:`~adaptive_po.analysis.labels`: the one order and the names of algorithms, conditions and levels
* :mod:`~adaptive_po.analysis.tables`: per-condition table, normalization references, aggregate table, Markdown
* :mod:`~adaptive_po.analysis.hypothesis`: the verdicts' tests (Welch's t, its mean over tasks,
  equivalence by two one-sided tests, Holm's adjustment, the smallest detectable difference)
* :mod:`~adaptive_po.analysis.verdicts`: the per-run table and the verdict rules every report shares
  (per task, aggregates that drop no task, saturation per compared pair, failures scored, what
  changed against :mod:`~adaptive_po.analysis.previous_rule`), the README-block writer
* :mod:`~adaptive_po.analysis.calibration`: the tests' false-positive rates by A/A draws from the
  committed per-run tables (``make calibration``)
* :mod:`~adaptive_po.analysis.quotes`: numbers and verdicts in prose quoted from a named report cell, checked
* :mod:`~adaptive_po.analysis.paper_data`: several suite roots loaded, pooled and externally normalized
* :mod:`~adaptive_po.analysis.comparisons`: aggregate IQM per level of a condition axis; wins, ties and losses
* :mod:`~adaptive_po.analysis.tuning_tax`: knob sensitivity and the cost of keeping the fresh-data configuration
* :mod:`~adaptive_po.analysis.plots`: every figure of the suite and paper reports
* :mod:`~adaptive_po.analysis.output`: the one way figures and tables are saved (atomically)

Reports (:mod:`adaptive_po.analysis.reports`):

* ``suite``: one suite's report (``python -m adaptive_po.analysis <suite_root>`` runs it too)
* ``paper``: the paper report over several suites (IQM per condition, profiles, the tuning tax)
* ``staleness_and_paper_verdicts``: the staleness and paper suites' verdicts from the committed run table
* ``equal_tuning``: equal tuning with held-out selection, ESS objective against PPO
* ``minatar``: the MinAtar tier's verdicts and its check against published PPO
* ``fresh_data``: why the ESS objective trails PPO on fresh Pendulum, and the pre-registered variants' verdicts
* ``r2vpo``: R2VPO against the published PPO runs of the staleness grid
* ``reissue``: a published suite report's verdicts re-issued from its committed per-run table
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
    """Lazy alias of :func:`adaptive_po.analysis.reports.suite.make_report` (keeps
    ``import adaptive_po.analysis`` free of matplotlib)."""
    from .reports.suite import make_report as _make_report

    return _make_report(*args, **kwargs)
