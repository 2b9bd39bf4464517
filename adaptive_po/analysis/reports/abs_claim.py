"""The after-ABS dial's own claim: PQN and `ppo` with and without it (``make abs-from-table``).

The question: does the dial (``batch_scaling=abs``, :mod:`adaptive_po.batch_scaling`: each next
rollout's length from how far the last update moved the behaviour) raise the final return, and
more on a larger network, as "Scalable (On-Policy) RL via Adaptive Batch Scaling" says of its own
rule? Runs: ``make bench-abs``, ``pqn`` on Breakout-MinAtar and Freeway-MinAtar (the MinAtar preset,
2M steps, fresh data, 5 seeds) with the dial, and on Breakout-MinAtar alone (3 seeds: a run of it
costs about 7 times a default one's, 1,190 against 170 CPU-seconds per 1M steps measured on
2026-12-07) with a Q-network four times wider (the variant ``width=x4``: conv 64 -> dense 512), with
and without the dial; its arm without either is ``make
bench-pqn-minatar``'s ``pqn`` runs (the same runs, read from ``runs/pqn-minatar``); and ``ppo`` on
CartPole-v1 at the staleness grid's budget with and without the dial (one run per process for both).

* from runs: ``python -m adaptive_po.analysis.reports.abs_claim --runs runs/abs runs/pqn-minatar --out docs/results/abs``
* from the committed table alone: ``python -m adaptive_po.analysis.reports.abs_claim --table
  docs/results/abs/per_run.csv --out docs/results/abs``

Per task and network: the final evaluation return with the dial minus without it, with Welch's 95%
interval, "not shown" where it spans zero; beside it, the rollout length (steps per environment) and
the behavioural divergence the runs logged, each run's mean over its updates (``progress.csv``'s
``rollout_steps`` and ``behaviour_divergence``; the policy objectives log them only with the dial on).
It writes ``per_run.csv`` and ``report.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from adaptive_po.contract import atomic_write_text

from ..run_curves import (
    REPORT_FILE, budgets_text, complete_values, difference_ci, difference_verdict, foreign_value, interval_text, mean_ci, number_text,
    read_runs_table, report_head, report_main,
)

#: the variant that turns the dial on, and the one that widens PQN's network
DIAL, WIDE = "batch_scaling=abs", "width=x4"
#: the per-run columns beyond run_curves.COLUMNS: what the dial logged, as means over each run's updates
EXTRA = ("rollout_steps_mean", "behaviour_divergence_mean")
MADE_BY = "`make abs-from-table` (`python -m adaptive_po.analysis.reports.abs_claim --table docs/results/abs/per_run.csv --out docs/results/abs`)"


@dataclass(frozen=True)
class Pair:
    """One comparison: on ``env``, the arm ``on`` (the dial on) against ``off`` (the same arm without it)."""

    env: str
    network: str
    off: str
    on: str


#: the comparisons, in the report's order: each game at PQN's two widths, then ``ppo`` on one classic task
PAIRS: tuple[Pair, ...] = (
    *(Pair(game, "MinAtar CNN (conv 16 -> dense 128)", "pqn", f"pqn@{DIAL}") for game in ("Breakout-MinAtar", "Freeway-MinAtar")),
    # the wide network on one game: a 2M-step run of it costs about 7 times the default one's
    Pair("Breakout-MinAtar", "4x wider (conv 64 -> dense 512)", f"pqn@{WIDE}", f"pqn@{DIAL},{WIDE}"),
    Pair("CartPole-v1", "the file's MLP policy", "ppo", f"ppo@{DIAL}"),
)
#: the arms each task is run with
ARMS: dict[str, tuple[str, ...]] = {env: tuple(a for p in PAIRS if p.env == env for a in (p.off, p.on)) for env in dict.fromkeys(p.env for p in PAIRS)}


def of_this_report(table: pd.DataFrame) -> pd.Series:
    """Which rows are runs of an arm of this report (on its task)."""
    return pd.Series([algo in ARMS.get(env, ()) for env, algo in zip(table["env"], table["algo"])], index=table.index, dtype=bool)


def read_table(path: str | Path) -> pd.DataFrame:
    """The committed table (:func:`~adaptive_po.analysis.run_curves.read_runs_table`, with the dial's
    columns); a one-line ``ValueError`` naming a task, an arm, or an arm on a task, not of this report."""
    table = read_runs_table(path, EXTRA)
    foreign_value(table, path, {"env": tuple(ARMS), "algo": tuple(dict.fromkeys(a for arms in ARMS.values() for a in arms))})
    stray = table[~of_this_report(table)]
    if len(stray):
        raise ValueError(f"{path}: {stray['algo'].iloc[0]!r} on {stray['env'].iloc[0]} is not of this report")
    return table


def comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Per :data:`PAIRS` entry: both arms' complete runs, their mean final evaluation returns, the
    difference (dial minus none) with Welch's 95% interval and what it shows, and the mean over
    seeds of each arm's mean rollout length and divergence."""
    rows = []
    for pair in PAIRS:
        values = {side: complete_values(table, "final_eval_return", env=pair.env, algo=algo) for side, algo in (("off", pair.off), ("on", pair.on))}
        estimate, low, high = difference_ci(values["on"], values["off"])
        row = {"env": pair.env, "network": pair.network, "off": pair.off, "on": pair.on, "n_off": len(values["off"]), "n_on": len(values["on"]),
               "mean_off": mean_ci(values["off"])[0], "mean_on": mean_ci(values["on"])[0],
               "difference": estimate, "low": low, "high": high, "shows": difference_verdict(low, high, "the dial ahead", "the dial behind")}
        for side, algo in (("off", pair.off), ("on", pair.on)):
            for column in EXTRA:
                logged = complete_values(table, column, env=pair.env, algo=algo)
                logged = logged[np.isfinite(logged)]
                row[f"{column}_{side}"] = float(logged.mean()) if len(logged) else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def report_markdown(table: pd.DataFrame) -> str:
    cmp = comparison(table)
    lines = [
        *report_head("The after-ABS dial's own claim: with and without it, on PQN at two widths and on `ppo`", MADE_BY,
                     "`make bench-abs` (its arm without the dial or the width: `make bench-pqn-minatar`'s `pqn` runs)"),
        "The dial is the after-ABS reconstruction at its declared defaults (`batch_scaling=abs`: the next rollout "
        "`clip(base * round(c / (d * base)), t_min, t_max)` steps per environment from the last update's divergence `d`; "
        "`c` = 0.05 x `n_steps`, `base` = `n_steps` / 4, `t_min` = `base`, `t_max` = 4 x `n_steps`). The divergence: for PQN the "
        "share of the update's fresh states whose greedy action changed, for `ppo` the mean total variation between the "
        f"policies before and after the update. Budgets (steps per run): {budgets_text(table)}; fresh data. Final return: the last "
        "evaluation (the file's episodes, greedy / deterministic policy). Differences: dial minus no dial, Welch 95% interval.",
        "",
        "| task | network | runs (no dial / dial) | final return, no dial | final return, dial | dial - no dial [Welch 95% CI] | what it shows | "
        "mean rollout length, no dial / dial | mean divergence, no dial / dial |",
        "|:---|:---|:---|---:|---:|:---|:---|:---|:---|",
    ]
    for _, r in cmp.iterrows():
        lines.append(
            f"| {r['env']} | {r['network']} | {r['n_off']} / {r['n_on']} | {number_text(r['mean_off'], 1)} | {number_text(r['mean_on'], 1)} | "
            f"{interval_text(r['difference'], r['low'], r['high'])} | {r['shows']} | "
            f"{number_text(r['rollout_steps_mean_off'], 1)} / {number_text(r['rollout_steps_mean_on'], 1)} | "
            f"{number_text(r['behaviour_divergence_mean_off'], 3)} / {number_text(r['behaviour_divergence_mean_on'], 3)} |"
        )
    wide = cmp[cmp["on"].str.contains(WIDE, regex=False)]
    narrow = cmp[cmp["env"].isin(wide["env"]) & ~cmp["on"].str.contains(WIDE, regex=False)]
    lines += ["", "## What it says", ""]
    lines.append(
        "\"not shown\": the interval spans zero, or an arm has fewer than two complete runs. The claim that larger networks "
        "gain most reads as the wider network's difference above the default one's, per game: "
        + "; ".join(f"{w['env']} {number_text(w['difference'], 1)} against {number_text(n['difference'], 1)}"
                    for (_, w), (_, n) in zip(wide.iterrows(), narrow.iterrows()))
        + " (a difference of differences, not tested here: at 3 to 5 seeds per arm its interval is wider than either's)."
    )
    lines.append("")
    lines.append("Rollout lengths are steps per environment (the configured one without the dial); a mean is over each run's "
                 "updates, then over its seeds. `ppo` without the dial logs no divergence (-).")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    def write(table: pd.DataFrame, out: Path) -> None:
        atomic_write_text(out / REPORT_FILE, report_markdown(table))

    def keep(table: pd.DataFrame) -> pd.DataFrame:
        return table[of_this_report(table)]

    return report_main(argv, "python -m adaptive_po.analysis.reports.abs_claim", __doc__.splitlines()[0], "docs/results/abs",
                       read_table, write, extra=EXTRA, keep=keep)


if __name__ == "__main__":
    raise SystemExit(main())
