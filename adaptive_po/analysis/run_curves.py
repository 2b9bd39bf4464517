"""A per-run table with each run's training and evaluation curves, and the command line of the
reports built on it (our MinAtar PPO beside gymnax-blines', ALE's first curves, PQN beside CleanRL):
the table from run folders or from its committed copy, a curve's value at a step, a mean with its
95% t-interval, and ``--runs``/``--table`` handled once.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from adaptive_po.contract import parse_curve, report_folder

from .hypothesis import mean_of_differences
from .output import save_csv
from .verdicts import table_from_runs

TABLE_FILE, REPORT_FILE = "per_run.csv", "report.md"
TRAIN_CURVE = "train_curve"
COLUMNS = ("suite", "env", "algo", "seed", "total_timesteps", "status", "final_eval_return", "final_train_return", "eval_curve", TRAIN_CURVE)


def table_from_folder(root: str | Path) -> pd.DataFrame:
    """One row per run under ``root`` (complete and failed), with its training curve."""
    import warnings

    from .load import load_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_runs(root)
    table = table_from_runs(runs, root)
    curves = {
        run_dir: " ".join(f"{int(s)}:{r:.4g}" for s, r in zip(rows["timesteps"], rows["rollout_return_mean"]) if np.isfinite(r))  # none before an episode ends
        for run_dir, rows in runs.progress.sort_values("timesteps").groupby("run_dir")
    }
    by_cell = {(r["env"], r["algo"], int(r["seed"])): curves.get(r["run_dir"], "") for _, r in runs.finals.iterrows()}
    table[TRAIN_CURVE] = [by_cell.get((r["env"], r["algo"], int(r["seed"])), "") for _, r in table.iterrows()]
    return table[list(COLUMNS)]


def read_runs_table(path: str | Path) -> pd.DataFrame:
    """A committed per-run table of :data:`COLUMNS`; a one-line ``ValueError`` naming what is missing."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no per-run table at {path}")
    table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    return table


def value_at(curve: str, step: int) -> float:
    """The curve's value at its point nearest ``step`` (NaN for an empty curve)."""
    points = parse_curve(curve) if isinstance(curve, str) and curve else []
    if not points:
        return math.nan
    steps = np.array([s for s, _ in points], dtype=float)
    return float(points[int(np.abs(steps - step).argmin())][1])


def mean_ci(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% t-interval (:func:`adaptive_po.analysis.hypothesis.mean_of_differences` of one
    sample; NaN bounds for fewer than 2 values)."""
    if not len(values):
        return math.nan, math.nan, math.nan
    d = mean_of_differences([(values, None)])
    return (d.estimate, *d.ci())


# -- the report ------------------------------------------------------------------------------------
def report_main(argv: Sequence[str] | None, prog: str, description: str, default_out: str, read: Callable[[str], pd.DataFrame],
                write: Callable[[pd.DataFrame, Path], None]) -> int:
    """A per-run report's command line: ``--runs`` (the run folders: the table is made and saved) or
    ``--table`` (a committed table, read by ``read``), then ``write(table, out)``; a bad input is one
    line and exit status 2, before anything is written."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", help="the run folders (runs/<suite>)")
    source.add_argument("--table", help=f"a per-run table this module wrote ({default_out}/{TABLE_FILE})")
    parser.add_argument("--out", default=default_out, help=f"where {TABLE_FILE} and the report go")
    args = parser.parse_args(argv)
    try:
        if args.runs is not None and not Path(args.runs).is_dir():
            raise ValueError(f"no run folders at {args.runs}")
        table = read(args.table) if args.table else table_from_folder(args.runs)
        if table.empty:
            raise ValueError(f"no runs in {args.runs or args.table}")
    except ValueError as error:
        print(f"error: {error}")
        return 2
    out = report_folder(args.out)
    if args.runs is not None:
        save_csv(table, out / TABLE_FILE)
    write(table, out)
    print(f"report: {out / REPORT_FILE}")
    return 0
