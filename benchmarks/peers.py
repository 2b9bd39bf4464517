"""Our population engine beside its peer, pure-JAX PPO (rejax), on the same cell: CPU seconds per
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
  torch thread, envpool's environment. *Cold*: the process from its start to the end of the first
  population; *warm*: a second population of other seeds in the same process.

The cell's settings are the RL Zoo's for CartPole-v1 (8 envs x 32 steps, one minibatch of 256, 20
epochs, gamma 0.98, GAE 0.8, clip 0.2, no entropy bonus, value 0.5, gradient norm 0.5, separate 64 x
64 tanh actor and critic) with the learning rate held at 1e-3 (rejax takes a constant; the Zoo
anneals it linearly, which costs nothing measurable); 10 greedy evaluation episodes every 5,000
steps. The two PPOs differ in details that do not change the cost (rejax steps actor and critic
with two optimizers and clips the value; ours is SB3's single optimizer), so the returns are
shown, not compared by a test. Both train the same number of steps (rejax's: whole evaluation
intervals of whole rollouts).

Usage::

    python benchmarks/peers.py                                        # CartPole-v1, K = 50 x 50,000 steps
    python benchmarks/peers.py --members 8 --steps 10000              # a smoke run (~2 min)
    python benchmarks/peers.py --peer-python /path/to/venv/bin/python # rejax installed elsewhere

Without rejax (no ``peers`` extra and no ``--peer-python``) it says so and exits 0: ``make perf``
runs it either way. On a machine shared with other jobs the figures are noisy: read the ratio of
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the RL Zoo's CartPole-v1 PPO, learning rate held constant, in rejax's names
CARTPOLE_REJAX: dict[str, Any] = {
    "num_envs": 8, "num_steps": 32, "num_epochs": 20, "num_minibatches": 1, "learning_rate": 1e-3, "gamma": 0.98,
    "gae_lambda": 0.8, "clip_eps": 0.2, "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5,
    "agent_kwargs": {"activation": "tanh", "hidden_layer_sizes": [64, 64]},
}
EVAL_EVERY, EVAL_EPISODES = 5_000, 10
ALGO = "ppo"


def peer_python(given: str | None) -> str | None:
    """The interpreter with rejax: ``given``, else this one if it imports rejax, else None."""
    if given:
        return given
    probe = subprocess.run([sys.executable, "-c", "import rejax, gymnax, jax"], capture_output=True)
    return sys.executable if probe.returncode == 0 else None


def our_envs_dir(tmp: Path) -> Path:
    """CartPole-v1's YAML file with the peer's constant learning rate and clip, and its evaluation schedule."""
    import yaml

    config = yaml.safe_load((ROOT / "adaptive_po/env_configs/CartPole-v1.yaml").read_text())
    config["hyperparams"].update(learning_rate=CARTPOLE_REJAX["learning_rate"], clip_range=CARTPOLE_REJAX["clip_eps"])
    config["evaluation"] = {"episodes": EVAL_EPISODES, "every": EVAL_EVERY}
    out = tmp / "envs"
    out.mkdir()
    (out / "CartPole-v1.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=50)
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--peer-python", default=os.environ.get("ADAPTIVE_PO_PEER_PYTHON"), help="an interpreter with rejax, gymnax and jax")
    args = p.parse_args()
    if args.members < 1 or args.steps < 1:
        raise SystemExit(f"--members and --steps must be >= 1, got {args.members} and {args.steps}")
    python = peer_python(args.peer_python)
    if python is None:
        print("peers: rejax is not installed here (pip install 'adaptive-po[peers]', or --peer-python): skipped")
        return 0
    cores = sorted(os.sched_getaffinity(0))
    peer_core, our_core = cores[0], cores[-1]
    iteration = CARTPOLE_REJAX["num_envs"] * CARTPOLE_REJAX["num_steps"]
    per_eval = -(-EVAL_EVERY // iteration) * iteration
    steps = per_eval * -(-args.steps // EVAL_EVERY)  # what rejax trains; ours trains the same
    child = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ADAPTIVE_PO_COMPILE": "1"}
    with tempfile.TemporaryDirectory(prefix="peers-") as name:
        tmp = Path(name)
        child["TORCHINDUCTOR_CACHE_DIR"] = str(tmp / "inductor")  # cold: nothing compiled before
        peer_cmd = [python, str(ROOT / "benchmarks/peer_rejax.py"), "--env", "CartPole-v1", "--members", str(args.members),
                    "--steps", str(args.steps), "--eval-every", str(EVAL_EVERY), "--eval-episodes", str(EVAL_EPISODES),
                    "--config", json.dumps(CARTPOLE_REJAX)]
        our_cmd = [sys.executable, str(ROOT / "benchmarks/peer_ours.py"), "--env", "CartPole-v1", "--algo", ALGO, "--members",
                   str(args.members), "--steps", str(steps), "--envs-dir", str(our_envs_dir(tmp)), "--out", str(tmp / "runs")]
        print(f"peers: CartPole-v1, K = {args.members} x {steps:,} steps, rejax on core {peer_core}, ours on core {our_core}, at the same time",
              flush=True)
        t0 = time.perf_counter()
        procs = [(start(peer_cmd, peer_core, {**os.environ, "JAX_PLATFORMS": "cpu"}, tmp / "rejax.log"), tmp / "rejax.log"),
                 (start(our_cmd, our_core, child, tmp / "ours.log"), tmp / "ours.log")]
        results = []
        for proc, log in procs:
            finish(proc, t0, log)
            results.append(json.loads(log.read_text().strip().splitlines()[-1]))
    theirs, ours = results
    rows = [("rejax " + theirs["jax"], theirs), ("adaptive-po " + ours["torch"] + " (population, compiled)", ours)]
    million = args.members * steps / 1e6
    print()
    print(f"| engine | cold CPU s | cold wall s | warm CPU s | warm wall s | CPU s per M member-steps, cold | warm | final evaluation return, mean (sd) over {args.members} |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        cold, warm, returns = r["cold"], r["warm"], r["final_returns"]
        sd = statistics.stdev(returns) if len(returns) > 1 else 0.0
        print(f"| {name} | {cold['cpu_s']:.1f} | {cold['wall_s']:.1f} | {warm['cpu_s']:.1f} | {warm['wall_s']:.1f} | "
              f"{cold['cpu_s'] / million:.1f} | {warm['cpu_s'] / million:.1f} | {statistics.mean(returns):.1f} ({sd:.1f}) |")
    print(f"\nours / rejax, CPU seconds per member-step: cold {ours['cold']['cpu_s'] / theirs['cold']['cpu_s']:.2f}x, "
          f"warm {ours['warm']['cpu_s'] / theirs['warm']['cpu_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
