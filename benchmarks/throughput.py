"""Environment throughput: raw envpool vs adaptive_po's envpool VecEnv vs the Python vector envs.

Usage::

    python benchmarks/throughput.py            # ~3 min on 2 cores
    python benchmarks/throughput.py --quick    # ~40 s
    python benchmarks/throughput.py --steps 5000 --rounds 30 --pairs 100 --envs CartPole-v1
    python benchmarks/throughput.py --envs '' --train-envs CartPole-v1 --train-rounds 9   # end to end only

Rows (8 envs each, uniformly random actions, pre-generated so RNG cost is excluded):

* ``envpool raw step()``      - envpool's own gymnasium pool, its public ``step`` in a loop
  (same configuration as our adapter: threads, Atari settings).  The reference.
* ``envpool raw _send/_recv`` (with ``--floor``) - the same pool driven through its private
  C++ calls, without envpool's Python conversion layer: the floor for any Python adapter.
  With nothing but two C++ calls per step its speed is bimodal on a busy 2-core machine
  (the worker thread either spins on a free core or must be woken), hence off by default.
* ``adaptive_po envpool``     - :class:`adaptive_po.environments.EnvpoolVecEnv` (SB3 ``VecEnv`` with
  same-step resets, terminal observations and episode statistics, over envpool's public
  ``send``/``recv``), fed int64 actions as SB3 policies produce them.
* ``gymnasium SyncVectorEnv`` / ``AsyncVectorEnv`` - gymnasium's own vector envs.
* ``SB3 DummyVecEnv``         - what ``make_vec_env(..., backend="gymnasium")`` returns.
* ``SB3 SubprocVecEnv``       - one process per env.

(CartPole's ``adaptive_po envpool`` row steps the in-process pool,
:mod:`adaptive_po.environments.cartpole`.) After the table, the environments the population engine
steps in this process, at a population's size, against what they replace
(:func:`bench_in_process`).

For Pong-v5 every Python-side row uses the same preprocessing chain as the gymnasium
backend (AtariPreprocessing + FIRE reset + frame stack + Monitor + episodic life + clip),
so all rows do the same emulation work.

Fairness on a noisy shared machine: every backend is built and warmed up first, then the
measurement runs in rounds; each round times one block per backend in a rotated order, so
slow drifts hit all rows alike.  A block runs ``--steps`` vector steps or stops at
``--block-time`` seconds, whichever comes first (garbage is collected before each block).
The table shows the median over rounds (and the min-max range); its ratio column is the
median of the per-round ratios to raw envpool.  Because a machine shared with other jobs
swings by 2-3x within seconds, the adapter's ratio is then measured once more from
``--pairs`` short blocks alternating adapter and raw envpool (A B B A ...) and printed
under the table: that median is the number to quote.

What matters is a whole training run, not env stepping alone, so the table is followed by
an end-to-end check (:func:`bench_training`, ``--train-envs``): short ESSPO runs on
CartPole-v1 and Pong-v5 (8 envs, envpool backend, CPU, one torch thread), alternating the
adapter with a bare VecEnv over raw envpool's ``_send/_recv`` (the floor above), with the
time inside the step calls measured.  The gap between the two is the most that any faster
adapter (spare envs instead of re-stepping finished envs, envpool's private calls instead
of its public ones: both were measured and removed) could take off the run; ``kept/ideal``
is the run time over the run time minus that gap.  The adapter keeps a faster path only if
it would save more than 5% of a whole run.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

warnings.filterwarnings("ignore", message=".*precision lowered by casting.*")

N_ENVS = 8
RAW = "envpool raw step()"
RAW_CPP = "envpool raw _send/_recv"
OURS = "adaptive_po envpool"


class Runner:
    """One backend: ``step(i)`` performs vector step ``i`` with the pre-generated actions."""

    def __init__(self, name: str, env: Any, step: Callable[[int], Any], reset: Callable[[], Any], close: Callable[[], Any]):
        self.name, self.env, self.step, self.reset, self.close = name, env, step, reset, close
        self.sps: list[float] = []


def build_runners(env_id: str, seed: int, actions: np.ndarray, floor: bool = False) -> list[Runner]:
    import envpool
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from adaptive_po import environments as E
    from adaptive_po.environments.gymnasium_backend import make_gym_atari
    from adaptive_po.environments.ids import envpool_id, gymnasium_id

    atari = E.is_atari(env_id)
    n = N_ENVS
    a32 = actions.astype(np.int32)
    a64 = actions.astype(np.int64)
    T = len(actions)
    runners: list[Runner] = []

    def gym_env_fn(rank: int) -> Callable[[], gym.Env]:
        def _init() -> gym.Env:
            if atari:
                return make_gym_atari(gymnasium_id(env_id), training=True)  # type: ignore[arg-type]
            return Monitor(gym.make(env_id))

        return _init

    def plain_gym_fn() -> gym.Env:  # gymnasium's own vector env gets the plain env on classic control
        return gym.make(env_id)

    # Process-based backends first: fork before any envpool thread exists in this process.
    def add(name: str, make: Callable[[], Runner]) -> None:
        try:
            runners.append(make())
        except Exception as exc:  # keep benchmarking the others
            print(f"  [{env_id}] {name}: not available ({type(exc).__name__}: {exc})", file=sys.stderr)

    def subproc() -> Runner:
        v = SubprocVecEnv([gym_env_fn(i) for i in range(n)], start_method="fork")
        v.seed(seed)
        return Runner("SB3 SubprocVecEnv", v, lambda i: v.step(a64[i % T]), v.reset, v.close)

    def async_vec() -> Runner:
        fns = [gym_env_fn(i) if atari else plain_gym_fn for i in range(n)]
        v = gym.vector.AsyncVectorEnv(fns, context="fork")
        return Runner("gymnasium AsyncVectorEnv", v, lambda i: v.step(a64[i % T]), lambda: v.reset(seed=seed), v.close)

    def sync_vec() -> Runner:
        fns = [gym_env_fn(i) if atari else plain_gym_fn for i in range(n)]
        v = gym.vector.SyncVectorEnv(fns)
        return Runner("gymnasium SyncVectorEnv", v, lambda i: v.step(a64[i % T]), lambda: v.reset(seed=seed), v.close)

    def dummy() -> Runner:
        v = DummyVecEnv([gym_env_fn(i) for i in range(n)])
        v.seed(seed)
        return Runner("SB3 DummyVecEnv", v, lambda i: v.step(a64[i % T]), v.reset, v.close)

    def ours() -> Runner:
        v = E.make_vec_env(env_id, n, seed, backend="envpool")
        return Runner(OURS, v, lambda i: v.step(a64[i % T]), v.reset, v.close)

    def raw_kwargs() -> dict[str, Any]:  # our adapter's configuration, with exactly n envs
        return {**ours_runner.env.envpool_make_kwargs(), "num_envs": n, "batch_size": n}

    def raw() -> Runner:
        pool = envpool.make_gymnasium(envpool_id(env_id), **raw_kwargs())
        return Runner(RAW, pool, lambda i: pool.step(a32[i % T]), pool.reset, pool.close)

    def raw_cpp() -> Runner:
        pool = envpool.make_gymnasium(envpool_id(env_id), **raw_kwargs())
        ids = np.arange(n, dtype=np.int32)

        def step(i: int) -> None:
            pool._send([ids, ids, a32[i % T]])
            pool._recv()

        return Runner(RAW_CPP, pool, step, pool.reset, pool.close)

    add("SB3 SubprocVecEnv", subproc)
    add("gymnasium AsyncVectorEnv", async_vec)
    add("gymnasium SyncVectorEnv", sync_vec)
    add("SB3 DummyVecEnv", dummy)
    add(OURS, ours)
    if runners and runners[-1].name == OURS:  # the raw pools copy our adapter's envpool configuration
        ours_runner = runners[-1]
        add(RAW, raw)
        if floor:
            add(RAW_CPP, raw_cpp)
    return runners


def time_block(r: Runner, start: int, max_steps: int, max_seconds: float, chunk: int) -> tuple[float, int]:
    step = r.step
    t0 = time.perf_counter()
    done = 0
    deadline = t0 + max_seconds
    while done < max_steps:
        for i in range(start + done, start + done + chunk):
            step(i)
        done += chunk
        if time.perf_counter() >= deadline:
            break
    return done / (time.perf_counter() - t0), done


Row = tuple[str, float, float, float, "float | None", "tuple[float, float] | None"]


def bench_env(env_id: str, args: argparse.Namespace) -> tuple[list[Row], str]:
    from adaptive_po import environments as E

    rng = np.random.default_rng(0)
    atari = E.is_atari(env_id)
    probe = E.make_vec_env(env_id, 1, 0)
    n_actions = probe.action_space.n  # discrete-action envs only
    probe.close()
    actions = rng.integers(0, n_actions, size=(max(args.steps, 1024), N_ENVS))
    t_build = time.perf_counter()
    runners = build_runners(env_id, args.seed, actions, floor=args.floor)
    build_s = time.perf_counter() - t_build
    warm = args.warmup // (8 if atari else 1)
    for r in runners:
        r.reset()
        for i in range(warm):
            r.step(i)
    gc.collect()
    gc.freeze()  # long-lived objects (torch, SB3, envs) out of the collector: gc.collect() gets cheap
    chunk = 4 if atari else 32
    max_steps = max(chunk, args.steps // (8 if atari else 1))
    cursor = warm

    # Phase 1: the table.  Rounds of one block per backend, in a rotated order.
    ratios: dict[str, list[float]] = {r.name: [] for r in runners}
    for rnd in range(args.rounds):
        k = rnd % len(runners)
        block: dict[str, float] = {}
        for r in runners[k:] + runners[:k]:
            gc.collect()  # garbage left by the previous row is not this row's cost
            sps, _ = time_block(r, cursor, max_steps, args.block_time, chunk)
            r.sps.append(sps * N_ENVS)
            block[r.name] = sps
        cursor += max_steps
        if RAW in block:
            for name, sps in block.items():
                ratios[name].append(sps / block[RAW])

    # Phase 2: the adapter-vs-raw ratio from many short paired blocks (A B B A ...), so that
    # both sides of each ratio see the same machine load.
    by_name = {r.name: r for r in runners}
    paired = ""
    if OURS in by_name and RAW in by_name and args.pairs > 0:
        pair_time = args.block_time / (2 if atari else 4)
        pr: list[float] = []
        for p in range(args.pairs):
            seq = (by_name[OURS], by_name[RAW]) if p % 2 == 0 else (by_name[RAW], by_name[OURS])
            got = {}
            for r in seq:
                gc.collect()
                got[r.name], _ = time_block(r, cursor, max_steps, pair_time, chunk)
            pr.append(got[OURS] / got[RAW])
        q = statistics.quantiles(pr, n=4)
        paired = (
            f"{env_id}: adaptive_po envpool / raw envpool step() = {statistics.median(pr):.2f} "
            f"(median of {len(pr)} paired {pair_time:g} s blocks; quartiles {q[0]:.2f}-{q[2]:.2f})"
        )

    for r in runners:
        try:
            r.close()
        except Exception:
            pass
    gc.unfreeze()
    rows: list[Row] = []
    for r in runners:
        rat = ratios[r.name]
        rows.append(
            (
                r.name,
                statistics.median(r.sps),
                min(r.sps),
                max(r.sps),
                statistics.median(rat) if rat else None,
                (min(rat), max(rat)) if rat else None,
            )
        )
    print(f"  ({env_id}: built {len(runners)} backends in {build_s:.1f} s)", file=sys.stderr)
    return rows, paired


#: env id -> (vector-env steps of one training run: full, --quick).  Pong's CnnPolicy is
#: costly on CPU, so two rollouts of 128 steps show its proportions.
TRAIN_STEPS = {"CartPole-v1": (30_000, 10_000), "Pong-v5": (2_048, 1_024)}
#: A faster adapter path earns its code only above this share of a whole training run.
WORTH_IT = 1.05


def _esspo(env_id: str, venv: Any) -> Any:
    import adaptive_po
    from adaptive_po import environments as E

    if E.is_atari(env_id):
        return adaptive_po.ESSPO("CnnPolicy", venv, n_steps=128, batch_size=256, n_epochs=1, seed=0, device="cpu")
    return adaptive_po.ESSPO(
        "MlpPolicy", venv, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8,
        learning_rate=1e-3, seed=0, device="cpu",
    )  # fmt: skip


def floor_vec_env(pool: Any) -> Any:
    """The cheapest envpool ``VecEnv`` there can be, for timing only: envpool's private
    ``_send/_recv``, its own next-step resets (junk steps reach the learner), no infos."""
    from stable_baselines3.common.vec_env import VecEnv

    class FloorVecEnv(VecEnv):
        def __init__(self) -> None:
            super().__init__(pool.config["num_envs"], pool.observation_space, pool.action_space)
            self.ids = np.arange(self.num_envs, dtype=np.int32)
            keys = list(pool._state_keys)
            self.idx = [keys.index(k) for k in ("obs", "reward", "done")]

        def reset(self) -> Any:
            return pool.reset()[0]

        def step_async(self, actions: np.ndarray) -> None:
            pool._send([self.ids, self.ids, actions.astype(np.int32)])

        def step_wait(self) -> Any:
            st = pool._recv()
            return st[self.idx[0]], st[self.idx[1]], st[self.idx[2]], [{} for _ in self.ids]

        def close(self) -> None:
            pool.close()

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            if attr_name == "render_mode":
                return [None] * self.num_envs
            raise AttributeError(attr_name)

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            raise NotImplementedError

        def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
            raise NotImplementedError

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False] * self.num_envs

    return FloorVecEnv()


def _timed_run(env_id: str, venv: Any, steps: int) -> tuple[float, float, int]:
    """(seconds of ``model.learn(steps)``, seconds of it inside the VecEnv's step calls, vector steps)."""
    in_env = [0.0, 0]
    step_async, step_wait = venv.step_async, venv.step_wait

    def timed_async(actions: np.ndarray) -> None:
        t = time.perf_counter()
        step_async(actions)
        in_env[0] += time.perf_counter() - t

    def timed_wait() -> Any:
        t = time.perf_counter()
        out = step_wait()
        in_env[0] += time.perf_counter() - t
        in_env[1] += 1
        return out

    venv.step_async, venv.step_wait = timed_async, timed_wait
    model = _esspo(env_id, venv)
    gc.collect()
    t0 = time.perf_counter()
    model.learn(steps)
    run = time.perf_counter() - t0
    venv.close()
    return run, in_env[0], int(in_env[1])


def bench_training(env_id: str, steps: int, rounds: int, seed: int) -> str:
    """End to end: how much of a whole training run could a faster envpool adapter save?

    Each round makes two ESSPO runs on the same envpool configuration, in alternating
    order: one with :class:`~adaptive_po.environments.EnvpoolVecEnv` (the kept path) and
    one with :func:`floor_vec_env` (no Python adapter can step faster), timing the time
    spent inside the VecEnv's step calls.  The learner's work per step is the same in
    both, so the kept run minus the gap between the two per-step env times is the run an
    ideal adapter would give; ``kept/ideal`` is the ratio of the two (median over rounds).
    """
    import envpool
    import torch

    from adaptive_po.environments import make_vec_env

    torch.set_num_threads(1)
    runs: list[float] = []
    kept_share: list[float] = []
    floor_share: list[float] = []
    ratios: list[float] = []
    for rnd in range(rounds):
        got = {}
        for which in ("kept", "floor") if rnd % 2 == 0 else ("floor", "kept"):
            venv = make_vec_env(env_id, N_ENVS, seed, backend="envpool")
            if which == "floor":
                kwargs = venv.envpool_make_kwargs()
                venv.close()
                venv = floor_vec_env(envpool.make_gymnasium(venv.env_id, **kwargs))
            got[which] = _timed_run(env_id, venv, steps)
        run, kept_env, n = got["kept"]
        _, floor_env, n_floor = got["floor"]
        floor_env *= n / n_floor
        runs.append(run)
        kept_share.append(kept_env / run)
        floor_share.append(floor_env / run)
        ratios.append(run / (run - max(0.0, kept_env - floor_env)))
    ratio = statistics.median(ratios)
    verdict = "no faster path is worth its code" if ratio < WORTH_IT else "a faster path would earn its place"
    return (
        f"{env_id}: whole training run ({steps:,} steps, ESSPO, {N_ENVS} envs): {statistics.median(runs):.1f} s, "
        f"{statistics.median(kept_share):.1%} of it in the adapter's step calls vs {statistics.median(floor_share):.1%} "
        f"with raw envpool _send/_recv; kept/ideal = {ratio:.3f} (median of {rounds}, {min(ratios):.3f}-{max(ratios):.3f})"
        f": {verdict} (threshold {WORTH_IT:.2f})"
    )


#: the in-process environments at a population's scale: (env id, games, what the engine runs, what it replaces)
IN_PROCESS = [("CartPole-v1", 400, "in-process pool (numpy)", "envpool's C++ pool"),
              ("MinAtar/Breakout-gymnax-v1", 512, "all games at once (numpy)", "the package, game by game")]


def bench_in_process(rounds: int, steps: int, seed: int) -> list[str]:
    """The environments the engine steps in this process (CartPole's pool, Breakout's games) against
    what they replace, at a population's size (CartPole K=50 x 8 envs, Breakout K=8 x 64), through
    the same VecEnv (same-step resets, episode statistics), random actions, alternating blocks of
    ``steps`` vector steps for ``rounds`` rounds: median ms per vector step and the ratio."""
    from adaptive_po.environments import EnvpoolVecEnv, available_backends
    from adaptive_po.environments.minatar import MinAtarVecEnv

    lines = ["| env | games | engine's | ms per vector step | replaced | ms per vector step | ratio |", "|---|---:|---|---:|---|---:|---:|"]
    for env_id, n, mine, theirs in IN_PROCESS:
        if env_id.startswith("MinAtar") and "minatar" not in available_backends(env_id):
            continue
        build = (lambda flag: EnvpoolVecEnv(env_id, n, seed, in_process=flag)) if not env_id.startswith("MinAtar") else (
            lambda flag: MinAtarVecEnv(env_id, n, seed, vectorized=flag))
        venvs = [build(True), build(False)]
        actions = np.random.default_rng(seed).integers(0, int(venvs[0].action_space.n), size=(steps, n))
        times: list[list[float]] = [[], []]
        for venv in venvs:
            venv.reset()
        for r in range(rounds):
            for j in (0, 1) if r % 2 == 0 else (1, 0):
                start = time.perf_counter()
                for a in actions:
                    venvs[j].step(a)
                times[j].append((time.perf_counter() - start) / steps * 1e3)
        ours_ms, theirs_ms = float(np.median(times[0])), float(np.median(times[1]))
        lines.append(f"| {env_id} | {n} | {mine} | {ours_ms:.3f} | {theirs} | {theirs_ms:.3f} | {theirs_ms / ours_ms:.1f}x |")
        for venv in venvs:
            venv.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2000, help="max vector steps per timed block (Atari rows: steps/8)")
    p.add_argument("--rounds", type=int, default=15, help="interleaved measurement rounds")
    p.add_argument("--block-time", type=float, default=0.4, help="max seconds per timed block")
    p.add_argument("--warmup", type=int, default=400, help="untimed warm-up vector steps (Atari: /8)")
    p.add_argument("--pairs", type=int, default=30, help="paired adapter/raw blocks for the ratio summary")
    p.add_argument("--envs", default="CartPole-v1,Pong-v5", help="comma-separated env ids")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--floor", action="store_true", help="add the 'envpool raw _send/_recv' row")
    p.add_argument("--train-envs", default="CartPole-v1,Pong-v5", help="end-to-end training check ('' skips it)")
    p.add_argument("--train-rounds", type=int, default=3, help="training runs per env in the end-to-end check")
    p.add_argument("--quick", action="store_true", help="~40 s version: fewer rounds, shorter blocks and runs")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.rounds, args.block_time, args.warmup, args.pairs = min(args.steps, 1000), 4, 0.15, 100, 16
        args.train_rounds = 1

    t0 = time.perf_counter()
    print(f"# {N_ENVS} envs, random actions; {args.rounds} interleaved rounds, blocks of <= {args.steps} steps "
          f"(Atari <= {max(4, args.steps // 8)}) or <= {args.block_time:g} s; cpus={os.cpu_count()}")  # fmt: skip
    header = f"| {'env':<11} | {'backend':<25} | {'env-steps/s (median)':>20} | {'min - max':>17} | {'vs raw envpool':>16} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    summaries = []
    for env_id in [e.strip() for e in args.envs.split(",") if e.strip()]:
        rows, paired = bench_env(env_id, args)
        summaries.append(paired)
        for name, med, lo, hi, ratio, rr in rows:
            rtxt = f"{ratio:.2f}x" if ratio is not None else "n/a"
            if rr is not None and name != RAW:
                rtxt += f" ({rr[0]:.2f}-{rr[1]:.2f})"
            print(f"| {env_id:<11} | {name:<25} | {med:>20,.0f} | {lo:>8,.0f} - {hi:>6,.0f} | {rtxt:>16} |", flush=True)
    for line in summaries:
        if line:
            print("# " + line)
    print("# the environments the population engine steps in this process, at a population's size (the same arrays as what they replace, tested):")
    for line in bench_in_process(4 if args.quick else 10, 100 if args.quick else 300, args.seed):
        print(line, flush=True)
    for env_id in [e.strip() for e in args.train_envs.split(",") if e.strip()]:
        full, quick = TRAIN_STEPS.get(env_id, TRAIN_STEPS["CartPole-v1"])
        print("# " + bench_training(env_id, quick if args.quick else full, args.train_rounds, args.seed), flush=True)
    print(f"# total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
