"""Our population engine beside its peer, pure-JAX PPO (rejax), on the same cells: CPU seconds per
million member-steps, cold and warm, with both sides' final evaluation returns.

Both sides train K seeds of PPO with the same settings on the same task, each on one core of its
own (pinned, one thread), at the same time, so that a machine's load weighs on both alike:

* **rejax** (``benchmarks/peer_rejax.py``, with an interpreter that has the ``peers`` extra:
  ``pip install 'adaptive-po[peers]'``, or ``--peer-python``): ``jit(vmap(train))`` over K keys,
  the whole training loop compiled by XLA, gymnax's environment included. *Cold*: the process from
  its start to the end of the first call (imports, tracing, compilation); *warm*: a second call on
  other keys (the compiled program alone).
* **adaptive-po** (``benchmarks/peer_ours.py``): one population of K members through the bench's
  population engine, the compiled step (``ADAPTIVE_PO_COMPILE=1``, an empty compile cache), one
  torch thread. *Cold*: the process from its start to the end of the first population; *warm*: a
  second population of other seeds in the same process.

Cells (:data:`CELLS`):

* **CartPole-v1**, K = 50 x 50,000 steps: the RL Zoo's settings (8 envs x 32 steps, one minibatch
  of 256, 20 epochs, gamma 0.98, GAE 0.8, clip 0.2, no entropy bonus, value 0.5, gradient norm 0.5,
  separate 64 x 64 tanh actor and critic) with the learning rate held at 1e-3 (rejax takes a
  constant; the Zoo anneals it); envpool's CartPole on our side, gymnax's on rejax's; 10 greedy
  evaluation episodes every 5,000 steps.
* **Breakout-MinAtar in gymnax's configuration**, K = 8 x 262,144 steps: gymnax-blines' settings
  (64 envs x 128 steps, 8 minibatches, 4 epochs, lr 5e-4, gamma 0.999, GAE 0.95, entropy 0.01)
  with their separate 2 x 256 ReLU MLPs; gymnax's game has no sticky actions and 1,000-step
  episodes, so ours runs ``MinAtar/Breakout-gymnax-v1`` (the same settings, the ``minatar``
  package's game), not the shipped task (sticky actions 0.1, the MinAtar CNN).

The two PPOs differ in details that do not change the cost (rejax steps actor and critic with two
optimizers and clips the value; ours is SB3's single optimizer), so the returns are shown beside
the times, not compared by a test. Both train the same number of steps (rejax's: whole evaluation
intervals of whole rollouts). What rejax cannot run at all (Box2D and ALE through envpool, the SB3
class, per-member staleness dials) has no cell here.

Usage::

    python benchmarks/peers.py                                        # both cells (~25 min on 2 cores)
    python benchmarks/peers.py --cells cartpole --members 8 --steps 10000   # a smoke run (~3 min)
    python benchmarks/peers.py --peer-python /path/to/venv/bin/python # rejax installed elsewhere

Without rejax (no ``peers`` extra and no ``--peer-python``) it says so and exits 0: ``make perf``
runs it either way. On a machine shared with other jobs the figures are noisy: read the ratios of
one invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@dataclass(frozen=True)
class Cell:
    """One task both sides train: rejax's settings and gymnax id, and our environment file's changes."""

    name: str
    gymnax_id: str
    env: str
    rejax: dict[str, Any]
    ours: dict[str, Any]
    members: int
    steps: int
    eval_every: int
    eval_episodes: int = 10


#: the RL Zoo's CartPole-v1 PPO, learning rate held constant, in rejax's names and in ours
CARTPOLE = Cell(
    "CartPole-v1", "CartPole-v1", "CartPole-v1",
    rejax={"num_envs": 8, "num_steps": 32, "num_epochs": 20, "num_minibatches": 1, "learning_rate": 1e-3, "gamma": 0.98,
           "gae_lambda": 0.8, "clip_eps": 0.2, "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5,
           "agent_kwargs": {"activation": "tanh", "hidden_layer_sizes": [64, 64]}},
    ours={"hyperparams__learning_rate": 1e-3, "hyperparams__clip_range": 0.2},
    members=50, steps=50_000, eval_every=5_000,
)
#: gymnax-blines' MinAtar PPO (64 envs x 128 steps, 8 minibatches, 4 epochs, lr 5e-4, gamma 0.999)
#: with their 2 x 256 ReLU MLPs, on Breakout in gymnax's configuration (no sticky actions, 1,000-step
#: episodes: ``MinAtar/Breakout-gymnax-v1`` on our side, not the shipped task)
BREAKOUT = Cell(
    "Breakout-MinAtar (gymnax's configuration)", "Breakout-MinAtar", "Breakout-MinAtar",
    rejax={"num_envs": 64, "num_steps": 128, "num_epochs": 4, "num_minibatches": 8, "learning_rate": 5e-4, "gamma": 0.999,
           "gae_lambda": 0.95, "clip_eps": 0.2, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5,
           "agent_kwargs": {"activation": "relu", "hidden_layer_sizes": [256, 256]}},
    ours={"ids": {"minatar": "MinAtar/Breakout-gymnax-v1"}, "hyperparams__policy": "MlpPolicy",
          "hyperparams__policy_kwargs": {"net_arch": {"pi": [256, 256], "vf": [256, 256]}, "activation_fn": "ReLU"}},
    members=8, steps=262_144, eval_every=131_072,
)
CELLS = {"cartpole": CARTPOLE, "breakout": BREAKOUT}
ALGO = "ppo"
#: what perf.md says after the tables: the cells of this project that the peer cannot run at all
ONLY_OURS = [
    "What only this engine runs. rejax 0.1.3 trains on gymnax's tasks (and brax, navix, jumanji, kinetix, craftax), and on "
    "gymnasium only for five classic-control tasks, one environment at a time through a host callback. So of this "
    "project's 20 environment files, rejax runs none of these at all:",
    "- LunarLander-v3 and LunarLanderContinuous-v3 (Box2D);",
    "- the nine Atari games (ALE through envpool);",
    "- the five MinAtar games as they ship here: the `minatar` package's dynamics with sticky actions 0.1 and the "
    "MinAtar CNN (gymnax's versions have no sticky actions and cap episodes at 1,000 steps; the Breakout cell above "
    "runs ours in gymnax's configuration for that reason);",
    "- any cell with a data dial: a member's policy lag, replay, action noise, sampler temperature or precision (rejax's "
    "PPO trains on its own fresh rollouts only), which is what every staleness study here varies;",
    "- the SB3 class (`BatchPolicyOptimization`), its callbacks, loggers and the RL Zoo;",
    "- the 16 objectives besides PPO, the ESS objective among them.",
]
#: the markers of this benchmark's section of docs/results/perf.md (benchmarks/roofline.py, which
#: rewrites the rest of that file, keeps the section as it is)
BEGIN, END = "<!-- peers: written by benchmarks/peers.py -->", "<!-- /peers -->"


def write_section(path: Path, lines: list[str]) -> None:
    """Put ``lines`` between :data:`BEGIN` and :data:`END` in ``path`` (appended where absent), atomically."""
    text = path.read_text() if path.exists() else ""
    block = "\n".join(lines).strip("\n")
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = f"{head}{BEGIN}\n{block}\n{END}{rest.split(END, 1)[1]}"
    else:
        text = f"{text.rstrip()}\n\n{BEGIN}\n{block}\n{END}\n"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def peer_python(given: str | None) -> str | None:
    """The interpreter with rejax: ``given``, else this one if it imports rejax, else None."""
    if given:
        return given
    probe = subprocess.run([sys.executable, "-c", "import rejax, gymnax, jax"], capture_output=True)
    return sys.executable if probe.returncode == 0 else None


def our_envs_dir(cell: Cell, tmp: Path) -> Path:
    """The cell's environment file with its changes and the peer's evaluation schedule."""
    from adaptive_po.bench.config import write_env_config_copy

    out = tmp / "envs"
    out.mkdir(exist_ok=True)
    write_env_config_copy(cell.env, out, evaluation={"episodes": cell.eval_episodes, "every": cell.eval_every}, **cell.ours)
    return out


def start(cmd: list[str], core: int, env: dict[str, str], log: Path) -> subprocess.Popen:
    """``cmd`` pinned to ``core``, its output (stdout and stderr) into ``log``."""
    with log.open("w") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=lambda: os.sched_setaffinity(0, {core}))


def finish(proc: subprocess.Popen, started: float, log: Path) -> dict[str, float]:
    """Wait for ``proc``: its CPU seconds (user + system, all its threads) and wall seconds."""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, proc.args))} failed (exit {proc.returncode}):\n{log.read_text()[-3000:]}")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall}


def run_cell(cell: Cell, python: str, members: int, steps: int) -> list[tuple[str, dict[str, Any]]]:
    """Both sides of one cell at the same time, one pinned core each; their JSON records."""
    cores = sorted(os.sched_getaffinity(0))
    peer_core, our_core = cores[0], cores[-1]
    cell = replace(cell, eval_every=min(cell.eval_every, steps))  # a short smoke run still evaluates at its end
    iteration = cell.rejax["num_envs"] * cell.rejax["num_steps"]
    per_eval = -(-cell.eval_every // iteration) * iteration
    trained = per_eval * -(-steps // cell.eval_every)  # what rejax trains; ours trains the same
    with tempfile.TemporaryDirectory(prefix="peers-") as name:
        tmp = Path(name)
        (tmp / "tmp").mkdir()
        # cold: nothing compiled before (inductor's cache, and anything its compiler keeps under
        # the temporary directory, empty), as on a machine's first run
        child = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ADAPTIVE_PO_COMPILE": "1",
                 "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor"), "TMPDIR": str(tmp / "tmp")}
        peer_cmd = [python, str(ROOT / "benchmarks/peer_rejax.py"), "--env", cell.gymnax_id, "--members", str(members),
                    "--steps", str(steps), "--eval-every", str(cell.eval_every), "--eval-episodes", str(cell.eval_episodes),
                    "--config", json.dumps(cell.rejax)]
        our_cmd = [sys.executable, str(ROOT / "benchmarks/peer_ours.py"), "--env", cell.env, "--algo", ALGO, "--members",
                   str(members), "--steps", str(trained), "--envs-dir", str(our_envs_dir(cell, tmp)), "--out", str(tmp / "runs")]
        print(f"peers: {cell.name}, K = {members} x {trained:,} steps, rejax on core {peer_core}, ours on core {our_core}, at the same time",
              flush=True)
        t0 = time.perf_counter()
        procs = [(start(peer_cmd, peer_core, {**os.environ, "JAX_PLATFORMS": "cpu"}, tmp / "rejax.log"), tmp / "rejax.log"),
                 (start(our_cmd, our_core, child, tmp / "ours.log"), tmp / "ours.log")]
        results = []
        for proc, log in procs:
            finish(proc, t0, log)
            results.append(json.loads(log.read_text().strip().splitlines()[-1]))
    theirs, ours = results
    for r in results:
        r["member_steps"] = members * trained
    return [(f"rejax, jax {theirs['jax']}", theirs), ("adaptive-po, torch " + ours["torch"], ours)]


def table(cell: Cell, rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = [f"| cell | engine | K x steps | cold CPU s | cold wall s | warm CPU s | warm wall s | CPU s per M member-steps, cold | CPU s per M member-steps, warm | "
             "final evaluation return, mean (sd) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows:
        cold, warm, returns, million = r["cold"], r["warm"], r["final_returns"], r["member_steps"] / 1e6
        sd = statistics.stdev(returns) if len(returns) > 1 else 0.0
        lines.append(f"| {cell.name} | {name} | {r['members']} x {r['member_steps'] // r['members']:,} | {cold['cpu_s']:.1f} | "
                     f"{cold['wall_s']:.1f} | {warm['cpu_s']:.1f} | {warm['wall_s']:.1f} | {cold['cpu_s'] / million:.1f} | "
                     f"{warm['cpu_s'] / million:.1f} | {statistics.mean(returns):.1f} ({sd:.1f}) |")
    (_, theirs), (_, ours) = rows
    lines.append(f"\n{cell.name}: ours / rejax, CPU seconds: cold {ours['cold']['cpu_s'] / theirs['cold']['cpu_s']:.2f}x, "
                 f"warm {ours['warm']['cpu_s'] / theirs['warm']['cpu_s']:.2f}x")
    parts = ours["cold"].get("parts")
    if parts:
        calls = parts["first_calls_wall_s"]
        named = ", ".join(f"{name} {calls[name]:.1f}" for name in ("act", "forward", "step") if name in calls)
        lines.append(f"\nWhat our cold run paid that the warm one did not: {parts['before_population']['cpu_s']:.1f} CPU s of imports "
                     f"before the first population; {sum(calls.values()):.1f} wall s in the compiled callables' first calls ({named}: "
                     f"dynamo's tracing and inductor's compilation; the forward pass and the step are compiled ahead and their "
                     f"kernels built with the act's, in its first call), of which the g++ processes' {parts['children_cpu_s']:.1f} CPU s.")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", default="cartpole,breakout", help=f"comma-separated, of {sorted(CELLS)}")
    p.add_argument("--members", type=int, default=None, help="K (default: the cell's, CartPole 50, Breakout 8)")
    p.add_argument("--steps", type=int, default=None, help="steps per member (default: the cell's, CartPole 50,000, Breakout 262,144)")
    p.add_argument("--peer-python", default=os.environ.get("ADAPTIVE_PO_PEER_PYTHON"), help="an interpreter with rejax, gymnax and jax")
    p.add_argument("--out", type=Path, default=None, help="also write the tables into this file's peers section (make perf: docs/results/perf.md)")
    args = p.parse_args()
    cells = [c.strip() for c in args.cells.split(",") if c.strip()]
    unknown = [c for c in cells if c not in CELLS]
    if unknown or not cells:
        raise SystemExit(f"--cells: unknown {unknown or args.cells!r}; choose from {sorted(CELLS)}")
    for flag, value in (("--members", args.members), ("--steps", args.steps)):
        if value is not None and value < 1:
            raise SystemExit(f"{flag} must be >= 1, got {value}")
    python = peer_python(args.peer_python)
    if python is None:
        print("peers: rejax is not installed here (pip install 'adaptive-po[peers]', or --peer-python): skipped")
        return 0
    lines = []
    for key in cells:
        cell = CELLS[key]
        lines += table(cell, run_cell(cell, python, args.members or cell.members, args.steps or cell.steps)) + [""]
    print("\n" + "\n".join(lines))
    if args.out is not None:
        import platform

        import torch

        write_section(args.out, [
            "## Beside its peer: pure-JAX PPO (rejax) on the same core", "",
            f"Written by `make perf` (`benchmarks/peers.py`) on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores "
            f"({platform.processor() or platform.machine()}), torch {torch.__version__}: each side one pinned core and one thread, "
            "both at the same time; cold from process start (compilation included; ours with empty compile caches, as on a "
            "machine's first run: later processes load the compiled kernels from the cache), warm a second "
            "call (rejax) or population (ours) in the same process; CPU seconds are the process's and its waited-for children's (our compiler's g++ runs); "
            "returns are the final greedy evaluations (10 episodes) per seed.", "", *lines, *ONLY_OURS,
        ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
