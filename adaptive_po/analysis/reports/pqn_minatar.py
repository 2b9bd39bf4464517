"""PQN on MinAtar beside our `ppo`, at equal steps, with each one's cost (``make pqn-minatar-from-table``).

The question: where PQN's authors show it fastest (MinAtar), how does it do here beside the
project's PPO, and what does a million steps of each cost? Runs: ``make bench-pqn-minatar``,
``pqn`` (the MinAtar preset: purejaxql's settings, 128 envs x 32 steps, 32 minibatches x 2 epochs,
lr 5e-4 decayed to 0, epsilon 1 -> 0.05 over the first 10%, gamma 0.99, lambda 0.65, conv 16 3x3 ->
LN -> dense 128 -> LN) and ``ppo`` (the games' files: gymnax-blines' settings, the MinAtar CNN) on
Breakout-MinAtar and Freeway-MinAtar, fresh data (lag 0), 2M steps, 5 seeds, one run per process
(the process engine for both, so that each run's recorded time is its own).

* from runs: ``python -m adaptive_po.analysis.reports.pqn_minatar --runs runs/pqn-minatar --out docs/results/pqn-minatar``
* from the committed table alone: ``python -m adaptive_po.analysis.reports.pqn_minatar --table
  docs/results/pqn-minatar/per_run.csv --out docs/results/pqn-minatar``

The cost is the run's ``wall_time_s`` (``summary.json``: training and its evaluations, one
single-threaded process per run) per million trained steps: core-seconds where the core was not
shared. It writes ``per_run.csv`` (each run's curves and its ``wall_time_s``), ``report.md`` and
``curves.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from adaptive_po.contract import atomic_write_text, parse_curve

from ..run_curves import (
    REPORT_FILE, TRAIN_CURVE, complete_values, difference_ci, difference_verdict, foreign_value, interval_text, label_panel, mean_ci,
    number_text, panels, read_runs_table, report_head, report_main, save_panels, value_at,
)

ENVS = ("Breakout-MinAtar", "Freeway-MinAtar")
ALGOS = ("pqn", "ppo")
#: the steps at which the training return is read
STEPS = (500_000, 1_000_000, 1_500_000, 2_000_000)
#: the per-run columns beyond run_curves.COLUMNS: the recorded wall time
EXTRA = ("wall_time_s",)
FIGURE_FILE = "curves.png"
MADE_BY = (
    "`make pqn-minatar-from-table` (`python -m adaptive_po.analysis.reports.pqn_minatar --table docs/results/pqn-minatar/per_run.csv "
    "--out docs/results/pqn-minatar`)"
)


def read_table(path: str | Path) -> pd.DataFrame:
    """The committed table (:func:`~adaptive_po.analysis.run_curves.read_runs_table`, with ``wall_time_s``);
    a one-line ``ValueError`` naming a game or an arm not of this report."""
    table = read_runs_table(path, EXTRA)
    foreign_value(table, path, {"env": ENVS, "algo": ALGOS})
    return table


def trained_steps(run: pd.Series) -> float:
    """The steps a run trained: its final evaluation's step (whole rollouts past the budget), else its budget."""
    points = parse_curve(run["eval_curve"]) if isinstance(run["eval_curve"], str) and run["eval_curve"] else []
    return float(points[-1][0]) if points else float(run["total_timesteps"])


def reaches(curve: str, step: int) -> bool:
    """Whether a curve runs to ``step`` (a shorter run has no value there)."""
    points = parse_curve(curve) if curve else []
    return bool(points) and points[-1][0] >= step


def seconds_per_million(table: pd.DataFrame) -> pd.Series:
    """Each run's ``wall_time_s`` per million trained steps (NaN where none is recorded)."""
    return table["wall_time_s"].astype(float) / (table.apply(trained_steps, axis=1) / 1e6)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per game and arm, over its complete runs: the final evaluation and training returns (mean,
    95% t-interval), the mean training return at each of :data:`STEPS` (of the runs that reach it),
    and the seconds per million steps (mean, 95% t-interval)."""
    table = table.assign(seconds_per_million=seconds_per_million(table))
    rows = []
    for env in ENVS:
        for algo in ALGOS:
            cell = {"env": env, "algo": algo}
            runs = table[(table["env"] == env) & (table["algo"] == algo) & (table["status"] == "complete")]
            curves = [c if isinstance(c, str) else "" for c in runs[TRAIN_CURVE]]
            reached = {s: [value_at(c, s) for c in curves if reaches(c, s)] for s in STEPS}
            rows.append({
                **cell, "seeds": len(runs), "failed": int(((table["env"] == env) & (table["algo"] == algo) & (table["status"] != "complete")).sum()),
                **dict(zip(("eval", "eval_low", "eval_high"), mean_ci(complete_values(table, "final_eval_return", **cell)))),
                **dict(zip(("train", "train_low", "train_high"), mean_ci(complete_values(table, "final_train_return", **cell)))),
                **{f"train_{s}": float(np.mean(reached[s])) if reached[s] else np.nan for s in STEPS},
                **dict(zip(("cost", "cost_low", "cost_high"), mean_ci(complete_values(table, "seconds_per_million", **cell)))),
            })
    return pd.DataFrame(rows)


def report_markdown(table: pd.DataFrame) -> str:
    arms = summary(table)
    budget = int(table["total_timesteps"].max())
    lines = [
        *report_head("PQN on MinAtar beside `ppo`, and what a million steps of each costs", MADE_BY, "`make bench-pqn-minatar`"),
        "Arms: `pqn` with its MinAtar preset (purejaxql's settings: 128 envs x 32 steps, 32 minibatches x 2 epochs, lr 5e-4 "
        "decayed to 0, epsilon 1 -> 0.05 over the first 10%, gamma 0.99, lambda 0.65, conv 16 3x3 -> LN -> dense 128 -> LN) and "
        "`ppo` with the games' files (gymnax-blines' settings, the MinAtar CNN); fresh data, "
        f"{budget:,} steps per run, seeds {', '.join(str(s) for s in sorted(table['seed'].unique()))}; one run per process. "
        "Final evaluation: the last of the file's evaluations (10 episodes of the greedy, deterministic policy). Training return: "
        "the mean of the last 100 training episodes of the acting policy (PQN's epsilon-greedy, PPO's sampled). Intervals: 95% t "
        "over seeds; the differences', Welch's.",
        "",
        "| game | arm | runs | final evaluation [95% CI] | final training return [95% CI] | "
        + " | ".join(f"training return at {s / 1e6:g}M" for s in STEPS) + " | seconds per million steps [95% CI] |",
        "|:---|:---|---:|:---|:---|" + "---:|" * len(STEPS) + ":---|",
    ]
    for _, r in arms.iterrows():
        runs = f"{r['seeds']}" + (f" (+{r['failed']} failed)" if r["failed"] else "")
        lines.append(
            f"| {r['env']} | `{r['algo']}` | {runs} | {interval_text(r['eval'], r['eval_low'], r['eval_high'])} | "
            f"{interval_text(r['train'], r['train_low'], r['train_high'])} | "
            + " | ".join(number_text(r[f"train_{s}"]) for s in STEPS)
            + f" | {interval_text(r['cost'], r['cost_low'], r['cost_high'], 0)} |"
        )
    lines += [
        "",
        "## `pqn` minus `ppo`",
        "",
        "| game | final evaluation, pqn - ppo [Welch 95% CI] | what it shows | cost, pqn / ppo |",
        "|:---|:---|:---|---:|",
    ]
    for env in ENVS:
        pqn = complete_values(table, "final_eval_return", env=env, algo="pqn")
        ppo = complete_values(table, "final_eval_return", env=env, algo="ppo")
        estimate, low, high = difference_ci(pqn, ppo)
        cost = arms.set_index(["env", "algo"])["cost"]
        ratio = cost[(env, "pqn")] / cost[(env, "ppo")]
        lines.append(f"| {env} | {interval_text(estimate, low, high)} | {difference_verdict(low, high, 'pqn ahead', 'ppo ahead')} | "
                     f"{number_text(ratio, 2)} |")
    lines += [
        "",
        "\"not shown\": the interval spans zero (or an arm has fewer than two complete runs). The cost is each run's recorded wall "
        "time (`wall_time_s` of its `summary.json`: training and its evaluations) over its trained steps; a run is one "
        "single-threaded process, so these are core-seconds where its core was not shared with other jobs, and runs that shared "
        "a busy machine read slower.",
    ]
    return "\n".join(lines) + "\n"


def curves_figure(table: pd.DataFrame, out: Path) -> Path:
    colors = {"pqn": "tab:green", "ppo": "tab:blue"}
    fig, axes = panels(len(ENVS), 5.2, 3.8)
    for ax, env in zip(axes, ENVS):
        for algo in ALGOS:
            runs = table[(table["env"] == env) & (table["algo"] == algo)].sort_values("seed")
            for i, (_, run) in enumerate(runs.iterrows()):
                points = parse_curve(run[TRAIN_CURVE]) if isinstance(run[TRAIN_CURVE], str) and run[TRAIN_CURVE] else []
                if points:
                    ax.plot([s / 1e6 for s, _ in points], [v for _, v in points], lw=0.9, alpha=0.7, color=colors[algo],
                            label=f"`{algo}` ({len(runs)} seeds)" if i == 0 else None)
        label_panel(ax, env, "environment steps (millions)", "training return (last 100 episodes)")
    return save_panels(fig, "PQN and PPO on MinAtar: training return of each seed", out)


def main(argv: Sequence[str] | None = None) -> int:
    def write(table: pd.DataFrame, out: Path) -> None:
        atomic_write_text(out / REPORT_FILE, report_markdown(table))
        curves_figure(table, out / FIGURE_FILE)

    def keep(table: pd.DataFrame) -> pd.DataFrame:
        return table[table["env"].isin(ENVS) & table["algo"].isin(ALGOS)]

    return report_main(argv, "python -m adaptive_po.analysis.reports.pqn_minatar", __doc__.splitlines()[0], "docs/results/pqn-minatar",
                       read_table, write, extra=EXTRA, keep=keep)


if __name__ == "__main__":
    raise SystemExit(main())
