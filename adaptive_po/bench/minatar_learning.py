"""MinAtar at learning budgets: the study of ``docs/results/minatar-learning/preregistration.md``.

The published MinAtar grid stops at 200k steps, where nothing has learned yet. This study asks the
staleness question where ``ppo`` learns, at one shared configuration (gymnax-blines' PPO settings,
no per-arm search at this cost):

1. **Pilot** (:func:`pilot_specs`, :func:`pilot_rows`, :func:`select_games`): ``ppo`` alone, lags 0
   and 8, seeds 200-202, on the five games at 2M steps; two budgets are read off these runs (the
   evaluation at step 1,000,000, and the final one). A game is kept at the first budget where
   ``ppo`` learns (at least 0.5 of its reference) and lag 8 measurably hurts it (the frozen study's
   rule, :func:`~adaptive_po.bench.frozen.pilot_criteria`).
2. **Study** (:func:`study_specs`): ``esspo``, ``ppo`` and ``decoupled-ppo`` at lags 0, 2, 8, 16 on
   scoring seeds 0-9, cut to the registered limit in the registered order (:func:`plan_cuts`) by a
   dry run calibrated on the pilot's own run times (:func:`seconds_per_million`).

The table is every study's (:mod:`adaptive_po.bench.study_table`), with each run's learning curve
(the pilot's 1M score is read from it): a run in the table is never run again, and a slice
(``--hours``) stops starting populations when its time is over.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from adaptive_po import contract
from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.frozen import pilot_criteria
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.study_table import (
    SliceOver, TableRunner, add_run_arguments, check_run_arguments, checked_runner, normalized, preflight, read_checked_table, results_lock, spec_key, specs_for, train_with_sweep,
)
from adaptive_po.contract import FROZEN_CURVE_COLUMN as CURVE_COLUMN, FrozenKey as Key, parse_curve

REGISTERED = contract.MINATAR_LEARNING_REGISTERED
GAMES: tuple[str, ...] = REGISTERED["games"]

PILOT_ALGO: str = REGISTERED["pilot_algo"]
PILOT_LAGS: tuple[int, ...] = REGISTERED["pilot_lags"]
PILOT_SEEDS: tuple[int, ...] = REGISTERED["pilot_seeds"]
PILOT_BUDGET: int = REGISTERED["pilot_budget"]
#: the budgets read off the pilot's runs, in the order tried: (budget, the evaluation step that
#: scores it; None: the run's final evaluation)
READ_BUDGETS: tuple[tuple[int, int | None], ...] = REGISTERED["read_budgets"]
#: the pilot's populations: one (game, lag)'s seeds
PILOT_POPULATION = len(PILOT_SEEDS)

ARMS: tuple[str, ...] = REGISTERED["arms"]
LAGS: tuple[int, ...] = REGISTERED["lags"]
#: the lags no cut removes (the primary endpoints' slopes)
KEPT_LAGS: tuple[int, ...] = REGISTERED["kept_lags"]
SCORE_SEEDS: tuple[int, ...] = REGISTERED["score_seeds"]
MIN_SEEDS: int = REGISTERED["min_seeds"]
MIN_GAMES: int = REGISTERED["min_games"]
#: the registered limit: 6 hours of the 2 cores
LIMIT_CORE_HOURS: float = REGISTERED["limit_core_hours"]

#: gymnax-blines' PPO at about 0.96M and 1.92M steps, beside the pilot's 1M and 2M
PUBLISHED: dict[str, tuple[float, ...]] = {game: tuple(r for _, r in points) for game, points in contract.MINATAR_LEARNING_PUBLISHED.items()}

RESULTS = contract.MINATAR_LEARNING_RESULTS
PILOT_FOLDER = contract.MINATAR_LEARNING_PILOT_FOLDER
SCORE_FOLDER = contract.MINATAR_LEARNING_SCORE_FOLDER
TABLE_FILE = contract.FROZEN_TABLE_FILE
SELECTION_FILE = contract.MINATAR_LEARNING_SELECTION_FILE
CUTS_FILE = contract.MINATAR_LEARNING_CUTS_FILE
PILOT_FILE = "pilot.md"


# ----------------------------------------------------------------------------------------------
# the pilot


def pilot_specs(out: str = "runs", envs_dir: str | None = None) -> list[RunSpec]:
    """``ppo`` at the games' settings, lags 0 and 8, seeds 200-202, 2M steps, on every game."""
    return [s for game in GAMES for s in specs_for(game, PILOT_ALGO, [""], PILOT_LAGS, PILOT_SEEDS, PILOT_BUDGET, PILOT_FOLDER, out, envs_dir)]


def read_score(row: Mapping[str, Any], at: int | None) -> tuple[float, float]:
    """(return, normalized score) of a pilot run at the evaluation step ``at`` (None: its final
    evaluation); a failed run scores its game's random score at every step. A complete run
    without an evaluation at ``at`` is an error naming the run (the table is not this study's)."""
    if row["status"] == "failed" or at is None:
        return float(row["final_eval_return"]), float(row["score"])
    points = dict(parse_curve(str(row.get(CURVE_COLUMN, ""))))
    if at not in points:
        raise ValueError(f"{TABLE_FILE}: the run {contract.frozen_row_key(row)} has no evaluation at step {at:,} (its {CURVE_COLUMN!r})")
    value = points[at]
    return value, normalized(value, float(row["random_score"]), float(row["reference"]))


def pilot_rows(table: Mapping[Key, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (game, budget read): the pilot's numbers and the registered criteria (where complete)."""
    out = []
    for game in GAMES:
        runs = {lag: [table.get((PILOT_FOLDER, game, PILOT_ALGO, "", lag, s, PILOT_BUDGET)) for s in PILOT_SEEDS] for lag in PILOT_LAGS}
        complete = all(r is not None for rows in runs.values() for r in rows)
        for budget, at in READ_BUDGETS:
            row: dict[str, Any] = {"env": game, "budget": budget, "runs": sum(r is not None for rows in runs.values() for r in rows),
                                   "complete": complete, "failed": sum(r is not None and r["status"] == "failed" for rows in runs.values() for r in rows)}
            if complete:
                read = {lag: [read_score(r, at) for r in runs[lag]] for lag in PILOT_LAGS}
                scores = {lag: np.array([s for _, s in read[lag]], float) for lag in PILOT_LAGS}
                returns = {lag: np.array([v for v, _ in read[lag]], float) for lag in PILOT_LAGS}
                fresh, stale = PILOT_LAGS
                row.update(pilot_criteria(scores[fresh], scores[stale], returns[fresh], returns[stale]))
                del row["saturated"]  # MinAtar has no maximum return
            out.append(row)
    return out


def select_games(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """Per game the first budget read that qualifies, in the games' order; the others dropped."""
    chosen: dict[str, int] = {}
    for r in rows:
        if r.get("qualifies") and r["env"] not in chosen:
            chosen[r["env"]] = int(r["budget"])
    return [(game, chosen[game]) for game in GAMES if game in chosen]


def pilot_text(rows: Sequence[Mapping[str, Any]], chosen: Sequence[tuple[str, int]], curves: Mapping[str, Mapping[int, float]]) -> str:
    from adaptive_po.analysis.endpoints import format_difference
    from adaptive_po.analysis.hypothesis import Difference

    def f(x: Any, digits: int = 3) -> str:
        return f"{x:.{digits}f}" if isinstance(x, float) and math.isfinite(x) else ""

    def ci(r: Mapping[str, Any]) -> str:
        """lag 0 - lag 8 with its Welch 95% CI (Welch-Satterthwaite degrees of freedom from the two sd's)."""
        n = len(PILOT_SEEDS)
        a, b = r["lag0_sd"] ** 2 / n, r["lag8_sd"] ** 2 / n
        df = (a + b) ** 2 / (a ** 2 / (n - 1) + b ** 2 / (n - 1)) if a + b > 0 else math.nan
        return format_difference(Difference(r["hurt"], r["hurt_se"], df))

    lines = [
        "# The pilot: which MinAtar games the study runs on, and at which budget", "",
        "Made by `python -m adaptive_po.bench.minatar_learning pilot`; rebuilt from `per_run.csv` by "
        "`python -m adaptive_po.bench.minatar_learning select`. The rule is the pre-registered one "
        "([`preregistration.md`](preregistration.md)): `ppo` alone with gymnax-blines' PPO hyper-parameters (its settings for the "
        "learner only: the environment keeps MinAtar's sticky actions, 0.1, and episodes capped at 10,000 steps, and the "
        "network is the MinAtar CNN), lags 0 and 8, seeds "
        f"{', '.join(map(str, PILOT_SEEDS))}, runs of {PILOT_BUDGET:,} steps; 1M is read at the evaluation of step 1,000,000, "
        "2M at the final one. A (game, budget) qualifies when `ppo` at lag 0 reaches a mean normalized score of at least 0.5 "
        "(*learns*) and lag 8 costs it at least 0.05 and at least one Welch standard error (*hurts*). Per game the first "
        "qualifying budget is used.", "",
        "Normalized score: (return - random) / (reference - random), with each game's random score and reference "
        "(`solved_threshold`) from its YAML file.", "",
        "| game | budget | runs (failed) | lag 0 (return) | lag 0 normalized (sd) | lag 8 normalized (sd) | lag 0 - lag 8 (se) | 95% CI of lag 0 - lag 8 (Welch) | learns | hurts | qualifies |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        if not r["complete"]:
            lines.append(f"| {r['env']} | {r['budget']:,} | {r['runs']} ({r['failed']}) | not complete | | | | | | | |")
            continue
        yes = lambda b: "yes" if b else "no"  # noqa: E731
        lines.append(
            f"| {r['env']} | {r['budget']:,} | {r['runs']} ({r['failed']}) | {f(r['lag0_return'], 2)} | {f(r['lag0_mean'])} ({f(r['lag0_sd'])}) | "
            f"{f(r['lag8_mean'])} ({f(r['lag8_sd'])}) | {r['hurt']:+.3f} ({f(r['hurt_se'])}) | {ci(r)} | {yes(r['learns'])} | {yes(r['hurts'])} | "
            f"**{yes(r['qualifies'])}** |"
        )
    lines += ["", "## Our `ppo` beside published PPO", "",
              "Mean lag-0 evaluation return over the pilot's seeds, beside gymnax-blines' PPO (no sticky actions, 1,000-step "
              "episodes, a 2 x 256 MLP: guides, not targets) at about 0.96M and 1.92M steps.", "",
              "| game | ours at 1M | published at 0.96M | ours at 2M | published at 1.92M |", "|---|---:|---:|---:|---:|"]
    for game in GAMES:
        ours, theirs = curves.get(game, {}), PUBLISHED.get(game)
        cell = lambda v: f"{v:.1f}" if v is not None else "not published"  # noqa: E731
        lines.append(f"| {game} | {cell(ours.get(READ_BUDGETS[0][0]))} | {cell(theirs[0] if theirs else None)} | "
                     f"{cell(ours.get(READ_BUDGETS[1][0]))} | {cell(theirs[1] if theirs else None)} |")
    lines += ["", "## Selected", ""]
    lines += [f"- {game} at {budget:,} steps" for game, budget in chosen] or ["- none"]
    dropped = [g for g in GAMES if g not in dict(chosen)]
    if dropped:
        lines += ["", f"Dropped (no budget qualifies): {', '.join(dropped)}."]
    if len(chosen) < MIN_GAMES:
        lines += ["", f"**Fewer than {MIN_GAMES} games qualify: as registered, the study is not run.** The pilot is the result."]
    return "\n".join(lines) + "\n"


def lag0_returns(table: Mapping[Key, Mapping[str, Any]]) -> dict[str, dict[int, float]]:
    """Per game, the pilot's mean lag-0 return at each budget read (complete games only)."""
    out: dict[str, dict[int, float]] = {}
    for r in pilot_rows(table):
        if r["complete"]:
            out.setdefault(r["env"], {})[int(r["budget"])] = float(r["lag0_return"])
    return out


def write_selection(results: Path, envs_dir: str | None = None, log: Callable[[str], None] = print) -> list[tuple[str, int]] | None:
    """pilot.md and selection.json from the table (None, and nothing written, while the pilot is not
    complete); the games ordered from the cheapest (their budget x the pilot's seconds per run)."""
    table = read_checked_table(results / TABLE_FILE, envs_dir)
    rows = pilot_rows(table)
    if not all(r["complete"] for r in rows):
        log(f"the pilot is not complete ({sum(r['runs'] for r in rows) // len(READ_BUDGETS)} of {len(GAMES) * len(PILOT_LAGS) * len(PILOT_SEEDS)} runs): no selection yet")
        return None
    speeds = {game: seconds_per_million(game, table, envs_dir) for game in GAMES}
    chosen = sorted(select_games(rows), key=lambda t: t[1] * speeds[t[0]])
    contract.atomic_write_text(results / PILOT_FILE, pilot_text(rows, chosen, lag0_returns(table)))
    contract.atomic_write_json(results / SELECTION_FILE, {
        "games": [{"env": game, "budget": budget} for game, budget in chosen],
        "order": "from the cheapest (budget x the pilot's measured core-seconds per million steps per run)",
        "seconds_per_million": speeds,
        "pilot": rows,
    })
    log(f"selected: {chosen} -> {results / PILOT_FILE}, {results / SELECTION_FILE}")
    return chosen


def read_selection(results: Path) -> tuple[list[tuple[str, int]], dict[str, float]]:
    """The pilot's selection (games and budgets, in order) and its speeds; a ``ValueError`` naming
    the file where it is missing or malformed."""
    path = results / SELECTION_FILE
    try:
        record = json.loads(contract.read_committed_text(path))
        games = [(str(g["env"]), int(g["budget"])) for g in record["games"]]
        speeds = {str(k): float(v) for k, v in record["seconds_per_million"].items()}
    except FileNotFoundError:
        raise ValueError(f"{path}: no selection yet: run the pilot first (python -m adaptive_po.bench.minatar_learning pilot)") from None
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a selection of this study ({err})") from None
    budgets = dict(READ_BUDGETS)
    for game, budget in games:
        if game not in GAMES or budget not in budgets:
            raise ValueError(f"{path}: ({game!r}, {budget}) is not one of this study's games and budgets")
    return games, speeds


# ----------------------------------------------------------------------------------------------
# the cost model


def seconds_per_million(game: str, table: Mapping[Key, Mapping[str, Any]] | None = None, envs_dir: str | None = None) -> float:
    """Core-seconds per million steps of one run of ``game``: measured on the pilot's finished runs
    where the table has them (each run records its population's wall time, one population per
    core, :data:`PILOT_POPULATION` runs each), else this project's recorded MinAtar speed
    (``measured_speeds.json``, an upper bound measured on a loaded machine)."""
    walls = [float(r["wall_time_s"]) for k, r in (table or {}).items()
             if k[0] == PILOT_FOLDER and k[1] == game and math.isfinite(float(r.get("wall_time_s", math.nan)))]
    if walls:
        steps = get_env_config(game, envs_dir)
        trained = -(-PILOT_BUDGET // (steps.hyperparams.n_envs * steps.hyperparams.n_steps)) * steps.hyperparams.n_envs * steps.hyperparams.n_steps
        return float(np.mean(walls)) / PILOT_POPULATION / (trained / 1e6)
    from adaptive_po.bench.estimate import _seconds_per_million

    return _seconds_per_million("population", game, minatar=True)[0]


def pilot_core_hours(table: Mapping[Key, Mapping[str, Any]] | None = None) -> float:
    """The pilot's core-hours by the model (the runs not in ``table``)."""
    table = table or {}
    left = [s for s in pilot_specs() if spec_key(s) not in table]
    return sum(PILOT_BUDGET / 1e6 * seconds_per_million(s.env) for s in left) / 3600


@dataclass(frozen=True)
class Plan:
    """The study's runs: games with their budgets, lags and scoring seeds (after the cuts)."""

    games: tuple[tuple[str, int], ...]
    lags: tuple[int, ...] = LAGS
    seeds: tuple[int, ...] = SCORE_SEEDS
    arms: tuple[str, ...] = ARMS

    def runs(self) -> int:
        return len(self.games) * len(self.arms) * len(self.lags) * len(self.seeds)

    def core_hours(self, speeds: Mapping[str, float], table: Mapping[Key, Any] | None = None) -> float:
        """Core-hours of the runs not yet in ``table``, at ``speeds`` (seconds per million steps per run)."""
        table = table or {}
        return sum(s.total_timesteps / 1e6 * speeds[s.env] for s in self.specs() if spec_key(s) not in table) / 3600

    def specs(self, out: str = "runs", envs_dir: str | None = None) -> list[RunSpec]:
        return [s for game, budget in self.games for arm in self.arms for s in self.arm_specs(game, budget, arm, out, envs_dir)]

    def arm_specs(self, game: str, budget: int, arm: str, out: str = "runs", envs_dir: str | None = None) -> list[RunSpec]:
        return specs_for(game, arm, [""], self.lags, self.seeds, budget, SCORE_FOLDER, out, envs_dir)


def plan_cuts(games: Sequence[tuple[str, int]], speeds: Mapping[str, float], limit: float = LIMIT_CORE_HOURS) -> tuple[dict[str, list[Any]], list[str]]:
    """The registered cut order, applied while the study exceeds ``limit`` core-hours: lag 16; the
    dearest game while more than :data:`MIN_GAMES` remain; the highest seed while more than
    :data:`MIN_SEEDS` remain. Returns the cuts and the lines that say so (an overrun of the minimum
    design included)."""
    cuts: dict[str, list[Any]] = {"lags": [], "games": [], "seeds": []}

    def plan() -> Plan:
        return apply_cuts(games, cuts)

    lines = [f"The dry run before the study's first run: {len(games)} games, {plan().runs()} runs, "
             f"{plan().core_hours(speeds):.1f} core-hours (limit {limit:g}: about {limit / 2:g} h on 2 cores), "
             "at the pilot's measured seconds per run."]
    for lag in (lag for lag in LAGS if lag not in KEPT_LAGS):
        if plan().core_hours(speeds) > limit:
            cuts["lags"].append(lag)
            lines.append(f"- cut lag {lag}: {plan().core_hours(speeds):.1f} core-hours left")
    while plan().core_hours(speeds) > limit and len(plan().games) > MIN_GAMES:
        dearest = max(plan().games, key=lambda g: g[1] * speeds[g[0]])
        cuts["games"].append(dearest[0])
        lines.append(f"- cut game {dearest[0]} (the dearest): {plan().core_hours(speeds):.1f} core-hours left")
    while plan().core_hours(speeds) > limit and len(plan().seeds) > MIN_SEEDS:
        cuts["seeds"].append(plan().seeds[-1])
        lines.append(f"- cut seed {cuts['seeds'][-1]}: {plan().core_hours(speeds):.1f} core-hours left")
    if plan().core_hours(speeds) > limit:
        lines.append(f"- the minimum design is still {plan().core_hours(speeds):.1f} core-hours: it runs anyway, as registered, "
                     "and the overrun is reported")
    if not any(cuts.values()):
        lines.append("- within the limit: nothing is cut")
    return cuts, lines


def apply_cuts(games: Sequence[tuple[str, int]], cuts: Mapping[str, Sequence[Any]]) -> Plan:
    return Plan(
        games=tuple(g for g in games if g[0] not in cuts.get("games", ())),
        lags=tuple(lag for lag in LAGS if lag not in cuts.get("lags", ())),
        seeds=tuple(s for s in SCORE_SEEDS if s not in cuts.get("seeds", ())),
    )


def read_cuts(path: Path) -> dict[str, list[Any]]:
    """The cuts written before the study's first run; a ``ValueError`` naming the file and the
    value that is not a registered cut."""
    try:
        cuts = json.loads(contract.read_committed_text(path))
    except ValueError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    allowed = {"lags": [lag for lag in LAGS if lag not in KEPT_LAGS], "games": list(GAMES), "seeds": list(SCORE_SEEDS[MIN_SEEDS:])}
    if not isinstance(cuts, dict) or set(cuts) != set(allowed):
        raise ValueError(f"{path}: expected the keys {sorted(allowed)}, got {cuts!r}")
    for kind, values in cuts.items():
        bad = [v for v in values if v not in allowed[kind]] if isinstance(values, list) else [values]
        if bad:
            raise ValueError(f"{path}: {kind} {bad} cannot be cut (allowed: {allowed[kind]})")
    return cuts


# ----------------------------------------------------------------------------------------------
# the command line


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; a bad input is one line on stderr with exit status 2."""
    return contract.one_line_errors("minatar_learning", lambda: _main(argv))


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m adaptive_po.bench.minatar_learning", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("dry-run", "the pilot's and (after it) the study's size and time; runs nothing"),
                       ("pilot", "ppo alone at lags 0 and 8 on the five games; then the selection"),
                       ("select", "the selection (pilot.md, selection.json) from the table alone"),
                       ("study", "the three arms on the selected games, resuming from the table")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--results", default=RESULTS, help="the study's committed folder (per_run.csv, selection.json, ...)")
        p.add_argument("--envs-dir", default=None)
        if name in ("pilot", "study"):
            add_run_arguments(p)
    args = parser.parse_args(argv)
    check_run_arguments(args, max_hours=24)
    preflight()
    # the pilot starts the study and may make its folder; the dry run, the selection and the study read it
    folder = contract.report_folder if args.command == "pilot" else contract.existing_folder
    results = folder(args.results, "the study's results folder")
    table_path = results / TABLE_FILE
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    if args.command == "select":
        write_selection(results, args.envs_dir, log)
        return 0
    if args.command == "dry-run":
        return dry_run(results, args.envs_dir, log)
    deadline = time.monotonic() + args.hours * 3600 if args.hours is not None else None
    train, failed = train_with_sweep(args.workers, not args.no_progress, args.redo_changed, command="minatar-learning", executor=args.executor)
    if args.command == "pilot":
        specs = pilot_specs(args.out, args.envs_dir)
        with results_lock(results):
            runner = checked_runner(table_path, train, args, log, deadline=deadline, curves=True)
            try:
                for game in GAMES:  # one batch per game: two populations of its seeds, one per core
                    runner.run([s for s in specs if s.env == game], max_members=PILOT_POPULATION)
            except SliceOver:
                log("the slice's time is over: the table holds every finished run; rerun to continue")
                return 0
            finally:
                for line in failed:
                    log(f"  failed (scored at the random score): {line}")
            write_selection(results, args.envs_dir, log)
        return 0
    return run_study(args, results, train, failed, deadline, log)


def dry_run(results: Path, envs_dir: str | None, log: Callable[[str], None]) -> int:
    table = read_checked_table(results / TABLE_FILE, envs_dir)
    done = sum(spec_key(s) in table for s in pilot_specs(envs_dir=envs_dir))  # the pilot's runs, not the folder's rows
    log(f"pilot: {len(pilot_specs())} runs of {PILOT_BUDGET:,} steps ({done} in the table), ~{pilot_core_hours(table):.1f} core-hours left "
        "at the recorded MinAtar speeds (an upper bound)")
    if not (results / SELECTION_FILE).exists():
        log("study: planned after the pilot (its size depends on the games it selects)")
        return 0
    games, speeds = read_selection(results)
    cuts, lines = plan_cuts(games, speeds)
    for line in lines:
        log(line)
    plan = apply_cuts(games, read_cuts(results / CUTS_FILE)) if (results / CUTS_FILE).exists() else apply_cuts(games, cuts)
    log(f"study: {plan.runs()} runs, {sum(1 for s in plan.specs() if spec_key(s) in table)} in the table, "
        f"~{plan.core_hours(speeds, table):.1f} core-hours left")
    return 0


def run_study(args: Any, results: Path, train: Callable[..., Any], failed: list[str], deadline: float | None, log: Callable[[str], None]) -> int:
    games, speeds = read_selection(results)
    if len(games) < MIN_GAMES:
        raise ValueError(f"{results / SELECTION_FILE}: {len(games)} games qualify, fewer than {MIN_GAMES}: as registered, the study is not run")
    table_path, cuts_path = results / TABLE_FILE, results / CUTS_FILE
    with results_lock(results):
        if not cuts_path.exists():  # written once, before the study's first run
            cuts, lines = plan_cuts(games, speeds)
            for line in lines:
                log(line)
            contract.atomic_write_json(cuts_path, cuts)
        plan = apply_cuts(games, read_cuts(cuts_path))
        runner: TableRunner = checked_runner(table_path, train, args, log, deadline=deadline, curves=True)
        log(f"study: {plan.runs()} runs on {[g for g, _ in plan.games]}, lags {list(plan.lags)}, seeds {list(plan.seeds)}; "
            f"~{plan.core_hours(speeds, runner.rows):.1f} core-hours left")
        population = math.ceil(len(plan.lags) * len(plan.seeds) / 2)  # one (game, arm) in two halves, one per core
        try:
            for game, budget in plan.games:
                for arm in plan.arms:
                    runner.run(plan.arm_specs(game, budget, arm, args.out, args.envs_dir), max_members=population)
        except SliceOver:
            log("the slice's time is over: the table holds every finished run; rerun to continue")
        finally:
            for line in failed:
                log(f"  failed (scored at the random score): {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
