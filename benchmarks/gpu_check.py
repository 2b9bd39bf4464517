"""The GPU check (``make gpu-check``): what one GPU machine gives the population engine, in one table.

Cells, each a real population (or process-engine run) through the bench's own code path
(:func:`adaptive_po.bench.population_engine.execute_population`, :func:`adaptive_po.bench.process_engine.execute_run`)
on a copy of the environment's YAML file whose evaluations happen only at the start and the end:

* CartPole-v1 populations of 256 and 1,024 members (MLP): environment steps per second and runs
  per hour at the CartPole budget of the classic suite (100k steps);
* an ALE population (Pong-v5, NatureCNN, uint8 frames) of 8, 16 and 32 members against one
  process-engine ALE run: environment steps per second;
* the peak GPU memory of each cell (``torch.cuda.max_memory_allocated``).

Steps per second are steady-state: environment steps between the first and the last update's
``time_elapsed`` in ``progress.csv`` (start-up and the evaluations excluded), summed over members.
Planned to finish in under 8 minutes on one GPU with 16 cores. ``--tiny`` runs the same cells at
toy sizes (a few members, 2 updates of small rollouts), on CPU too: the tests run it so the script
is known to work before a GPU is lent. ``--json`` also writes the table's rows as JSON.

Usage::

    python benchmarks/gpu_check.py                # on the GPU machine (device cuda when available)
    python benchmarks/gpu_check.py --tiny --device cpu
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from adaptive_po.bench.config import get_env_config, write_env_config_copy  # noqa: E402
from adaptive_po.bench.population_engine import execute_population  # noqa: E402
from adaptive_po.bench.run_folder import RunSpec  # noqa: E402
from adaptive_po.bench.process_engine import execute_run  # noqa: E402

ALGO = "esspo"
#: (env, members per cell, updates per run): the full check and the toy one
FULL = {"CartPole-v1": ((256, 1024), 10), "Pong-v5": ((8, 16, 32), 4)}
TINY = {"CartPole-v1": ((2, 4), 3), "Pong-v5": ((1, 2), 3)}
#: the budgets "runs per hour" refers to: the classic suite's CartPole, the Atari suite's 10M frames
RUN_BUDGET = {"CartPole-v1": 100_000, "Pong-v5": 2_500_000}


def _config_copy(env: str, folder: Path, updates: int, tiny: bool) -> tuple[Path, int]:
    """A copy of ``env``'s YAML file with evaluations only at the start and the end (and, tiny,
    small rollouts); returns the folder and the budget of ``updates`` updates."""
    hp = get_env_config(env).hyperparams
    small = dict(n_envs=2, n_steps=32, batch_size=32, n_epochs=1) if tiny else {}
    budget = updates * small.get("n_envs", hp.n_envs) * small.get("n_steps", hp.n_steps)
    changes = {f"hyperparams__{key}": value for key, value in small.items()}
    path = write_env_config_copy(env, folder, evaluation={"episodes": 1 if tiny else 2, "every": budget}, **changes)
    return path.parent, budget


def _steady_rate(run_dirs: list[Path]) -> float:
    """Environment steps per second between the first and the last update, summed over runs."""
    total = 0.0
    for run_dir in run_dirs:
        with open(run_dir / "progress.csv") as f:
            rows = list(csv.DictReader(f))
        if len(rows) < 2:
            raise SystemExit(f"{run_dir}: fewer than 2 updates, no steady-state rate")
        steps = float(rows[-1]["timesteps"]) - float(rows[0]["timesteps"])
        seconds = float(rows[-1]["time_elapsed"]) - float(rows[0]["time_elapsed"])
        total += steps / max(seconds, 1e-9)
    return total


def _peak_memory(device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    import torch

    return torch.cuda.max_memory_allocated() / 2**30


def _reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def cell(env: str, members: int, updates: int, device: str, root: Path, tiny: bool, engine: str) -> dict:
    envs_dir, budget = _config_copy(env, root / "envs", updates, tiny)
    out = root / f"{env}-{engine}-{members}"
    specs = [RunSpec("gpu-check", env, ALGO, seed, budget, out=str(out), device=device, envs_dir=str(envs_dir)) for seed in range(members)]
    _reset_peak(device)
    started = time.perf_counter()
    results = execute_population(specs) if engine == "population" else [execute_run(specs[0])]
    wall = time.perf_counter() - started
    bad = [r for r in results if r["status"] != "complete"]
    if bad:
        raise SystemExit(f"{env} {engine} x{members}: {bad[0].get('error')}\n{bad[0].get('traceback', '')[-2000:]}")
    rate = _steady_rate([Path(r["run_dir"]) for r in results])
    return {
        "env": env, "engine": engine, "members": members, "steps_per_run": budget, "wall_s": round(wall, 1),
        "env_steps_per_s": round(rate), "runs_per_hour": round(3600 * rate / RUN_BUDGET[env], 1),
        "peak_gpu_gib": None if (peak := _peak_memory(device)) is None else round(peak, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cuda or cpu")
    parser.add_argument("--tiny", action="store_true", help="toy sizes (works on CPU; what the tests run)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    import torch

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    plan = TINY if args.tiny else FULL
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "CPU"
    print(f"GPU check on {device} ({name}), {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}, torch {torch.__version__}"
          + (" (tiny sizes)" if args.tiny else ""), flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="adaptive-po-gpu-check-") as tmp:
        root = Path(tmp)
        for env, (sizes, updates) in plan.items():
            for k in sizes:
                rows.append(cell(env, k, updates, device, root, args.tiny, "population"))
                print(f"  measured {env} population of {k}", file=sys.stderr, flush=True)
            if env == "Pong-v5":
                rows.append(cell(env, 1, updates, device, root, args.tiny, "process"))
    print("\n| env | engine | members | steps per run | wall s | env steps/s (steady) | runs/hour at the suite budget (CartPole 100k steps, ALE 10M frames) | peak GPU GiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        peak = "-" if r["peak_gpu_gib"] is None else f"{r['peak_gpu_gib']:.2f}"
        print(f"| {r['env']} | {r['engine']} | {r['members']} | {r['steps_per_run']:,} | {r['wall_s']} | {r['env_steps_per_s']:,} | {r['runs_per_hour']} | {peak} |")
    process = next(r for r in rows if r["engine"] == "process")
    for r in rows:
        if r["env"] == process["env"] and r["engine"] == "population":
            print(f"{r['env']} population of {r['members']}: {r['env_steps_per_s'] / max(process['env_steps_per_s'], 1):.1f}x the process engine's steps/s")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "name": name, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
