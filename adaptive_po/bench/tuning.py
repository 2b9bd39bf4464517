"""Equal tuning with held-out selection: every objective gets the same search, scored on fresh seeds.

The protocol (``adaptive-po tune``, ``make bench-tuned``):

1. **Search.** For each environment and objective, one Optuna study (TPE, the RL Zoo's tuner)
   over the knobs that matter: the learning rate, the number of epochs and the minibatch size
   (factors of the environment's RL-Zoo values, the same space for every objective) and the
   objective's own knobs (:data:`OWN_SPACE`; the ESS objective has none). Trial 0 is the default
   configuration; every study gets the same number of trials. Each trial trains on the *search
   seeds* under every condition of the plan (fresh data and one stale condition); its score per
   condition is the mean final evaluation return over those seeds. TPE is told the mean over the
   conditions, so the candidates are the same for both selections.
2. **Selection.** Per condition, the trial with the best score on the search seeds (ties: the
   earlier trial, so the default wins a tie).
3. **Scoring.** The default and the configuration selected on fresh data train again on the
   *scoring seeds*, which the search never saw, under every condition; each other condition's
   own selection under that condition. The analysis (``adaptive_po.analysis.reports.equal_tuning``) compares
   default with default and tuned with tuned, and prices retuning (the configuration selected on
   fresh data, run on stale data, against the one selected on stale data) without selection bias.

A failed run (``FAILED``, or no ``COMPLETE``) scores the environment's random score: a
configuration that diverges is never better for it. Runs are ordinary run folders
(``<out>/<search_suite>``, ``<out>/<score_suite>``): a rerun skips the complete ones, and the seeded
sampler, told the same scores, asks the same trials again, so an interrupted search resumes where
it stopped.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from adaptive_po.dials import DataDials
from adaptive_po import contract
from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.grid import Grid, expand_grid
from adaptive_po.bench.variants import SHARED_KNOBS, make_variant, objective_knobs

#: the shared knobs' search space, as factors of the environment's tuned (RL Zoo) value
LEARNING_RATE_FACTORS: tuple[float, float] = (0.25, 4.0)  # log-uniform
EPOCH_FACTORS: tuple[float, ...] = (0.5, 1.0, 2.0)
BATCH_FACTORS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)

#: each objective's own knobs: ``name: (low, high, default)`` searched uniformly; objectives not
#: listed have no knob of their own searched (the ESS objective has none at all)
OWN_SPACE: dict[str, dict[str, tuple[float, float, float]]] = {
    "ppo": {"clip_range": (0.1, 0.5, 0.2)},
    "decoupled-ppo": {"clip_range": (0.1, 0.5, 0.2)},
    "dapo": {"clip_range": (0.1, 0.5, 0.2)},
    "cispo": {"eps_high": (0.5, 8.0, 2.0)},
    "spo": {"eps": (0.1, 0.5, 0.2)},
    "r2vpo": {"variance_target": (0.005, 0.08, 0.02), "dual_step": (1.0, 100.0, 10.0), "initial_multiplier": (0.1, 10.0, 1.0)},
    "quatro": {"radius": (0.002, 0.05, 0.01)},
}

SEARCH_FILE = "trials.csv"
SELECTION_FILE = "selected.json"


@dataclass(frozen=True)
class TuningPlan:
    """What is searched, how much, and on which seeds."""

    envs: tuple[str, ...]
    algos: tuple[str, ...]
    #: the data conditions (dicts of the collector's dials); the first is the "fresh" one
    conditions: tuple[Mapping[str, Any], ...] = ({}, {"policy_lag": 16})
    trials: int = 6
    #: trials asked at once per study (one round of the sweep); the first round is TPE's random start
    round_size: int = 4
    search_seeds: tuple[int, ...] = (100, 101)
    score_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    sampler_seed: int = 0
    #: the suite whose budgets (``budget.<suite>`` in each environment's YAML file) apply
    suite: str = "tuning"
    search_suite: str = "tuning-search"
    score_suite: str = "tuning-score"
    out: str = "runs"
    envs_dir: str | None = None
    device: str = "cpu"
    #: overrides every environment's budget (tests, smoke runs)
    timesteps: int | None = None

    def check(self) -> None:
        """Errors naming the bad value, before any compute."""
        if self.trials < 1:
            raise ValueError(f"trials must be >= 1, got {self.trials!r}")
        if self.round_size < 1:
            raise ValueError(f"round size must be >= 1, got {self.round_size!r}")
        if not self.conditions:
            raise ValueError("no conditions to tune on")
        overlap = sorted(set(self.search_seeds) & set(self.score_seeds))
        if overlap:
            raise ValueError(f"seeds {overlap} are both search and scoring seeds; selection must be held out")
        if not self.search_seeds or not self.score_seeds:
            raise ValueError("search seeds and scoring seeds must both be given")
        for algo in self.algos:
            unknown = sorted(set(OWN_SPACE.get(algo, {})) - set(objective_knobs(algo)))
            if unknown:
                raise ValueError(f"OWN_SPACE names knobs {unknown} that {algo} does not have")


def condition_name(condition: Mapping[str, Any]) -> str:
    """``fresh`` for the default data, else ``policy_lag=16`` (the dials that differ)."""
    return ",".join(f"{k}={condition[k]}" for k in sorted(condition)) or "fresh"


def _round(value: float, digits: int = 2) -> float:
    return float(f"{value:.{digits}g}")


def params_variant(algo: str, params: Mapping[str, float], own_space: Mapping[str, Mapping[str, tuple[float, float, float]]] = OWN_SPACE) -> str:
    """The canonical variant of one trial's parameters; values equal to the defaults are left out,
    so the default configuration is ``""`` (the folder ``<algo>``). ``own_space``: each
    objective's own knobs, as :data:`OWN_SPACE`."""
    values: dict[str, float | str] = {}
    for name in SHARED_KNOBS:
        factor = _round(float(params.get(name, 1.0)))
        if factor != 1.0:
            values[name] = f"x{factor:g}"
    for name, (_, _, default) in own_space.get(algo, {}).items():
        value = _round(float(params.get(name, default)))
        if value != default:
            values[name] = value
    return make_variant(**values)


def default_params(algo: str, own_space: Mapping[str, Mapping[str, tuple[float, float, float]]] = OWN_SPACE) -> dict[str, float]:
    own = {name: default for name, (_, _, default) in own_space.get(algo, {}).items()}
    return {"learning_rate": 1.0, "n_epochs": 1.0, "batch_size": 1.0, **own}


def suggest(trial: Any, algo: str, own_space: Mapping[str, Mapping[str, tuple[float, float, float]]] = OWN_SPACE) -> dict[str, float]:
    """One trial's parameters from an Optuna trial (the same shared space for every objective)."""
    low, high = LEARNING_RATE_FACTORS
    params = {
        "learning_rate": trial.suggest_float("learning_rate", low, high, log=True),
        "n_epochs": trial.suggest_categorical("n_epochs", list(EPOCH_FACTORS)),
        "batch_size": trial.suggest_categorical("batch_size", list(BATCH_FACTORS)),
    }
    for name, (lo, hi, _) in own_space.get(algo, {}).items():
        params[name] = trial.suggest_float(name, lo, hi)
    return params


@dataclass(frozen=True)
class ZooFactorSpace:
    """The shared space of the tuned and frozen studies: the learning rate, epochs and minibatch
    as factors of the task's RL Zoo values (:data:`LEARNING_RATE_FACTORS`, :data:`EPOCH_FACTORS`,
    :data:`BATCH_FACTORS`), plus each objective's own knobs (``own``, as :data:`OWN_SPACE`)."""

    own: Mapping[str, Mapping[str, tuple[float, float, float]]] = dataclasses.field(default_factory=lambda: OWN_SPACE)

    def default(self, algo: str) -> dict[str, Any]:
        return default_params(algo, self.own)

    def suggest(self, trial: Any, algo: str) -> dict[str, Any]:
        return suggest(trial, algo, self.own)

    def variant(self, algo: str, params: Mapping[str, Any]) -> str:
        return params_variant(algo, params, self.own)

    def record(self, algos: Sequence[str]) -> dict[str, Any]:
        return {
            "learning_rate": f"factor, log-uniform in [{LEARNING_RATE_FACTORS[0]}, {LEARNING_RATE_FACTORS[1]}]",
            "n_epochs": f"factor in {list(EPOCH_FACTORS)}", "batch_size": f"factor in {list(BATCH_FACTORS)}",
            "own": {a: {k: f"uniform in [{lo}, {hi}], default {d}" for k, (lo, hi, d) in self.own.get(a, {}).items()} for a in algos},
        }


#: the update schedules of :class:`ScheduleSpace`: ``k`` optimizer steps per rollout, each on the
#: whole rollout (``batch_size=rollout,n_epochs=k``), or one pass of the task's Zoo minibatches
#: (``n_epochs=1``: each sample used once)
ONE_PASS = "one-pass"


@dataclass(frozen=True)
class ScheduleSpace:
    """The update schedule as the searched dial (the ESS objective's authors take one or a few
    optimizer steps per rollout, each on the whole rollout): the rollout's length as a factor of
    the Zoo's (``n_steps``), the schedule (``steps``: whole-rollout steps per rollout, or
    :data:`ONE_PASS`), the learning rate as a factor over a range wide enough for full-batch
    steps, the KL estimator of the objectives that take one (``kl``: exact or the sampled k3), and
    each objective's own knobs. Every variant names its schedule explicitly."""

    rollout_factors: tuple[float, ...] = (0.0625, 0.125, 0.25, 0.5, 1.0, 2.0)
    steps: tuple[int | str, ...] = (1, 2, 5, ONE_PASS)
    learning_rate: tuple[float, float] = (0.25, 16.0)
    kl: tuple[str, ...] = ("analytic", "sampled")
    own: Mapping[str, Mapping[str, tuple[float, float, float]]] = dataclasses.field(default_factory=lambda: OWN_SPACE)
    #: trial 0: the authors' shipped examples (one whole-rollout step per rollout, the sampled k3
    #: KL) on the shortest rollout (the most optimizer steps a budget buys), the Zoo learning rate
    default_rollout: float = 0.0625
    default_steps: int | str = 1
    default_kl: str = "sampled"

    def _has_kl(self, algo: str) -> bool:
        from adaptive_po.bench.variants import objective_switches

        return "kl" in objective_switches(algo)

    def default(self, algo: str) -> dict[str, Any]:
        params: dict[str, Any] = {"learning_rate": 1.0, "n_steps": self.default_rollout, "steps": self.default_steps}
        if self._has_kl(algo):
            params["kl"] = self.default_kl
        return {**params, **{name: default for name, (_, _, default) in self.own.get(algo, {}).items()}}

    def suggest(self, trial: Any, algo: str) -> dict[str, Any]:
        low, high = self.learning_rate
        params: dict[str, Any] = {
            "learning_rate": trial.suggest_float("learning_rate", low, high, log=True),
            "n_steps": trial.suggest_categorical("n_steps", list(self.rollout_factors)),
            "steps": trial.suggest_categorical("steps", list(self.steps)),
        }
        if self._has_kl(algo):
            params["kl"] = trial.suggest_categorical("kl", list(self.kl))
        for name, (lo, hi, _) in self.own.get(algo, {}).items():
            params[name] = trial.suggest_float(name, lo, hi)
        return params

    def variant(self, algo: str, params: Mapping[str, Any]) -> str:
        values: dict[str, Any] = {}
        lr = _round(float(params["learning_rate"]))
        if lr != 1.0:
            values["learning_rate"] = f"x{lr:g}"
        if float(params["n_steps"]) != 1.0:
            values["n_steps"] = f"x{float(params['n_steps']):g}"
        steps = params["steps"]
        if steps == ONE_PASS:
            values["n_epochs"] = 1
        else:
            values["n_epochs"], values["batch_size"] = int(steps), "rollout"
        if params.get("kl", "analytic") != "analytic":
            values["kl"] = params["kl"]
        for name, (_, _, default) in self.own.get(algo, {}).items():
            value = _round(float(params.get(name, default)))
            if value != default:
                values[name] = value
        return make_variant(**values)

    def record(self, algos: Sequence[str]) -> dict[str, Any]:
        return {
            "learning_rate": f"factor, log-uniform in [{self.learning_rate[0]}, {self.learning_rate[1]}]",
            "n_steps": f"factor in {list(self.rollout_factors)}",
            "steps": f"in {list(self.steps)}: k whole-rollout optimizer steps per rollout (batch_size=rollout,n_epochs=k), "
                     f"or {ONE_PASS!r} (n_epochs=1, the Zoo minibatch)",
            "kl": {a: f"in {list(self.kl)}" for a in algos if self._has_kl(a)},
            "default": {a: self.variant(a, self.default(a)) for a in algos},
            "own": {a: {k: f"uniform in [{lo}, {hi}], default {d}" for k, (lo, hi, d) in self.own.get(a, {}).items()} for a in algos},
        }


def _space(own_space: Mapping[str, Any], space: Any) -> Any:
    return ZooFactorSpace(own_space) if space is None else space


def plan_specs(
    plan: TuningPlan, env: str, algo: str, variants: Sequence[str], seeds: Sequence[int], suite_name: str,
    conditions: Sequence[Mapping[str, Any]] | None = None,
) -> list[RunSpec]:
    """The runs of ``variants`` on ``seeds`` under ``conditions`` (default: all of the plan's)."""
    grid = Grid(
        suite=plan.suite,
        envs=[env],
        algos=[algo],
        seeds=list(seeds),
        conditions=[DataDials.from_condition(c) for c in (plan.conditions if conditions is None else conditions)],
        variants={algo: list(dict.fromkeys(variants))},
        device=plan.device,
        out=plan.out,
        suite_name=suite_name,
        envs_dir=plan.envs_dir,
        tensorboard=False,
        timesteps=plan.timesteps,
    )
    return expand_grid(grid)


def run_score(spec: RunSpec, random_score: float) -> tuple[float, bool]:
    """(final evaluation return, failed?): a run that is not complete or has no finite final
    return scores ``random_score``."""
    run_dir = spec.run_dir
    if contract.is_complete(run_dir):
        try:
            value = float(json.loads(contract.read_regular_text(run_dir / contract.SUMMARY_FILE))["final_eval_return_mean"])
        except (OSError, ValueError, KeyError, TypeError):
            value = math.nan
        if math.isfinite(value):
            return value, False
    return random_score, True


def _study(plan: TuningPlan, env: str, algo: str) -> Any:
    return make_study(env, algo, plan.sampler_seed, plan.round_size)


def make_study(
    env: str, algo: str, sampler_seed: int, round_size: int,
    own_space: Mapping[str, Mapping[str, tuple[float, float, float]]] = OWN_SPACE, space: Any = None,
) -> Any:
    """One seeded TPE study (its seed from ``sampler_seed`` and the (env, algo) pair), the default
    configuration enqueued as trial 0, the first ``round_size`` trials its random start. ``space``:
    a search space (:class:`ZooFactorSpace` of ``own_space`` when None, or :class:`ScheduleSpace`)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seed = (sampler_seed + zlib.crc32(f"{env}/{algo}".encode())) % 2**31
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=round_size, constant_liar=True)
    study = optuna.create_study(direction="maximize", sampler=sampler, study_name=f"{env}/{algo}")
    study.enqueue_trial(_space(own_space, space).default(algo))
    return study


#: how many times a study is asked again for a trial whose configuration it has already tried
#: (TPE can propose the default again, e.g. with ``round_size`` 1) before the repeat is accepted
MAX_REASKS = 50


def ask_new(
    study: Any, algo: str, seen: set[str], own_space: Mapping[str, Mapping[str, tuple[float, float, float]]] = OWN_SPACE,
    space: Any = None,
) -> tuple[Any, str]:
    """A trial whose configuration the study has not tried yet: a repeat (which would only spend
    a trial on runs already done) is discarded (told FAIL, so TPE ignores it) and another asked."""
    from optuna.trial import TrialState

    space = _space(own_space, space)
    for _ in range(MAX_REASKS):
        trial = study.ask()
        variant = space.variant(algo, space.suggest(trial, algo))
        if variant not in seen:
            break
        study.tell(trial, state=TrialState.FAIL)
    seen.add(variant)
    return trial, variant


def run_tuning(plan: TuningPlan, run: Any, log: Any = print) -> dict[str, Any]:
    """Search, select, score. ``run(specs)`` trains the runs (the sweep; it may skip complete ones
    and must not raise for failed runs). Returns the selection (also written to
    ``<out>/<search_suite>/selected.json``).

    One writer per study: the sweep locks of both folders (``<out>/<search_suite>`` and
    ``<out>/<score_suite>``) are held from before the first search run to after the last scoring
    run, so a second tune on the same ``--out`` is refused
    (:class:`~adaptive_po.bench.locks.SweepLocked`, exit 2) before it writes anything, and the
    record (``trials.csv``, ``selected.json``) is only ever written by the holder."""
    from adaptive_po.bench.locks import sweep_lock

    plan.check()
    keys = [(env, algo) for env in plan.envs for algo in plan.algos]
    for env in plan.envs:  # bad input is named before a lock file is made
        get_env_config(env, plan.envs_dir)
    for env, algo in keys:  # every grid validates before any compute
        plan_specs(plan, env, algo, [""], plan.search_seeds[:1], plan.search_suite)
    with sweep_lock([Path(plan.out) / plan.search_suite, Path(plan.out) / plan.score_suite]):
        return _run_tuning(plan, run, log)


def _run_tuning(plan: TuningPlan, run: Any, log: Any) -> dict[str, Any]:
    keys = [(env, algo) for env in plan.envs for algo in plan.algos]
    random_scores = {env: get_env_config(env, plan.envs_dir).random_score for env in plan.envs}
    studies = {key: _study(plan, *key) for key in keys}
    seen: dict[tuple[str, str], set[str]] = {key: set() for key in keys}
    numbers: dict[tuple[str, str], int] = {key: 0 for key in keys}
    rows: list[dict[str, Any]] = []
    done = 0
    while done < plan.trials:
        size = min(plan.round_size, plan.trials - done)
        asked: dict[tuple[str, str], list[tuple[Any, str]]] = {}
        specs: list[RunSpec] = []
        for (env, algo), study in studies.items():
            asked[(env, algo)] = []
            for _ in range(size):
                asked[(env, algo)].append(ask_new(study, algo, seen[(env, algo)]))
            variants = [v for _, v in asked[(env, algo)]]
            specs += plan_specs(plan, env, algo, variants, plan.search_seeds, plan.search_suite)
        unique = list({str(s.relative_dir): s for s in specs}.values())
        log(f"tuning round {done // plan.round_size + 1}: trials {done}-{done + size - 1} of {plan.trials} per study, {len(unique)} runs")
        run(unique)
        for (env, algo), trials in asked.items():
            study = studies[(env, algo)]
            for trial, variant in trials:
                per_condition = {}
                failures = 0
                for condition in plan.conditions:
                    scores = []
                    for spec in plan_specs(plan, env, algo, [variant], plan.search_seeds, plan.search_suite, [condition]):
                        value, failed = run_score(spec, random_scores[env])
                        scores.append(value)
                        failures += failed
                    per_condition[condition_name(condition)] = sum(scores) / len(scores)
                value = sum(per_condition.values()) / len(per_condition)
                study.tell(trial, value)
                number = numbers[(env, algo)]  # the study's n-th trial (discarded repeats are not counted)
                numbers[(env, algo)] += 1
                rows.append(
                    {"env": env, "algo": algo, "trial": number, "variant": variant, "failed_runs": failures,
                     **{f"score[{k}]": v for k, v in per_condition.items()}, "mean_score": value}
                )
        done += size
    selected: dict[str, dict[str, dict[str, Any]]] = {}
    for env, algo in keys:
        mine = [r for r in rows if r["env"] == env and r["algo"] == algo]
        for condition in plan.conditions:
            name = condition_name(condition)
            best = max(mine, key=lambda r: (r[f"score[{name}]"], -r["trial"]))
            selected.setdefault(env, {}).setdefault(algo, {})[name] = {
                "variant": best["variant"], "trial": best["trial"], "search_score": best[f"score[{name}]"],
            }
    root = Path(plan.out) / plan.search_suite
    root.mkdir(parents=True, exist_ok=True)
    _write_trials(root / SEARCH_FILE, rows)
    record = {"plan": _plan_record(plan), "selected": selected}
    contract.atomic_write_json(root / SELECTION_FILE, record)
    log(f"selection written to {root / SELECTION_FILE}")
    score_specs: list[RunSpec] = []
    fresh = condition_name(plan.conditions[0])
    for env, algo in keys:
        chosen = selected[env][algo]
        for condition in plan.conditions:  # the default, the fresh choice, and this condition's own choice
            variants = ["", chosen[fresh]["variant"], chosen[condition_name(condition)]["variant"]]
            score_specs += plan_specs(plan, env, algo, variants, plan.score_seeds, plan.score_suite, [condition])
    log(f"scoring: {len(score_specs)} runs on seeds {list(plan.score_seeds)} (never searched on)")
    run(score_specs)
    return record


def _plan_record(plan: TuningPlan) -> dict[str, Any]:
    return {
        "envs": list(plan.envs), "algos": list(plan.algos), "conditions": [dict(c) for c in plan.conditions],
        "condition_names": [condition_name(c) for c in plan.conditions],
        "trials": plan.trials, "round_size": plan.round_size, "search_seeds": list(plan.search_seeds),
        "score_seeds": list(plan.score_seeds), "sampler": "optuna TPESampler(n_startup_trials=round_size, constant_liar=True)",
        "sampler_seed": plan.sampler_seed, "suite": plan.suite, "timesteps": plan.timesteps,
        "space": {
            "learning_rate": f"factor, log-uniform in [{LEARNING_RATE_FACTORS[0]}, {LEARNING_RATE_FACTORS[1]}]",
            "n_epochs": f"factor in {list(EPOCH_FACTORS)}", "batch_size": f"factor in {list(BATCH_FACTORS)}",
            "own": {a: {k: f"uniform in [{lo}, {hi}], default {d}" for k, (lo, hi, d) in OWN_SPACE.get(a, {}).items()} for a in plan.algos},
        },
    }


def _write_trials(path: Path, rows: list[dict[str, Any]]) -> None:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    contract.atomic_write_text(path, buf.getvalue())
