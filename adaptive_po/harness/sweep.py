"""The sweep: expand a grid into runs, validate it up front, run it resumably with progress.

Each run is an independent process (``python -m adaptive_po _run SPEC``) with one torch thread on
CPU, so a crash, a hang killed by the user or a NaN costs that run only; the run records itself
as failed and the sweep goes on. A rerun skips complete runs and restarts the others.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from adaptive_po.collector import validate_off_policy_settings
from adaptive_po.harness.config import ConfigError, get_env_config
from adaptive_po.harness.contract import FAILED, STATUS_FILE, atomic_write_text, is_complete
from adaptive_po.harness.runner import RunSpec, completed_summary, resolve_backend, resolve_device
from adaptive_po.harness.suites import get_suite
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
    behaviour_log_prob: list[str] = field(default_factory=lambda: ["actual"])
    timesteps: int | None = None
    device: str = "cpu"
    backend: str = "auto"
    out: str = "runs"
    suite_name: str | None = None
    envs_dir: str | None = None
    executor: str = "local"


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
    for lag, noise, replay, blp in itertools.product(grid.lags, grid.noise, grid.replay, grid.behaviour_log_prob):
        validate_off_policy_settings(lag, replay, noise, blp)
    if grid.timesteps is not None and (isinstance(grid.timesteps, bool) or grid.timesteps < 1):
        raise ValueError(f"timesteps must be a positive integer, got {grid.timesteps!r}")
    # Ray workers resolve "auto" themselves: the driver may have no GPU while the workers do
    device = grid.device if grid.executor == "ray" else resolve_device(grid.device)
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; use auto, cpu or cuda")
    suite_name = grid.suite_name or suite.name

    specs: list[RunSpec] = []
    for env_name in grid.envs:
        env_cfg = get_env_config(env_name, grid.envs_dir)
        resolve_backend(env_cfg.ids, grid.backend)  # fails now, not in a worker
        if grid.timesteps is not None:
            total = grid.timesteps
        elif suite.name in env_cfg.budget:
            total = env_cfg.budget[suite.name]
        else:
            raise ConfigError(
                f"{env_cfg.path}: key 'budget.{suite.name}' is missing; give --timesteps or add a budget for suite {suite.name!r}"
            )
        rollout = env_cfg.hyperparams.n_envs * env_cfg.hyperparams.n_steps
        for algo, (lag, noise, replay, blp), seed in itertools.product(
            grid.algos, itertools.product(grid.lags, grid.noise, grid.replay, grid.behaviour_log_prob), grid.seeds
        ):
            if total < rollout:
                raise ValueError(f"timesteps={total} is smaller than one rollout of {env_name} ({rollout} steps)")
            specs.append(
                RunSpec(
                    suite=suite_name,
                    env=env_name,
                    algo=algo,
                    seed=seed,
                    total_timesteps=total,
                    policy_lag=lag,
                    replay=replay,
                    action_noise=float(noise),
                    behaviour_log_prob=blp,
                    device=device,
                    backend=grid.backend,
                    out=grid.out,
                    envs_dir=grid.envs_dir,
                )
            )
    return specs


#: measured here (2-core CPU, one torch thread per run): CartPole-v1 and Acrobot-v1 with the
#: Zoo settings train at about 150-250 s per million environment steps, evaluations included
MLP_SECONDS_PER_MILLION = 250.0


def describe_grid(specs: Sequence[RunSpec]) -> str:
    """A dry-run listing: the runs per environment, and a cost estimate (steps x measured speed)."""
    from adaptive_po.harness.config import get_env_config

    lines = [f"{len(specs)} runs"]
    by_env: dict[str, list[RunSpec]] = {}
    for spec in specs:
        by_env.setdefault(spec.env, []).append(spec)
    mlp_steps = cnn_steps = 0
    for env, runs in by_env.items():
        steps = sum(r.total_timesteps for r in runs)
        if get_env_config(env, runs[0].envs_dir).hyperparams.policy == "CnnPolicy":
            cnn_steps += steps
        else:
            mlp_steps += steps
        algos = sorted({r.algo for r in runs})
        conditions = sorted({r.condition for r in runs})
        seeds = sorted({r.seed for r in runs})
        lines.append(
            f"  {env}: {len(runs)} runs = {len(algos)} algos {algos} x {len(conditions)} conditions x "
            f"{len(seeds)} seeds, {runs[0].total_timesteps:,} steps each"
        )
    done = sum(is_complete(s.run_dir) for s in specs)
    lines.append(f"  already complete: {done}; to run: {len(specs) - done}")
    if mlp_steps:
        hours = mlp_steps / 1e6 * MLP_SECONDS_PER_MILLION / 3600
        lines.append(
            f"  cost estimate: {mlp_steps:,} MLP-policy environment steps ~ {hours:.1f} CPU-core-hours "
            f"(~{MLP_SECONDS_PER_MILLION:.0f} s per million steps per core, measured on classic control)"
        )
    if cnn_steps:
        lines.append(f"  plus {cnn_steps:,} CnnPolicy (Atari) steps: no estimate (GPU speed not measured here)")
    return "\n".join(lines)


# -- local execution ------------------------------------------------------------------------------
@dataclass
class _Active:
    spec: RunSpec
    process: subprocess.Popen
    result_path: Path
    log_path: Path
    started: float


def _log_dir(spec: RunSpec) -> Path:
    return Path(spec.out) / spec.suite / ".logs"


def _start_local(spec: RunSpec) -> _Active:
    logs = _log_dir(spec)
    logs.mkdir(parents=True, exist_ok=True)
    stem = str(spec.relative_dir).replace(os.sep, "__")
    spec_path = logs / f"{stem}.spec.json"
    result_path = logs / f"{stem}.result.json"
    log_path = logs / f"{stem}.log"
    atomic_write_text(spec_path, json.dumps(spec.to_dict()))
    if result_path.exists():
        result_path.unlink()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "adaptive_po", "_run", str(spec_path), "--result", str(result_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return _Active(spec, process, result_path, log_path, time.time())


def _finish_local(active: _Active) -> dict[str, Any]:
    code = active.process.returncode
    try:
        return json.loads(active.result_path.read_text())
    except (OSError, ValueError):
        pass
    tail = ""
    try:
        tail = "\n".join(active.log_path.read_text().splitlines()[-20:])
    except OSError:
        pass
    error = f"worker process exited with status {code} without a result"
    run_dir = active.spec.run_dir
    if not is_complete(run_dir):
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / FAILED, f"{error}\n--- last lines of {active.log_path} ---\n{tail}\n")
    return {"run_dir": str(run_dir), "relative_dir": str(active.spec.relative_dir), "status": "failed", "error": error}


def _live_timesteps(spec: RunSpec) -> int:
    try:
        return int(json.loads((spec.run_dir / STATUS_FILE).read_text())["timesteps"])
    except (OSError, ValueError, KeyError):
        return 0


ResultCallback = Callable[[RunSpec, dict[str, Any]], None]


def run_local(specs: Sequence[RunSpec], workers: int, on_result: ResultCallback, on_tick: Callable[[list[RunSpec]], None]) -> None:
    """Run ``specs`` in at most ``workers`` concurrent processes."""
    pending = list(specs)
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
                    on_result(item.spec, _finish_local(item))
            active = still
            on_tick([a.spec for a in active])
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


def run_sweep(
    specs: Sequence[RunSpec],
    workers: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    show_progress: bool = True,
) -> SweepResult:
    """Run every spec not yet complete; report progress; return what happened."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if executor not in ("local", "ray"):
        raise ValueError(f"unknown executor {executor!r}; use local or ray")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    if executor == "local":
        workers = workers or os.cpu_count() or 1
    # with Ray, no --workers means: as many runs at once as the cluster's resources allow
    result = SweepResult()
    started = time.time()
    todo = []
    for spec in specs:
        summary = completed_summary(spec)
        if summary is None:
            todo.append(spec)
        else:
            result.skipped.append(
                {"relative_dir": str(spec.relative_dir), "status": "skipped", "final_return": summary.get("final_eval_return_mean")}
            )
    console = Console(stderr=True)
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
                progress.console.print(f"[red]FAILED[/red] {key}: {outcome.get('error', '?')}")
            elif status == "complete":
                progress.console.print(
                    f"done  {key}: return {outcome.get('final_return', float('nan')):.1f} in {outcome.get('wall_time_s', 0):.0f}s"
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

        if executor == "local":
            run_local(todo, workers, on_result, on_tick)
        else:
            from adaptive_po.harness.ray_executor import run_ray

            run_ray(todo, ray_address=ray_address, on_result=on_result, on_tick=on_tick, max_concurrent=workers)
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
