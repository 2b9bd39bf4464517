"""The sweep: expand a grid into runs, validate it up front, run it resumably with progress.

The runs to do are split into *jobs* (:func:`adaptive_po.bench.jobs.plan_jobs`), and each job
is one worker process with one torch thread on CPU (:func:`run_local`, here) or one Ray task
(:func:`adaptive_po.bench.ray_executor.run_ray`): both executors take the same planned jobs.
With the population engine (the default) a job is a population: the runs of one environment,
algorithm and budget that differ only in seed and data dials, trained together in one process
(``python -m adaptive_po _run_population SPECS``, :mod:`adaptive_po.bench.population_runner`). Runs
the engine does not support (gSDE, Dict observations), and every run with the process engine, are
jobs of one run (``python -m adaptive_po _run SPEC``).

A crash, a hang killed by the user or a NaN costs that job's runs only: they record themselves as
failed (a worker that dies without a result has ``FAILED`` written for each of its unfinished
runs) and the sweep goes on. A rerun skips complete runs and restarts the others; a complete run
is never removed without a word: a damaged one is redone with its reason printed, and one made
with another configuration (another budget, an edited YAML file) only with ``--redo-changed``
(:class:`ResumePlan`; the dry run lists both). A full disk or a read-only filesystem ends the sweep
with one message (:class:`~adaptive_po.bench.locks.DestinationError`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from adaptive_po.bench.config import ConfigError, check_policy, check_run_limits, get_env_config
from adaptive_po.dials import DIAL_DEFAULTS, DIAL_NAMES, DataDials
from adaptive_po.contract import FAILED, STATUS_FILE, SUMMARY_FILE
from adaptive_po.contract import atomic_write_text, is_complete
from adaptive_po.contract import SUMMARY_DIVERGED, check_name
from adaptive_po.bench.jobs import Job, ResultCallback, TickCallback, check_engine, check_jobs, plan_jobs
from adaptive_po.bench.locks import DRIVER_PID_ENV, WORKER_DISK_EXITS, destination_error, disk_error_text, is_disk_error
from adaptive_po.bench.runner import RUN_CHANGED, RUN_DAMAGED, RUN_NEW, RUN_SAME, RunFolderState, RunSpec
from adaptive_po.bench.runner import run_folder_state
from adaptive_po.environments import resolve_backend, resolve_device
from adaptive_po.bench.suites import get_suite
from adaptive_po.bench.variants import parse_variant
from adaptive_po.objectives import get_objective


@dataclass
class Grid:
    """A sweep request after defaults from the suite were filled in."""

    suite: str
    envs: list[str]
    algos: list[str]
    seeds: list[int]
    lags: list[int]
    noise: list[float]
    replay: list[int]
    behaviour_log_prob: list[str] = field(default_factory=lambda: [DIAL_DEFAULTS["behaviour_log_prob"]])
    temperatures: list[float] = field(default_factory=lambda: [DIAL_DEFAULTS["sampler_temperature"]])
    precisions: list[str] = field(default_factory=lambda: [DIAL_DEFAULTS["sampler_precision"]])
    #: explicit data conditions (dicts of DataDials fields) instead of the product of the lists above
    conditions: list[dict[str, Any]] | None = None
    #: per algorithm, the variants to run ("" = the defaults); algorithms not named run "" only
    variants: dict[str, list[str]] | None = None
    timesteps: int | None = None
    device: str = "cpu"
    backend: str = "auto"
    out: str = "runs"
    suite_name: str | None = None
    envs_dir: str | None = None
    executor: str = "local"
    tensorboard: bool = True


def _dials(values: dict[str, Any]) -> DataDials:
    """One data condition (numbers as the run folders record them); ``ValueError`` names a bad dial."""
    unknown = sorted(set(values) - set(DIAL_NAMES))
    if unknown:
        raise ValueError(f"unknown condition key(s) {unknown} in {values}")
    dials = DataDials(**values)
    floats = {name: float(getattr(dials, name)) for name in ("action_noise", "sampler_temperature")}
    return dataclasses.replace(dials, **floats)


def grid_conditions(grid: Grid) -> list[DataDials]:
    """The grid's data conditions: its explicit list, or the product of its dial lists."""
    if grid.conditions is not None:
        if not grid.conditions:
            raise ValueError("no conditions selected")
        return [_dials(dict(c)) for c in grid.conditions]
    axes = (grid.lags, grid.noise, grid.replay, grid.behaviour_log_prob, grid.temperatures, grid.precisions)
    order = ("policy_lag", "action_noise", "replay", "behaviour_log_prob", "sampler_temperature", "sampler_precision")
    return [_dials(dict(zip(order, levels))) for levels in itertools.product(*axes)]


def expand_grid(grid: Grid) -> list[RunSpec]:
    """Validate every axis of the grid (errors name the bad value) and list its runs.

    Order: environment, algorithm, condition, seed, so that a partial sweep already holds
    comparable runs for the first environments.
    """
    suite = get_suite(grid.suite)
    if grid.executor not in ("local", "ray"):
        raise ValueError(f"unknown executor {grid.executor!r}; use local or ray")
    if not grid.envs:
        raise ValueError("no environments selected")
    if not grid.algos:
        raise ValueError("no algorithms selected")
    if not grid.seeds:
        raise ValueError("no seeds selected")
    for seed in grid.seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    for algo in grid.algos:
        get_objective(algo)
    conditions = grid_conditions(grid)  # validated, each a DataDials
    variants = {algo: list((grid.variants or {}).get(algo, [""])) for algo in grid.algos}
    for algo, names in variants.items():
        if not names:
            raise ValueError(f"no variants selected for {algo}")
        for name in names:
            parse_variant(algo, name)
    unknown = sorted(set(grid.variants or {}) - set(grid.algos))
    if unknown:
        raise ValueError(f"variants given for algorithms not in the grid: {unknown}")
    if grid.timesteps is not None and (isinstance(grid.timesteps, bool) or grid.timesteps < 1):
        raise ValueError(f"timesteps must be a positive integer, got {grid.timesteps!r}")
    # Ray workers resolve "auto" themselves: the driver may have no GPU while the workers do
    device = grid.device if grid.executor == "ray" else resolve_device(grid.device)
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; use auto, cpu or cuda")
    # a folder under --out, never a path (contract.check_name)
    suite_name = check_name("suite name", grid.suite_name if grid.suite_name is not None else suite.name)

    specs: list[RunSpec] = []
    for env_name in grid.envs:
        env_cfg = get_env_config(env_name, grid.envs_dir)
        resolve_backend(env_cfg.ids, grid.backend)  # fails now, not in a worker
        check_policy(env_cfg, grid.backend)  # its policy_kwargs build a policy (only when it has some)
        if grid.timesteps is not None:
            total = grid.timesteps
        elif suite.name in env_cfg.budget:
            total = env_cfg.budget[suite.name]
        else:
            raise ConfigError(
                f"{env_cfg.path}: key 'budget.{suite.name}' is missing; give --timesteps or add a budget for suite {suite.name!r}"
            )
        check_run_limits(env_cfg, total, "--timesteps" if grid.timesteps is not None else f"{env_cfg.path}: key 'budget.{suite.name}'")
        rollout = env_cfg.hyperparams.n_envs * env_cfg.hyperparams.n_steps
        runs = ((a, v, c, s) for a in grid.algos for v in variants[a] for c in conditions for s in grid.seeds)
        for algo, variant, condition, seed in runs:
            if total < rollout:
                raise ValueError(f"timesteps={total} is smaller than one rollout of {env_name} ({rollout} steps)")
            specs.append(
                RunSpec(
                    suite=suite_name,
                    env=env_name,
                    algo=algo,
                    seed=seed,
                    total_timesteps=total,
                    dials=condition,
                    variant=variant,
                    device=device,
                    backend=grid.backend,
                    out=grid.out,
                    envs_dir=grid.envs_dir,
                    tensorboard=grid.tensorboard,
                )
            )
    return specs


# -- what a rerun does with the runs already there ------------------------------------------------
class ChangedRuns(ValueError):
    """Complete runs would be replaced by runs of another configuration, and that was not asked
    for (``--redo-changed``): refused before any compute (a ``ValueError``: exit code 2)."""


#: how many runs a refusal or a dry run names one by one
NAMED_RUNS = 5


@dataclass
class ResumePlan:
    """Each spec with what its run folder holds (:func:`~adaptive_po.bench.runner.run_folder_state`)."""

    states: list[tuple[RunSpec, RunFolderState]]

    def of(self, kind: str) -> list[tuple[RunSpec, RunFolderState]]:
        return [(spec, state) for spec, state in self.states if state.kind == kind]

    def todo(self, redo_changed: bool = False) -> list[RunSpec]:
        """The specs to run, in order: new, damaged and (with ``redo_changed``) changed ones."""
        kinds = {RUN_NEW, RUN_DAMAGED} | ({RUN_CHANGED} if redo_changed else set())
        return [spec for spec, state in self.states if state.kind in kinds]

    def redo_lines(self, redo_changed: bool = False) -> list[str]:
        """``"<run>: <why>"`` for every complete run that is to be deleted and done again."""
        lines = [f"{spec.relative_dir}: {state.reasons[0]}" for spec, state in self.of(RUN_DAMAGED)]
        if redo_changed:
            lines += [f"{spec.relative_dir}: configuration changed: {_changes(state)}" for spec, state in self.of(RUN_CHANGED)]
        return lines

    def check_changed(self, redo_changed: bool, command: str = "bench") -> None:
        """:class:`ChangedRuns` naming the complete runs of another configuration, unless
        ``redo_changed``."""
        changed = self.of(RUN_CHANGED)
        if not changed or redo_changed:
            return
        folders = ", ".join(sorted({str(Path(spec.out) / spec.suite) for spec, _ in changed}))
        named = "; ".join(f"{spec.relative_dir} ({_changes(state)})" for spec, state in changed[:NAMED_RUNS])
        more = f"; and {len(changed) - NAMED_RUNS} more" if len(changed) > NAMED_RUNS else ""
        hint = " (`bench --dry-run` lists them all)" if command == "bench" else ""
        raise ChangedRuns(
            f"{len(changed)} complete run(s) in {folders} were made with another configuration and would be "
            f"deleted and trained again: {named}{more}. Nothing was run. Add --redo-changed to replace them, "
            f"or give another --out or --suite-name to keep both{hint}"
        )


def _changes(state: RunFolderState, most: int = 3) -> str:
    shown = ", ".join(state.reasons[:most])
    return shown + (f", and {len(state.reasons) - most} more keys" if len(state.reasons) > most else "")


def plan_resume(specs: Sequence[RunSpec]) -> ResumePlan:
    """What each spec's run folder holds, compared with the spec (the configuration is resolved
    only for complete runs)."""
    return ResumePlan([(spec, run_folder_state(spec)) for spec in specs])


#: wall seconds per million environment steps of one run on one core (esspo, evaluations and
#: start-up included), by engine and environment, measured by benchmarks/engines_speed.py (make perf)
#: on a 2-core machine (quiet, process runs bracketing the populations); the population engine
#: with 50 members (smaller populations are slower per member: 10 members measured 1.4-2.4x). Environments not measured are estimated at
#: the mean of the measured ones, and the dry run says so.
SECONDS_PER_MILLION: dict[str, dict[str, float]] = {
    "process": {"CartPole-v1": 324.0, "Acrobot-v1": 183.0},
    # Pendulum and LunarLander: the quick suite's populations of 10 (make bench, 2026-11-30: 258-291 s
    # per population of 10 x 100k / 10 x 200k steps, one per core)
    "population": {"CartPole-v1": 95.0, "Acrobot-v1": 41.0, "Pendulum-v1": 270.0, "LunarLander-v3": 145.0},
}
#: the same for the MinAtar CNN (environments of the ``minatar`` backend), measured in the published MinAtar grid
#: (populations of 10, two workers on 2 cores, while other jobs shared the cores much of the
#: time: an upper bound), for both engines (the process engine's figure is not measured: ``make
#: perf``'s MinAtar cell gives the ratio); MinAtar envs not listed take the mean of these
MINATAR_SECONDS_PER_MILLION: dict[str, float] = {
    "Asterix-MinAtar": 435.0, "Breakout-MinAtar": 340.0, "Freeway-MinAtar": 577.0, "Seaquest-MinAtar": 656.0, "SpaceInvaders-MinAtar": 566.0,
}


#: ALE agent steps (4 frames each) per second on one core, random actions, one envpool thread, 8
#: environments: measured on this project's 2-core CPU machine on 2026-11-30 while a bench used both
#: cores (a lower bound). The Atari estimate is bound by them; the GPU learner's speed is not in
#: it (no GPU has been lent to measure it: ``make gpu-check`` does).
ALE_STEPS_PER_CORE: dict[str, float] = {
    "BattleZone-v5": 840.0, "DoubleDunk-v5": 755.0, "NameThisGame-v5": 953.0, "Phoenix-v5": 1388.0, "Qbert-v5": 1131.0,
}
#: the machine the Atari suite is sized for: one GPU and this many cores
ATARI_MACHINE_CORES = 16


def _atari_estimate(steps_by_env: dict[str, int], cores: int) -> list[str]:
    """The Atari lines of the dry run: environment-bound hours on the GPU machine and here."""
    mean = sum(ALE_STEPS_PER_CORE.values()) / len(ALE_STEPS_PER_CORE)
    core_seconds = sum(steps / ALE_STEPS_PER_CORE.get(env, mean) for env, steps in steps_by_env.items())
    guessed = sorted(set(steps_by_env) - set(ALE_STEPS_PER_CORE))
    total = sum(steps_by_env.values())
    lines = [
        f"  cost estimate (Atari, population engine): {total:,} agent steps; environment-bound "
        f"~{format_duration(core_seconds / ATARI_MACHINE_CORES / 3600)} on one GPU machine with {ATARI_MACHINE_CORES} cores, "
        f"~{format_duration(core_seconds / cores / 3600)} of ALE stepping alone on this machine's {cores} cores",
        "    measured where: ALE steps/s per core on the project's 2-core CPU machine (2026-11-30, "
        + ", ".join(f"{e} {v:.0f}" for e, v in ALE_STEPS_PER_CORE.items())
        + "); the GPU learner's speed is not measured (no GPU lent yet; `make gpu-check` measures it), so the estimate "
        "assumes the learner keeps up; on a CPU-only machine the CNN learner is far slower: `make bench-atari` runs the smoke grid there",
    ]
    if guessed:
        lines.append(f"    (not measured, estimated at the mean ALE speed: {', '.join(guessed)})")
    return lines


def _seconds_per_million(engine: str, env: str, minatar: bool = False) -> tuple[float, bool]:
    """(seconds per million steps, measured for this env?); ``minatar``: an environment of the
    MinAtar backend, estimated from :data:`MINATAR_SECONDS_PER_MILLION`"""
    if minatar:
        table = MINATAR_SECONDS_PER_MILLION
        return table.get(env, sum(table.values()) / len(table)), env in table and engine == "population"
    table = SECONDS_PER_MILLION[engine]
    if env in table:
        return table[env], True
    return sum(table.values()) / len(table), False


def format_duration(hours: float, prefix: str = "") -> str:
    """A cost estimate for people: minutes under an hour, hours (one decimal) from there.

    ``format_duration(0.1)`` -> ``"6 min"``, ``format_duration(9.44)`` -> ``"9.4 h"``;
    with ``prefix="CPU-core-"``: ``"6 CPU-core-minutes"``, ``"9.4 CPU-core-hours"``.
    """
    if hours < 0:
        raise ValueError(f"a duration cannot be negative, got {hours!r} h")
    minutes = hours * 60
    if round(minutes) < 60:
        count = "<1" if minutes < 0.5 else f"{minutes:.0f}"
        return f"{count} {prefix}minutes" if prefix else f"{count} min"
    return f"{hours:.1f} {prefix}hours" if prefix else f"{hours:.1f} h"


def describe_grid(specs: Sequence[RunSpec], engine: str = "population", redo_changed: bool = False) -> str:
    """A dry-run listing: the runs per environment, what is complete already and which complete
    runs would be redone and why (damaged, or made with another configuration: the differing keys,
    old -> new), and a cost estimate (steps x the measured speed of ``engine``; runs the
    population engine does not support count at the process engine's speed; complete runs count
    too). A summary, never a line per run: the dry run lists the run folders with ``--list-runs``."""
    from adaptive_po.bench.config import budget_notes
    from adaptive_po.bench.population_runner import supports_population

    check_engine(engine)
    lines = [f"{len(specs)} runs, {sum(s.total_timesteps for s in specs):,} environment steps in all"]
    notes: list[str] = []
    by_env: dict[str, list[RunSpec]] = {}
    for spec in specs:
        by_env.setdefault(spec.env, []).append(spec)
    seconds = {"population": 0.0, "process": 0.0}
    steps_by_engine = {"population": 0, "process": 0}
    from adaptive_po.environments.ids import is_atari

    guessed: set[str] = set()
    atari_steps: dict[str, int] = {}
    for env, runs in by_env.items():
        steps = sum(r.total_timesteps for r in runs)
        ids = get_env_config(env, runs[0].envs_dir).ids
        if any(is_atari(i) for i in ids.values()):
            atari_steps[env] = steps
        else:
            which = "population" if engine == "population" and supports_population(runs[0]) else "process"
            speed, measured = _seconds_per_million(which, env, minatar="minatar" in ids)
            seconds[which] += steps / 1e6 * speed
            steps_by_engine[which] += steps
            if not measured:
                guessed.add(env)
        algos = sorted({r.algo for r in runs})
        conditions = sorted({r.condition for r in runs})
        seeds = sorted({r.seed for r in runs})
        configs = sorted({r.algo_label for r in runs})
        variants = f" ({len(configs)} configurations with their knob variants)" if len(configs) > len(algos) else ""
        lines.append(
            f"  {env}: {len(runs)} runs = {len(algos)} algos {algos}{variants} x {len(conditions)} conditions x "
            f"{len(seeds)} seeds, {runs[0].total_timesteps:,} steps each"
        )
        for budget in sorted({r.total_timesteps for r in runs}):
            notes += [f"  {note}" for note in budget_notes(get_env_config(env, runs[0].envs_dir), budget)]
    for axis, key in (("algorithms", lambda s: s.algo), ("conditions", lambda s: s.condition)):
        counts: dict[str, int] = {}
        for spec in specs:
            counts[key(spec)] = counts.get(key(spec), 0) + 1
        lines.append(f"  runs per {axis[:-1]}: " + ", ".join(f"{name} {n}" for name, n in counts.items()))
    lines += notes
    plan = plan_resume(specs)
    changed, damaged = plan.of(RUN_CHANGED), plan.of(RUN_DAMAGED)
    lines.append(f"  already complete: {len(plan.of(RUN_SAME))}; to run: {len(plan.todo(redo_changed))}")
    for spec, state in damaged[:NAMED_RUNS]:
        lines.append(f"    redo {spec.relative_dir}: {state.reasons[0]}")
    if len(damaged) > NAMED_RUNS:
        lines.append(f"    ... and {len(damaged) - NAMED_RUNS} more damaged runs redone")
    if changed:
        fate = ("redone (--redo-changed): their folders are cleared" if redo_changed
                else "kept: the bench refuses to run until --redo-changed is given or --out / --suite-name changes")
        lines.append(f"  complete with another configuration: {len(changed)}, {fate}")
        for spec, state in changed[:NAMED_RUNS]:
            lines.append(f"    {'redo ' if redo_changed else ''}{spec.relative_dir}: {_changes(state)}")
        if len(changed) > NAMED_RUNS:
            lines.append(f"    ... and {len(changed) - NAMED_RUNS} more")
    cores = os.cpu_count() or 1
    for which in ("population", "process"):
        if steps_by_engine[which]:
            hours = seconds[which] / 3600
            lines.append(
                f"  cost estimate ({which} engine): {steps_by_engine[which]:,} environment steps ~ "
                f"{format_duration(hours, 'CPU-core-')}, ~{format_duration(hours / cores)} on this machine's {cores} cores "
                f"(speeds per environment measured by benchmarks/engines_speed.py, Pendulum and LunarLander in the quick suite; MinAtar: in the published MinAtar grid)"
            )
    if guessed:
        lines.append(f"  (not measured, estimated at the mean measured speed: {', '.join(sorted(guessed))})")
    if atari_steps:
        lines.extend(_atari_estimate(atari_steps, cores))
    return "\n".join(lines)


# -- local execution ------------------------------------------------------------------------------
@dataclass
class _Active:
    job: Job
    process: subprocess.Popen
    result_path: Path
    log_path: Path
    started: float


def _log_dir(spec: RunSpec) -> Path:
    return Path(spec.out) / spec.suite / ".logs"


def _start_local(job: Job) -> _Active:
    """Start ``job``'s worker: ``_run SPEC`` for one run, ``_run_population SPECS`` for a population.

    Its files lie in ``<out>/<suite>/.logs/``, named after the (first) run's folder.
    """
    first = job.specs[0]
    logs = _log_dir(first)
    logs.mkdir(parents=True, exist_ok=True)
    stem = str(first.relative_dir).replace(os.sep, "__") + (f".population-{len(job.specs)}" if job.population else "")
    spec_path = logs / f"{stem}.spec.json"
    result_path = logs / f"{stem}.result.json"
    log_path = logs / f"{stem}.log"
    if job.population:
        command, payload = "_run_population", [spec.to_dict() for spec in job.specs]
    else:
        command, payload = "_run", first.to_dict()
    atomic_write_text(spec_path, json.dumps(payload))
    if result_path.exists():
        result_path.unlink()
    # the worker SIGKILLs itself when this driver dies (locks.die_with_driver): no orphans
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", DRIVER_PID_ENV: str(os.getpid())}
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "adaptive_po", command, str(spec_path), "--result", str(result_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return _Active(job, process, result_path, log_path, time.time())


def _read_results(active: _Active) -> list[dict[str, Any]] | None:
    """The worker's records, one per run of its job, or None if it left none (or a wrong one)."""
    try:
        data = json.loads(active.result_path.read_text())
    except (OSError, ValueError):
        return None
    records = data if active.job.population else [data]
    if not isinstance(records, list) or len(records) != len(active.job.specs) or not all(isinstance(r, dict) for r in records):
        return None
    return records


def _finish_local(active: _Active) -> list[dict[str, Any]]:
    """One record per run of the finished job. A worker that died without its result leaves its
    complete runs as they are and writes ``FAILED`` (with its log's last lines) into the others."""
    records = _read_results(active)
    if records is not None:
        return records
    code = active.process.returncode
    tail = ""
    try:
        tail = "\n".join(active.log_path.read_text().splitlines()[-20:])
    except OSError:
        pass
    error = f"worker process exited with status {code} without a result"
    disk = [line.strip() for line in tail.splitlines() if disk_error_text(line)]
    # it could not write its files: say so (the sweep ends on it, see run_sweep)
    disk_error = bool(disk) or code in WORKER_DISK_EXITS
    if disk:
        error += f": {disk[-1]}"
    elif disk_error:
        error += ": it could not write its files (a full disk, a quota or a read-only filesystem)"
    out = []
    for spec in active.job.specs:
        run_dir = spec.run_dir
        record = {"run_dir": str(run_dir), "relative_dir": str(spec.relative_dir)}
        if is_complete(run_dir):  # a population member that finished before its worker died
            try:
                summary = json.loads((run_dir / SUMMARY_FILE).read_text())
                out.append({**record, "status": "complete", "final_return": summary["final_eval_return_mean"], "wall_time_s": summary.get("wall_time_s", 0.0)})
                continue
            except (OSError, ValueError, KeyError):
                pass
        else:
            try:
                run_dir.mkdir(parents=True, exist_ok=True)
                atomic_write_text(run_dir / FAILED, f"{error}\n--- last lines of {active.log_path} ---\n{tail}\n")
            except OSError:
                if not disk_error:
                    raise
                # no room for FAILED either: the run stays incomplete (a rerun redoes it)
        out.append({**record, "status": "failed", "error": error, "disk_error": disk_error})
    return out


def _live_timesteps(spec: RunSpec) -> int:
    try:
        return int(json.loads((spec.run_dir / STATUS_FILE).read_text())["timesteps"])
    except (OSError, ValueError, KeyError):
        return 0


def run_local(
    jobs: Sequence[Job],
    workers: int,
    on_result: ResultCallback | None = None,
    on_tick: TickCallback | None = None,
) -> None:
    """Run ``jobs`` (planned by :func:`~adaptive_po.bench.jobs.plan_jobs`) in at most
    ``workers`` concurrent processes.

    ``on_result(spec, record)`` is called once per run when its job ends; ``on_tick`` about every
    quarter second with the runs of the jobs in flight.
    """
    check_jobs(jobs)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    on_result = on_result or (lambda spec, record: None)
    on_tick = on_tick or (lambda active: None)
    pending = list(jobs)
    active: list[_Active] = []
    try:
        while pending or active:
            while pending and len(active) < workers:
                active.append(_start_local(pending.pop(0)))
            time.sleep(0.25)
            still = []
            for item in active:
                if item.process.poll() is None:
                    still.append(item)
                else:
                    for spec, record in zip(item.job.specs, _finish_local(item)):
                        on_result(spec, record)
            active = still
            on_tick([spec for a in active for spec in a.job.specs])
    except BaseException:
        for item in active:
            item.process.terminate()
        for item in active:
            try:
                item.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                item.process.kill()
        raise


# -- the sweep with progress ----------------------------------------------------------------------
@dataclass
class SweepResult:
    complete: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    wall_time_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def diverged(self) -> list[dict[str, Any]]:
        """Complete (or skipped) runs whose summary flags a divergence without a NaN."""
        return [r for r in self.complete + self.skipped if r.get("diverged")]


def _diverged(spec: RunSpec) -> str | None:
    try:
        return json.loads((spec.run_dir / SUMMARY_FILE).read_text()).get(SUMMARY_DIVERGED)
    except (OSError, ValueError, AttributeError):
        return None


def run_sweep(
    specs: Sequence[RunSpec],
    workers: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    show_progress: bool = True,
    engine: str = "population",
    redo_changed: bool = False,
) -> SweepResult:
    """Run every spec not yet complete; report progress; return what happened.

    ``workers``: jobs at once (a population is one job; see
    :func:`~adaptive_po.bench.jobs.plan_jobs` for ``engine``).
    The sweep holds the lock of its folders (``<out>/<suite>``) throughout: a second sweep on
    them is refused (:class:`~adaptive_po.bench.locks.SweepLocked`), and so is a folder that
    cannot be written. A complete run whose files fail
    :func:`~adaptive_po.contract.verify_complete_run` is redone, with the reason printed.
    A complete run made with another configuration (config.json differs from the requested one)
    is redone only with ``redo_changed`` (its differing keys printed); without it the sweep raises
    :class:`ChangedRuns` naming them, before any compute.

    A full disk, an exhausted quota or a read-only filesystem (``ENOSPC``, ``EDQUOT``, ``EROFS``),
    in the driver or reported by a worker, ends the sweep: its workers are stopped and
    :class:`~adaptive_po.bench.locks.DestinationError` (a ``ValueError``: exit code 2) names the
    folder. No run is complete unless its ``COMPLETE`` marker was written, last and atomically, so
    a rerun once there is space again redoes exactly the unfinished runs.
    """
    from adaptive_po.bench.locks import sweep_folders, sweep_lock

    with sweep_lock(sweep_folders(specs)):
        try:
            return _run_sweep(specs, workers, executor, ray_address, show_progress, engine, redo_changed)
        except OSError as err:
            if is_disk_error(err):  # the workers are stopped already; the lock is released below
                raise destination_error(err, sweep_folders(specs)) from None
            raise


def _run_sweep(
    specs: Sequence[RunSpec],
    workers: int | None,
    executor: str,
    ray_address: str | None,
    show_progress: bool,
    engine: str,
    redo_changed: bool,
) -> SweepResult:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if executor not in ("local", "ray"):
        raise ValueError(f"unknown executor {executor!r}; use local or ray")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    check_engine(engine)
    if executor == "local":
        workers = workers or os.cpu_count() or 1
    # with Ray, no --workers means: as many jobs at once as the cluster's resources allow
    result = SweepResult()
    started = time.time()
    plan = plan_resume(specs)
    plan.check_changed(redo_changed)  # before any compute: complete runs are never replaced unasked
    todo = plan.todo(redo_changed)
    redo = plan.redo_lines(redo_changed)
    for spec, state in plan.of(RUN_SAME):
        summary = state.summary or {}
        result.skipped.append(
            {
                "relative_dir": str(spec.relative_dir),
                "status": "skipped",
                "final_return": summary.get("final_eval_return_mean"),
                "diverged": summary.get(SUMMARY_DIVERGED),
            }
        )
    console = Console(stderr=True)
    for line in redo:
        console.print(f"[yellow]redo[/yellow]  {escape(line)}; its folder is cleared and the run done again")
    total_steps = sum(s.total_timesteps for s in todo) or 1
    finished_steps = 0
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=not show_progress, refresh_per_second=2) as progress:
        def detail() -> str:
            done = len(result.complete) + len(result.skipped)
            return f"{done}/{len(specs)} runs done, {len(result.failed)} failed, {len(result.skipped)} skipped"

        sweep_task = progress.add_task("sweep", total=total_steps, detail=detail())
        run_tasks: dict[str, Any] = {}

        def on_result(spec: RunSpec, outcome: dict[str, Any]) -> None:
            nonlocal finished_steps
            status = outcome.get("status", "failed")
            {"complete": result.complete, "skipped": result.skipped}.get(status, result.failed).append(outcome)
            finished_steps += spec.total_timesteps
            key = str(spec.relative_dir)
            if key in run_tasks:
                progress.remove_task(run_tasks.pop(key))
            if status == "failed":
                progress.console.print(f"[red]FAILED[/red] {escape(key)}: {escape(str(outcome.get('error', '?')))}")
                if outcome.get("disk_error") or disk_error_text(str(outcome.get("error", ""))):  # all later runs would too
                    raise destination_error(str(outcome["error"]), [Path(spec.out) / spec.suite], run=key)
            elif status == "complete":
                if "diverged" not in outcome:  # the population and Ray engines: from the summary
                    outcome["diverged"] = _diverged(spec)
                flag = f" [yellow]diverged[/yellow]: {escape(outcome['diverged'])}" if outcome["diverged"] else ""
                progress.console.print(
                    f"done  {escape(key)}: return {outcome.get('final_return', float('nan')):.1f} in {outcome.get('wall_time_s', 0):.0f}s{flag}"
                )
            progress.update(sweep_task, completed=finished_steps, detail=detail())

        def on_tick(active: list[RunSpec]) -> None:
            live = 0
            for spec in active:
                key = str(spec.relative_dir)
                steps = _live_timesteps(spec)
                live += steps
                if key not in run_tasks:
                    run_tasks[key] = progress.add_task(f"  {key}", total=spec.total_timesteps, detail="")
                progress.update(run_tasks[key], completed=steps)
            progress.update(sweep_task, completed=finished_steps + live, detail=detail())

        jobs = plan_jobs(todo, engine)
        if executor == "local":
            run_local(jobs, workers, on_result, on_tick)
        else:
            from adaptive_po.bench.ray_executor import run_ray

            run_ray(jobs, ray_address=ray_address, on_result=on_result, on_tick=on_tick, max_concurrent=workers)
    for record in result.diverged:
        console.print(
            f"[yellow]diverged[/yellow] {escape(str(record.get('relative_dir')))}: complete, but its numbers "
            f"broke down: {escape(str(record['diverged']))}"
        )
    result.wall_time_s = time.time() - started
    return result


def parse_list(text: str | None, cast: Callable[[str], Any], name: str) -> list[Any] | None:
    """``"0,1,2"`` -> ``[0, 1, 2]``; a bad item is a ``ValueError`` naming the flag and item."""
    if text is None:
        return None
    out = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        try:
            out.append(cast(item))
        except ValueError:
            raise ValueError(f"{name}: {item!r} is not a valid {cast.__name__}") from None
    return out


def seeds_from(text: str | None, default: int) -> list[int]:
    """``--seeds 5`` -> 0..4; ``--seeds 0,3,7`` -> those seeds."""
    if text is None:
        return list(range(default))
    if "," not in text and "-" not in text.strip()[1:]:
        try:
            n = int(text)
        except ValueError:
            raise ValueError(f"--seeds: {text!r} is neither a count nor a comma-separated list") from None
        if n < 1:
            raise ValueError(f"--seeds: the count must be >= 1, got {n}")
        return list(range(n))
    return parse_list(text, int, "--seeds") or []


def iter_failed(result: SweepResult) -> Iterable[str]:
    for item in result.failed:
        yield f"{item.get('relative_dir')}: {item.get('error')}"
