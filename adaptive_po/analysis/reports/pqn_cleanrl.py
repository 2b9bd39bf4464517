"""Our PQN beside CleanRL's documented PQN, with CleanRL's settings (``make pqn-cleanrl-from-table``).

The question: is our PQN the published algorithm? Runs: ``make bench-pqn-cleanrl``, ``pqn`` on
CartPole-v1 and Acrobot-v1 at 500,000 steps with the classic-control preset (CleanRL's
``cleanrl/pqn.py`` defaults: 4 envs x 128 steps, 4 minibatches, 4 epochs, lr 2.5e-4 annealed, epsilon
1 -> 0.05 over the first half, gamma 0.99, lambda 0.65, a 120-84 MLP with LayerNorm), 5 seeds.

* from runs: ``python -m adaptive_po.analysis.reports.pqn_cleanrl --runs runs/pqn-cleanrl --out docs/results/pqn-cleanrl``
* from the committed table alone: ``python -m adaptive_po.analysis.reports.pqn_cleanrl --table
  docs/results/pqn-cleanrl/per_run.csv --out docs/results/pqn-cleanrl``

The measure is CleanRL's: the return of the training episodes (epsilon-greedy, the learner acting)
at the end of training, here the mean of the last 100 finished ones. It writes ``per_run.csv``,
``report.md`` and ``curves.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from adaptive_po.contract import atomic_write_text, parse_curve

from ..output import save_figure
from ..run_curves import REPORT_FILE, TRAIN_CURVE, mean_ci, read_runs_table, report_main

#: CleanRL's documented PQN (vwxyzjn/cleanrl, docs/rl-algorithms/pqn.md, "pqn.py", "Episode Rewards"):
#: mean ± standard deviation over its seeds of the training episodes' return at 500,000 steps
PUBLISHED: dict[str, tuple[float, float]] = {"CartPole-v1": (495.13, 6.89), "Acrobot-v1": (-95.63, 5.73)}
PUBLISHED_SOURCE = "CleanRL's `cleanrl/pqn.py` (docs/rl-algorithms/pqn.md, \"Episode Rewards\", benchmark/pqn.sh at 500,000 steps)"
FIGURE_FILE = "curves.png"
MADE_BY = (
    "`make pqn-cleanrl-from-table` (`python -m adaptive_po.analysis.reports.pqn_cleanrl --table docs/results/pqn-cleanrl/per_run.csv "
    "--out docs/results/pqn-cleanrl`)"
)


def read_table(path: str | Path) -> pd.DataFrame:
    """The committed table; a one-line ``ValueError`` naming a task or an algorithm not of this report."""
    table = read_runs_table(path)
    other = sorted({str(e) for e in table["env"]} - set(PUBLISHED)) + sorted({str(a) for a in table["algo"]} - {"pqn"})
    if other:
        raise ValueError(f"{path}: {other[0]!r} is not of this report ({', '.join(PUBLISHED)}; pqn)")
    return table


def comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Per task: our seeds' final training return, its mean and 95% t-interval, CleanRL's mean ± sd,
    and whether our interval misses CleanRL's mean ± sd entirely (*outside their band*)."""
    rows = []
    for env, (theirs, sd) in PUBLISHED.items():
        runs = table[(table["env"] == env) & (table["status"] == "complete")].sort_values("seed")
        ours = runs["final_train_return"].to_numpy(dtype=float)
        mean, low, high = mean_ci(ours)
        rows.append({"env": env, "seeds": len(ours), "ours": ours, "mean": mean, "low": low, "high": high, "sd": float(np.std(ours, ddof=1)) if len(ours) > 1 else np.nan,
                     "eval": float(runs["final_eval_return"].mean()) if len(runs) else np.nan, "published": theirs, "published_sd": sd,
                     "outside": bool(len(ours) > 1 and (high < theirs - sd or low > theirs + sd))})
    return pd.DataFrame(rows)


def report_markdown(table: pd.DataFrame, cmp: pd.DataFrame) -> str:
    budget = int(table["total_timesteps"].max())
    lines = [
        "# Our PQN beside CleanRL's documented PQN, with CleanRL's settings",
        "",
        f"Made by {MADE_BY}; runs by `make bench-pqn-cleanrl`.",
        "",
        f"Ours: `pqn` with the classic-control preset (CleanRL's `cleanrl/pqn.py` defaults), {len(table)} runs of {budget:,} steps, "
        f"seeds {', '.join(str(s) for s in sorted(table['seed'].unique()))}. Published: {PUBLISHED_SOURCE}. The measure on both sides: "
        "the return of the training episodes (epsilon-greedy, epsilon 0.05 by then) at the end; ours is the mean of the last 100 "
        "finished episodes of each run, then the mean over seeds with a 95% t-interval. Beside it, our greedy policy's final "
        "evaluation (10 episodes).",
        "",
        "| task | ours, training episodes [95% CI] | sd over seeds | per seed | ours, greedy evaluation | CleanRL (mean ± sd) | outside their band? |",
        "|:---|:---|---:|:---|---:|:---|:---|",
    ]
    for _, r in cmp.iterrows():
        interval = f"{r['mean']:.1f} [{r['low']:.1f}, {r['high']:.1f}]" if np.isfinite(r["low"]) else f"{r['mean']:.1f} (no interval)"
        lines.append(f"| {r['env']} | {interval} | {r['sd']:.1f} | {', '.join(f'{v:.1f}' for v in r['ours'])} | {r['eval']:.1f} | "
                     f"{r['published']:.2f} ± {r['published_sd']:.2f} | {'yes' if r['outside'] else 'no'} |")
    outside = cmp[cmp["outside"]]
    lines += ["", "## What it says", ""]
    if outside.empty:
        lines.append("On each task our interval meets CleanRL's documented mean ± sd: the difference, if any, is not shown at these "
                     "seeds. Equal is not shown either: CleanRL publishes no interval to test against.")
    else:
        cells = "; ".join(f"{r['env']} ({r['mean']:.1f} against {r['published']:.2f} ± {r['published_sd']:.2f})" for _, r in outside.iterrows())
        lines.append(f"Our PQN is **outside CleanRL's band** on: {cells}. The cause is not measured yet; until it is, this is a "
                     "difference, not an explanation.")
    return "\n".join(lines) + "\n"


def curves_figure(table: pd.DataFrame, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PUBLISHED), figsize=(5.2 * len(PUBLISHED), 3.8))
    for ax, (env, (theirs, sd)) in zip(np.atleast_1d(axes), PUBLISHED.items()):
        for _, run in table[table["env"] == env].sort_values("seed").iterrows():
            text = run[TRAIN_CURVE] if isinstance(run[TRAIN_CURVE], str) else ""
            points = parse_curve(text) if text else []
            if points:
                ax.plot([s / 1e3 for s, _ in points], [v for _, v in points], lw=0.9, alpha=0.8, label=f"ours, seed {run['seed']}")
        end = float(table["total_timesteps"].max()) / 1e3
        ax.errorbar([end], [theirs], yerr=[sd], fmt="k*", ms=11, capsize=3, label="CleanRL PQN (mean ± sd)")
        ax.set_title(env)
        ax.set_xlabel("environment steps (thousands)")
        ax.set_ylabel("training-episode return (epsilon-greedy)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("PQN with CleanRL's settings: ours (each seed) and CleanRL's documented result")
    fig.tight_layout()
    return save_figure(fig, out, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    def write(table: pd.DataFrame, out: Path) -> None:
        atomic_write_text(out / REPORT_FILE, report_markdown(table, comparison(table)))
        curves_figure(table, out / FIGURE_FILE)

    return report_main(argv, "python -m adaptive_po.analysis.reports.pqn_cleanrl", __doc__.splitlines()[0], "docs/results/pqn-cleanrl", read_table, write)


if __name__ == "__main__":
    raise SystemExit(main())
