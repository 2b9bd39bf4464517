"""After R2VPO on the staleness grid: its verdicts against tuned PPO, beside the published arms.

``r2vpo`` runs the staleness suite's grid (Acrobot, CartPole, LunarLander, Pendulum x policy lag 0,
4, 16, 64 x seeds 0-4, the suite's budgets, the population engine) as its own suite
(``runs/staleness-r2vpo``). Its per-run table joins those runs to the published PPO runs of the
same grid (``docs/results/staleness/per_run.csv``: same seeds, same budgets), and the verdicts are
the project's rules (:mod:`adaptive_po.analysis.verdicts`) on the pair alone, so that adding this
arm changes no published verdict of the other arms (saturation is decided on ``r2vpo`` and PPO
only; the staleness report keeps its own four arms).

* from runs: ``python -m adaptive_po.analysis.reports.r2vpo --runs runs/staleness-r2vpo
  --baseline docs/results/staleness/per_run.csv --out docs/results/r2vpo``
* from the committed table alone: ``python -m adaptive_po.analysis.reports.r2vpo --table
  docs/results/r2vpo/per_run.csv --out docs/results/r2vpo``

Writes ``per_run.csv`` (from runs only) and ``verdicts.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import pandas as pd

from adaptive_po.contract import atomic_write_text, report_folder

from ..verdicts import aggregates, per_run_table, per_task, verdicts_markdown

ARM = "r2vpo"
BASELINE = "ppo"
#: the per-run table's columns: what the verdicts read, plus the dials that name the condition
COLUMNS = (
    "suite", "env", "algo", "condition", "policy_lag", "seed", "total_timesteps", "status", "random_score",
    "solved_threshold", "final_eval_return", "auc",
)
MADE_BY = (
    "`make r2vpo-from-table` (`python -m adaptive_po.analysis.reports.r2vpo --table docs/results/r2vpo/per_run.csv "
    "--out docs/results/r2vpo`)"
)


def table_from_runs(runs: str | Path, baseline_table: str | Path) -> pd.DataFrame:
    """``r2vpo``'s run folders under ``runs`` and the PPO rows of the published staleness table, for
    the cells ``r2vpo`` ran (environment, condition, seed, budget): one row per run."""
    arm = per_run_table(runs)
    arm = arm[arm["algo"] == ARM]
    if arm.empty:
        raise SystemExit(f"no {ARM} runs under {runs}")
    base = pd.read_csv(baseline_table)
    base = base[base["algo"] == BASELINE]
    cells = set(zip(arm["env"], arm["condition"], arm["total_timesteps"].astype(int)))
    base = base[[(e, c, int(t)) in cells for e, c, t in zip(base["env"], base["condition"], base["total_timesteps"])]]
    missing = sorted(cells - set(zip(base["env"], base["condition"], base["total_timesteps"].astype(int))))
    if missing:
        raise SystemExit(f"the baseline table {baseline_table} has no {BASELINE} runs for {missing}")
    table = pd.concat([arm[list(COLUMNS)], base[list(COLUMNS)]], ignore_index=True)
    return table.sort_values(["env", "condition", "algo", "seed"]).reset_index(drop=True)


def report(table: pd.DataFrame, seed: int = 0) -> str:
    tasks = per_task(table, BASELINE, seed)
    agg = aggregates(table, tasks, BASELINE, seed)
    body = verdicts_markdown(
        table, tasks, agg, BASELINE, title="After R2VPO on the staleness grid: verdicts against tuned PPO", made_by=MADE_BY,
    )
    head, sep, rest = body.partition("\n\n")
    note = (
        "`r2vpo` (`adaptive_po/objectives.py`, `r2vpo_loss`: rho A minus a Lagrange multiplier times the batch's ratio "
        "variance minus 0.02, the multiplier moved by projected dual ascent after each update, step 10, start 1) on the "
        "staleness suite's grid, against the published PPO runs of that grid (same seeds, same budgets, "
        "`docs/results/staleness/per_run.csv`). Only this pair enters the verdicts below, so saturation is decided on "
        "the pair; the other arms' verdicts are in [`staleness/verdicts.md`](../staleness/verdicts.md), unchanged. "
        "Runs: `make bench-r2vpo`."
    )
    return f"{head}\n\n{note}{sep}{rest}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.reports.r2vpo", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", help="the r2vpo suite's run folders (runs/staleness-r2vpo)")
    source.add_argument("--table", help="a per-run table this module wrote (docs/results/r2vpo/per_run.csv)")
    parser.add_argument("--baseline", default="docs/results/staleness/per_run.csv", help="the published staleness per-run table")
    parser.add_argument("--out", default="docs/results/r2vpo", help="where per_run.csv and verdicts.md go")
    args = parser.parse_args(argv)
    out = report_folder(args.out)
    if args.runs:
        table = table_from_runs(args.runs, args.baseline)
        atomic_write_text(out / "per_run.csv", table.to_csv(index=False))
    else:
        table = pd.read_csv(args.table)
    atomic_write_text(out / "verdicts.md", report(table))
    print(f"wrote {out / 'verdicts.md'} ({len(table)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
