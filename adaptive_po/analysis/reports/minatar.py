"""The MinAtar tier's verdicts and its reference check (``make minatar-report``).

Input: the run folders of ``runs/minatar`` or, without them, the per-run table this module writes
(``docs/results/minatar/per_run.csv``, committed), so the report can be rebuilt from committed data
alone: ``python -m adaptive_po.analysis.reports.minatar --table docs/results/minatar/per_run.csv --out docs/results/minatar``.

What it writes into ``--out``:

* ``per_run.csv``: one row per run of the grid (``runs/minatar``) and of the reference suite
  (``runs/minatar-reference``, PPO at the published step), failed runs included: the suite and the
  configuration keys (budget among them), the final deterministic evaluation return, the last training-episode return (the mean of
  the last 100 episodes of the stochastic policy, what MinAtar and gymnax report), the AUC of the
  evaluation curve and the evaluation curve itself (``steps:return`` pairs).
* ``verdicts.md``: per game and condition, each arm's mean final return with a 95% CI and its
  difference to PPO with a CI; then the aggregate over games two ways (the mean of per-game
  normalized means, which drops nothing, and the IQM of all runs), and a verdict only where both
  agree. The rules (failures scored at the random score, saturation, what a win is) are
  :mod:`adaptive_po.analysis.verdicts`'s.
* ``reference_check.md``: our PPO beside published PPO numbers on the same games.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import pandas as pd

from ...contract import atomic_write_text, report_folder
from ..output import save_csv
from ..stats import bootstrap_ci, normalize_score
from ..verdicts import (
    aggregate_lines, aggregates, ci_text, condition_label, per_run_table, per_task, replace_block, verdicts_markdown, win_tie_loss,
)

BASELINE = "ppo"
#: published PPO returns on MinAtar at the logged step nearest our budget (gymnax-blines stores its
#: PPO learning curves in ``agents/<Game>-MinAtar/ppo.pkl``: keys ``log_steps`` and ``log_return``,
#: the mean return of a sampled policy over 164 episodes, one seed; minimal action set, no sticky
#: actions, 1,000-step episodes, a 2 x 256 MLP; commit 3f029d6b98af), and at 9.92M steps
PUBLISHED_PPO: dict[str, dict[str, float]] = {
    "Asterix-MinAtar": {"steps": 320_000, "return": 1.36, "return_10m": 14.95},
    "Breakout-MinAtar": {"steps": 320_000, "return": 8.37, "return_10m": 22.88},
    "Freeway-MinAtar": {"steps": 320_000, "return": 24.69, "return_10m": 58.80},
    "SpaceInvaders-MinAtar": {"steps": 320_000, "return": 19.40, "return_10m": 131.64},
}
PUBLISHED_SOURCE = (
    "gymnax-blines (RobertTLange/gymnax-blines @ 3f029d6b98af, agents/<Game>-MinAtar/ppo.pkl: logged PPO "
    "evaluation returns of a sampled policy); Seaquest has no published PPO result (gymnax dropped the game); "
    "the MinAtar paper's AC(lambda) curve reads about 1 at 1M frames"
)
#: the suite of the verdicts, and the one of the reference check (our PPO at the published step)
GRID, REFERENCE = "minatar", "minatar-reference"
#: below this fraction of its reference (normalized score) at lag 0, PPO has not yet learned the game
#: at the grid's budget: the game's verdicts are labelled pre-learning
LEARNED = 0.5


def at_early_reference(grid: pd.DataFrame) -> pd.DataFrame:
    """The grid normalized by the other published reference: PPO at the logged step nearest 320k
    (where published; Seaquest keeps its own) instead of PPO at 9.92M."""
    early = grid["env"].map(lambda e: PUBLISHED_PPO.get(e, {}).get("return"))
    return grid.assign(solved_threshold=early.fillna(grid["solved_threshold"]))


def pre_learning(grid: pd.DataFrame) -> pd.DataFrame:
    """Per game: PPO's mean normalized score at lag 0 and whether that is below :data:`LEARNED`."""
    ppo = grid[(grid["algo"] == BASELINE) & (grid["policy_lag"] == 0)]
    rows = []
    for env, runs in ppo.groupby("env"):
        score = normalize_score(runs["final_eval_return"].to_numpy(float), runs["random_score"].iloc[0], runs["solved_threshold"].iloc[0]).mean()
        rows.append({"env": env, "normalized": float(score), "reference": float(runs["solved_threshold"].iloc[0]), "pre_learning": bool(score < LEARNED)})
    return pd.DataFrame(rows)


# -- the suite's report ----------------------------------------------------------------------------
def per_game(grid: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    return per_task(grid, BASELINE, seed)


def game_aggregates(grid: pd.DataFrame, games: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    return aggregates(grid, games, BASELINE, seed)


def verdicts_report(grid: pd.DataFrame, games: pd.DataFrame, agg: pd.DataFrame, seed: int = 0) -> str:
    text = verdicts_markdown(
        grid, games, agg, BASELINE, title="MinAtar: verdicts against tuned PPO",
        made_by="`make minatar-report` (`python -m adaptive_po.analysis.reports.minatar`)", task="game",
    )
    head, rest = text.split("\n## Primary endpoints", 1)
    learning = pre_learning(grid)
    lines = [
        "## References and learning",
        "",
        "The reference of each game (normalized score 1) is published PPO at 9.92M steps (gymnax-blines; Seaquest: its YAML value). "
        f"A game where our PPO at lag 0 scores below {LEARNED} of it at this budget is **pre-learning**: its verdicts say how the "
        "objectives start, not how they learn.",
        "",
        "| game | reference (return) | PPO at lag 0, normalized | pre-learning |",
        "|:---|---:|---:|:---|",
        *[f"| {r['env']} | {r['reference']:.2f} | {r['normalized']:.2f} | {'yes' if r['pre_learning'] else 'no'} |" for _, r in learning.iterrows()],
        "",
        *reference_sensitivity(grid, agg, seed),
        "",
    ]
    return head + "\n".join(lines) + "\n## Primary endpoints" + rest


def reference_sensitivity(grid: pd.DataFrame, agg: pd.DataFrame, seed: int = 0) -> list[str]:
    """The aggregates again under the other published reference (PPO near 320k steps), each row's
    verdict beside today's; the rows where they differ are marked."""
    early = at_early_reference(grid)
    early_agg = aggregates(early, per_task(early, BASELINE, seed), BASELINE, seed).set_index(["condition", "algo"])
    lines = [
        "Under the other published reference (PPO at the logged step nearest 320k; Seaquest unchanged), the aggregates read:",
        "",
        "| condition | algorithm | reference 9.92M: difference [95% CI], verdict | reference 320k: difference [95% CI], verdict | verdicts differ |",
        "|:---|:---|:---|:---|:---|",
    ]
    for _, r in agg.iterrows():
        e = early_agg.loc[(r["condition"], r["algo"])]
        lines.append(
            f"| {condition_label(r['condition'])} | {r['algo']} | {ci_text(r['mean_diff'], r['mean_low'], r['mean_high'], '+.3f')}, {r['verdict']} "
            f"| {ci_text(e['mean_diff'], e['mean_low'], e['mean_high'], '+.3f')}, {e['verdict']} | {'**yes**' if e['verdict'] != r['verdict'] else 'no'} |"
        )
    return lines


def reference_markdown(table: pd.DataFrame, seed: int = 0) -> str:
    """Our PPO on fresh data beside the published one: the reference suite (PPO at the published
    step) where it was run, else the grid's own PPO."""
    reference = table[table["suite"] == REFERENCE]
    ppo = reference if len(reference) else table[(table["suite"] == GRID) & (table["algo"] == BASELINE) & (table["policy_lag"] == 0)]
    lines = [
        "# MinAtar: our PPO beside published PPO",
        "",
        f"Our PPO (suite `{ppo['suite'].iloc[0] if len(ppo) else GRID}`: fresh data, the MinAtar CNN, gymnax-blines' hyper-parameters) at its budget: the mean over seeds of the "
        "last training-episode return (the stochastic policy, mean of its last 100 episodes: what the published curves "
        "measure) and of the final deterministic evaluation, with 95% bootstrap CIs. Published: " + PUBLISHED_SOURCE + ".",
        "",
        "| game | our budget | our PPO, training episodes [95% CI] | our PPO, deterministic evaluation [95% CI] | random | published PPO (steps) | published PPO at 9.92M |",
        "|:---|---:|:---|:---|---:|:---|---:|",
    ]
    for env, runs in ppo.groupby("env"):
        train = bootstrap_ci(runs["final_train_return"].to_numpy(float), seed=seed)
        final = bootstrap_ci(runs["final_eval_return"].to_numpy(float), seed=seed)
        pub = PUBLISHED_PPO.get(env)
        published = f"{pub['return']:.2f} ({pub['steps']:,})" if pub else "none published"
        ten = f"{pub['return_10m']:.2f}" if pub else "-"
        lines.append(
            f"| {env} | {int(runs['total_timesteps'].iloc[0]):,} | {train[0]:.2f} [{train[1]:.2f}, {train[2]:.2f}] | "
            f"{final[0]:.2f} [{final[1]:.2f}, {final[2]:.2f}] | {runs['random_score'].iloc[0]:.2f} | {published} | {ten} |"
        )
    lines += [
        "",
        "Differences in setup that move these numbers: we keep MinAtar's sticky actions (0.1, gymnax has none) and its "
        "unbounded episodes (capped at 10,000 steps; gymnax ends every episode at 1,000), and we train the MinAtar CNN "
        "where gymnax-blines trains a 2 x 256 MLP.",
    ]
    return "\n".join(lines) + "\n"


def readme_block(agg: pd.DataFrame, games: pd.DataFrame, grid: pd.DataFrame | None = None) -> str:
    """The README's MinAtar aggregate: the verdict table only (numbers generated, never typed)."""
    lines = aggregate_lines(agg, BASELINE, task="game", counts=win_tie_loss(games, BASELINE))
    if grid is not None:
        learning = pre_learning(grid)
        names = ", ".join(learning[learning["pre_learning"]]["env"])
        lines += ["", f"Pre-learning at this budget (PPO at lag 0 below {LEARNED} of its reference): {names or 'none'}."]
    return "\n".join(lines)


README_BEGIN = "<!-- results:minatar:begin (generated by `make minatar-report`; do not edit by hand) -->"
README_END = "<!-- results:minatar:end -->"


def write_readme(readme: Path, block: str) -> None:
    atomic_write_text(readme, replace_block(readme.read_text(), README_BEGIN, README_END, block, f"MinAtar results in {readme}"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.reports.minatar", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", help="the suite's run folders (runs/minatar)")
    source.add_argument("--table", help="a per-run table written before (docs/results/minatar/per_run.csv)")
    parser.add_argument("--reference-runs", default=None, help="the reference suite's run folders (runs/minatar-reference), if run")
    parser.add_argument("--out", required=True)
    parser.add_argument("--readme", default=None, help="also refresh this README's MinAtar block")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    args = parser.parse_args(argv)
    if args.table is not None and not Path(args.table).is_file():
        raise SystemExit(f"per-run table {args.table!r} does not exist")
    if args.runs is not None and not Path(args.runs).is_dir():
        raise SystemExit(f"run folder {args.runs!r} does not exist: run `make bench-minatar` first")
    if args.reference_runs is not None and args.table is not None:
        raise SystemExit("--reference-runs goes with --runs (a table holds the reference runs already)")
    roots = [args.runs] + ([args.reference_runs] if args.reference_runs and Path(args.reference_runs).is_dir() else [])
    table = pd.read_csv(args.table) if args.table else per_run_table(*roots)
    grid = table[table["suite"] == GRID]
    if grid.empty:
        raise SystemExit(f"no runs of the {GRID!r} suite found")
    out = Path(args.out)
    report_folder(out)
    games = per_game(grid, args.seed)
    agg = game_aggregates(grid, games, args.seed)
    if args.runs is not None:
        save_csv(table, out / "per_run.csv")
    atomic_write_text(out / "verdicts.md", verdicts_report(grid, games, agg, args.seed))
    atomic_write_text(out / "reference_check.md", reference_markdown(table, args.seed))
    if args.readme:
        write_readme(Path(args.readme), readme_block(agg, games, grid))
    print(f"wrote {out / 'verdicts.md'} and {out / 'reference_check.md'}" + (f"; refreshed {args.readme}" if args.readme else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
