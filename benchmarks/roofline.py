"""The population engine against the core's arithmetic: one table, printed and written to
``docs/results/perf.md``.

For each cell (CartPole-v1 50 members, minibatch 256; Pendulum-v1 10 members, minibatch 64;
LunarLander-v3 10 members, minibatch 64; Breakout-MinAtar CNN 16 members, minibatch 1024; each
environment's own settings, ``esspo``), on one core (``torch.set_num_threads(1)``):

* **step**: one stacked minibatch step (``vmap(grad(member loss))`` plus the per-member Adam, what
  :meth:`adaptive_po.population.PopulationLearner.update` runs per minibatch), median ms, eager and
  compiled (``torch.compile``, inductor), with the compilation's one-time seconds;
* **useful GFLOP/s**: the networks' matrix-product and convolution FLOPs of that step (forward and
  backward, counted by ``torch.utils.flop_counter`` on the eager step) over its time;
* **bf16**: the compiled step of the ``precision=bf16`` variant's learner (MLP cells), beside float32's;
* **bmm GFLOP/s**: a batched matmul of the cell's largest layer's shape (``[K, B, in] x [K, in, out]``)
  on the same core, the rate the step's arithmetic could run at;
* **shares**: where a short population run's time goes (compiled step, compilation excluded: it is
  paid once per process and shown in its own column): update, act, environment, evaluation,
  set-up, the rest (collection bookkeeping, files).

``--baseline TREE`` (a checkout of older code, e.g. ``git worktree add ../base <commit>``) adds, in
the same invocation, that tree's eager step on the same cells and the end-to-end runs per hour per
core of the Pendulum and LunarLander populations (the quick suite's budgets) and of the MinAtar CNN's (a fresh
``python -m adaptive_po _run_population`` process each, as the bench runs them) for both trees, as
ratios.

    python benchmarks/roofline.py                 # all cells, short profiled runs (a few minutes)
    python benchmarks/roofline.py --cells Pendulum-v1 --no-write
    python benchmarks/roofline.py --baseline ../adaptive-po-base   # plus before/after ratios (~15 min)

Machines shared with other jobs are noisy: compare the ratios of one invocation.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__" and os.environ.get("ROOFLINE_TREE") is None:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

ALGO = "esspo"
#: cell -> (members, environment steps per member of the short profiled run)
CELLS: dict[str, tuple[int, int]] = {
    "CartPole-v1": (50, 10_240),
    "Pendulum-v1": (10, 20_480),
    "LunarLander-v3": (10, 32_768),
    "Breakout-MinAtar": (16, 16_384),
}
#: the cells whose network has convolutions: their learner trains in float32 only
CNN_CELLS = ("Breakout-MinAtar",)
#: the end-to-end cells of ``--baseline``: the quick suite's populations (its budgets), and the
#: MinAtar CNN's population (the profiled cell's size)
END_TO_END = {"Pendulum-v1": (10, 100_000), "LunarLander-v3": (10, 200_000), "Breakout-MinAtar": (16, 16_384)}
OUT = ROOT / "docs" / "results" / "perf.md"


# -- one cell's learner and minibatch ---------------------------------------------------------------
def build(env: str, members: int, compile_step: bool | None, precision: str = "fp32"):
    """The population learner of ``env``'s cell as the engine builds it (``precision``: the learner's,
    the ``precision=bf16`` variant's), a random minibatch of its shapes, and the step's face; works on
    older trees too (no ``compile_step`` there)."""
    from adaptive_po import distributions as D
    from adaptive_po.bench.config import get_env_config
    from adaptive_po.bench.run_folder import RunSpec, run_settings
    from adaptive_po.environments import make_vec_env, resolve_backend
    from adaptive_po.population import Member, PopulationLearner, StackedRollout, _StackedFace
    from adaptive_po.update import replay_information, training_data

    cfg = get_env_config(env)
    hp, objective_kwargs = run_settings(RunSpec("roofline", env, ALGO, 0, 1000, out=tempfile.gettempdir(), device="cpu"), cfg.hyperparams)
    backend, env_id = resolve_backend(cfg.ids, "auto")
    vec = make_vec_env(env_id, 1, 0, backend)
    observation_space, action_space = vec.observation_space, vec.action_space
    vec.close()
    extra = {}
    if "compile_step" in inspect.signature(PopulationLearner.__init__).parameters:
        extra["compile_step"] = compile_step
    if precision != "fp32":
        extra["precision"] = precision
    try:
        from adaptive_po.bench.process_settings import keep_freed_memory
    except ImportError:  # an older tree: its learner set the allocator itself
        pass
    else:
        keep_freed_memory()  # the allocator as the bench's training process has it
    learner = PopulationLearner(
        observation_space, action_space, [Member(seed) for seed in range(members)], objective=ALGO,
        objective_kwargs=objective_kwargs, policy=hp.policy, **extra, **hp.algorithm_kwargs(),
    )
    k, e = members, hp.n_envs
    t = max(1, math.ceil(hp.batch_size / e))
    g = torch.Generator().manual_seed(0)
    shape = observation_space.shape
    if observation_space.dtype == np.uint8:
        obs = torch.randint(0, 2, (k, t, e, *shape), generator=g, dtype=torch.uint8)
    else:
        obs = torch.randn(k, t, e, *shape, generator=g)
    actions, blp, params = learner.act(obs.reshape(k, t * e, *shape))
    s = (k, t, e)
    rollout = StackedRollout(
        obs, actions.reshape(*s, *actions.shape[2:]), torch.randn(s, generator=g), torch.zeros(s), blp.reshape(s),
        params.reshape(*s, -1), torch.zeros(s, dtype=torch.bool), torch.zeros_like(obs), obs[:, 0], torch.zeros(k, e),
    )
    face = _StackedFace(learner, 3e-4)
    data = training_data(face, [rollout])
    data["proximal_log_prob"] = D.log_prob(learner.kind, face.dist_params(data), data["actions"]).detach()
    data["fresh"], replay_ess = replay_information(data["proximal_log_prob"], data["behaviour_log_prob"], t * e)
    minibatch = face.select(data, next(iter(face.minibatches(t * e))))
    minibatch["replay_ess"] = replay_ess
    arguments = {**learner.objective_arguments(0.7), **learner.objective_state}
    return learner, face, minibatch, arguments, hp


def median_ms(fn, repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def step_ms(env: str, members: int, compiled: bool, repeats: int, precision: str = "fp32") -> dict[str, float]:
    """The stacked step's median ms (and, compiled, the first call's seconds: the compilation)."""
    learner, face, minibatch, arguments, _ = build(env, members, compiled, precision)
    call = lambda: face.step(minibatch, arguments, None)  # noqa: E731
    started = time.perf_counter()
    call()
    first = time.perf_counter() - started
    return {"ms": median_ms(call, repeats), "first_s": first}


def step_flops(env: str, members: int) -> tuple[int, tuple[int, ...]]:
    """The eager step's matrix-product and convolution FLOPs (forward and backward), and the largest
    layer's ``(K, B, in, out)``."""
    from torch.utils.flop_counter import FlopCounterMode

    learner, face, minibatch, arguments, hp = build(env, members, False)
    with FlopCounterMode(display=False) as counter:
        face.step(minibatch, arguments, None)
    widest = max((v for v in learner.params.values() if v.dim() == 3), key=lambda v: v.shape[1] * v.shape[2])
    return counter.get_total_flops(), (members, hp.batch_size, widest.shape[2], widest.shape[1])


def bmm_gflops(k: int, b: int, n_in: int, n_out: int, repeats: int) -> float:
    x, w = torch.randn(k, b, n_in), torch.randn(k, n_in, n_out)
    ms = median_ms(lambda: torch.bmm(x, w), repeats * 4)
    return 2 * k * b * n_in * n_out / ms / 1e6


# -- where a short population run's time goes ---------------------------------------------------------
def profiled_run(env: str, members: int, steps: int) -> dict[str, float]:
    """Seconds of a population run (``members`` x ``steps``, compiled step) by part: set-up (until
    training starts), update, act, env (training environment steps), evaluation, other, each
    without the compilations that happened inside it (``compile``: their sum); and the total."""
    from adaptive_po import compiled as CP
    from adaptive_po.bench.population_engine import PopulationObserver, execute_population
    from adaptive_po.bench.run_folder import RunSpec
    from adaptive_po.compile_setup import COMPILE_ENV

    seconds = dict.fromkeys(("set-up", "update", "compile", "act", "env", "evaluation"), 0.0)

    def timed(part, fn):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            start, compiled = time.perf_counter(), sum(CP.COMPILE_SECONDS.values())
            try:
                return fn(*args, **kwargs)
            finally:
                compiling = sum(CP.COMPILE_SECONDS.values()) - compiled
                seconds[part] += time.perf_counter() - start - compiling
                seconds["compile"] += compiling

        return wrapper

    class Timer(PopulationObserver):
        def started(self, population) -> None:  # type: ignore[no-untyped-def]
            seconds["set-up"] = time.perf_counter() - began
            population.learner.update = timed("update", population.learner.update)
            population.learner.act = timed("act", population.learner.act)
            population.train_env.step = timed("env", population.train_env.step)
            population.evaluate = timed("evaluation", population.evaluate)

    previous = os.environ.get(COMPILE_ENV)
    os.environ[COMPILE_ENV] = "1"
    try:
        with tempfile.TemporaryDirectory(prefix="adaptive-po-roofline-") as tmp:
            specs = [RunSpec("roofline", env, ALGO, seed, steps, out=tmp, device="cpu", tensorboard=False) for seed in range(members)]
            began = time.perf_counter()
            results = execute_population(specs, Timer())
            total = time.perf_counter() - began
    finally:
        if previous is None:
            os.environ.pop(COMPILE_ENV)
        else:
            os.environ[COMPILE_ENV] = previous
    failed = [r for r in results if r["status"] != "complete"]
    if failed:
        raise SystemExit(f"{env}: {failed[0].get('error')}")
    seconds["other"] = total - sum(seconds.values())
    seconds["total"] = total - seconds["compile"]
    return seconds


# -- end to end, and the older tree ---------------------------------------------------------------------
def tree_env(tree: Path, compile_setting: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ROOFLINE_TREE": str(tree)}
    if compile_setting is not None:
        env["ADAPTIVE_PO_COMPILE"] = compile_setting
    return env


def baseline_steps(tree: Path, cells: list[str], repeats: int) -> dict[str, float]:
    """The older tree's eager step (ms) per cell, measured by this script in a process that imports
    that tree."""
    out = subprocess.run(
        [sys.executable, __file__, "--step-worker", ",".join(cells), "--repeats", str(repeats)],
        env=tree_env(tree), cwd=tree, capture_output=True, text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"the baseline's step worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def population_wall(tree: Path, env: str, members: int, steps: int, tmp: Path, compile_setting: str | None = None) -> float:
    """Seconds of one population (seeds 0..K-1) in a fresh process of ``tree``, start to exit."""
    from adaptive_po.bench.run_folder import RunSpec

    out = Path(tempfile.mkdtemp(dir=tmp))
    specs = [RunSpec("population", env, ALGO, seed, steps, out=str(out), device="cpu").to_dict() for seed in range(members)]
    (out / "specs.json").write_text(json.dumps(specs))
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "adaptive_po", "_run_population", str(out / "specs.json"), "--result", str(out / "result.json")],
        env=tree_env(tree, compile_setting), cwd=tree, capture_output=True, text=True,
    )
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{env} population in {tree} failed:\n{result.stderr[-3000:]}")
    statuses = [r["status"] for r in json.loads((out / "result.json").read_text())]
    if statuses.count("complete") != members:
        raise SystemExit(f"{env} population in {tree}: {statuses}")
    return wall


# -- the table ----------------------------------------------------------------------------------------
def measure(cells: list[str], repeats: int, profile: bool) -> list[dict[str, float | str]]:
    rows = []
    for env in cells:
        members, steps = CELLS[env]
        flops, (k, b, n_in, n_out) = step_flops(env, members)
        eager = step_ms(env, members, False, repeats)
        compiled = step_ms(env, members, True, repeats)
        # the bf16 learner (the precision=bf16 variant: an explicit, recorded choice): MLP cells only
        bf16 = step_ms(env, members, True, repeats, "bf16")["ms"] if env not in CNN_CELLS else float("nan")
        row: dict[str, float | str] = {
            "cell": env, "members": members, "minibatch": b, "eager_ms": eager["ms"], "compiled_ms": compiled["ms"], "bf16_ms": bf16,
            "compile_s": compiled["first_s"], "mflop": flops / 1e6, "bmm_shape": f"[{k}, {b}, {n_in}] x [{k}, {n_in}, {n_out}]",
            "bmm_gflops": bmm_gflops(k, b, n_in, n_out, repeats),
        }
        if profile:
            seconds = profiled_run(env, members, steps)
            row.update({f"share_{part}": seconds[part] / seconds["total"] for part in seconds if part not in ("total", "compile")})
            row["run_s"], row["run_compile_s"], row["run_steps"] = seconds["total"], seconds["compile"], steps
        rows.append(row)
        print(f"measured {env}", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict], baseline: dict[str, float] | None, end_to_end: list[tuple] | None) -> str:
    lines = [
        f"One core (torch.set_num_threads(1)), `{ALGO}`, each environment's own settings; torch {torch.__version__}.",
        "",
        "| cell | K | minibatch | eager step ms | compiled step ms | eager/compiled | compile s | MFLOP per step | useful GFLOP/s eager | useful GFLOP/s compiled | bmm GFLOP/s (shape) | compiled / bmm | compiled bf16 step ms | fp32/bf16 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        useful_e, useful_c = r["mflop"] / r["eager_ms"], r["mflop"] / r["compiled_ms"]
        lines.append(
            f"| {r['cell']} | {r['members']} | {r['minibatch']} | {r['eager_ms']:.2f} | {r['compiled_ms']:.2f} | "
            f"{r['eager_ms'] / r['compiled_ms']:.1f}x | {r['compile_s']:.1f} | {r['mflop']:.1f} | {useful_e:.1f} | {useful_c:.1f} | "
            f"{r['bmm_gflops']:.1f} ({r['bmm_shape']}) | {useful_c / r['bmm_gflops']:.0%} | "
            + (f"{r['bf16_ms']:.2f} | {r['compiled_ms'] / r['bf16_ms']:.1f}x |" if r["bf16_ms"] == r["bf16_ms"] else "fp32 only | |")
        )
    lines += [
        "",
        "The bf16 column is the `precision=bf16` variant's learner (the network under bfloat16 autocast; parameters,",
        "optimizer and objective in float32): an explicit choice recorded in the run's folder and `config.json`, never",
        "the default. Its effect on returns is measured apart (`benchmarks/bf16_effect.py`, docs/results/bf16.md).",
    ]
    parts = ("update", "act", "env", "evaluation", "set-up", "other")
    if rows and "run_s" in rows[0]:
        lines += [
            "",
            "Where a short population run's time goes (compiled; the compilations the run still paid, for shapes the step",
            "measurement above had not met, are excluded from the shares and shown apart):",
            "",
            "| cell | steps per member | run s | compile s in the run | " + " | ".join(parts) + " |",
            "|---|---:|---:|---:|" + "---:|" * len(parts),
        ]
        for r in rows:
            shares = " | ".join(f"{r['share_' + p]:.0%}" for p in parts)
            lines.append(f"| {r['cell']} | {r['run_steps']:,} | {r['run_s']:.1f} | {r['run_compile_s']:.1f} | {shares} |")
    if baseline:
        lines += ["", "The older tree's eager step against this tree's compiled step (same invocation):", "",
                  "| cell | older step ms | compiled step ms | faster |", "|---|---:|---:|---:|"]
        for r in rows:
            if r["cell"] in baseline:
                lines.append(f"| {r['cell']} | {baseline[r['cell']]:.2f} | {r['compiled_ms']:.2f} | {baseline[r['cell']] / r['compiled_ms']:.1f}x |")
    if end_to_end:
        lines += ["", "End to end, one population per fresh process (evaluations included), runs per hour per core:", "",
                  "| cell | K x steps | older tree s | this tree s (auto) | older runs/h | this runs/h | faster |", "|---|---|---:|---:|---:|---:|---:|"]
        for env, k, steps, old, new in end_to_end:
            lines.append(f"| {env} | {k} x {steps:,} | {old:.1f} | {new:.1f} | {3600 * k / old:.0f} | {3600 * k / new:.0f} | {old / new:.2f}x |")
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as handle:
        handle.write(text)
    os.replace(handle.name, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", default=",".join(CELLS), help="comma-separated cells (default: all four)")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per step measurement (median)")
    parser.add_argument("--no-profile", action="store_true", help="skip the short profiled population runs (the shares)")
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout of older code: its step and end-to-end runs per hour beside this tree's")
    parser.add_argument("--no-write", action="store_true", help=f"print only; do not write {OUT.relative_to(ROOT)}")
    parser.add_argument("--step-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.step_worker is not None:  # inside the older tree: its eager step per cell, as JSON
        print(json.dumps({env: step_ms(env, CELLS[env][0], False, args.repeats)["ms"] for env in args.step_worker.split(",")}))
        return
    cells = [c for c in args.cells.split(",") if c]
    unknown = sorted(set(cells) - set(CELLS))
    if unknown:
        raise SystemExit(f"unknown cells {unknown}; known: {list(CELLS)}")
    rows = measure(cells, args.repeats, not args.no_profile)
    baseline = end_to_end = None
    if args.baseline is not None:
        baseline = baseline_steps(args.baseline.resolve(), cells, args.repeats)
        end_to_end = []
        with tempfile.TemporaryDirectory(prefix="adaptive-po-e2e-") as tmp:
            for env, (k, steps) in END_TO_END.items():
                if env in cells:
                    # older, this, older: a drift of the machine's load weighs on both alike
                    old = [population_wall(args.baseline.resolve(), env, k, steps, Path(tmp))]
                    new = population_wall(ROOT, env, k, steps, Path(tmp))
                    old.append(population_wall(args.baseline.resolve(), env, k, steps, Path(tmp)))
                    end_to_end.append((env, k, steps, sum(old) / 2, new))
                    print(f"end to end {env}", file=sys.stderr, flush=True)
    text = table(rows, baseline, end_to_end)
    print(text)
    if not args.no_write:
        from peers import BEGIN, END  # the peer benchmark's section of the same file is kept as it is

        old = OUT.read_text() if OUT.exists() else ""
        kept = BEGIN + old.split(BEGIN, 1)[1].split(END, 1)[0] + END + "\n" if BEGIN in old and END in old else ""
        write_atomically(OUT, "# The population engine against the core's arithmetic\n\n"
                         "Written by `make perf` (`benchmarks/roofline.py`); the numbers are one machine's, "
                         "read the ratios.\n\n" + text + ("\n" + kept if kept else ""))


if __name__ == "__main__":
    main()
