"""Inside an update: a per-epoch trace of what the objective saw (the fresh-data diagnosis).

The run-folder contract keeps one row per update, reduced over its minibatches. That hides the
question "what happens *within* an update?": on fresh data the first minibatch of the ESS objective
has every ratio equal to 1 (e_B = 1), so does it have a trust region at all before the policy has
moved? This module trains one run on the process engine (the SB3 class, the same update core as
the population engine) and records, after every epoch of the traced updates:

* what the loss saw, from the epoch's minibatch statistics: the minibatch ESS (mean, standard
  deviation and minimum over the epoch's minibatches), the KL weight ``1 - e_B``, the cap (or,
  for PPO, clip) fraction, the approximate KL to the policy at the start of the update, entropy;
* what the whole batch says at the parameters the epoch ended with (no gradient): the ESS of
  pi_theta / pi_b over the whole batch, the mean and standard deviation of the minibatch ESS over
  a random partition of the batch into minibatches of the run's size (its sampling noise and bias
  at fixed parameters), the approximate KL to the start of the update, the analytic KL to the
  behaviour policy, the fraction of ratios outside PPO's band [0.8, 1.2], and the policy's standard
  deviation for Gaussian policies;
* the update's context: its start-of-update ESS and KL of pi_prox against pi_b (how stale the
  batch is before any step) and the mean episode return of the rollouts so far.

``adaptive-po trace`` runs a small grid of such runs (resumable: a finished trace is skipped) into
``<out>/<env>/<algo>/<condition>/seed-<n>.csv``; ``analysis/fresh_data.py`` turns them into the
diagnosis figure and report.

``trace`` follows the rules of ``bench`` and ``train``: each trace's settings (budget, ``--every``,
lag, seed and the environment file's hash) are recorded beside it (``seed-<n>.settings.json``,
written before the trace, so a trace never exists without them) and compared on a rerun: a trace
made with other settings is refused (exit 2, naming it) unless ``--redo-changed`` is given, never
kept silently; the output folder's sweep lock is held throughout (a second trace there is refused);
the run-size limits (``ADAPTIVE_PO_MAX_TIMESTEPS`` ...) are checked before anything trains; and its
worker processes die with the driver (``kill -9`` included).
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from adaptive_po import contract
from adaptive_po.dials import DataDials

#: the columns of a trace file, in order
TRACE_COLUMNS: tuple[str, ...] = (
    "update", "epoch", "timesteps", "ep_return",
    "start_ess", "start_kl",
    "mb_ess_mean", "mb_ess_std", "mb_ess_min", "kl_weight", "cap_fraction", "mb_approx_kl", "entropy",
    "batch_ess", "fixed_mb_ess_mean", "fixed_mb_ess_std", "batch_approx_kl", "batch_kl_behaviour",
    "outside_band", "policy_std",
)

#: PPO's default clip range, the band ``outside_band`` counts against (a reference, not a knob)
BAND = 0.2


@dataclass(frozen=True)
class TraceSpec:
    """One traced run: the environment, objective, seed, data dials, budget and which updates are
    traced (every ``every``-th, counting from the first)."""

    env: str
    algo: str
    seed: int
    total_timesteps: int
    policy_lag: int = 0
    every: int = 1
    out: str = "runs/trace"
    envs_dir: str | None = None

    @property
    def condition(self) -> str:
        return DataDials(policy_lag=self.policy_lag).condition

    @property
    def path(self) -> Path:
        return Path(self.out) / self.env / self.algo / self.condition / f"seed-{self.seed}.csv"


class EpochTracer:
    """The epoch listener: one row per epoch of every traced update (see the module docstring)."""

    def __init__(self, model: Any, every: int = 1, seed: int = 0) -> None:
        import numpy as np

        self.model = model
        self.every = max(1, int(every))
        self.rows: list[dict[str, float]] = []
        self._update = 0
        self._rng = np.random.default_rng(seed)
        self._start: dict[str, float] = {}

    def __call__(self, epoch: int, rows: Sequence[dict[str, Any]], data: dict[str, Any]) -> None:
        import numpy as np
        import torch

        from adaptive_po import distributions as D
        from adaptive_po.objectives import effective_sample_size_from_log_ratios
        from adaptive_po.update import approx_kl

        if epoch == 0:
            self._update += 1
            prox = data["proximal_log_prob"].detach()
            behaviour = data["behaviour_log_prob"]
            self._start = {
                "start_ess": float(effective_sample_size_from_log_ratios(prox - behaviour)),
                "start_kl": float(approx_kl(prox - behaviour)),
            }
        if (self._update - 1) % self.every:
            return
        model = self.model
        with torch.no_grad():
            params = model._dist_params(data)
            log_prob = D.log_prob(model.kind, params, data["actions"])
            log_ratio = (log_prob - data["behaviour_log_prob"]).to(torch.float64)
            n = log_ratio.numel()
            order = torch.as_tensor(self._rng.permutation(n))
            size = int(model.batch_size)
            chunks = [log_ratio[order[i : i + size]] for i in range(0, n - size + 1, size)] or [log_ratio]
            fixed = np.array([float(effective_sample_size_from_log_ratios(c)) for c in chunks])
            kl_b = D.kl(model.kind, params, data["behaviour_params"]).to(torch.float64).mean()
            ratio = torch.exp(log_ratio)
        mb_ess = np.array([float(r["ess"]) for r in rows]) if rows else np.array([math.nan])
        mean = lambda name: float(np.mean([float(r[name]) for r in rows])) if rows else math.nan  # noqa: E731
        std = math.nan
        if hasattr(model.policy, "log_std"):
            std = float(torch.exp(model.policy.log_std.detach()).mean())
        infos = [info["r"] for info in model.ep_info_buffer] if model.ep_info_buffer else []
        self.rows.append({
            "update": self._update,
            "epoch": epoch + 1,
            "timesteps": int(model.num_timesteps),
            "ep_return": float(np.mean(infos)) if infos else math.nan,
            **self._start,
            "mb_ess_mean": float(mb_ess.mean()),
            "mb_ess_std": float(mb_ess.std()),
            "mb_ess_min": float(mb_ess.min()),
            "kl_weight": mean("kl_weight"),
            "cap_fraction": mean("cap_fraction"),
            "mb_approx_kl": mean("approx_kl"),
            "entropy": mean("entropy"),
            "batch_ess": float(effective_sample_size_from_log_ratios(log_ratio)),
            "fixed_mb_ess_mean": float(fixed.mean()),
            "fixed_mb_ess_std": float(fixed.std()),
            "batch_approx_kl": float(approx_kl(log_prob - data["proximal_log_prob"])),
            "batch_kl_behaviour": float(kl_b),
            "outside_band": float(((ratio - 1.0).abs() > BAND).to(torch.float64).mean()),
            "policy_std": std,
        })


def trace_csv(rows: Iterable[dict[str, float]]) -> str:
    """The trace rows as CSV text, in :data:`TRACE_COLUMNS` order, floats with 6 significant digits."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(TRACE_COLUMNS)
    for row in rows:
        writer.writerow([_cell(row[name]) for name in TRACE_COLUMNS])
    return buffer.getvalue()


def _cell(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if value != value:  # NaN
        return ""
    return f"{value:.6g}"


class ChangedTraces(ValueError):
    """Finished traces made with other settings, and no ``--redo-changed``."""


def settings_path(spec: TraceSpec) -> Path:
    """Where ``spec``'s settings are recorded: ``seed-<n>.settings.json`` beside its trace."""
    return spec.path.with_name(spec.path.stem + ".settings.json")


def trace_settings(spec: TraceSpec) -> dict[str, Any]:
    """What a trace depends on: its budget, which updates are traced, the data, the seed, and the
    environment file (by hash: an edited YAML file makes another trace)."""
    import hashlib

    from adaptive_po.bench.config import get_env_config

    env_file = get_env_config(spec.env, spec.envs_dir).path
    return {
        "env": spec.env, "algo": spec.algo, "seed": spec.seed, "policy_lag": spec.policy_lag,
        "total_timesteps": spec.total_timesteps, "every": spec.every,
        "env_file_sha256": hashlib.sha256(Path(env_file).read_bytes()).hexdigest(),
    }


def trace_changes(spec: TraceSpec) -> list[str] | None:
    """None when ``spec`` has no finished trace; ``[]`` when its finished trace was made with these
    settings; else what differs (``"total_timesteps 1024 -> 2048"``)."""
    import json

    if not spec.path.exists():
        return None
    try:
        recorded = json.loads(settings_path(spec).read_text())
    except (OSError, ValueError):
        recorded = None
    if not isinstance(recorded, dict):
        return ["its settings were not recorded (or cannot be read)"]
    wanted = trace_settings(spec)
    return [f"{k} {recorded.get(k)!r} -> {v!r}" for k, v in wanted.items() if recorded.get(k) != v]


def run_trace(spec: TraceSpec, redo_changed: bool = False) -> Path:
    """Train one traced run and write its trace atomically; a finished trace made with the same
    settings is kept as it is; one made with other settings is refused (:class:`ChangedTraces`)
    unless ``redo_changed``, then trained again."""
    changes = trace_changes(spec)
    if changes == []:
        return spec.path
    if changes and not redo_changed:
        raise ChangedTraces(f"{spec.path} was made with other settings ({'; '.join(changes)}); add --redo-changed to redo it, or give another --out")
    settings = trace_settings(spec)
    if changes:  # redone: the old trace goes first, so a stop midway never leaves it beside new settings
        spec.path.unlink()
        settings_path(spec).unlink(missing_ok=True)
    from adaptive_po.bench.run_folder import RunSpec
    from adaptive_po.bench.process_engine import build_training

    run = RunSpec(
        suite="trace", env=spec.env, algo=spec.algo, seed=spec.seed, total_timesteps=spec.total_timesteps,
        dials=DataDials(policy_lag=spec.policy_lag), envs_dir=spec.envs_dir, tensorboard=False,
    )
    model, train_env, eval_env, *_ = build_training(run)
    try:
        from stable_baselines3.common.logger import configure

        model.set_logger(configure(None, []))
        tracer = EpochTracer(model, spec.every, spec.seed)
        model.add_epoch_listener(tracer)
        model.learn(spec.total_timesteps)
    finally:
        train_env.close()
        eval_env.close()
    spec.path.parent.mkdir(parents=True, exist_ok=True)
    # the settings first: a trace never exists without the settings it was made with
    contract.atomic_write_json(settings_path(spec), settings)
    contract.atomic_write_text(spec.path, trace_csv(tracer.rows))
    return spec.path


def _redo_trace(spec: TraceSpec) -> Path:
    return run_trace(spec, redo_changed=True)


def _worker_start(driver: int) -> None:
    """A trace worker's first act: be SIGKILLed when the driver dies (as a sweep's workers are)."""
    from adaptive_po.bench.locks import DRIVER_PID_ENV, die_with_driver

    os.environ[DRIVER_PID_ENV] = str(driver)
    die_with_driver()


def check_changed(specs: Sequence[TraceSpec], redo_changed: bool) -> list[str]:
    """``"<trace>: <what changed>"`` for every finished trace made with other settings;
    :class:`ChangedTraces` naming them (before anything trains) unless ``redo_changed``."""
    lines = []
    for spec in specs:
        changes = trace_changes(spec)
        if changes:
            lines.append(f"{spec.path}: {'; '.join(changes)}")
    if lines and not redo_changed:
        more = f"; and {len(lines) - 3} more" if len(lines) > 3 else ""
        raise ChangedTraces(
            f"{len(lines)} finished trace(s) were made with other settings and would be traced again: "
            f"{'; '.join(lines[:3])}{more}. Nothing was run. Add --redo-changed to redo them, or give another --out to keep both"
        )
    return lines


def run_traces(specs: Sequence[TraceSpec], workers: int = 1, redo_changed: bool = False) -> list[Path]:
    """Run every traced run, ``workers`` at a time (separate processes that die with this one);
    finished ones made with the same settings are skipped; finished ones made with other settings
    are refused (:class:`ChangedTraces`, before anything trains) unless ``redo_changed``."""
    check_changed(specs, redo_changed)
    todo = [s for s in specs if trace_changes(s) != []]
    if workers <= 1 or len(todo) <= 1:
        for spec in todo:
            run_trace(spec, redo_changed)
        return [s.path for s in specs]
    import multiprocessing

    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_worker_start, initargs=(os.getpid(),)) as pool:
        list(pool.map(_redo_trace if redo_changed else run_trace, todo))
    return [s.path for s in specs]


def plan(
    envs: Sequence[str], algos: Sequence[str], lags: Sequence[int], seeds: Sequence[int], *,
    total_timesteps: dict[str, int], every: dict[str, int], out: str, envs_dir: str | None = None,
) -> list[TraceSpec]:
    """The grid of traced runs; bad input (an unknown environment or objective, a negative lag, a
    missing budget) fails here, before anything trains, with the value named."""
    from adaptive_po.bench.config import get_env_config
    from adaptive_po.bench.grid import listed_once
    from adaptive_po.compile_setup import check_settings
    from adaptive_po.objectives import get_objective

    check_settings()
    for values, what in ((envs, "environment"), (algos, "algorithm"), (lags, "lag"), (seeds, "seed")):
        listed_once(values, what, Path(out))  # as bench and tune refuse them: two runs, one trace file
    for seed in seeds:
        if seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    for env in envs:
        get_env_config(env, envs_dir)
        if env not in total_timesteps:
            raise ValueError(f"no trace budget for environment {env!r}")
    for algo in algos:
        get_objective(algo)
    for lag in lags:
        DataDials(policy_lag=lag)
    from adaptive_po.bench.config import check_run_limits

    for env in envs:  # the same size limits as bench and train (ADAPTIVE_PO_MAX_TIMESTEPS ...)
        if total_timesteps[env] <= 0:
            raise ValueError(f"--timesteps must be > 0, got {total_timesteps[env]}")
        check_run_limits(get_env_config(env, envs_dir), total_timesteps[env], "--timesteps")
    for env, n in every.items():
        if n < 1:
            raise ValueError(f"--every must be >= 1, got {n}")
    return [
        TraceSpec(env, algo, seed, total_timesteps[env], lag, every.get(env, 1), out, envs_dir)
        for env in envs for algo in algos for lag in lags for seed in seeds
    ]


def add_trace_arguments(parser: Any) -> None:
    """The options of ``adaptive-po trace`` (and ``python -m adaptive_po.bench.trace``), each help
    naming its default."""
    parser.add_argument("--envs", default="Pendulum-v1", help="comma-separated environment names (default: Pendulum-v1)")
    parser.add_argument("--algos", default="esspo,ppo", help="comma-separated algorithm names (default: esspo,ppo)")
    parser.add_argument("--lags", default="0,16", help="comma-separated policy lags (default: 0,16)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default: 0,1,2)")
    parser.add_argument("--timesteps", type=int, required=True, help="environment steps per run (required)")
    parser.add_argument("--every", type=int, default=1, help="trace every n-th update (default: 1, every update)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="runs at a time (default: one per core)")
    parser.add_argument("--out", default="runs/trace", help="where the traces go (default: runs/trace)")
    parser.add_argument("--envs-dir", default=None, help="folder of environment YAML files (default: the environments shipped with the package, or $ADAPTIVE_PO_ENVS)")
    parser.add_argument(
        "--redo-changed", action="store_true",
        help="redo finished traces whose recorded settings (budget, --every, the environment file) differ from the "
        "requested ones; without them such traces are kept and the command refuses (exit 2), naming them",
    )


def run_from_arguments(args: Any) -> int:
    split = lambda text: [x for x in str(text).split(",") if x]  # noqa: E731
    envs = split(args.envs)
    try:
        lags, seeds = [int(x) for x in split(args.lags)], [int(x) for x in split(args.seeds)]
    except ValueError as err:
        raise ValueError(f"--lags and --seeds take comma-separated integers: {err}") from None
    if args.timesteps <= 0:
        raise ValueError(f"--timesteps must be > 0, got {args.timesteps}")
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    specs = plan(
        envs, split(args.algos), lags, seeds,
        total_timesteps={e: args.timesteps for e in envs}, every={e: args.every for e in envs}, out=args.out,
        envs_dir=args.envs_dir,
    )
    from adaptive_po.bench.locks import sweep_lock

    # one writer per output folder, as for a sweep: a second trace there is refused (exit 2)
    with sweep_lock([args.out]):
        for line in check_changed(specs, args.redo_changed):
            print(f"redo  {line}", file=sys.stderr)
        paths = run_traces(specs, args.workers, args.redo_changed)
    for path in paths:
        print(path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m adaptive_po.bench.trace",
        description="Per-epoch traces inside updates: what the objective saw, epoch by epoch (the same as `adaptive-po trace`).",
    )
    add_trace_arguments(parser)
    return run_from_arguments(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
