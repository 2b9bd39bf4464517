"""Train ESSPO on your own gymnasium environment with stale data: an SB3 script, one line changed.

This is the Stable-Baselines3 script a user already has (define an environment, check it,
vectorize it, train, save, load, evaluate). The import of the algorithm is the one line that
changes; ``policy_lag=4`` is the one argument added, to make the actor four updates older than
the learner (SB3's PPO has no such dial). Run it::

    python examples/esspo_custom_env.py                  # about 10 s on one CPU core
    python examples/esspo_custom_env.py --timesteps 5000 --policy-lag 0
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

# The one line that differs from the SB3 script (`from stable_baselines3 import PPO as Agent`):
from adaptive_po import ESSPO as Agent


class Corridor(gym.Env):
    """Walk from cell 0 to the goal cell of a corridor: -0.05 per step, +1 at the goal.

    Observation: the position and the time used, scaled to [0, 1]. Actions: 0 (left), 1 (right).
    Truncated after ``max_steps`` steps; a random walk seldom gets there in time.
    """

    metadata = {"render_modes": []}

    def __init__(self, length: int = 8, max_steps: int = 40) -> None:
        self.length, self.max_steps = length, max_steps
        self.observation_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def _observation(self) -> np.ndarray:
        return np.array([self.position / self.length, self.steps / self.max_steps], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):  # type: ignore[override]
        super().reset(seed=seed)
        self.position, self.steps = 0, 0
        return self._observation(), {}

    def step(self, action):  # type: ignore[no-untyped-def]
        self.position = int(np.clip(self.position + (1 if action == 1 else -1), 0, self.length))
        self.steps += 1
        terminated = self.position == self.length
        reward = 1.0 if terminated else -0.05
        return self._observation(), reward, terminated, self.steps >= self.max_steps, {}


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=10_000)
    parser.add_argument("--policy-lag", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="folder for the saved model (default: a temporary one)")
    args = parser.parse_args(argv)

    check_env(Corridor())
    env = make_vec_env(Corridor, n_envs=4, seed=args.seed)
    model = Agent("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=4, learning_rate=3e-3, gamma=0.95,
                  policy_lag=args.policy_lag, seed=args.seed, device="cpu", verbose=0)
    random_return, _ = evaluate_policy(model, Monitor(Corridor()), n_eval_episodes=20, deterministic=False)
    model.learn(total_timesteps=args.timesteps)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.out or tmp) / "esspo_corridor"
        model.save(path)
        loaded = Agent.load(path, device="cpu")
    mean_return, std_return = evaluate_policy(loaded, Monitor(Corridor()), n_eval_episodes=20, deterministic=True)
    print(f"{type(loaded).__name__} with policy_lag={loaded.dials.policy_lag} after {args.timesteps} steps: "
          f"return {mean_return:.2f} +/- {std_return:.2f} (untrained: {random_return:.2f}; best possible: "
          f"{1.0 - 0.05 * (Corridor().length - 1):.2f})")
    return float(mean_return)


if __name__ == "__main__":
    main()
