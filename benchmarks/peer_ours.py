"""Our side of ``benchmarks/peers.py``: one population of K members through the bench's population
engine (the compiled step, one torch thread), twice in one process, on the one core this process
is pinned to; prints one JSON object on its last line.

``cold``: the process's CPU and wall seconds from its start (imports included) to the end of the
first population (compilation included); ``warm``: a second population of other seeds in the same
process (the compiled step reused), the counterpart of the peer's second call. ``breakdown``: after
both, a third, shorter population (``--profile-steps``) under torch's profiler, its CPU seconds by
where they went (:func:`breakdown`). ``isa``: after those,
what instruction sets the process ran (``peer_isa.torch_evidence``: ATen's level, inductor's vector
ISA and ``-march``, the AVX-512 instructions in the kernels it built, oneDNN's and MKL's ISA).
"""

from __future__ import annotations

import sys
from typing import Any

import peer_clock  # first: the process's clock starts here


def main() -> int:
    import argparse
    import json
    import os
    from pathlib import Path

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--algo", default="ppo")
    p.add_argument("--members", type=int, default=50)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--envs-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--profile-steps", type=int, default=None, help="steps per member of the profiled population (default: a quarter of --steps; 0: none)")
    args = p.parse_args()
    os.environ.setdefault("ADAPTIVE_PO_COMPILE", "1")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import torch

    torch.set_num_threads(1)
    from adaptive_po.bench.population_engine import execute_population
    from adaptive_po.bench.run_folder import RunSpec

    def population(name: str, seeds: range, steps: int = args.steps) -> list[float]:
        specs = [RunSpec("peers", args.env, args.algo, seed, steps, out=str(Path(args.out) / name), envs_dir=args.envs_dir,
                         tensorboard=False) for seed in seeds]
        outcomes = execute_population(specs)
        bad = [o for o in outcomes if o["status"] != "complete"]
        if bad:
            raise SystemExit(f"{len(bad)} members did not complete: {bad[0].get('error', bad[0])}")
        return [json.loads((Path(o["run_dir"]) / "summary.json").read_text())["final_eval_return_mean"] for o in outcomes]

    import resource

    from adaptive_po import compiled as CP

    before = {"cpu_s": peer_clock.cpu(), "wall_s": peer_clock.wall()}
    returns = population("cold", range(args.members))
    cold = {"cpu_s": peer_clock.cpu(), "wall_s": peer_clock.wall()}
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    first_calls: dict[str, float] = {}  # each compiled callable's first calls: tracing, compiling, building its kernels
    for (key, _), seconds in CP.COMPILE_SECONDS.items():
        kind = key[0] if key[0] in ("act", "forward") else "step"
        first_calls[kind] = first_calls.get(kind, 0.0) + seconds
    cold["parts"] = {"before_population": before, "first_calls_wall_s": first_calls, "children_cpu_s": children.ru_utime + children.ru_stime}
    warm_returns, warm = peer_clock.measure(lambda: population("warm", range(args.members, 2 * args.members)))
    profile_steps = args.steps // 4 if args.profile_steps is None else args.profile_steps
    parts = None
    if profile_steps > 0:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            _, measured = peer_clock.measure(lambda: population("profiled", range(2 * args.members, 3 * args.members), profile_steps))
        parts = {"steps": profile_steps, "cpu_s": measured["cpu_s"], **breakdown(prof.key_averages(), measured["cpu_s"], measured["wall_s"])}
    import peer_isa

    print(json.dumps({"engine": "adaptive-po", "torch": torch.__version__, "members": args.members, "cold": cold, "warm": warm,
                      "final_returns": returns, "warm_final_returns": warm_returns, "breakdown": parts, "isa": peer_isa.torch_evidence()}))
    return 0


#: the profiler's names of the matrix products ATen hands to its BLAS (MKL here)
MATMUL_OPS = ("aten::bmm", "aten::mm", "aten::addmm", "aten::baddbmm", "aten::matmul")


def breakdown(averages: Any, cpu_s: float, wall_s: float) -> dict[str, float]:
    """A profiled population's CPU seconds by where they went, from the profiler's self times (each
    op's own time, its callees' apart): ``matmul`` (ATen's matrix products, :data:`MATMUL_OPS`: the
    BLAS), ``generated`` (the compiled graphs' own time: inductor's generated C++ kernels and their
    wrappers), ``aten`` (every other ATen op) and ``outside`` (the rest of ``cpu_s``: Python, the
    environments' stepping, the dispatcher and the profiler's own cost). The profiler times by the
    wall clock: each part is its share of the population's ``wall_s`` times ``cpu_s`` (the same on
    a pinned core of its own, as in peers.py; a shared core's waits spread over every part)."""
    out = {"matmul": 0.0, "generated": 0.0, "aten": 0.0}
    for event in averages:
        seconds = event.self_cpu_time_total / 1e6
        if event.key in MATMUL_OPS:
            out["matmul"] += seconds
        elif "CompiledFxGraph" in event.key:
            out["generated"] += seconds
        elif event.key.startswith("aten::"):
            out["aten"] += seconds
    scale = cpu_s / wall_s if wall_s > 0 else 0.0
    out = {part: seconds * scale for part, seconds in out.items()}
    out["outside"] = cpu_s - sum(out.values())
    return out


if __name__ == "__main__":
    sys.exit(main())
