"""The paper's analysis: the ESS objective vs tuned objectives under stale and mismatched data.

``python -m adaptive_po.analysis.paper RUNS_ROOT [RUNS_ROOT ...] --out DIR`` (see :func:`main`) reads one or
more suite roots (e.g. ``runs/paper runs/sensitivity runs/staleness``) and writes into ``DIR``:

* ``report.md``: every table below with its CIs and run counts, the normalization references and
  a list of the conditions where the ESS objective wins, ties and loses;
* ``iqm_conditions.png``: aggregate IQM of the normalized final score vs the headline data
  conditions (:data:`HEADLINE_CONDITIONS`), one line per algorithm (default knobs) with a CI band;
* ``iqm_staleness.png``: the same vs policy lag, from the roots that hold a lag sweep;
* ``iqm_mismatch.png``: the same vs every other condition axis that varies (temperature,
  precision, ...), one panel per axis;
* ``profiles.png``: performance profiles (fraction of runs above each normalized score), one
  panel per headline condition;
* ``tuning_profiles.png`` and ``retuning_cost.png``: the tuning tax, from the roots with knob
  variants (the sensitivity suite): fraction of *configurations* above each score, and what the
  configuration that was best on fresh data loses under each other condition;
* the tables as CSV files.

**Normalization** is external (never the PPO arm of the same sweep): each run's final evaluation
return is mapped to ``(return - random_score) / (solved_threshold - random_score)`` with the two
values of that run's own ``config.json``; runs without a usable pair are left out and listed.

**Failures are scored, never dropped.** A failed run (``FAILED`` with a readable ``config.json``)
is scored at its environment's random score (its config's ``random_score``, normalized 0) and
counted wherever its cell is: in the IQMs, the profiles and the tuning tax, where a configuration
with a failed run is scored with it, so no environment is dropped from a tuning cell because one
configuration failed there.

**Several roots.** The headline figures and the mismatch figure pool the runs at the default knobs
(``variant == ""``) of every root and count a run key (env, algorithm, variant, condition, budget,
seed) found in several roots once, from the first root given: list the main suite first. No
comparison mixes budgets: every section keeps one budget (``total_timesteps``) per env, the budget
of the first root holding it, and names the runs at other budgets it leaves out; a run missing at
that budget is missing, never borrowed from another budget. An environment enters a figure only if
it has runs at every level on that figure's x axis. The staleness figure uses only the roots whose
fresh-sampler runs hold a lag sweep (3 lags or more, else 2), the tuning tax only the roots that
hold knob variants.

The work is split by job: :mod:`adaptive_po.analysis.conditions` (the condition vocabulary),
:mod:`adaptive_po.analysis.labels` (order and names), :mod:`adaptive_po.analysis.paper_data` (loading several roots and
the normalization), :mod:`adaptive_po.analysis.comparisons` (IQM per level, wins/ties/losses),
:mod:`adaptive_po.analysis.tuning` (the tuning tax), :mod:`adaptive_po.analysis.plots` (the figures) and
:mod:`adaptive_po.analysis.paper_report` (the report's sections). This module re-exports their public names
and holds the command line. Only :mod:`adaptive_po.contract` of the training package is
imported (never torch).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from .comparisons import iqm_by_level, wins_ties_losses
from .conditions import FRESH, HEADLINE_CONDITIONS, NamedCondition
from .labels import ESS_ALGO
from .load import run_reporting
from .paper_data import PaperData, load_paper_runs, normalize_runs, reference_table
from .paper_report import PaperReport, make_paper_report, wtl_lines
from .stats import add_bootstrap_arguments, iqm_difference_ci, parse_report_arguments, performance_profile
from .tuning import config_scores, retuning_cost, tuning_profile, tuning_spread

__all__ = [
    "ESS_ALGO",
    "FRESH",
    "HEADLINE_CONDITIONS",
    "NamedCondition",
    "PaperData",
    "PaperReport",
    "load_paper_runs",
    "normalize_runs",
    "reference_table",
    "iqm_by_level",
    "performance_profile",
    "iqm_difference_ci",
    "wins_ties_losses",
    "config_scores",
    "tuning_spread",
    "tuning_profile",
    "retuning_cost",
    "make_paper_report",
    "main",
]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m adaptive_po.analysis.paper",
        description="The paper's analysis over one or more suite roots: IQM vs condition, staleness and mismatch "
                    "level, performance profiles, the tuning tax and the retuning cost, with external "
                    "normalization (each run's random_score and solved_threshold).",
    )
    p.add_argument("roots", nargs="+", type=Path, metavar="RUNS_ROOT",
                   help="suite folders, e.g. runs/paper runs/sensitivity runs/staleness (the first wins on duplicates)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: <first root>/paper)")
    add_bootstrap_arguments(p)
    p.add_argument("--ess-algo", default=ESS_ALGO, help=f"the objective drawn emphasized and judged (default {ESS_ALGO})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_report_arguments(_parser(), argv)
    out = args.out if args.out is not None else args.roots[0] / "paper"
    rep = run_reporting(lambda: make_paper_report(
        args.roots, out, confidence=args.confidence, n_resamples=args.resamples, seed=args.seed, ess_algo=args.ess_algo,
    ))
    if rep is None:
        return 1
    for name in ("wins_conditions", "wins_staleness"):
        wtl = rep.tables.get(name)
        if wtl is not None and not wtl.empty:
            fmt = (lambda i: HEADLINE_CONDITIONS[i].label) if name == "wins_conditions" else (lambda v: f"lag {int(v)}")
            print("\n".join(wtl_lines(wtl, fmt, args.ess_algo)))
    for s in rep.skipped:
        print(f"not drawn: {s}")
    print(f"Wrote {len(rep.figures)} figure(s), {len(rep.tables)} table(s) and report.md to {rep.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
