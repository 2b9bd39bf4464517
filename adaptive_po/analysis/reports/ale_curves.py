"""ALE's first learning curves on CPU: `ppo` and `esspo` on Breakout-v5 at 1M agent steps (``make ale-curves-from-table``).

The question: does an agent here learn on the real ALE at all? Runs: ``make bench-ale-curves``, the
shipped ``Breakout-v5`` file (envpool, the RL Zoo's Atari PPO settings, the Nature CNN), 1,000,000
agent steps (4M frames) per run, one run per process on one core; evaluated on full games by the
file's protocol (10 episodes every 250,000 steps, no episodic life, no reward clipping).

* from runs: ``python -m adaptive_po.analysis.reports.ale_curves --runs runs/ale-curves --out docs/results/ale-curves``
* from the committed table alone: ``python -m adaptive_po.analysis.reports.ale_curves --table
  docs/results/ale-curves/per_run.csv --out docs/results/ale-curves``

It writes ``per_run.csv`` (each run's evaluation curve and its training curve: the mean raw
full-game return of the last 100 training games after each update), ``report.md`` and ``curves.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from adaptive_po.contract import atomic_write_text, parse_curve

from ..output import save_figure
from ..run_curves import REPORT_FILE, TRAIN_CURVE, mean_ci, read_runs_table, report_main, value_at

ENV = "Breakout-v5"
ALGOS = ("ppo", "esspo")
#: the guides: a uniform-random policy and the human score (Mnih et al. 2015), as the shipped file has them
RANDOM, HUMAN = 1.7, 31.8
#: the steps the report reads (the file's evaluation points)
STEPS = (250_000, 500_000, 750_000, 1_000_000)
#: the public reference: CleanRL's documented PPO on Breakout, at its end only (no public number at
#: 4M frames was found in CleanRL's or the RL Zoo's documentation; their curves are images)
REFERENCE = (
    "CleanRL's `ppo_atari.py` (docs/rl-algorithms/ppo.md, \"Experiment results\"): BreakoutNoFrameskip-v4 414.66 ± 28.09, "
    "the average episodic return of 3 seeds at 10M agent steps (40M frames, no sticky actions), ten times this budget; "
    "its learning curves are published as images only, so no number at 4M frames is quoted here"
)
FIGURE_FILE = "curves.png"
MADE_BY = (
    "`make ale-curves-from-table` (`python -m adaptive_po.analysis.reports.ale_curves --table docs/results/ale-curves/per_run.csv "
    "--out docs/results/ale-curves`)"
)


def read_table(path: str | Path) -> pd.DataFrame:
    """The committed table (:func:`~adaptive_po.analysis.run_curves.read_runs_table`); a one-line ``ValueError``
    naming a game or an arm not of this report."""
    table = read_runs_table(path)
    other = sorted({str(e) for e in table["env"]} - {ENV}) + sorted({str(a) for a in table["algo"]} - set(ALGOS))
    if other:
        raise ValueError(f"{path}: {other[0]!r} is not of this report ({ENV}, {', '.join(ALGOS)})")
    return table


def rows(table: pd.DataFrame) -> pd.DataFrame:
    """Per run: its training return at each of :data:`STEPS` and its final full-game evaluation."""
    out = []
    for _, r in table.sort_values(["algo", "seed"]).iterrows():
        train = r[TRAIN_CURVE] if isinstance(r[TRAIN_CURVE], str) else ""
        out.append({"algo": r["algo"], "seed": int(r["seed"]), "status": r["status"], "final_eval": float(r["final_eval_return"]),
                    **{f"train_{s}": value_at(train, s) for s in STEPS},
                    **{f"eval_{s}": value_at(r["eval_curve"] if isinstance(r["eval_curve"], str) else "", s) for s in STEPS}})
    return pd.DataFrame(out)


def report_markdown(table: pd.DataFrame) -> str:
    per_run = rows(table)
    budget = int(table["total_timesteps"].max())
    lines = [
        "# ALE's first learning curves: `ppo` and `esspo` on Breakout-v5, on CPU",
        "",
        f"Made by {MADE_BY}; runs by `make bench-ale-curves`.",
        "",
        f"Setting: the shipped `{ENV}` file (envpool; 84x84 grayscale, frame skip 4, frame stack 4, up to 30 no-op starts, "
        "sticky actions 0.25; episodic life and reward clipping in training only), the RL Zoo's Atari PPO hyper-parameters "
        "(8 envs x 128 steps, 4 epochs of 256-sample minibatches, lr 2.5e-4 and clip 0.1 both annealed linearly, entropy 0.01), "
        f"the Nature CNN; {budget:,} agent steps per run ({4 * budget / 1e6:g}M frames); `esspo` at its defaults on the same file. "
        "Training return: the mean raw full-game return (all lives, unclipped) of the last 100 training games of the sampled "
        "policy. Evaluation: 10 full games of the deterministic policy every 250,000 steps, as the file says.",
        "",
        f"Guides: a uniform-random policy scores {RANDOM:g}, the human score is {HUMAN:g}. Public reference: {REFERENCE}.",
        "",
        "| arm | seed | status | " + " | ".join(f"training return at {s / 1e6:g}M" for s in STEPS) + " | evaluation at " + f"{STEPS[-1] / 1e6:g}M" + " | final evaluation |",
        "|:---|---:|:---|" + "---:|" * len(STEPS) + "---:|---:|",
    ]
    for _, r in per_run.iterrows():
        lines.append(f"| `{r['algo']}` | {r['seed']} | {r['status']} | " + " | ".join(f"{r[f'train_{s}']:.1f}" for s in STEPS)
                     + f" | {r[f'eval_{STEPS[-1]}']:.1f} | {r['final_eval']:.1f} |")
    lines += ["", "## What it says", ""]
    for algo in ALGOS:
        runs = per_run[(per_run["algo"] == algo) & (per_run["status"] == "complete")]
        if runs.empty:
            lines.append(f"- `{algo}`: no complete run yet.")
            continue
        train = runs[f"train_{STEPS[-1]}"].to_numpy(dtype=float)
        mean, low, high = mean_ci(train)
        interval = f" [{low:.1f}, {high:.1f}]" if np.isfinite(low) else " (one seed: no interval)"
        lines.append(
            f"- `{algo}`: training return at {STEPS[-1] / 1e6:g}M steps {mean:.1f}{interval} over {len(runs)} seed(s), "
            f"{mean / RANDOM:.1f} times the random score ({int((train > RANDOM).sum())} of {len(train)} seed(s) above it); final full-game evaluation "
            f"{runs['final_eval'].mean():.1f}."
        )
    lines += ["", "Each arm has at most two seeds here: the curves show whether an agent learns on the ALE on this engine, not "
              "which arm is ahead; no difference between the arms is tested."]
    return "\n".join(lines) + "\n"


def curves_figure(table: pd.DataFrame, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ppo": "tab:blue", "esspo": "tab:red"}
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.8))
    for ax, column, title in zip(axes, (TRAIN_CURVE, "eval_curve"), ("training games (sampled policy)", "evaluation, 10 full games (deterministic)")):
        for _, run in table.sort_values(["algo", "seed"]).iterrows():
            text = run[column] if isinstance(run[column], str) else ""
            points = parse_curve(text) if text else []
            if points:
                ax.plot([s / 1e6 for s, _ in points], [v for _, v in points], "-" if column == TRAIN_CURVE else "o-", lw=1.0, ms=4,
                        color=colors.get(run["algo"], "k"), alpha=0.5 + 0.4 * (int(run["seed"]) == 0), label=f"{run['algo']}, seed {run['seed']}")
        ax.axhline(RANDOM, color="0.5", ls=":", lw=1, label=f"random ({RANDOM:g})")
        ax.axhline(HUMAN, color="0.3", ls="--", lw=1, label=f"human ({HUMAN:g})")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("agent steps (millions; x4 frames)")
        ax.set_ylabel("full-game return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{ENV} on CPU: `ppo` and `esspo` to {int(table['total_timesteps'].max()) / 1e6:g}M agent steps")
    fig.tight_layout()
    return save_figure(fig, out, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    def write(table: pd.DataFrame, out: Path) -> None:
        atomic_write_text(out / REPORT_FILE, report_markdown(table))
        curves_figure(table, out / FIGURE_FILE)

    return report_main(argv, "python -m adaptive_po.analysis.reports.ale_curves", __doc__.splitlines()[0], "docs/results/ale-curves", read_table, write)


if __name__ == "__main__":
    raise SystemExit(main())
