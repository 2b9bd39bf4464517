"""Environment throughput: raw envpool vs adaptive_po's envpool VecEnv vs the Python vector envs.

Usage::

    python benchmarks/throughput.py            # ~1.5 min on 2 cores
    python benchmarks/throughput.py --quick    # ~20 s
    python benchmarks/throughput.py --steps 5000 --rounds 30 --pairs 100 --envs CartPole-v1

Rows (8 envs each, uniformly random actions, pre-generated so RNG cost is excluded):

* ``envpool raw step()``      - envpool's own gymnasium pool, its public ``step`` in a loop
  (same configuration as our adapter: threads, Atari settings).  The reference.
* ``envpool raw _send/_recv`` (with ``--floor``) - the same pool driven through its private
  C++ calls, without envpool's Python conversion layer (our adapter uses these calls too).
  With nothing but two C++ calls per step its speed is bimodal on a busy 2-core machine
  (the worker thread either spins on a free core or must be woken), hence off by default.
* ``adaptive_po envpool``     - :class:`adaptive_po.environments.EnvpoolVecEnv` (SB3 ``VecEnv`` with
  same-step resets, terminal observations and episode statistics), fed int64 actions as
  SB3 policies produce them.
* ``gymnasium SyncVectorEnv`` / ``AsyncVectorEnv`` - gymnasium's own vector envs.
* ``SB3 DummyVecEnv``         - what ``make_vec_env(..., backend="gymnasium")`` returns.
* ``SB3 SubprocVecEnv``       - one process per env.

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

    atari = E.is_atari(env_id)
    n = N_ENVS
    a32 = actions.astype(np.int32)
    a64 = actions.astype(np.int64)
    T = len(actions)
    runners: list[Runner] = []

    def gym_env_fn(rank: int) -> Callable[[], gym.Env]:
        def _init() -> gym.Env:
            if atari:
                return E._make_gym_atari(E._gym_id(env_id), training=True)
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
        pool = envpool.make_gymnasium(E._envpool_id(env_id), **raw_kwargs())
        return Runner(RAW, pool, lambda i: pool.step(a32[i % T]), pool.reset, pool.close)

    def raw_cpp() -> Runner:
        pool = envpool.make_gymnasium(E._envpool_id(env_id), **raw_kwargs())
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
    p.add_argument("--quick", action="store_true", help="~20 s version: fewer rounds of shorter blocks")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.rounds, args.block_time, args.warmup, args.pairs = min(args.steps, 1000), 4, 0.15, 100, 16

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
    print(f"# total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
