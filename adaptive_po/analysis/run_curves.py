"""A per-run table with each run's training and evaluation curves, and the command line of the
reports built on it (our MinAtar PPO beside gymnax-blines', ALE's first curves, PQN beside CleanRL,
PQN's evidence tables): the table from run folders or from its committed copy, a curve's value at a
step, a mean with its 95% t-interval, and ``--runs``/``--table`` handled once.

A report may ask for more per-run columns than :data:`COLUMNS` (:data:`EXTRA_COLUMNS`: the policy lag,
the recorded wall time, the means of the after-ABS dial's logged statistics); its table then holds
them, and its committed copy must.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from adaptive_po.contract import parse_curve, report_folder

from .hypothesis import mean_of_differences, welch
from .output import save_csv, save_figure
from .verdicts import table_from_runs

TABLE_FILE, REPORT_FILE = "per_run.csv", "report.md"
TRAIN_CURVE = "train_curve"
COLUMNS = ("suite", "env", "algo", "seed", "total_timesteps", "status", "final_eval_return", "final_train_return", "eval_curve", TRAIN_CURVE)
#: the per-run columns a report may add (``extra``): the data condition's ``policy_lag``; ``wall_time_s``,
#: the run's wall-clock seconds as its ``summary.json`` records them (training and evaluations; NaN for
#: a failed run); and the means over the run's updates of ``progress.csv``'s ``rollout_steps`` and
#: ``behaviour_divergence`` (the after-ABS dial's input and output; NaN where the run logged none)
EXTRA_COLUMNS = ("policy_lag", "wall_time_s", "rollout_steps_mean", "behaviour_divergence_mean")


def table_from_folder(root: str | Path, extra: Sequence[str] = ()) -> pd.DataFrame:
    """One row per run under ``root`` (complete and failed), with its training curve and the
    :data:`EXTRA_COLUMNS` named in ``extra``."""
    import warnings

    from .load import load_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_runs(root)
    table = table_from_runs(runs, root)
    progress = runs.progress.sort_values("timesteps").groupby("run_dir")
    per_dir = {
        run_dir: {
            TRAIN_CURVE: " ".join(f"{int(s)}:{r:.4g}" for s, r in zip(rows["timesteps"], rows["rollout_return_mean"]) if np.isfinite(r)),  # none before an episode ends
            **{f"{name}_mean": float(pd.to_numeric(rows[name], errors="coerce").mean()) if name in rows else math.nan
               for name in ("rollout_steps", "behaviour_divergence")},
        }
        for run_dir, rows in progress
    }
    for _, run in runs.finals.iterrows():
        per_dir.setdefault(run["run_dir"], {})["wall_time_s"] = float(run["wall_time_s"])
    # a run's cell: its variant is part of its algo label, its lag of its condition
    by_cell = {(r["env"], r["algo"], r["condition"], int(r["seed"])): per_dir.get(r["run_dir"], {}) for _, r in runs.finals.iterrows()}
    found = [by_cell.get((r["env"], r["algo"], r["condition"], int(r["seed"])), {}) for _, r in table.iterrows()]
    table[TRAIN_CURVE] = [values.get(TRAIN_CURVE, "") for values in found]
    for name in extra:
        if name not in table.columns:
            table[name] = [values.get(name, math.nan) for values in found]
    return table[[*COLUMNS, *_extra(extra)]]


def _extra(extra: Sequence[str]) -> list[str]:
    unknown = [name for name in extra if name not in EXTRA_COLUMNS]
    if unknown:
        raise ValueError(f"unknown per-run columns {unknown}; the table adds {list(EXTRA_COLUMNS)}")
    return list(extra)


def read_runs_table(path: str | Path, extra: Sequence[str] = ()) -> pd.DataFrame:
    """A committed per-run table of :data:`COLUMNS` and the :data:`EXTRA_COLUMNS` named in ``extra``;
    a one-line ``ValueError`` naming what is missing."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no per-run table at {path}")
    table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    missing = [c for c in (*COLUMNS, *_extra(extra)) if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    return table


def foreign_value(table: pd.DataFrame, path: str | Path, allowed: dict[str, Sequence[Any]]) -> None:
    """A one-line ``ValueError`` naming the first value of a column of ``allowed`` (``{"env": [...],
    "algo": [...]}``) that a report does not cover: a committed table of another report."""
    for column, values in allowed.items():
        other = sorted({str(v) for v in table[column]} - {str(v) for v in values})
        if other:
            raise ValueError(f"{path}: {column} {other[0]!r} is not of this report ({', '.join(map(str, values))})")


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


#: what a difference's 95% interval that spans zero (or that cannot be computed) says
NOT_SHOWN = "not shown"


def difference_ci(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """``mean(x) - mean(y)`` and its Welch 95% interval (:func:`adaptive_po.analysis.hypothesis.welch`;
    NaN bounds where an arm has fewer than 2 values, NaN throughout where one has none)."""
    if not len(x) or not len(y):
        return math.nan, math.nan, math.nan
    d = welch(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    return (d.estimate, *d.ci())


def difference_verdict(low: float, high: float, above: str, below: str) -> str:
    """``above`` where a difference's 95% interval lies above zero, ``below`` where it lies below,
    else :data:`NOT_SHOWN` (the interval spans zero, or there is none)."""
    if not (np.isfinite(low) and np.isfinite(high)) or low <= 0.0 <= high:
        return NOT_SHOWN
    return above if low > 0.0 else below


def number_text(value: float, digits: int = 1) -> str:
    """``value`` with ``digits`` decimals, ``-`` where it is not a finite number (nothing measured)."""
    return "-" if not np.isfinite(value) else f"{value:.{digits}f}"


def interval_text(mean: float, low: float, high: float, digits: int = 1) -> str:
    """``12.3 [1.0, 20.0]``; ``12.3 (no interval)`` without bounds; ``-`` without a mean."""
    if not np.isfinite(mean):
        return "-"
    if not (np.isfinite(low) and np.isfinite(high)):
        return f"{mean:.{digits}f} (no interval)"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def complete_values(table: pd.DataFrame, column: str, **cell: Any) -> np.ndarray:
    """``column`` of the complete runs of one cell (``env=..., algo=..., policy_lag=...``), by seed."""
    runs = table[table["status"] == "complete"]
    for key, value in cell.items():
        runs = runs[runs[key] == value]
    return runs.sort_values("seed")[column].to_numpy(dtype=float)


def budgets_text(table: pd.DataFrame) -> str:
    """Each task's budget, ``CartPole-v1 100,000, Acrobot-v1 200,000`` (steps per run)."""
    return ", ".join(f"{env} {int(budget):,}" for env, budget in table.groupby("env", sort=False)["total_timesteps"].max().items())


def panels(n: int, width: float, height: float) -> tuple[Any, list[Any]]:
    """A figure of ``n`` panels side by side, each ``width`` x ``height`` inches (the Agg backend), and its axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n, figsize=(width * n, height))
    return fig, list(np.atleast_1d(axes))


def label_panel(ax: Any, title: str, xlabel: str, ylabel: str) -> None:
    """A panel's title, axis labels, grid, and its legend where it has labelled lines."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def report_head(title: str, made_by: str, runs_by: str) -> list[str]:
    """A report's first lines: its title, the command that makes it from its table, and the one that runs its runs."""
    return [f"# {title}", "", f"Made by {made_by}; runs by {runs_by}.", ""]


def save_panels(fig: Any, title: str, out: Path) -> Path:
    """``fig`` under its ``title``, laid out and saved as a PNG at ``out``."""
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, out, dpi=110)


# -- the report ------------------------------------------------------------------------------------
def added_to(committed: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``committed``'s runs with ``new``'s added (a run in both, by suite, task, arm, condition and
    seed, is ``new``'s), in run order: a table continued slice by slice from its committed rows."""
    key = [c for c in ("suite", "env", "algo", "condition", "policy_lag", "seed") if c in new.columns and c in committed.columns]
    index = lambda t: pd.MultiIndex.from_frame(t[key].astype(str))  # noqa: E731
    kept = committed[~index(committed).isin(index(new))]
    merged = pd.concat([kept, new.reindex(columns=committed.columns)], ignore_index=True)
    return merged.sort_values(key, kind="stable").reset_index(drop=True)


def report_main(argv: Sequence[str] | None, prog: str, description: str, default_out: str, read: Callable[[str], pd.DataFrame],
                write: Callable[[pd.DataFrame, Path], None], extra: Sequence[str] = (),
                keep: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> int:
    """A per-run report's command line: ``--runs`` (one or more suites' run folders: the table, with
    the :data:`EXTRA_COLUMNS` of ``extra``, is made, cut to the report's runs by ``keep`` where a folder
    holds others too, and saved) or ``--table`` (a committed table, read by ``read``), then
    ``write(table, out)``; a bad input is one line and exit status 2, before anything is written."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", nargs="+", help="the run folders (runs/<suite>; several: their runs together)")
    source.add_argument("--table", help=f"a per-run table this module wrote ({default_out}/{TABLE_FILE})")
    parser.add_argument("--out", default=default_out, help=f"where {TABLE_FILE} and the report go")
    parser.add_argument("--add", action="store_true",
                        help=f"with --runs: add their runs to the {TABLE_FILE} already in --out, if any (a run in both is the folder's), so "
                             "a study run in slices continues on a machine without the earlier slices' run folders")
    args = parser.parse_args(argv)
    try:
        if args.table:
            if args.add:
                raise ValueError("--add adds run folders (--runs) to the table in --out, not a --table")
            table = read(args.table)
        else:
            for root in args.runs:
                if not Path(root).is_dir():
                    raise ValueError(f"no run folders at {root}")
            table = pd.concat([table_from_folder(root, extra) for root in args.runs], ignore_index=True)
            table = keep(table) if keep is not None else table
            if args.add and (Path(args.out) / TABLE_FILE).exists():  # none yet: the first slice's table is its own
                table = added_to(read(str(Path(args.out) / TABLE_FILE)), table)
        if table.empty:
            raise ValueError(f"no runs in {args.table or ' '.join(args.runs)}")
    except ValueError as error:
        print(f"error: {error}")
        return 2
    out = report_folder(args.out)
    if args.runs is not None:
        save_csv(table, out / TABLE_FILE)
    write(table, out)
    print(f"report: {out / REPORT_FILE}")
    return 0
