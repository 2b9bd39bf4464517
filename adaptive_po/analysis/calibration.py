"""How often each per-task test declares a difference where there is none, measured on this
project's own runs (A/A simulations), and the exact A/A pair of the published grids.

``python -m adaptive_po.analysis.calibration --out docs/results/calibration.md`` (``make
calibration``) reads the committed per-run tables under ``docs/results/`` and writes the table.

The A/A draws: every cell of a committed table (task, arm, condition, budget, suite) gives its runs'
normalized scores minus the cell's mean, scaled by sqrt(n / (n - 1)) so that their spread is the
cell's sample spread; the residuals of one task in one table form a pool (arms and conditions
mixed, so the pool has the heavy tails, point masses at a ceiling and failed runs that the real
comparisons see). One A/A comparison picks a pool, draws two groups of n runs from it with
replacement (both from one distribution: the null is true) and applies each test at 5%. The
aggregate test draws every task of a table at once and tests the mean over tasks of the
differences. "spread x3" draws the second group from the pool scaled by 3: equal means, unequal
spreads (the null of a difference in means, not of equal distributions).

The exact A/A pair: ``decoupled-ppo`` at lag 0 is PPO (its proximal policy is the behaviour
policy on fresh data), so every verdict of it against PPO at lag 0 must be equivalent or
inconclusive; the table lists them in every published grid that has the pair, under 20 seeds of
the (descriptive) bootstrap.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats as _stats

from .hypothesis import ALPHA, mean_of_differences
from .verdicts import detectable_text
from ..contract import atomic_write_text
from .stats import normalize_score

#: the committed per-run tables the pools come from (``quick`` repeats the tuned suite's default runs)
TABLES = {
    "staleness": "staleness/per_run.csv", "paper": "paper/per_run.csv", "minatar": "minatar/per_run.csv",
    "tuned": "tuned/per_run.csv", "fresh-data": "fresh-data/per_run.csv", "r2vpo": "r2vpo/per_run.csv",
}
CELL = ["suite", "env", "algo", "condition", "total_timesteps"]
SIZES = (5, 10)
REPS = 4000
RESAMPLES = 1000
SEEDS = 20


def load_tables(results: Path) -> dict[str, pd.DataFrame]:
    tables = {}
    for name, rel in TABLES.items():
        path = results / rel
        if not path.is_file():
            raise SystemExit(f"calibration: the committed per-run table {path} is missing")
        table = pd.read_csv(path)
        if name == "r2vpo":  # its PPO rows are the staleness grid's own
            table = table[table["algo"] == "r2vpo"]
        tables[name] = table
    return tables


def residual_pools(tables: dict[str, pd.DataFrame]) -> dict[tuple[str, str], np.ndarray]:
    """(table, task) -> the pooled residuals of its cells' normalized scores (see the module docstring)."""
    pools: dict[tuple[str, str], list[np.ndarray]] = {}
    for name, table in tables.items():
        score = normalize_score(table["final_eval_return"].to_numpy(float), table["random_score"].to_numpy(float), table["solved_threshold"].to_numpy(float))
        for key, cell in table.assign(score=score).groupby(CELL):
            x = cell["score"].to_numpy(float)
            if len(x) >= 2:
                pools.setdefault((name, key[1]), []).append((x - x.mean()) * np.sqrt(len(x) / (len(x) - 1)))
    return {k: np.concatenate(v) for k, v in sorted(pools.items())}


def _welch_reject(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Welch rejections at ALPHA for groups ``a`` [reps, n] and ``b`` [reps, m]."""
    va, vb = a.var(axis=1, ddof=1) / a.shape[1], b.var(axis=1, ddof=1) / b.shape[1]
    diff, se2 = a.mean(axis=1) - b.mean(axis=1), va + vb
    with np.errstate(divide="ignore", invalid="ignore"):
        df = se2 ** 2 / (va ** 2 / (a.shape[1] - 1) + vb ** 2 / (b.shape[1] - 1))
        p = 2 * _stats.t.sf(np.abs(diff) / np.sqrt(se2), df)
    p = np.where(se2 == 0, np.where(diff == 0, 1.0, 0.0), p)
    return p < ALPHA


def _bootstrap_reject(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The rule of before: the 95% percentile-bootstrap CI of mean(a) - mean(b) excludes 0."""
    out = np.empty(len(a), bool)
    for i in range(len(a)):
        da = a[i][rng.integers(0, a.shape[1], (RESAMPLES, a.shape[1]))].mean(axis=1)
        db = b[i][rng.integers(0, b.shape[1], (RESAMPLES, b.shape[1]))].mean(axis=1)
        low, high = np.percentile(da - db, [2.5, 97.5])
        out[i] = low > 0 or high < 0
    return out


def _permutation_reject(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A two-sided permutation test of the difference in means (RESAMPLES random relabellings)."""
    both = np.concatenate([a, b], axis=1)
    n = a.shape[1]
    observed = np.abs(a.mean(axis=1) - b.mean(axis=1))
    out = np.empty(len(a), bool)
    for i in range(len(a)):
        perm = rng.permuted(np.broadcast_to(both[i], (RESAMPLES, both.shape[1])), axis=1)
        stat = np.abs(perm[:, :n].mean(axis=1) - perm[:, n:].mean(axis=1))
        out[i] = (1 + (stat >= observed[i] - 1e-12).sum()) / (RESAMPLES + 1) < ALPHA
    return out


def _wilson(k: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = k / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _draw(pools: list[np.ndarray], n: int, reps: int, rng: np.random.Generator, spread: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    which = rng.integers(0, len(pools), reps)
    a = np.stack([pools[w][rng.integers(0, len(pools[w]), n)] for w in which])
    b = np.stack([pools[w][rng.integers(0, len(pools[w]), n)] for w in which]) * spread
    return a, b


def simulate(pools: dict[tuple[str, str], np.ndarray], seed: int = 0, reps: int = REPS) -> pd.DataFrame:
    """False-positive rates of each test at each n (see the module docstring)."""
    rng = np.random.default_rng(seed)
    values = list(pools.values())
    rows = []
    for n in SIZES:
        a, b = _draw(values, n, reps, rng)
        for method, rejected in (
            ("percentile bootstrap (the rule of before)", _bootstrap_reject(a, b, rng)),
            ("permutation test", _permutation_reject(a, b, rng)),
            ("Welch's t (the rule now)", _welch_reject(a, b)),
        ):
            rows.append(_row(method, "per task", n, rejected))
        a, b = _draw(values, n, reps, rng, spread=3.0)
        rows.append(_row("permutation test", "per task, spread x3", n, _permutation_reject(a, b, rng)))
        rows.append(_row("Welch's t (the rule now)", "per task, spread x3", n, _welch_reject(a, b)))
        rows.append(_row("Welch-Satterthwaite, mean over tasks (the rule now)", "aggregate", n, _aggregate_rejections(pools, n, reps // 2, rng)))
    return pd.DataFrame(rows)


def _aggregate_rejections(pools: dict[tuple[str, str], np.ndarray], n: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """A/A of the aggregate: each rep takes one table's tasks, two groups of n per task."""
    by_table: dict[str, list[np.ndarray]] = {}
    for (name, _), pool in pools.items():
        by_table.setdefault(name, []).append(pool)
    names = sorted(n_ for n_, p in by_table.items() if len(p) >= 2)
    out = np.empty(reps, bool)
    for i in range(reps):
        tasks = by_table[names[rng.integers(0, len(names))]]
        pairs = [(p[rng.integers(0, len(p), n)], p[rng.integers(0, len(p), n)]) for p in tasks]
        out[i] = mean_of_differences(pairs).p_value() < ALPHA
    return out


def _row(method: str, what: str, n: int, rejected: np.ndarray) -> dict:
    k, total = int(rejected.sum()), len(rejected)
    low, high = _wilson(k, total)
    return {"test": method, "comparison": what, "runs per arm": n, "A/A comparisons": total, "declared a difference": k,
            "false-positive rate": k / total, "low": low, "high": high}


def exact_pair(results: Path, seeds: int = SEEDS) -> pd.DataFrame:
    """decoupled-ppo against ppo at lag 0 in every published grid that has both, under ``seeds``
    bootstrap seeds: the distinct verdicts seen, per task and in aggregate."""
    from . import verdicts as v

    rows = []
    for name in ("staleness", "paper", "minatar"):
        table = pd.read_csv(results / TABLES[name])
        fresh = table[(table["condition"] == "lag0_noise0_replay0") & table["algo"].isin(["decoupled-ppo", "ppo"])]
        if fresh["algo"].nunique() < 2:
            continue
        seen: dict[str, set[str]] = {}
        first: dict[str, tuple[float, float, float]] = {}
        for seed in range(seeds):
            tasks = v.per_task(fresh, "ppo", seed)
            agg = v.aggregates(fresh, tasks, "ppo", seed)
            for _, r in tasks[tasks["algo"] == "decoupled-ppo"].iterrows():
                seen.setdefault(r["env"], set()).add(r["verdict"])
                first.setdefault(r["env"], (r["diff"], r["p"], r["detectable"]))
            for _, r in agg.iterrows():
                seen.setdefault("aggregate", set()).add(r["verdict"])
                first.setdefault("aggregate", (r["mean_diff"], r["p"], r["detectable"]))
        for key, words in seen.items():
            d, p, det = first[key]
            rows.append({"grid": name, "task": key, "difference": d, "p": p, "detectable": det, "verdicts under 20 seeds": ", ".join(sorted(words))})
    return pd.DataFrame(rows)


def markdown(rates: pd.DataFrame, pair: pd.DataFrame, pools: dict) -> str:
    counts = pd.Series([k[0] for k in pools]).value_counts().sort_index()
    lines = [
        "# Calibration: the level of the per-task test, measured on this project's runs",
        "",
        "Generated by `make calibration` (`python -m adaptive_po.analysis.calibration`) from the committed per-run tables "
        f"({', '.join(f'`{t}`' for t in TABLES.values())}; `quick/` repeats the tuned suite's default runs and is left out). "
        f"Pools of residuals: {len(pools)} (task, table) pairs ({', '.join(f'{n} {c}' for n, c in counts.items())}), "
        f"{sum(len(p) for p in pools.values())} residuals. Each A/A comparison draws both groups from one pool, so there "
        f"is no difference to find; a test at {ALPHA:g} should declare one in at most {ALPHA:.0%} of them. "
        f"{REPS} A/A comparisons per row ({REPS // 2} for the aggregate); the interval is the Wilson 95% interval of the rate "
        f"(the Monte Carlo error). Bootstrap and permutation tests use {RESAMPLES} resamples each. "
        "Method: `adaptive_po/analysis/calibration.py`'s docstring.",
        "",
        "| test | comparison | runs per arm | A/A comparisons | declared a difference | false-positive rate [95% MC interval] |",
        "|:---|:---|---:|---:|---:|:---|",
    ]
    for _, r in rates.iterrows():
        lines.append(f"| {r['test']} | {r['comparison']} | {r['runs per arm']} | {r['A/A comparisons']} | {r['declared a difference']} | "
                     f"{r['false-positive rate']:.3f} [{r['low']:.3f}, {r['high']:.3f}] |")
    lines += [
        "",
        "The verdicts use Welch's t (per task) and its Welch-Satterthwaite form for the mean over tasks, each then "
        "Holm-adjusted within its report. \"spread x3\" rows: equal means, one group three times as spread: the "
        "permutation test assumes exchangeable groups, Welch does not.",
        "",
        "## The exact A/A pair: `decoupled-ppo` against `ppo` at lag 0",
        "",
        "At lag 0 `decoupled-ppo`'s proximal policy is the behaviour policy, so it is PPO. Its verdicts in every published "
        f"grid that has the pair, under bootstrap seeds 0 to {SEEDS - 1} (the aggregate's difference is in normalized score, "
        "a task's in return; detectable in normalized score):",
        "",
        "| grid | task | difference | p (unadjusted) | detectable (80% power) | verdicts under 20 seeds |",
        "|:---|:---|---:|---:|---:|:---|",
    ]
    for _, r in pair.iterrows():
        lines.append(f"| {r['grid']} | {r['task']} | {r['difference']:+.3f} | {r['p']:.3f} | {detectable_text(r['detectable'])} | {r['verdicts under 20 seeds']} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.calibration", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default="docs/results", help="the folder of the committed per-run tables")
    parser.add_argument("--out", default="docs/results/calibration.md")
    args = parser.parse_args(argv)
    results = Path(args.results)
    pools = residual_pools(load_tables(results))
    text = markdown(simulate(pools), exact_pair(results), pools)
    atomic_write_text(Path(args.out), text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
