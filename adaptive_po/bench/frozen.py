"""Tune once, freeze, sweep staleness: the study of ``docs/results/frozen/preregistration.md``.

The paper's claim is robustness to stale data *without retuning*. The study asks it as a user of an
asynchronous system would:

1. **Pilot** (:func:`pilot_specs`, :func:`select_tasks`): PPO alone at its Zoo settings, lags 0 and
   8, selects the tasks where PPO learns, is not saturated and is measurably hurt by staleness.
2. **Search**: one seeded TPE study per (task, arm, tuning lag), 16 trials on 3 search seeds;
   every arm is tuned on fresh data, ``esspo`` and ``ppo`` also at lag 8.
3. **Sweep**: every fresh-tuned configuration, frozen, at lags 0-64 on 10 scoring seeds the search
   never saw. **Tax**: the lag-8-tuned configurations of ``esspo`` and ``ppo`` at lag 8 on the same
   seeds.

**The committed table is the record.** Every finished run is a row of ``per_run.csv`` (folder,
task, arm, configuration, lag, seed, budget, final return); a run in the table is never run again,
and the search is told the table's scores (not the run folders'), so a study continued on a fresh
machine from the committed table alone asks the same trials and trains only what is missing. The
study runs in slices (``hours``): no new batch starts once a slice's time is over, and the table is
written after every batch, atomically. The table, its rows and the runner are every study's
(:mod:`adaptive_po.bench.study_table`); this module holds the pilot with its candidate budgets
(``python -m adaptive_po.bench.frozen pilot``), and the search, sweep, tax and cost model every
searched design reuses (:class:`StudyPlan`, :func:`search_task`, :func:`score_task`,
:func:`estimate_hours`). The study itself is trained from its plan file by the generic runner
(``python -m adaptive_po.bench.study study --results docs/results/frozen``, :mod:`adaptive_po.bench.searched`),
which replays its published searches and selections byte for byte.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from adaptive_po import contract
from adaptive_po.bench.config import check_budget, get_env_config
from adaptive_po.bench.run_folder import RunSpec, schedule_named
from adaptive_po.bench.tuning import ask_new, make_study
from adaptive_po.studies.pilot import criteria
from adaptive_po.studies.plan import Rule

#: the pilot's candidates (task, budgets in the order tried), as pre-registered
CANDIDATES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("CartPole-v1", (50_000, 25_000)),
    ("Acrobot-v1", (100_000, 50_000)),
    ("Pendulum-v1", (100_000,)),
    ("MountainCar-v0", (300_000,)),
    ("LunarLander-v3", (500_000,)),
    ("LunarLanderContinuous-v3", (300_000,)),
)
PILOT_ALGO = "ppo"
PILOT_LAGS: tuple[int, ...] = (0, 8)
PILOT_SEEDS: tuple[int, ...] = (200, 201, 202, 203, 204)
#: a (task, budget) qualifies when PPO at lag 0 reaches this mean normalized score ...
LEARNS_AT_LEAST = 0.5
#: ... lag 8 costs it at least this much (and at least one standard error of the difference) ...
HURT_AT_LEAST = 0.05
#: ... and not every lag-0 seed is within this fraction of the task's maximum return
SATURATION_FRACTION = 0.01
MAX_RETURN: dict[str, float] = {"CartPole-v1": 500.0}

#: the registered plan (in the contract: the report checks the recorded plan against it)
ARMS: tuple[str, ...] = contract.FROZEN_REGISTERED["arms"]
TAX_ARMS: tuple[str, ...] = contract.FROZEN_REGISTERED["tax_arms"]
LAGS: tuple[int, ...] = contract.FROZEN_REGISTERED["lags"]
#: the primary endpoint's lags (the realistic range and fresh data)
SLOPE_LAGS: tuple[int, ...] = (0, 1, 2, 4, 8)
TAX_LAG: int = contract.FROZEN_REGISTERED["tax_lag"]
SEARCH_SEEDS: tuple[int, ...] = contract.FROZEN_REGISTERED["search_seeds"]
SCORE_SEEDS: tuple[int, ...] = contract.FROZEN_REGISTERED["score_seeds"]
#: the sweep's population size: one arm's lags and scoring seeds, in two halves (two workers)
SCORE_POPULATION: int = math.ceil(len(LAGS) * len(SCORE_SEEDS) / 2)
TRIALS: int = contract.FROZEN_REGISTERED["trials"]
ROUND_SIZE: int = contract.FROZEN_REGISTERED["round_size"]
SAMPLER_SEED: int = contract.FROZEN_REGISTERED["sampler_seed"]
#: each arm's own knobs searched: ``name: (low, high, default)``, uniform
OWN_SPACE: dict[str, dict[str, tuple[float, float, float]]] = {
    "ppo": {"clip_range": (0.1, 0.5, 0.2)},
    "decoupled-ppo": {"clip_range": (0.1, 0.5, 0.2), "is_truncation": (0.5, 2.0, 1.0)},
}

#: run folders under ``--out``
PILOT_FOLDERS: tuple[str, ...] = ("frozen-pilot", "frozen-pilot-2")
#: the study's files and the per-run table's format live in the contract (the report reads them too)
from adaptive_po.contract import (  # noqa: E402
    FROZEN_PILOT_SELECTION_FILE as PILOT_SELECTION_FILE, FROZEN_SCORE_FOLDER as SCORE_FOLDER,
    FROZEN_CONFIG_COLUMN as CONFIG_COLUMN, FROZEN_SEARCH_FOLDER as SEARCH_FOLDER, FROZEN_SELECTION_FILE as SELECTION_FILE, FROZEN_TABLE_COLUMNS as TABLE_COLUMNS,
    FROZEN_TABLE_FILE as TABLE_FILE, FROZEN_TRIALS_FILE as TRIALS_FILE, FrozenKey as Key, read_frozen_table as read_table,
)

from adaptive_po.bench.study_table import (  # noqa: F401 - the study's table and runner, re-exported for its callers
    DIVERGED_CAUSES, GRID_SUITE, ConfigCheck, SliceOver, TableRunner, add_run_arguments, check_run_arguments, train_with_sweep, apply_config_check, check_configs, checked_runner,
    condition, config_checksum, finished_row, normalized, preflight, read_checked_table, results_lock, row_key, row_spec, scored_failure,
    spec_key, specs_for, write_table,
)
# ----------------------------------------------------------------------------------------------
# the pilot


def pilot_specs(out: str = "runs", envs_dir: str | None = None) -> list[RunSpec]:
    """PPO at its Zoo settings, lags 0 and 8, seeds 200-204, at every candidate budget."""
    specs: list[RunSpec] = []
    for env, budgets in CANDIDATES:
        for index, budget in enumerate(budgets):
            specs += specs_for(env, PILOT_ALGO, [""], PILOT_LAGS, PILOT_SEEDS, budget, PILOT_FOLDERS[index], out, envs_dir)
    return specs


def pilot_rows(table: Mapping[Key, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per candidate (task, budget): the pilot's numbers and the three criteria."""
    out = []
    for env, budgets in CANDIDATES:
        for index, budget in enumerate(budgets):
            scores = {}
            returns = {}
            for lag in PILOT_LAGS:
                rows = [table.get((PILOT_FOLDERS[index], env, PILOT_ALGO, "", lag, s, budget, "")) for s in PILOT_SEEDS]
                got = [r for r in rows if r is not None]
                scores[lag] = np.array([r["score"] for r in got], float)
                returns[lag] = np.array([r["final_eval_return"] for r in got], float)
            complete = all(len(scores[lag]) == len(PILOT_SEEDS) for lag in PILOT_LAGS)
            fresh, stale = scores[PILOT_LAGS[0]], scores[PILOT_LAGS[1]]
            row: dict[str, Any] = {"env": env, "budget": budget, "runs": sum(len(v) for v in scores.values()), "complete": complete}
            if complete:
                ceiling = MAX_RETURN.get(env)
                saturated = ceiling is not None and bool(np.all(returns[PILOT_LAGS[0]] >= ceiling * (1 - SATURATION_FRACTION)))
                row.update(pilot_criteria(fresh, stale, returns[PILOT_LAGS[0]], returns[PILOT_LAGS[1]], saturated))
            out.append(row)
    return out


#: the registered qualification rule, as a plan file gives it (:mod:`adaptive_po.studies.pilot`)
PILOT_RULE = Rule(learns_at_least=LEARNS_AT_LEAST, hurt_at_least=HURT_AT_LEAST, hurt_at_least_se=1.0, min_tasks=1, not_run="",
                  saturation_fraction=SATURATION_FRACTION, max_return=MAX_RETURN)


def pilot_criteria(fresh: np.ndarray, stale: np.ndarray, fresh_returns: np.ndarray, stale_returns: np.ndarray, saturated: bool = False) -> dict[str, Any]:
    """The registered rule on one candidate's normalized lag-0 (``fresh``) and lag-8 (``stale``)
    scores (:func:`adaptive_po.studies.pilot.criteria` with :data:`PILOT_RULE`): PPO *learns*,
    lag 8 *hurts* it, and it qualifies where both hold and it is not ``saturated``."""
    return criteria(PILOT_RULE, PILOT_LAGS, fresh, stale, fresh_returns, stale_returns, saturated)


def select_tasks(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """Per task, the first budget (in the registered order) that qualifies; tasks with none are
    dropped. ``ValueError`` while a candidate's pilot is incomplete."""
    incomplete = [f"{r['env']} at {r['budget']:,}" for r in rows if not r["complete"]]
    if incomplete:
        raise ValueError(f"the pilot is not complete for {incomplete}; run it first")
    chosen: list[tuple[str, int]] = []
    for env, budgets in CANDIDATES:
        for budget in budgets:
            row = next(r for r in rows if r["env"] == env and r["budget"] == budget)
            if row["qualifies"]:
                chosen.append((env, budget))
                break
    return chosen


# ----------------------------------------------------------------------------------------------
# the command line


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; a bad input is one line on stderr with exit status 2."""
    return contract.one_line_errors("frozen", lambda: _main(argv))


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m adaptive_po.bench.frozen", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("pilot", "PPO alone at lags 0 and 8 on every candidate; then the selection"),
                       ("select", "the selection (pilot.md, selection.json) from the table alone")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--results", default="docs/results/frozen", help="the study's committed folder (per_run.csv, selection.json, ...)")
        if name != "select":
            add_run_arguments(p, hours=False)
            p.add_argument("--dry-run", action="store_true", help="print the plan, its size and its time; run nothing")
            p.add_argument("--envs-dir", default=None)
    args = parser.parse_args(argv)
    check_run_arguments(args)
    preflight()
    if args.command == "pilot" and not args.dry_run:  # the pilot starts a study: it may make its folder
        results = contract.report_folder(args.results, "the study's results folder")
    else:  # a dry run, the selection and the study (after the pilot) read the folder: never made
        results = contract.existing_folder(args.results, "the study's results folder")
    table_path = results / TABLE_FILE
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    if args.command == "select":
        return write_selection(results, log)
    # the pilot; its study (search, sweep, tax on the selected tasks) is the generic runner's:
    # python -m adaptive_po.bench.study study --results docs/results/frozen (make bench-frozen)
    train, failed = train_with_sweep(args.workers, not args.no_progress, args.redo_changed, executor=args.executor)
    specs = pilot_specs(args.out, args.envs_dir)
    runner = checked_runner(table_path, train, args, log, dry=True)
    todo = [s for s in specs if spec_key(s) not in runner.rows]
    log(f"pilot: {len(specs)} runs ({len(specs) - len(todo)} in {table_path}); candidates {[(e, list(b)) for e, b in CANDIDATES]}")
    if args.dry_run:
        return 0
    with results_lock(results):
        runner = checked_runner(table_path, train, args, log)  # read again under the lock
        runner.run(specs)
        for line in failed:
            log(f"  failed (scored at the random score): {line}")
        return write_selection(results, log)


def seconds_per_million(env: str) -> float:
    """The dry run's measured speed of the population engine for ``env`` (one core), at the size of
    the sweep's populations (one arm's lags and seeds in two halves)."""
    from adaptive_po.bench.estimate import _seconds_per_million

    return _seconds_per_million("population", env, members=SCORE_POPULATION)[0]


def _fmt(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, float) and math.isfinite(value) else ("" if value is None else str(value))


def pilot_text(rows: Sequence[Mapping[str, Any]], chosen: Sequence[tuple[str, int]]) -> str:
    yes = lambda flag: "yes" if flag else "no"  # noqa: E731
    lines = [
        "# The pilot: which tasks the frozen-tuning study runs on",
        "",
        "Made by `python -m adaptive_po.bench.frozen pilot` (`make frozen-pilot`); rebuilt from `per_run.csv` by "
        "`python -m adaptive_po.bench.frozen select`. The rule is the pre-registered one ([`preregistration.md`](preregistration.md)): "
        f"`{PILOT_ALGO}` alone at its RL Zoo settings, lags {PILOT_LAGS[0]} and {PILOT_LAGS[1]}, seeds "
        f"{PILOT_SEEDS[0]}-{PILOT_SEEDS[-1]}; a (task, budget) qualifies when PPO at lag 0 reaches a mean normalized score of "
        f"at least {LEARNS_AT_LEAST:g} (*learns*), not every lag-0 seed is within {SATURATION_FRACTION:.0%} of the task's maximum "
        f"return (*not saturated*; only CartPole has one), and lag {PILOT_LAGS[1]} costs it at least {HURT_AT_LEAST:g} and at "
        "least one Welch standard error (*hurts*). Per task the first qualifying budget is used.",
        "",
        "Normalized score: (return - random) / (reference - random), with each task's random score and reference "
        "(`solved_threshold`) from its YAML file.",
        "",
        "| task | budget | lag 0 (return) | lag 0 normalized (sd) | lag 8 normalized (sd) | lag 0 - lag 8 (se) | learns | not saturated | hurts | qualifies |",
        "|---|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in rows:
        if not r["complete"]:
            lines.append(f"| {r['env']} | {r['budget']:,} | ({r['runs']} of {2 * len(PILOT_SEEDS)} runs) | | | | | | | |")
            continue
        lines.append(
            f"| {r['env']} | {r['budget']:,} | {r['lag0_return']:.1f} | {r['lag0_mean']:.3f} ({r['lag0_sd']:.3f}) | "
            f"{r['lag8_mean']:.3f} ({r['lag8_sd']:.3f}) | {r['hurt']:+.3f} ({r['hurt_se']:.3f}) | {yes(r['learns'])} | "
            f"{yes(not r['saturated'])} | {yes(r['hurts'])} | **{yes(r['qualifies'])}** |"
        )
    lines += ["", "## Selected", ""]
    if chosen:
        lines += [f"- {env} at {budget:,} steps" for env, budget in chosen]
    else:
        lines.append("- none")
    dropped = [env for env, _ in CANDIDATES if env not in {e for e, _ in chosen}]
    if dropped:
        lines += ["", f"Dropped (no budget qualifies): {', '.join(dropped)}."]
    if len(chosen) < 6:
        lines += ["", f"**{len(chosen)} tasks qualify, fewer than the six the study asked for.** As registered, no substitute is "
                  "added after the pilot; the study runs on these and the report says so."]
    return "\n".join(lines) + "\n"


def write_selection(results: Path, log: Callable[[str], None] = print) -> int:
    """pilot.md and selection.json from the table; the tasks ordered from the cheapest to the dearest."""
    rows = pilot_rows(read_checked_table(results / TABLE_FILE))
    chosen = select_tasks(rows)
    chosen = sorted(chosen, key=lambda t: t[1] * seconds_per_million(t[0]))
    cuts, lines = plan_cuts(chosen)
    contract.atomic_write_text(results / "pilot.md", pilot_text(rows, chosen) + "\n## Size\n\n" + "\n".join(lines) + "\n")
    kept = [t for t in chosen if t[0] not in cuts["tasks"]]
    record = {
        "tasks": [{"env": env, "budget": budget} for env, budget in kept],
        "order": "from the cheapest (budget x the measured seconds per million steps of the population engine)",
        "cuts": cuts,
        "pilot": [{k: v for k, v in r.items()} for r in rows],
    }
    contract.atomic_write_json(results / PILOT_SELECTION_FILE, record)
    log(f"selected: {chosen} -> {results / 'pilot.md'}, {results / PILOT_SELECTION_FILE}")
    return 0


# ----------------------------------------------------------------------------------------------
# the study: search, sweep, tax


@dataclass(frozen=True)
class StudyPlan:
    """What the study runs (the pre-registered values by default; tests shrink them)."""

    tasks: tuple[tuple[str, int], ...]
    arms: tuple[str, ...] = ARMS
    tax_arms: tuple[str, ...] = TAX_ARMS
    lags: tuple[int, ...] = LAGS
    tax_lag: int = TAX_LAG
    search_seeds: tuple[int, ...] = SEARCH_SEEDS
    score_seeds: tuple[int, ...] = SCORE_SEEDS
    trials: int = TRIALS
    round_size: int = ROUND_SIZE
    sampler_seed: int = SAMPLER_SEED
    own_space: Mapping[str, Mapping[str, tuple[float, float, float]]] = field(default_factory=lambda: OWN_SPACE)
    #: the search space (:class:`~adaptive_po.bench.tuning.ZooFactorSpace` of ``own_space`` when None)
    space: Any = None
    #: the run folders of the search and of the sweep and tax (the table's ``folder`` column)
    search_folder: str = SEARCH_FOLDER
    score_folder: str = SCORE_FOLDER
    #: the arms tuned on fresh data and swept over the lags (None: every arm); an arm left out is
    #: only tuned at the tax lag (its fresh configuration is another study's)
    fresh_arms: tuple[str, ...] | None = None
    out: str = "runs"
    envs_dir: str | None = None
    device: str = "cpu"

    def check(self) -> None:
        """Errors naming the bad value, before any compute."""
        from adaptive_po.bench.variants import objective_knobs

        if not self.tasks:
            raise ValueError("no tasks: the pilot selected none (see pilot.md)")
        for env, budget in self.tasks:
            get_env_config(env, self.envs_dir)
            check_budget(budget, f"{env}: budget")
        if self.trials < 1 or self.round_size < 1:
            raise ValueError(f"trials and round size must be >= 1, got {self.trials!r} and {self.round_size!r}")
        overlap = sorted(set(self.search_seeds) & set(self.score_seeds))
        if overlap:
            raise ValueError(f"seeds {overlap} are both search and scoring seeds; selection must be held out")
        if not self.search_seeds or not self.score_seeds:
            raise ValueError("search seeds and scoring seeds must both be given")
        if 0 not in self.lags or (self.tax_arms and self.tax_lag not in self.lags):
            raise ValueError(f"the sweep's lags {list(self.lags)} must hold 0 and the tax lag {self.tax_lag}")
        stray = sorted(set(self.swept_arms) - set(self.arms))
        if stray or not set(self.arms) <= set(self.swept_arms) | set(self.tax_arms):
            raise ValueError(f"fresh arms {list(self.swept_arms)}: every one an arm, every arm fresh or taxed (arms {list(self.arms)})")
        extra = sorted(set(self.tax_arms) - set(self.arms))
        if extra:
            raise ValueError(f"tax arms {extra} are not arms of the study {list(self.arms)}")
        for algo in self.arms:
            unknown = sorted(set(self.own_space.get(algo, {})) - set(objective_knobs(algo)))
            if unknown:
                raise ValueError(f"the search space names knobs {unknown} that {algo} does not have")

    @property
    def search_space(self) -> Any:
        from adaptive_po.bench.tuning import ZooFactorSpace

        return ZooFactorSpace(self.own_space) if self.space is None else self.space

    @property
    def swept_arms(self) -> tuple[str, ...]:
        """The arms tuned on fresh data and swept over the lags."""
        return self.arms if self.fresh_arms is None else self.fresh_arms

    def tuning_lags(self, algo: str) -> tuple[int, ...]:
        fresh = (0,) if algo in self.swept_arms else ()
        return fresh + ((self.tax_lag,) if algo in self.tax_arms else ())

    def specs(self, env: str, algo: str, variants: Sequence[str], lags: Sequence[int], seeds: Sequence[int], budget: int, folder: str) -> list[RunSpec]:
        return specs_for(env, algo, variants, lags, seeds, budget, folder, self.out, self.envs_dir, self.device)

    def search_runs(self) -> int:
        return sum(len(self.tuning_lags(a)) for a in self.arms) * self.trials * len(self.search_seeds)

    def score_runs(self) -> int:
        """The sweep and the tax (at most: a tax run coincides with a sweep run where the lag-8
        selection is the fresh one)."""
        return (len(self.swept_arms) * len(self.lags) + len(self.tax_arms)) * len(self.score_seeds)

    def record(self) -> dict[str, Any]:
        return {
            "tasks": [{"env": e, "budget": b} for e, b in self.tasks], "arms": list(self.arms), "tax_arms": list(self.tax_arms),
            "lags": list(self.lags), "tax_lag": self.tax_lag, "search_seeds": list(self.search_seeds),
            "score_seeds": list(self.score_seeds), "trials": self.trials, "round_size": self.round_size,
            "sampler": "optuna TPESampler(seed from sampler_seed and task/arm, n_startup_trials=round_size, constant_liar=True); trial 0 the Zoo default",
            "sampler_seed": self.sampler_seed,
            "space": self.search_space.record(self.arms),
            **({"fresh_arms": list(self.fresh_arms)} if self.fresh_arms is not None else {}),
        }


def lag_name(lag: int) -> str:
    return "fresh" if lag == 0 else f"lag{lag}"


def search_task(plan: StudyPlan, runner: TableRunner, env: str, budget: int, log: Callable[[str], None] = print) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """One task's searches (every arm on fresh data, the tax arms also at the tax lag), in rounds
    over all its studies at once. Returns (trial rows, selection ``{algo: {"fresh"|"lag8": ...}}``)."""
    keys = [(algo, lag) for algo in plan.arms for lag in plan.tuning_lags(algo)]
    studies = {k: make_study(env, k[0], plan.sampler_seed, plan.round_size, space=plan.search_space) for k in keys}
    seen: dict[tuple[str, int], set[str]] = {k: set() for k in keys}
    rows: list[dict[str, Any]] = []
    told: dict[tuple[str, int], list[dict[str, Any]]] = {k: [] for k in keys}
    done = 0
    while done < plan.trials:
        size = min(plan.round_size, plan.trials - done)
        asked = {k: [ask_new(studies[k], k[0], seen[k], space=plan.search_space) for _ in range(size)] for k in keys}
        runs = {(k, variant): plan.specs(env, k[0], [variant], [k[1]], plan.search_seeds, budget, plan.search_folder) for k, got in asked.items() for _, variant in got}
        specs = [s for trial_specs in runs.values() for s in trial_specs]
        todo = sum(spec_key(s) not in runner.rows for s in specs)
        log(f"{env}: search round {done // plan.round_size + 1} (trials {done}-{done + size - 1} of {plan.trials} in each of {len(keys)} studies): {len(specs)} runs, {todo} to train")
        runner.run(specs)
        for (algo, lag), got in asked.items():
            for trial, variant in got:
                results = runner.run(runs[((algo, lag), variant)])  # in the table now: nothing is trained
                value = float(np.mean([r["final_eval_return"] for r in results]))
                studies[(algo, lag)].tell(trial, value)
                rows.append({
                    "env": env, "budget": budget, "algo": algo, "tuned_at": lag_name(lag), "trial": len(told[(algo, lag)]),
                    "variant": variant, "failed_runs": sum(r["status"] == "failed" for r in results),
                    "search_return": value, "search_score": float(np.mean([r["score"] for r in results])),
                })
                told[(algo, lag)].append(rows[-1])
        done += size
    selected: dict[str, dict[str, Any]] = {}
    for algo, lag in keys:
        best = max(told[(algo, lag)], key=lambda r: (r["search_return"], -r["trial"]))
        selected.setdefault(algo, {})[lag_name(lag)] = {
            "variant": best["variant"], "trial": best["trial"], "search_return": best["search_return"], "search_score": best["search_score"],
        }
    return rows, selected


def score_task(plan: StudyPlan, runner: TableRunner, env: str, budget: int, selected: Mapping[str, Mapping[str, Any]], log: Callable[[str], None] = print) -> None:
    """The sweep (fresh-tuned configurations at every lag, two arms per batch so that two workers
    train populations of equal size) and the tax (lag-tuned configurations at the tax lag)."""
    per_arm = len(plan.lags) * len(plan.score_seeds)
    for i in range(0, len(plan.swept_arms), 2):
        pair = plan.swept_arms[i : i + 2]
        specs = [s for algo in pair for s in plan.specs(env, algo, [selected[algo]["fresh"]["variant"]], plan.lags, plan.score_seeds, budget, plan.score_folder)]
        log(f"{env}: sweep of {', '.join(pair)} ({len(specs)} runs, {sum(spec_key(s) not in runner.rows for s in specs)} to train)")
        runner.run(specs, max_members=math.ceil(per_arm / 2))
    tax = [s for algo in plan.tax_arms for s in plan.specs(env, algo, [selected[algo][lag_name(plan.tax_lag)]["variant"]], [plan.tax_lag], plan.score_seeds, budget, plan.score_folder)]
    log(f"{env}: tax runs ({len(tax)} runs, {sum(spec_key(s) not in runner.rows for s in tax)} to train)")
    runner.run(tax)


def optimizer_steps_per_update(env: str, algo: str, variant: str, envs_dir: str | None = None) -> int:
    """Optimizer steps of one update of this configuration: epochs x minibatches per rollout."""
    from adaptive_po.bench.variants import apply_variant

    hp, _ = apply_variant(algo, variant, get_env_config(env, envs_dir).hyperparams, {})
    return int(hp.n_epochs * math.ceil(hp.n_envs * hp.n_steps / hp.batch_size))


def updates_per_run(env: str, budget: int, envs_dir: str | None = None, algo: str = "", variant: str = "") -> int:
    """Updates of one run: the budget in rollouts (of the variant's length where it names ``n_steps``)."""
    from adaptive_po.bench.variants import apply_variant

    hp = get_env_config(env, envs_dir).hyperparams
    if variant:
        hp, _ = apply_variant(algo, variant, hp, {})
    return math.ceil(budget / (hp.n_envs * hp.n_steps))


def check_grids(plan: StudyPlan) -> None:
    """The plan's checks, then every task's and arm's grid (trial 0's variant too), before any compute."""
    plan.check()
    for env, budget in plan.tasks:
        for algo in plan.arms:
            default = plan.search_space.variant(algo, plan.search_space.default(algo))
            plan.specs(env, algo, ["", default], plan.lags, plan.score_seeds[:1], budget, plan.score_folder)


def describe_picks(plan: StudyPlan, env: str, budget: int, selected: Mapping[str, Mapping[str, dict[str, Any]]], every: bool = False) -> None:
    """Each selection's optimizer steps per update, and its updates per run where its variant names
    the rollout's length (``every``: for every selection)."""
    for algo, picks in selected.items():
        for pick in picks.values():
            pick["optimizer_steps_per_update"] = optimizer_steps_per_update(env, algo, pick["variant"], plan.envs_dir)
            if every or schedule_named(algo, pick["variant"]):
                pick["updates_per_run"] = updates_per_run(env, budget, plan.envs_dir, algo, pick["variant"])


def read_selection(path: Path) -> tuple[dict[str, Any], tuple[tuple[str, int], ...]]:
    """The pilot's selection (``selection.json``) and its tasks, checked before any compute: a JSON
    object (:func:`~adaptive_po.contract.read_committed_json`) whose ``tasks`` is a list of
    ``{"env": <name>, "budget": <steps>}``, each name one folder of a run's path
    (:func:`~adaptive_po.contract.check_name`) and each budget a whole number of steps within the
    run limit (:func:`~adaptive_po.bench.config.check_budget`); a ``ValueError`` naming the file,
    the task and the value otherwise."""
    record = contract.read_committed_json(path)
    tasks = record.get("tasks")
    if not isinstance(tasks, list):
        raise ValueError(f"{path}: 'tasks' must be a list of {{\"env\": <name>, \"budget\": <steps>}}, got {tasks!r:.80}")
    checked = []
    for number, task in enumerate(tasks, start=1):
        where = f"{path}: task {number}"
        if not isinstance(task, dict) or "env" not in task or "budget" not in task:
            raise ValueError(f"{where} must be {{\"env\": <name>, \"budget\": <steps>}}, got {task!r:.80}")
        try:
            env = contract.check_name("environment name", task["env"])
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        checked.append((env, check_budget(task["budget"], f"{where} ({env}): budget")))
    return record, tuple(checked)


def check_cuts(cuts: Any, path: Path, allowed: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    """``cuts`` as read from ``path`` (``{"lags": [64], ...}``) when every key is one of ``allowed``'s
    and lists only its values; a ``ValueError`` naming the file and the entry otherwise."""
    if not isinstance(cuts, dict):
        raise ValueError(f"{path}: the cuts must be a JSON object of lists, got {cuts!r:.80}")
    unknown = sorted(set(cuts) - set(allowed))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown} in the cuts; allowed: {sorted(allowed)}")
    for key, values in cuts.items():
        if not isinstance(values, list):
            raise ValueError(f"{path}: {key!r} must be a list, got {values!r:.80}")
        stray = [v for v in values if isinstance(v, bool) or v not in allowed[key]]
        if stray:
            raise ValueError(f"{path}: {key!r} names {stray[0]!r:.80}, not one of {list(allowed[key])}")
    return cuts


def study_plan(results: Path, out: str = "runs", envs_dir: str | None = None) -> StudyPlan:
    """The plan of the committed selection (``selection.json``: the pilot's tasks and any cuts,
    checked by :func:`read_selection` and :func:`check_cuts`)."""
    path = results / PILOT_SELECTION_FILE
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path} is missing: run the pilot first (make frozen-pilot)")
    record, tasks = read_selection(path)
    cuts = check_cuts(record.get("cuts", {}), path, {"lags": LAGS, "arms": ARMS, "tasks": [env for env, _ in CANDIDATES]})
    return StudyPlan(
        tasks=tasks,
        arms=tuple(a for a in ARMS if a not in cuts.get("arms", [])),
        lags=tuple(lag for lag in LAGS if lag not in cuts.get("lags", [])),
        out=out, envs_dir=envs_dir,
    )


def _modeled_seconds(env: str, budget: int, search_runs: int, score_runs: int) -> tuple[float, float]:
    """(search, scoring) core-seconds of the model: search runs in populations of 3 at the
    measured small-population factor, scoring runs at the population speed."""
    from adaptive_po.bench.estimate import MEASURED_SPEEDS

    factor = float(MEASURED_SPEEDS["small_population_factor"]["factor"])
    per_run = budget / 1e6 * seconds_per_million(env)
    return factor * per_run * search_runs, per_run * score_runs


def measured_seconds(table: Mapping[Key, Mapping[str, Any]], folder: str, env: str, budget: int, search: bool | None = None) -> tuple[float, int]:
    """(core-seconds, runs) the table's finished runs of one task and folder took: every run records
    its population's wall time; a population is the runs of one configuration (a search trial's
    seeds, a sweep arm's lags and seeds in populations of at most 35), so its time is counted once."""
    groups: dict[tuple[str, str], list[float]] = {}
    for key, row in table.items():
        if key[0] == folder and key[1] == env and key[6] == budget and math.isfinite(row.get("wall_time_s", math.nan)):
            groups.setdefault((key[2], key[3]), []).append(float(row["wall_time_s"]))
    search = folder == SEARCH_FOLDER if search is None else search
    size = len(SEARCH_SEEDS) * 2 if search else SCORE_POPULATION
    seconds = sum(max(walls) * math.ceil(len(walls) / size) for walls in groups.values())
    return seconds, sum(len(w) for w in groups.values())


def planned_done(plan: StudyPlan, table: Mapping[Key, Any], env: str, budget: int,
                 picks: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None) -> tuple[int, int]:
    """(search, scoring) runs of the plan for one task that the table holds: a row counts only as
    one of the plan's runs, never as a row of the folder. Search: per arm and tuning lag, the rows on
    the search seeds of at most ``trials`` configurations. Scoring: with the task's ``picks``
    (``{arm: {"fresh"|"lag<tax lag>": {"variant": ...}}}``, selected.json's) exactly the planned
    runs (each swept arm's fresh choice at every lag, each tax arm's lag choice at the tax lag, on
    the scoring seeds); before the picks, per arm, lag and scoring seed at most the runs planned
    there. A row on another seed, lag, arm or configuration is no planned run."""
    search_rows: dict[tuple[str, int], dict[str, int]] = {}
    score_rows: dict[tuple[str, int, int], set[str]] = {}
    search_seeds, score_seeds = set(plan.search_seeds), set(plan.score_seeds)
    for key in table:
        folder, row_env, algo, variant, lag, seed, steps, sampler = key
        if row_env != env or steps != budget or sampler:
            continue
        if folder == plan.search_folder and seed in search_seeds:
            by_variant = search_rows.setdefault((algo, lag), {})
            by_variant[variant] = by_variant.get(variant, 0) + 1
        elif folder == plan.score_folder and seed in score_seeds:
            score_rows.setdefault((algo, lag, seed), set()).add(variant)
    search = sum(sum(sorted(search_rows.get((algo, lag), {}).values(), reverse=True)[: plan.trials])
                 for algo in plan.arms for lag in plan.tuning_lags(algo))
    tax = lag_name(plan.tax_lag)
    wanted = [(algo, "fresh", lag) for algo in plan.swept_arms for lag in plan.lags] + [(algo, tax, plan.tax_lag) for algo in plan.tax_arms]
    if picks and all(isinstance(picks.get(algo), Mapping) and isinstance(picks[algo].get(tuned), Mapping) for algo, tuned, _ in wanted):
        planned = {(algo, str(picks[algo][tuned].get("variant", "")), lag, seed) for algo, tuned, lag in wanted for seed in plan.score_seeds}
        score = sum(variant in score_rows.get((algo, lag, seed), ()) for algo, variant, lag, seed in planned)
    else:
        slots: dict[tuple[str, int], int] = {}
        for algo, _, lag in wanted:
            slots[(algo, lag)] = slots.get((algo, lag), 0) + 1
        score = sum(min(n, len(score_rows.get((algo, lag, seed), ()))) for (algo, lag), n in slots.items() for seed in plan.score_seeds)
    return search, score


def estimate_hours(plan: StudyPlan, table: Mapping[Key, Any] | None = None, default_ratios: tuple[float, float] = (1.0, 1.0),
                   picks: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per task: runs, the plan's runs the table holds (:func:`planned_done`; ``picks``: the
    selections by task, selected.json's ``selected``), and core-hours left by the model; where the
    table already holds runs of finished tasks, also ``calibrated_core_hours``: the model scaled by
    the ratio of the core-time those runs took to what the model gave them (search and scoring
    apart)."""
    table = table or {}
    ratios = []
    for folder, index in ((plan.search_folder, 0), (plan.score_folder, 1)):
        took = modeled = 0.0
        for env, budget in plan.tasks:
            seconds, runs = measured_seconds(table, folder, env, budget, search=index == 0)
            took += seconds
            modeled += _modeled_seconds(env, budget, runs, runs)[index]
        ratios.append(took / modeled if modeled > 0 and took > 0 else math.nan)
    out = []
    for env, budget in plan.tasks:
        done_search, done_score = planned_done(plan, table, env, budget, (picks or {}).get(env))
        search, score = plan.search_runs(), plan.score_runs()
        left = _modeled_seconds(env, budget, max(0, search - done_search), max(0, score - done_score))
        calibrated = sum(part * (ratio if math.isfinite(ratio) else default) for part, ratio, default in zip(left, ratios, default_ratios))
        out.append({
            "env": env, "budget": budget, "runs": search + score, "done": done_search + done_score,
            "core_hours": sum(left) / 3600, "calibrated_core_hours": calibrated / 3600,
            "search_ratio": ratios[0], "score_ratio": ratios[1],
        })
    return out


#: the plan's limit: about 8 hours of the 2 cores
LIMIT_CORE_HOURS = 16.0


def plan_cuts(tasks: Sequence[tuple[str, int]], limit: float = LIMIT_CORE_HOURS) -> tuple[dict[str, list[Any]], list[str]]:
    """The pre-registered cut order, applied while the dry run exceeds ``limit`` core-hours: lag 64,
    then the ``vtrace`` arm, then the dearest remaining task, again and again (never the last one).
    Returns the cuts and the lines that say so."""
    cuts: dict[str, list[Any]] = {"lags": [], "arms": [], "tasks": []}

    def hours() -> float:
        kept = tuple(t for t in tasks if t[0] not in cuts["tasks"])
        if not kept:
            return 0.0
        plan = StudyPlan(
            tasks=kept, arms=tuple(a for a in ARMS if a not in cuts["arms"]), lags=tuple(lag for lag in LAGS if lag not in cuts["lags"]),
        )
        return sum(r["core_hours"] for r in estimate_hours(plan))

    lines = [f"The dry run before any study run: {len(tasks)} tasks, {hours():.1f} core-hours (limit {limit:g}: about {limit / 2:g} h on 2 cores)."]
    steps: list[tuple[str, Any]] = [(kind, what) for kind, order in contract.FROZEN_CUT_ORDER.items() for what in order]
    while hours() > limit:
        if steps:
            kind, what = steps.pop(0)
            cuts[kind].append(what)
            lines.append(f"- cut {'lag' if kind == 'lags' else 'arm'} {what}: {hours():.1f} core-hours left")
            continue
        remaining = [t for t in tasks if t[0] not in cuts["tasks"]]
        if len(remaining) <= 1:
            break
        dearest = max(remaining, key=lambda t: t[1] * seconds_per_million(t[0]))
        cuts["tasks"].append(dearest[0])
        lines.append(f"- cut task {dearest[0]} (the dearest): {hours():.1f} core-hours left")
    if not any(cuts.values()):
        lines.append("")
        lines.append("Within the limit: nothing is cut.")
    return cuts, lines


if __name__ == "__main__":
    import sys

    sys.exit(main())
