"""envpool's CartPole in numpy, in this process: the same pool interface (``reset``, ``send``,
``recv``, ``config``, the spaces) and the same numbers, bit for bit.

:class:`~adaptive_po.environments.envpool_adapter.EnvpoolVecEnv` steps CartPole through this pool
instead of envpool's C++ one. A CartPole step is a few dozen floating-point operations; what costs
is the hand-over to envpool's worker thread and back, twice a vector step when an episode ends
(the step, then the same-step reset): 0.5 ms of a 0.65 ms step of 400 environments measured here,
about a tenth of a CartPole population's time (training and evaluation).

What it reproduces (envpool 1.2.5, ``classic_control/cartpole.h`` and ``core/env.h``):

* each environment's generator: ``std::mt19937`` seeded ``seed + env_id`` (numpy's legacy
  ``RandomState(seed)`` is the same generator with the same seeding), and
  ``std::uniform_real_distribution<double>(-0.05, 0.05)`` as libstdc++ draws it (two 32-bit
  words ``g1 + g2 * 2**32`` over ``2**64``, scaled to the interval), four draws per reset;
* the dynamics in float64, with the C++ expressions' order of operations, observations rounded
  to float32;
* envpool's episode bookkeeping: a step sent to a finished environment resets it (reward 0);
  ``done`` when the pole or cart leaves its bounds or at ``max_episode_steps``; ``truncated`` when
  done at ``max_episode_steps`` (even if the pole fell on that step), ``terminated`` otherwise.

``tests/test_envs.py`` steps both pools side by side on recorded random actions, with partial
sends and resets, and compares every array.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: the constants of envpool's CartPoleEnv, computed as it computes them (double precision)
GRAVITY = 9.8
MASS_POLE = 0.1
MASS_TOTAL = 1.0 + MASS_POLE
LENGTH = 0.5
MASS_POLE_LENGTH = MASS_POLE * LENGTH
FORCE = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
INIT_RANGE = 0.05
#: envpool ids this pool stands in for, with what their envpool spec sets apart from the defaults
#: (:data:`CONFIG_DEFAULTS`): the episode limit and the reward threshold
SPECS: dict[str, dict[str, Any]] = {
    "CartPole-v0": {"max_episode_steps": 200, "reward_threshold": 195.0},
    "CartPole-v1": {"max_episode_steps": 500, "reward_threshold": 475.0},
}
IDS = tuple(SPECS)
#: envpool's config keys for CartPole and their defaults (``base_path``: :func:`_assets_path`);
#: ``batch_size`` 0 means ``num_envs``
CONFIG_DEFAULTS: dict[str, Any] = {
    "num_envs": 1, "batch_size": 0, "num_threads": 0, "max_num_players": 1, "thread_affinity_offset": -1, "base_path": None,
    "seed": 42, "env_seed": [], "gym_reset_return_info": True,
}
#: the observation bounds envpool's spec gives (float64 thresholds as float32): twice the cart's
#: and the pole's limits, the velocities unbounded
OBSERVATION_HIGH = np.array([X_THRESHOLD * 2, np.inf, THETA_THRESHOLD * 2, np.inf], dtype=np.float32)


def _assets_path() -> str:
    """envpool's ``base_path`` (its assets folder beside the package), found without importing it."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("envpool")
    root = os.path.dirname(os.path.dirname(spec.origin)) if spec is not None and spec.origin else ""
    return os.path.join(root, "envpool_assets")


def spec_config(env_id: str, **config: Any) -> dict[str, Any]:
    """``envpool.make_spec(env_id, **config).config`` as a dict, without importing envpool (which
    imports every environment family it has, jumanji's renderer among them: half a second of a
    CartPole process's start). ``tests/test_envs.py`` holds it to envpool's."""
    if env_id not in SPECS:
        raise ValueError(f"CartPolePool runs {IDS}, not {env_id!r}")
    unknown = sorted(set(config) - set(CONFIG_DEFAULTS) - set(SPECS[env_id]))
    if unknown:
        raise TypeError(f"envpool's {env_id} has no config key {', '.join(map(repr, unknown))}")
    out = {**CONFIG_DEFAULTS, "base_path": _assets_path(), **SPECS[env_id], **config}
    out["batch_size"] = out["batch_size"] or out["num_envs"]
    return {key: out[key] for key in (*CONFIG_DEFAULTS, *SPECS[env_id])}


class CartPolePool:
    """``envpool.make_gymnasium(env_id, **config)`` (``num_envs = batch_size``) without its worker
    thread: ``send`` steps (or resets) the given environments at once, ``recv`` returns their
    arrays in the order sent. The state is ``(4, n)`` float64: position, velocity, angle, angular
    velocity."""

    def __init__(self, env_id: str, **config: Any) -> None:
        import gymnasium as gym

        self.config = spec_config(env_id, **config)
        num_envs, seed = self.config["num_envs"], self.config["seed"]
        if self.config["batch_size"] != num_envs:
            raise ValueError(f"CartPolePool steps every environment sent at once: batch_size {self.config['batch_size']} != num_envs {num_envs}")
        self.observation_space = gym.spaces.Box(-OBSERVATION_HIGH, OBSERVATION_HIGH, dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.max_episode_steps = int(self.config["max_episode_steps"])
        self.n = int(num_envs)
        self._rngs = [np.random.RandomState(seed + i) for i in range(self.n)]
        self._state = np.zeros((4, self.n), dtype=np.float64)
        self._elapsed = np.full(self.n, self.max_episode_steps + 1, dtype=np.int32)
        self._done = np.ones(self.n, dtype=bool)
        self._all = np.arange(self.n, dtype=np.int32)
        self._sent: tuple[np.ndarray, np.ndarray] | None = None

    def _reset(self, ids: np.ndarray) -> None:
        """Each of ``ids`` starts an episode: four uniform draws from its own generator."""
        if len(ids):
            # each environment's draws from its own generator; the arithmetic on all of them at once
            words = np.stack([self._rngs[i].randint(0, 2**32, size=8, dtype=np.uint32) for i in ids.tolist()]).astype(np.float64)
            canonical = (words[:, 0::2] + words[:, 1::2] * 2.0**32) / 2.0**64
            canonical = np.where(canonical >= 1.0, np.nextafter(1.0, 0.0), canonical)
            self._state[:, ids] = (canonical * (INIT_RANGE - -INIT_RANGE) + -INIT_RANGE).T
        self._elapsed[ids] = 0
        self._done[ids] = False

    def _step(self, ids: np.ndarray | None, action: np.ndarray) -> None:
        """One step of the environments ``ids`` (``None``: all) under ``action`` (0 or 1 each)."""
        state = self._state if ids is None else self._state[:, ids]
        x, x_dot, theta, theta_dot = state
        force = np.where(action == 1, FORCE, -FORCE)
        costheta, sintheta = np.cos(theta), np.sin(theta)
        temp = (force + MASS_POLE_LENGTH * theta_dot * theta_dot * sintheta) / MASS_TOTAL
        theta_acc = (GRAVITY * sintheta - costheta * temp) / (LENGTH * (4.0 / 3.0 - MASS_POLE * costheta * costheta / MASS_TOTAL))
        x_acc = temp - MASS_POLE_LENGTH * theta_acc * costheta / MASS_TOTAL
        x = x + TAU * x_dot
        x_dot = x_dot + TAU * x_acc
        theta = theta + TAU * theta_dot
        theta_dot = theta_dot + TAU * theta_acc
        where = slice(None) if ids is None else ids
        self._state[:, where] = (x, x_dot, theta, theta_dot)
        self._elapsed[where] += 1
        fell = (x < -X_THRESHOLD) | (x > X_THRESHOLD) | (theta < -THETA_THRESHOLD) | (theta > THETA_THRESHOLD)
        self._done[where] = fell | (self._elapsed[where] >= self.max_episode_steps)

    def reset(self) -> tuple[np.ndarray, dict[str, Any]]:
        self._reset(self._all)
        self._sent = None
        return self._state.T.astype(np.float32, order="C"), self._info(self._all)

    def send(self, action: np.ndarray, env_id: np.ndarray | None = None) -> None:
        ids = self._all if env_id is None else np.asarray(env_id, dtype=np.int32)
        action = np.asarray(action).reshape(len(ids))
        finished = self._done[ids]
        if not finished.any():
            self._step(None if env_id is None else ids, action)
        else:
            if not finished.all():
                self._step(ids[~finished], action[~finished])
            self._reset(ids[finished])
        self._sent = (ids, finished)

    def recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if self._sent is None:
            raise RuntimeError("CartPolePool: recv() without a send()")
        ids, reset = self._sent
        self._sent = None
        whole = len(ids) == self.n and ids is self._all
        obs = (self._state if whole else self._state[:, ids]).T.astype(np.float32, order="C")  # C order, as envpool gives them
        done = self._done[ids]
        truncated = done & (self._elapsed[ids] >= self.max_episode_steps)
        reward = np.where(reset, np.float32(0.0), np.float32(1.0))
        return obs, reward, done & ~truncated, truncated, self._info(ids)

    def _info(self, ids: np.ndarray) -> dict[str, Any]:
        return {"env_id": ids.copy(), "players": {"env_id": ids.copy()}, "elapsed_step": self._elapsed[ids].copy()}
