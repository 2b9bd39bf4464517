"""The ``"minatar"`` backend: MinAtar's five games (Young & Tian 2019) behind SB3's ``VecEnv``.

MinAtar ("MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible Reinforcement Learning
Experiments", arXiv 1903.03176) reimplements Breakout, Asterix, Freeway, Seaquest and Space
Invaders on a 10 x 10 grid whose channels are object types. It is the field's CPU-scale stand-in
for the ALE. The games come from the ``minatar`` package (GPL-3.0), an optional extra that is
installed (``pip install 'adaptive-po[minatar]'``), never vendored: this module only imports it.

Settings, MinAtar's own defaults unless stated:

* sticky actions with probability 0.1 and difficulty ramping on (``minatar.Environment``'s
  defaults, as in the paper);
* the **minimal action set** of each game (``MinAtar/<Game>-v1`` in MinAtar's gymnasium
  registration; gymnax and the JAX PPO baselines use it too); the paper's agents used all 6;
* observations ``(channels, 10, 10)`` uint8 in {0, 1}, channel-first for SB3 and torch (MinAtar
  gives ``(10, 10, channels)`` booleans); the space is ``Box(0, 1, uint8)``, not an image space in
  SB3's sense, so the policy converts to float without dividing by 255;
* rewards are the game's own (no clipping, no episodic life: MinAtar has neither);
* a time limit of :data:`MINATAR_MAX_EPISODE_STEPS` agent steps (a truncation, flagged as such),
  which MinAtar itself does not have: only a deterministic policy that never loses would reach
  it, and it keeps an evaluation from running forever. Freeway ends by itself after 2,500 steps.

The same games in gymnax's configuration (``MinAtar/<Game>-gymnax-v1``, :data:`MINATAR_GYMNAX_GAMES`:
no sticky actions, 1,000-step episodes) exist for comparisons with JAX code that trains them so.

Conventions are those of every backend here (:mod:`adaptive_po.environments`): same-step
auto-reset with ``terminal_observation`` and ``TimeLimit.truncated`` in the infos, ``Monitor``-style
``episode`` statistics, env ``i`` seeded ``seed + i`` (its game's and its sticky actions' one
random stream, as ``minatar.Environment.seed`` does).
"""

from __future__ import annotations

import functools
import importlib
import time
import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from adaptive_po.environments.minatar_breakout import BreakoutGames
from adaptive_po.environments.subsets import checked_env_ids

#: the games, MinAtar's module name by our id (``MinAtar/<Game>-v1``, MinAtar's gymnasium spelling)
MINATAR_GAMES: dict[str, str] = {
    "MinAtar/Asterix-v1": "asterix",
    "MinAtar/Breakout-v1": "breakout",
    "MinAtar/Freeway-v1": "freeway",
    "MinAtar/Seaquest-v1": "seaquest",
    "MinAtar/SpaceInvaders-v1": "space_invaders",
}
MINATAR_STICKY_ACTION_PROBABILITY: float = 0.1
MINATAR_MAX_EPISODE_STEPS: int = 10_000
#: the games in gymnax's configuration (``MinAtar/<Game>-gymnax-v1``): no sticky actions, episodes
#: cut at 1,000 steps (Freeway's at 2,500), as gymnax's MinAtar and the JAX baselines train them;
#: for comparisons with those (``make perf``'s peer cell), never a shipped task
MINATAR_GYMNAX_GAMES: dict[str, str] = {f"MinAtar/{name}-gymnax-v1": module for name, module in (
    ("Asterix", "asterix"), ("Breakout", "breakout"), ("Freeway", "freeway"), ("Seaquest", "seaquest"), ("SpaceInvaders", "space_invaders"))}
GYMNAX_MAX_EPISODE_STEPS: dict[str, int] = {"freeway": 2_500}
GYMNAX_DEFAULT_MAX_EPISODE_STEPS = 1_000
#: the fewest games that Breakout steps all at once (:class:`~adaptive_po.environments.minatar_breakout.BreakoutGames`):
#: measured on one core, 0.78 against the package's 4.8 us a game step at 512 games, 6.2 against
#: 4.6 at 16 (the arrays' fixed cost); the games are the same either way
VECTORIZED_MIN_GAMES = 32


def minatar_settings(env_id: str) -> tuple[str, float, int]:
    """(MinAtar's module name, sticky-action probability, episode cap) of one of our MinAtar ids."""
    if env_id in MINATAR_GAMES:
        return MINATAR_GAMES[env_id], MINATAR_STICKY_ACTION_PROBABILITY, MINATAR_MAX_EPISODE_STEPS
    if env_id in MINATAR_GYMNAX_GAMES:
        module = MINATAR_GYMNAX_GAMES[env_id]
        return module, 0.0, GYMNAX_MAX_EPISODE_STEPS.get(module, GYMNAX_DEFAULT_MAX_EPISODE_STEPS)
    raise ValueError(f"Unknown MinAtar id {env_id!r}; available: {sorted(MINATAR_GAMES)} (and in gymnax's configuration {sorted(MINATAR_GYMNAX_GAMES)})")
MINATAR_INSTALL_HINT = "the MinAtar games need the optional extra: pip install 'adaptive-po[minatar]' (minatar, GPL-3.0)"


@functools.cache
def minatar_available() -> str | None:
    """None if ``minatar`` imports, else the reason it does not."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module("minatar")
    except Exception as err:  # noqa: BLE001 - any import failure means "not available"
        return f"{MINATAR_INSTALL_HINT} ({type(err).__name__}: {err})"
    return None


def is_minatar(env_id: str) -> bool:
    return isinstance(env_id, str) and (env_id in MINATAR_GAMES or env_id in MINATAR_GYMNAX_GAMES)


class MinAtarVecEnv(VecEnv):
    """``n`` MinAtar games stepped in one Python loop (Breakout's all at once in numpy), with
    SB3's same-step auto-reset.

    Build it with :func:`~adaptive_po.environments.make_vec_env` (backend ``"minatar"``).
    ``env_is_wrapped(Monitor)`` is True: the ``episode`` infos follow SB3's ``Monitor``.
    """

    def __init__(self, env_id: str, num_envs: int, seed: int, *, max_episode_steps: int | None = None, vectorized: bool | None = None) -> None:
        module, sticky, cap = minatar_settings(env_id)
        reason = minatar_available()
        if reason is not None:
            raise ValueError(f"{env_id!r}: {reason}")
        from minatar import Environment

        self.env_id = env_id
        self.render_mode = None
        self.max_episode_steps = int(cap if max_episode_steps is None else max_episode_steps)
        self._n = int(num_envs)
        #: Breakout's games all at once (:class:`~adaptive_po.environments.minatar_breakout.BreakoutGames`,
        #: the package's game step for step) from :data:`VECTORIZED_MIN_GAMES` games on, or where
        #: ``vectorized`` says so; the other games one ``minatar.Environment`` each
        if vectorized is None:
            vectorized = self._n >= VECTORIZED_MIN_GAMES
        self._batch = BreakoutGames(self._n, sticky) if module == "breakout" and vectorized else None
        probe = Environment(module, sticky_action_prob=sticky)
        self._games = [probe] if self._batch is not None else [Environment(module, sticky_action_prob=sticky) for _ in range(self._n)]
        self._action_set = np.asarray(probe.minimal_action_set(), dtype=np.int64)
        rows, cols, channels = probe.state_shape()
        observation_space = gym.spaces.Box(0, 1, shape=(channels, rows, cols), dtype=np.uint8)
        super().__init__(self._n, observation_space, gym.spaces.Discrete(len(self._action_set)))
        self._obs = np.zeros((self._n, channels, rows, cols), dtype=np.uint8)
        self._ep_ret = np.zeros(self._n, dtype=np.float64)
        self._ep_len = np.zeros(self._n, dtype=np.int64)
        self._actions: np.ndarray | None = None
        self._t_start = time.time()
        self._has_reset = False
        self.seed(seed)

    def _observe(self, i: int, out: np.ndarray) -> None:
        out[...] = self._games[i].state().transpose(2, 0, 1)

    def _reset_game(self, i: int) -> None:
        game = self._games[i]
        game.reset()
        game.last_action = 0  # a sticky action does not carry over from the previous episode
        self._ep_ret[i] = 0.0
        self._ep_len[i] = 0
        self._observe(i, self._obs[i])

    # ---- VecEnv API --------------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        if self._pending_seeds is not None:
            if self._batch is not None:
                self._batch.seed(self._pending_seeds)
            else:
                for game, s in zip(self._games, self._pending_seeds):
                    game.seed(s)
            self._pending_seeds = None
        if self._batch is not None:
            self._reset_batch(np.arange(self._n))
        else:
            for i in range(self._n):
                self._reset_game(i)
        self._has_reset = True
        self.reset_infos = [{} for _ in range(self._n)]
        self._reset_options()
        return self._obs.copy()

    def step_async(self, actions: np.ndarray) -> None:
        if not self._has_reset:
            raise RuntimeError("MinAtarVecEnv: call reset() before step().")
        a = np.asarray(actions).reshape(-1)
        if a.shape != (self._n,):
            raise ValueError(f"actions of shape {np.shape(actions)} do not fit {self._n} envs with action space {self.action_space}")
        self._actions = self._action_set[a.astype(np.int64)]

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("MinAtarVecEnv: step_wait() called without step_async().")
        actions, self._actions = self._actions.tolist(), None
        return self._step(range(self._n), actions)

    def step_some(self, actions: np.ndarray, env_ids: np.ndarray) -> VecEnvStepReturn:
        """Step only the games ``env_ids`` (distinct, each ``actions[j]`` for game ``env_ids[j]``);
        the others stay where they are. Returns their ``(obs, rewards, dones, infos)`` in the order
        of ``env_ids``, as :meth:`step_wait` does; each game has its own seeded generator."""
        if not self._has_reset:
            raise RuntimeError("MinAtarVecEnv: call reset() before step_some().")
        ids = checked_env_ids(env_ids, self._n).tolist()
        a = np.asarray(actions).reshape(-1)
        if a.shape != (len(ids),):
            raise ValueError(f"actions of shape {np.shape(actions)} do not fit {len(ids)} envs with action space {self.action_space}")
        obs, rewards, dones, infos = self._step(ids, self._action_set[a.astype(np.int64)].tolist())
        return obs[ids], rewards[ids], dones[ids], [infos[i] for i in ids]

    def _reset_batch(self, ids: np.ndarray) -> None:
        self._batch.reset(ids)  # type: ignore[union-attr]
        self._ep_ret[ids] = 0.0
        self._ep_len[ids] = 0
        self._observe_batch(ids)

    def _observe_batch(self, ids: np.ndarray) -> None:
        planes = np.empty((len(ids), *self._obs.shape[1:]), dtype=np.uint8)
        self._batch.observe(ids, planes)  # type: ignore[union-attr]
        self._obs[ids] = planes

    def _step_batch(self, ids: np.ndarray, actions: np.ndarray) -> VecEnvStepReturn:
        """:meth:`_step` for :attr:`_batch`'s games: all of ``ids`` at once."""
        rewards = np.zeros(self._n, dtype=np.float32)
        dones = np.zeros(self._n, dtype=bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self._n)]
        reward, terminal = self._batch.act(ids, actions)  # type: ignore[union-attr]
        rewards[ids] = reward
        self._ep_ret[ids] += reward
        self._ep_len[ids] += 1
        truncated = ~terminal & (self._ep_len[ids] >= self.max_episode_steps)
        self._observe_batch(ids)
        ended = terminal | truncated
        if ended.any():
            now = round(time.time() - self._t_start, 6)
            for i, cut in zip(ids[ended].tolist(), truncated[ended].tolist()):
                infos[i] = self._episode_end(i, self._obs[i].copy(), cut, now)
            dones[ids[ended]] = True
            self._reset_batch(ids[ended])
        return self._obs.copy(), rewards, dones, infos

    def _episode_end(self, i: int, last: np.ndarray, truncated: bool, now: float) -> dict[str, Any]:
        """The infos of game ``i``'s step that ended its episode (before its reset): the last
        observation, whether the time limit cut it, and the ``Monitor``-style statistics."""
        return {
            "terminal_observation": last,
            "TimeLimit.truncated": bool(truncated),
            "episode": {"r": round(float(self._ep_ret[i]), 6), "l": int(self._ep_len[i]), "t": now},
        }

    def _step(self, ids: Sequence[int], actions: list[int]) -> VecEnvStepReturn:
        """Step games ``ids`` with ``actions`` (one each); arrays over all games, the others untouched."""
        if self._batch is not None:
            return self._step_batch(np.asarray(ids, dtype=np.int64), np.asarray(actions, dtype=np.int64))
        rewards = np.zeros(self._n, dtype=np.float32)
        dones = np.zeros(self._n, dtype=bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self._n)]
        obs = self._obs
        for i, action in zip(ids, actions):
            reward, terminal = self._games[i].act(action)
            rewards[i] = reward
            self._ep_ret[i] += reward
            self._ep_len[i] += 1
            truncated = not terminal and self._ep_len[i] >= self.max_episode_steps
            if terminal or truncated:
                last = np.empty_like(obs[i])
                self._observe(i, last)
                infos[i] = self._episode_end(i, last, truncated, round(time.time() - self._t_start, 6))
                dones[i] = True
                self._reset_game(i)
            else:
                self._observe(i, obs[i])
        return obs.copy(), rewards, dones, infos

    def close(self) -> None:
        self._has_reset = False

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed env ``i`` with ``seed + i`` from the next :meth:`reset` on."""
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - self._n))
        self._pending_seeds = [int(seed) + i for i in range(self._n)]
        return list(self._pending_seeds)

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in range(self._n)]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        n = len(list(self._get_indices(indices)))
        if attr_name in ("render_mode", "env_id", "max_episode_steps"):
            return [getattr(self, attr_name)] * n
        raise AttributeError(f"MinAtarVecEnv: no attribute {attr_name!r}")

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise NotImplementedError(f"MinAtarVecEnv cannot set {attr_name!r}; build a new one with make_vec_env(...)")

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        raise NotImplementedError(f"MinAtarVecEnv cannot call {method_name!r} on individual games")

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        wrapped = isinstance(wrapper_class, type) and issubclass(Monitor, wrapper_class)
        return [wrapped for _ in self._get_indices(indices)]

    def __repr__(self) -> str:
        return f"MinAtarVecEnv({self.env_id!r}, num_envs={self._n})"
