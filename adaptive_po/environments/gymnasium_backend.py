"""The ``"gymnasium"`` backend: ``Monitor``-wrapped gymnasium envs in SB3's ``DummyVecEnv``.

Atari games get wrappers that reproduce envpool's Atari preprocessing (see
:func:`make_gym_atari`), so that one policy and one set of conventions fit both backends.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from adaptive_po.environments import atari
from adaptive_po.environments.subsets import checked_env_ids


class _FireOnReset(gym.Wrapper):
    """After each full reset press FIRE once, for games that have it (envpool's ``use_fire_reset``)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        self._fire = meanings.index("FIRE") if "FIRE" in meanings else None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        if self._fire is not None:
            obs, _, terminated, truncated, step_info = self.env.step(self._fire)
            info.update(step_info)
            if terminated or truncated:  # pragma: no cover - practically never
                obs, info = self.env.reset()
        return obs, info


class _LifeLossContinuation(gym.Wrapper):
    """Sits below ``Monitor``: continues a game after a life loss (one FIRE, else NOOP, step).

    Called by :class:`_EpisodicLife` through ``get_wrapper_attr`` so that ``Monitor``
    does not count the continuation as an agent step (envpool does not either).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        self._action = meanings.index("FIRE") if "FIRE" in meanings else 0

    def continue_after_life_loss(self) -> tuple[Any, dict[str, Any], bool]:
        obs, _, terminated, truncated, info = self.env.step(self._action)
        return obs, info, bool(terminated or truncated)


class _EpisodicLife(gym.Wrapper):
    """Above ``Monitor``: ``terminated`` at every life loss; the next ``reset()`` continues the
    game (no restart) unless it is over.  ``Monitor`` below still sees whole games."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._lives = 0
        self._continue = False

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        if not (terminated or truncated) and 0 < lives < self._lives:
            terminated = True
            self._continue = True
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self._continue:
            self._continue = False
            obs, info, ended = self.env.get_wrapper_attr("continue_after_life_loss")()
            if not ended:
                self._lives = self.env.unwrapped.ale.lives()
                return obs, info
        obs, info = self.env.reset(**kwargs)
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info


class _SignReward(gym.RewardWrapper):
    """Reward clipping to {-1, 0, 1} (sign), as envpool's ``reward_clip``."""

    def reward(self, reward: float) -> float:
        return float(np.sign(reward))


def make_gym_atari(gym_id: str, training: bool) -> gym.Env:
    """One gymnasium Atari env with the envpool-equivalent preprocessing, wrapped in ``Monitor``.

    Stack (inner to outer): ALE (frameskip 1, grayscale, sticky actions, 108k frames)
    -> AtariPreprocessing (noops, skip 4, max-pool, 84x84 INTER_AREA) -> FIRE on reset
    -> frame stack (4, 84, 84) -> life-loss continuation -> Monitor (raw rewards, whole
    games) -> [training: episodic life -> reward sign].

    :param gym_id: a gymnasium Atari id (``ALE/Pong-v5``).
    :param training: add episodic life and reward clipping.
    """
    env = gym.make(
        gym_id,
        frameskip=1,
        obs_type="grayscale",
        repeat_action_probability=atari.ATARI_REPEAT_ACTION_PROBABILITY,
        full_action_space=False,
        max_num_frames_per_episode=atari.ATARI_MAX_EPISODE_STEPS * atari.ATARI_FRAME_SKIP,
    )
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=atari.ATARI_NOOP_MAX,
        frame_skip=atari.ATARI_FRAME_SKIP,
        screen_size=atari.ATARI_SCREEN_SIZE,
        terminal_on_life_loss=False,
        grayscale_obs=True,
        grayscale_newaxis=False,
        scale_obs=False,
    )
    env = _FireOnReset(env)
    env = gym.wrappers.FrameStackObservation(env, atari.ATARI_FRAME_STACK)
    env = _LifeLossContinuation(env)
    env = Monitor(env)
    if training:
        env = _EpisodicLife(env)
        env = _SignReward(env)
    return env


class GymnasiumVecEnv(DummyVecEnv):
    """SB3's ``DummyVecEnv`` with :meth:`step_some`, as the other backends have it."""

    def step_some(self, actions: np.ndarray, env_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step only the envs ``env_ids`` (distinct, each ``actions[j]`` for env ``env_ids[j]``),
        each as ``DummyVecEnv.step_wait`` steps it (same-step reset, ``terminal_observation``,
        ``TimeLimit.truncated``); the others stay where they are. Returns their ``(obs, rewards,
        dones, infos)`` in the order of ``env_ids``; each env has its own seeded generator."""
        ids = checked_env_ids(env_ids, self.num_envs).tolist()
        actions = np.asarray(actions)
        if len(actions) != len(ids):
            raise ValueError(f"{len(actions)} actions for {len(ids)} envs")
        observations, infos = [], []
        for action, i in zip(actions, ids):
            obs, self.buf_rews[i], terminated, truncated, self.buf_infos[i] = self.envs[i].step(action)
            self.buf_dones[i] = terminated or truncated
            self.buf_infos[i]["TimeLimit.truncated"] = truncated and not terminated
            if self.buf_dones[i]:
                self.buf_infos[i]["terminal_observation"] = obs
                obs, self.reset_infos[i] = self.envs[i].reset()
            self._save_obs(i, obs)
            observations.append(obs)
            infos.append(dict(self.buf_infos[i]))
        return np.stack(observations), self.buf_rews[ids].copy(), self.buf_dones[ids].copy(), infos


def make_gymnasium_vec_env(gym_id: str, n_envs: int, seed: int, *, is_atari: bool, training: bool) -> VecEnv:
    """``n_envs`` copies of ``gym_id`` in a ``DummyVecEnv`` (:class:`GymnasiumVecEnv`); env ``i`` is
    seeded ``seed + i`` at the first reset."""

    def thunk(rank: int):
        def _init() -> gym.Env:
            env = make_gym_atari(gym_id, training) if is_atari else Monitor(gym.make(gym_id))
            env.action_space.seed(seed + rank)
            return env

        return _init

    venv = GymnasiumVecEnv([thunk(i) for i in range(n_envs)])
    venv.seed(seed)  # applied at the first reset: env i gets seed + i
    return venv
