"""Where a MinAtar population run's time goes: acting, environment stepping, the rest of collection,
the update, and evaluation, measured before making any part cheaper.

One population of ``--members`` runs of one configuration (the game's shipped settings: the MinAtar
CNN, gymnax-blines' PPO hyper-parameters; ``--algo`` esspo by default) trains ``--steps``
environment steps per member through the bench's own population engine
(:func:`adaptive_po.bench.population_engine.execute_population`), exactly as the bench runs it. An
observer wraps, on that population only, the learner's ``act`` (the sampling forward pass), the
training pool's ``step`` (the MinAtar games, in Python), the learner's ``update`` and the
population's ``evaluate`` (deterministic episodes, which step the evaluation pool and act
themselves), with a synchronizing wall clock; collection's own bookkeeping (stores, episode
statistics, truncations, tensors) is what remains of the collection time.

Prints one table per game: seconds and share of the run's wall time per part, and the wall
seconds per million environment steps per run (the population's wall time divided by its member
steps), with the process's CPU seconds beside it. On a machine shared with other jobs the shares
are the number to read; the absolute seconds are upper bounds.

Usage::

    python benchmarks/minatar_profile.py                                   # Breakout, 10 members x 50k
    python benchmarks/minatar_profile.py --games Breakout-MinAtar Freeway-MinAtar --members 10 --steps 100000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

GAMES = ("Asterix-MinAtar", "Breakout-MinAtar", "Freeway-MinAtar", "SpaceInvaders-MinAtar", "Seaquest-MinAtar")
PARTS = ("act", "environment step", "collection bookkeeping", "update", "evaluation")


class Clock:
    """Exclusive seconds per part: a wrapped call's time less that of the wrapped calls inside it
    (an evaluation due in the middle of a rollout counts as evaluation, not as collection)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.inner: list[float] = []  #: per open call, the time of the wrapped calls inside it

    def wrap(self, part: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.inner.append(0.0)
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                took = time.perf_counter() - started
                self.seconds[part] += took - self.inner.pop()
                if self.inner:
                    self.inner[-1] += took

        return timed


def profile(game: str, members: int, steps: int, algo: str, out: Path) -> dict[str, Any]:
    from adaptive_po.bench.population_engine import PopulationObserver, execute_population
    from adaptive_po.bench.run_folder import RunSpec
    from adaptive_po.dials import DataDials

    clock = Clock()

    class Observer(PopulationObserver):
        def started(self, population: Any) -> None:
            learner = population.learner
            learner.act = clock.wrap("act", learner.act)
            learner.update = clock.wrap("update", learner.update)
            population.train_env.step = clock.wrap("environment step", population.train_env.step)
            population.collect = clock.wrap("collection", population.collect)
            population.evaluate = clock.wrap("evaluation", population.evaluate)

    specs = [
        RunSpec(suite="profile", env=game, algo=algo, seed=seed, total_timesteps=steps, out=str(out), device="cpu",
                dials=DataDials(), tensorboard=False)
        for seed in range(members)
    ]
    cpu, wall = time.process_time(), time.perf_counter()
    results = execute_population(specs, Observer())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    failed = [r for r in results if r["status"] != "complete"]
    if failed:
        raise RuntimeError(f"{game}: {len(failed)} runs failed: {failed[0].get('error')}")
    seconds = dict(clock.seconds)
    seconds["collection bookkeeping"] = seconds.pop("collection", 0.0)  # what collect does besides acting and stepping
    member_steps = members * steps
    return {
        "game": game, "members": members, "steps": steps, "wall": wall, "cpu": cpu, "seconds": seconds,
        "wall_per_million": wall / member_steps * 1e6, "cpu_per_million": cpu / member_steps * 1e6,
        "final": [r["final_return"] for r in results],
    }


def table(result: dict[str, Any]) -> str:
    wall = result["wall"]
    lines = [
        f"### {result['game']}: {result['members']} members x {result['steps']:,} steps",
        "",
        "| part | seconds | share of wall time |",
        "|---|---:|---:|",
    ]
    accounted = 0.0
    for part in PARTS:
        value = result["seconds"].get(part, 0.0)
        accounted += value
        lines.append(f"| {part} | {value:.1f} | {value / wall:.1%} |")
    lines.append(f"| start-up, files, the rest | {wall - accounted:.1f} | {(wall - accounted) / wall:.1%} |")
    lines += [
        "",
        f"Wall seconds per million steps per run: {result['wall_per_million']:.0f} (CPU seconds: {result['cpu_per_million']:.0f}); "
        f"final returns: {', '.join(f'{v:.1f}' for v in result['final'])}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", nargs="+", default=["Breakout-MinAtar"], choices=GAMES)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--algo", default="esspo")
    args = parser.parse_args(argv)
    if args.members < 1 or args.steps < 1:
        parser.error(f"--members and --steps must be positive, got {args.members} and {args.steps}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"# MinAtar population profile ({args.algo}, ADAPTIVE_PO_COMPILE={os.environ.get('ADAPTIVE_PO_COMPILE', 'auto')}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    with tempfile.TemporaryDirectory(prefix="minatar-profile-") as out:
        for game in args.games:
            print(table(profile(game, args.members, args.steps, args.algo, Path(out))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
