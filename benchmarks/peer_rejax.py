"""The pure-JAX peer's side of ``benchmarks/peers.py``: rejax's PPO on a gymnax task, K seeds in one
compiled call, on the one core this process is pinned to. Run by ``peers.py`` with an interpreter
that has the ``peers`` extra (``pip install 'adaptive-po[peers]'``: jax on CPU, rejax, gymnax);
prints one JSON object on its last line.

What it measures: the process's CPU and wall seconds from its start (imports included) to the end
of the first call (``cold``: tracing and XLA compilation included), and those of a second call on
other seeds (``warm``: the compiled program alone); and each seed's evaluations (the mean return of
``--eval-episodes`` deterministic episodes, greedy actions, every ``--eval-every`` steps); after both
calls, what instruction sets the compiled program uses (``isa``: ``peer_isa.xla_evidence``, the
program compiled again with XLA's dump on).
"""

from __future__ import annotations

import os
import sys

import peer_clock  # first: the process's clock starts here


def main() -> int:
    import argparse
    import json

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="CartPole-v1", help="a gymnax id")
    p.add_argument("--members", type=int, default=50)
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--eval-every", type=int, default=5_000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--config", required=True, help="rejax PPO settings as JSON (num_envs, num_steps, ...)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    # one core, one thread: XLA's CPU client otherwise runs its own thread pool
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    from rejax import PPO
    from rejax.evaluate import evaluate

    settings = json.loads(args.config)
    algo = PPO.create(env=args.env, total_timesteps=args.steps, eval_freq=args.eval_every, skip_initial_evaluation=True, **settings)
    episodes = args.eval_episodes

    def greedy_evaluation(algo, ts, rng):  # type: ignore[no-untyped-def]
        def act(obs, rng):  # type: ignore[no-untyped-def]
            dist = algo.actor.apply(ts.actor_ts.params, jnp.expand_dims(obs, 0), method="_action_dist")
            return jnp.squeeze(jnp.argmax(dist.logits, axis=-1))

        lengths, returns = evaluate(act, rng, algo.env, algo.env_params, episodes, algo.env_params.max_steps_in_episode)
        return returns.mean()

    algo = algo.replace(eval_callback=greedy_evaluation)
    train = jax.jit(jax.vmap(algo.train))

    def call(seed: int):  # type: ignore[no-untyped-def]
        keys = jax.random.split(jax.random.PRNGKey(seed), args.members)
        _, evaluations = train(keys)
        return jax.block_until_ready(evaluations)

    evaluations = call(args.seed)
    cold = {"cpu_s": peer_clock.cpu(), "wall_s": peer_clock.wall()}
    warm_evaluations, warm = peer_clock.measure(lambda: call(args.seed + 1))
    import peer_isa

    isa = peer_isa.xla_evidence(train, jax.random.split(jax.random.PRNGKey(args.seed), args.members))
    iteration = settings["num_envs"] * settings["num_steps"]
    per_eval = -(-args.eval_every // iteration) * iteration
    trained = per_eval * -(-args.steps // args.eval_every)
    print(json.dumps({
        "engine": "rejax", "jax": jax.__version__, "members": args.members, "trained_steps": trained, "cold": cold, "warm": warm,
        "final_returns": [float(x) for x in evaluations[:, -1]], "warm_final_returns": [float(x) for x in warm_evaluations[:, -1]],
        "curve_steps": [per_eval * (i + 1) for i in range(evaluations.shape[1])], "isa": isa,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
