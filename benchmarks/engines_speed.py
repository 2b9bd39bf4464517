"""Runs per hour: the process engine (one process per run) vs the population engine (K runs stacked
in one process), side by side in one invocation, plus the classic suite's projected wall time.

Usage::

    python benchmarks/engines_speed.py                 # the cells the results quote: CartPole-v1 100k, Acrobot-v1 200k; K = 10, 50 (~25 min on 2 cores)
    python benchmarks/engines_speed.py --quick         # 20k steps, K = 10, 20 (~5 min)
    python benchmarks/engines_speed.py --envs CartPole-v1 --members 10,50,100 --steps 100000 --process-runs 3
    python benchmarks/engines_speed.py --envs Breakout-MinAtar --members 16 --steps 49152 --process-runs 2   # the MinAtar CNN cell

Both engines run the same cell (``esspo``, lag 0, the environment's Zoo settings, evaluations
included) as the bench runs it: each measurement is a fresh ``python -m adaptive_po`` process with
one torch thread, timed from start to exit (imports included), one at a time so that they do not
share the cores. The process runs are timed before, between and after the populations, so that a drift in
the machine's load weighs on both engines alike. ``runs/hour/core`` is ``3600 * runs / wall``; on a machine with ``C`` cores a
sweep runs ``C`` such processes at once. The projection multiplies each engine's measured seconds
per million environment steps (per run) by the steps of the classic suite, divided over the cores.
Machines shared with other jobs are noisy: compare the ratios of one invocation, not numbers
across invocations.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from adaptive_po.bench.config import get_env_config  # noqa: E402
from adaptive_po.bench.run_folder import RunSpec  # noqa: E402
from adaptive_po.bench.suites import get_suite  # noqa: E402

ALGO = "esspo"
CHILD_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(cmd, env=CHILD_ENV, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr[-3000:]}")
    return wall


def process_wall(env: str, steps: int, seed: int, out: Path) -> float:
    """One run, one process: ``adaptive-po train``."""
    return _timed([sys.executable, "-m", "adaptive_po", "train", "--env", env, "--algo", ALGO, "--seed", str(seed),
                   "--timesteps", str(steps), "--out", str(out), "--suite-name", "process", "--device", "cpu",
                   "--engine", "process"])


def population_wall(env: str, steps: int, members: int, out: Path) -> float:
    """``members`` runs (seeds 0..K-1) in one process, through the engine's worker entry point."""
    out = out / f"population-{env}-{members}"  # a fresh results root: nothing to skip
    out.mkdir()
    specs = [RunSpec("population", env, ALGO, seed, steps, out=str(out), device="cpu").to_dict() for seed in range(members)]
    spec_file = out / f"population-{env}-{members}.json"
    result_file = out / f"population-{env}-{members}.result.json"
    spec_file.write_text(json.dumps(specs))
    wall = _timed([sys.executable, "-m", "adaptive_po", "_run_population", str(spec_file), "--result", str(result_file)])
    statuses = [r["status"] for r in json.loads(result_file.read_text())]
    if statuses.count("complete") != members:
        raise SystemExit(f"population of {members} on {env}: {statuses}")
    return wall


def classic_steps() -> dict[str, int]:
    """Environment steps of the classic suite per environment (runs x budget)."""
    suite = get_suite("classic")
    runs_per_env = len(suite.algos) * suite.seeds * len(suite.lags) * len(suite.noise) * len(suite.replay)
    return {env: runs_per_env * get_env_config(env).budget["classic"] for env in suite.envs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="CartPole-v1,Acrobot-v1")
    parser.add_argument("--steps", default=None, help="steps per run, one per env (default: 100000 CartPole, 200000 Acrobot)")
    parser.add_argument("--members", default="10,50", help="population sizes")
    parser.add_argument("--process-runs", type=int, default=3, help="process-engine runs timed per env, before, between and after the populations")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores the projection divides over")
    parser.add_argument("--quick", action="store_true", help="20k steps, populations of 10 and 20, one process run")
    args = parser.parse_args()
    envs = [e for e in args.envs.split(",") if e]
    members = [int(k) for k in args.members.split(",")]
    default_steps = {"CartPole-v1": 100_000, "Acrobot-v1": 200_000}
    steps = dict(zip(envs, map(int, args.steps.split(",")))) if args.steps else {e: default_steps.get(e, 100_000) for e in envs}
    process_runs = args.process_runs
    if args.quick:
        steps, members, process_runs = {e: 20_000 for e in envs}, [10, 20], 1

    rows = []
    speed: dict[str, dict[str, float]] = {}  # engine -> env -> seconds per million steps per run (one core)
    with tempfile.TemporaryDirectory(prefix="adaptive-po-perf-") as tmp:
        out = Path(tmp)
        for env in envs:
            n = steps[env]
            # process runs bracket the populations (before, between, after), so that a slow drift
            # of the machine's load weighs on both engines alike
            walls = [process_wall(env, n, 0, out)]
            measured = []
            for i, k in enumerate(members):
                measured.append((k, population_wall(env, n, k, out)))
                if len(walls) < process_runs:
                    walls.append(process_wall(env, n, i + 1, out))
            per_run = sum(walls) / len(walls)
            rows.append((env, n, "process", 1, per_run, 3600 / per_run))
            speed.setdefault("process", {})[env] = per_run / n * 1e6
            for k, wall in measured:
                rows.append((env, n, "population", k, wall, 3600 * k / wall))
                speed.setdefault(f"population K={k}", {})[env] = wall / k / n * 1e6
            print(f"measured {env}", file=sys.stderr, flush=True)

    print(f"\nRuns per hour per core, {ALGO}, lag 0, evaluations included (one torch thread per process)\n")
    print("| env | steps per run | engine | runs per process | wall s | runs/hour/core | vs process |")
    print("|---|---:|---|---:|---:|---:|---:|")
    base = {env: rate for env, _, engine, _, _, rate in rows if engine == "process"}
    for env, n, engine, k, wall, rate in rows:
        print(f"| {env} | {n:,} | {engine} | {k} | {wall:.1f} | {rate:.0f} | {rate / base[env]:.2f}x |")

    total = classic_steps()
    if not set(envs) & set(total):
        return  # (the MinAtar cell of `make perf`: no classic environment measured, nothing to project)
    print(f"\nClassic suite ({sum(total.values()):,} environment steps over {len(total)} envs) projected on {args.cores} cores:")
    print("| engine | s per million steps per run (mean of measured envs) | projected wall hours |")
    print("|---|---:|---:|")
    for engine, per_env in speed.items():
        mean = sum(per_env.values()) / len(per_env)
        # measured envs at their own speed, the others at the mean of the measured ones
        seconds = sum(steps_ * per_env.get(env, mean) / 1e6 for env, steps_ in total.items())
        print(f"| {engine} | {mean:.0f} | {seconds / args.cores / 3600:.1f} |")
    unmeasured = sorted(set(total) - set(envs))
    if unmeasured:
        print(f"\n(projection: {', '.join(unmeasured)} at the mean speed of the measured environments)")


if __name__ == "__main__":
    main()
