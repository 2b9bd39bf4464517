"""PQN under staleness: its final return at policy lags 0, 4 and 16 on the staleness grid's discrete tasks (``make pqn-staleness-from-table``).

The question: does a Q-learner whose actor is k updates old lose what the policy objectives lose?
Runs: ``make bench-pqn-staleness``, ``pqn`` (the classic-control preset: CleanRL's settings) on
CartPole-v1, Acrobot-v1 and LunarLander-v3 (the staleness grid's discrete tasks, at its budgets:
100,000, 200,000 and 200,000 steps) at lags 0, 4 and 16, 5 seeds. Under lag the actor is the
Q-network of k updates ago; the Q(lambda) targets are the current network's (``adaptive_po.pqn``).

* from runs: ``python -m adaptive_po.analysis.reports.pqn_staleness --runs runs/pqn-staleness --out docs/results/pqn-staleness``
* from the committed table alone: ``python -m adaptive_po.analysis.reports.pqn_staleness --table
  docs/results/pqn-staleness/per_run.csv --out docs/results/pqn-staleness``

Per task: the final evaluation return at each lag (mean, 95% t-interval over seeds), and lag k minus
lag 0 with Welch's 95% interval, "not shown" where it spans zero. It writes ``per_run.csv`` (with each
run's ``policy_lag``), ``report.md`` and ``staleness.png`` (return against lag).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from adaptive_po.contract import atomic_write_text

from ..run_curves import (
    REPORT_FILE, budgets_text, complete_values, difference_ci, difference_verdict, foreign_value, interval_text, label_panel, mean_ci,
    panels, read_runs_table, report_head, report_main, save_panels,
)

ENVS = ("CartPole-v1", "Acrobot-v1", "LunarLander-v3")
ALGO = "pqn"
LAGS = (0, 4, 16)
#: the per-run columns beyond run_curves.COLUMNS: the data condition's lag
EXTRA = ("policy_lag",)
FIGURE_FILE = "staleness.png"
MADE_BY = (
    "`make pqn-staleness-from-table` (`python -m adaptive_po.analysis.reports.pqn_staleness --table docs/results/pqn-staleness/per_run.csv "
    "--out docs/results/pqn-staleness`)"
)


def read_table(path: str | Path) -> pd.DataFrame:
    """The committed table (:func:`~adaptive_po.analysis.run_curves.read_runs_table`, with ``policy_lag``);
    a one-line ``ValueError`` naming a task, an algorithm or a lag not of this report."""
    table = read_runs_table(path, EXTRA)
    foreign_value(table, path, {"env": ENVS, "algo": (ALGO,), "policy_lag": LAGS})
    return table


def by_lag(table: pd.DataFrame) -> pd.DataFrame:
    """Per task and lag: the complete runs' final evaluation return (mean, 95% t-interval) and, past
    lag 0, lag k minus lag 0 with Welch's 95% interval and what it shows."""
    rows = []
    for env in ENVS:
        fresh = complete_values(table, "final_eval_return", env=env, policy_lag=0)
        for lag in LAGS:
            values = complete_values(table, "final_eval_return", env=env, policy_lag=lag)
            mean, low, high = mean_ci(values)
            diff = difference_ci(values, fresh) if lag else (np.nan, np.nan, np.nan)
            rows.append({"env": env, "lag": lag, "seeds": len(values), "mean": mean, "low": low, "high": high,
                         "difference": diff[0], "diff_low": diff[1], "diff_high": diff[2],
                         "shows": difference_verdict(diff[1], diff[2], "above lag 0", "below lag 0") if lag else ""})
    return pd.DataFrame(rows)


def report_markdown(table: pd.DataFrame) -> str:
    lags = by_lag(table)
    lines = [
        *report_head("PQN under staleness: final return at policy lags 0, 4 and 16", MADE_BY, "`make bench-pqn-staleness`"),
        "`pqn` with the classic-control preset (CleanRL's settings: 4 envs x 128 steps, 4 minibatches x 4 epochs, lr 2.5e-4 "
        "decayed, epsilon 1 -> 0.05 over the first half, gamma 0.99, lambda 0.65, a 120-84 MLP with LayerNorm) on the staleness "
        f"grid's discrete tasks at its budgets (steps per run: {budgets_text(table)}). At lag k the actor is the Q-network of k updates ago; "
        "the targets are the current network's. Final return: the last evaluation (the file's episodes, greedy policy). "
        "Intervals: 95% t over seeds; the differences', Welch's.",
        "",
        "| task | lag | runs | final return [95% CI] | lag k - lag 0 [Welch 95% CI] | what it shows |",
        "|:---|---:|---:|:---|:---|:---|",
    ]
    for _, r in lags.iterrows():
        difference = interval_text(r["difference"], r["diff_low"], r["diff_high"]) if r["lag"] else ""
        lines.append(f"| {r['env']} | {r['lag']} | {r['seeds']} | {interval_text(r['mean'], r['low'], r['high'])} | {difference} | {r['shows']} |")
    lines += ["", "\"not shown\": the interval spans zero, or a lag has fewer than two complete runs; no correction for the six "
              "comparisons is made, so read a lone shown difference with that in mind."]
    return "\n".join(lines) + "\n"


def staleness_figure(table: pd.DataFrame, out: Path) -> Path:
    lags = by_lag(table)
    fig, axes = panels(len(ENVS), 4.4, 3.6)
    for ax, env in zip(axes, ENVS):
        cells = lags[lags["env"] == env]
        for lag in LAGS:
            values = complete_values(table, "final_eval_return", env=env, policy_lag=lag)
            ax.plot([lag] * len(values), values, "o", color="0.6", ms=3)
        has = np.isfinite(cells["low"].to_numpy(dtype=float))
        ax.errorbar(cells["lag"][has], cells["mean"][has], yerr=[(cells["mean"] - cells["low"])[has], (cells["high"] - cells["mean"])[has]],
                    fmt="s-", color="tab:green", capsize=3, label="mean, 95% CI")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xticks(LAGS, [str(lag) for lag in LAGS])
        label_panel(ax, env, "policy lag (updates)", "final return")
    return save_panels(fig, "PQN: final return against policy lag (each seed in grey)", out)


def main(argv: Sequence[str] | None = None) -> int:
    def write(table: pd.DataFrame, out: Path) -> None:
        atomic_write_text(out / REPORT_FILE, report_markdown(table))
        staleness_figure(table, out / FIGURE_FILE)

    def keep(table: pd.DataFrame) -> pd.DataFrame:
        return table[table["env"].isin(ENVS) & (table["algo"] == ALGO) & table["policy_lag"].isin(LAGS)]

    return report_main(argv, "python -m adaptive_po.analysis.reports.pqn_staleness", __doc__.splitlines()[0], "docs/results/pqn-staleness",
                       read_table, write, extra=EXTRA, keep=keep)


if __name__ == "__main__":
    raise SystemExit(main())
