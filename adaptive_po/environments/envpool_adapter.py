"""The ``"envpool"`` backend: :class:`EnvpoolVecEnv`, envpool's C++ pool behind SB3's ``VecEnv``."""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from adaptive_po.environments import atari as atari_settings
from adaptive_po.environments.subsets import checked_env_ids

INT32_MAX = 2**31 - 1


class EnvpoolVecEnv(VecEnv):
    """SB3 ``VecEnv`` over an envpool pool in sync mode, with SB3's same-step auto-reset.

    Build it with :func:`~adaptive_po.environments.make_vec_env`.  A step is one public
    ``send``/``recv`` pair into envpool plus numpy bookkeeping; Python loops run only
    over the envs that finished.

    envpool resets a finished env on its *next* step (ignoring that step's action and
    returning the reset observation with reward 0).  So that no such junk transition
    reaches the learner, the envs that finish in a step are stepped once more right
    away (one extra ``send``/``recv`` of just those envs): that runs envpool's own
    auto-reset (a full reset, or on Atari with episodic life and lives left envpool's
    in-game continuation: no-ops and FIRE, same game), and its observation is returned
    in the same step.  Slot ``i`` is envpool env ``i``, seeded ``seed + i``.

    Faster variants existed (pre-reset spare envs instead of the extra round trip,
    envpool's private ``_send``/``_recv`` instead of its public calls); measured end to
    end they saved under 3% of a CartPole or Pong training run, not worth a second code
    path.  ``make perf`` (``benchmarks/throughput.py``) prints that bound.

    ``env_is_wrapped(Monitor)`` is True: the ``episode`` infos follow SB3's
    ``Monitor`` (so ``evaluate_policy`` counts whole Atari games).

    CartPole is the exception to "C++ pool": ``in_process`` (the default) steps it with
    :class:`~adaptive_po.environments.cartpole.CartPolePool`, envpool's dynamics and generators
    in numpy, the same arrays bit for bit without the hand-over to envpool's worker thread
    (0.45 -> 0.13 ms a vector step of 400 environments with their resets, on one core).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        seed: int,
        *,
        atari: bool = False,
        training: bool = True,
        num_threads: int = 1,
        in_process: bool = True,
    ) -> None:
        self.env_id = env_id
        #: CartPole steps in this process (:class:`~adaptive_po.environments.cartpole.CartPolePool`,
        #: envpool's numbers bit for bit) unless False
        self.in_process = bool(in_process)
        self.atari = bool(atari)
        self.training = bool(training)
        self.episodic_life = self.atari and self.training
        self.render_mode = None
        self._n = int(num_envs)
        self._num_threads = int(num_threads)
        self._seed = int(seed)
        self._pool: Any = None
        self._build_pool(self._seed)
        obs_space = _sanitize_box(self._pool.observation_space)
        act_space = self._pool.action_space
        super().__init__(self._n, obs_space, act_space)
        self._act_shape = (self._n, *act_space.shape)
        self._zero_actions = np.zeros(self._act_shape, dtype=act_space.dtype)
        self._range = range(self._n)
        self._ep_ret = np.zeros(self._n, dtype=np.float64)
        self._ep_len = np.zeros(self._n, dtype=np.int64)
        self._t_start = time.time()
        self._pending_seed: int | None = None
        self._pool_fresh = True
        self._has_reset = False
        self._waiting = False
        self._closed = False

    def envpool_make_kwargs(self, seed: int | None = None) -> dict[str, Any]:
        """The keyword arguments this adapter passes to ``envpool.make_gymnasium(env_id, ...)``."""
        seed = self._seed if seed is None else seed
        kw: dict[str, Any] = dict(num_envs=self._n, batch_size=self._n, seed=seed, num_threads=self._num_threads)
        if self.atari:
            kw.update(
                episodic_life=self.episodic_life,
                reward_clip=self.training,
                repeat_action_probability=atari_settings.ATARI_REPEAT_ACTION_PROBABILITY,
                stack_num=atari_settings.ATARI_FRAME_STACK,
                frame_skip=atari_settings.ATARI_FRAME_SKIP,
                noop_max=atari_settings.ATARI_NOOP_MAX,
                img_height=atari_settings.ATARI_SCREEN_SIZE,
                img_width=atari_settings.ATARI_SCREEN_SIZE,
                gray_scale=True,
                full_action_space=False,
                use_fire_reset=True,
                max_episode_steps=atari_settings.ATARI_MAX_EPISODE_STEPS,
            )
        return kw

    def _build_pool(self, seed: int) -> None:
        from adaptive_po.environments import cartpole

        with warnings.catch_warnings():
            # envpool builds float32 Boxes from float64 bounds; gymnasium warns about that.
            warnings.filterwarnings("ignore", message=".*precision lowered by casting.*")
            if self.in_process and self.env_id in cartpole.IDS:
                pool = cartpole.CartPolePool(self.env_id, **self.envpool_make_kwargs(seed))
            else:
                import envpool

                pool = envpool.make_gymnasium(self.env_id, **self.envpool_make_kwargs(seed))
            _ = pool.observation_space, pool.action_space
        self._pool = pool
        self._seed = seed

    # ---- VecEnv API --------------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        """Reset all envs (a full game reset for Atari); applies a seed set by :meth:`seed`."""
        self._check_open()
        self._drain()
        if self._pending_seed is not None:
            if not (self._pool_fresh and self._pending_seed == self._seed):
                self._pool = None  # release the old pool's threads before building the new one
                self._build_pool(self._pending_seed)
            self._pending_seed = None
        obs, info = self._pool.reset()
        self._pool_fresh = False
        self._has_reset = True
        self._ep_ret[:] = 0.0
        self._ep_len[:] = 0
        if self.atari:
            self.reset_infos = [{"lives": int(v)} for v in info["lives"]]
        else:
            self.reset_infos = [{} for _ in self._range]
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        if not self._has_reset:  # (close() clears it too)
            self._check_open()
            raise RuntimeError("EnvpoolVecEnv: call reset() before step().")
        if self._waiting:
            raise RuntimeError("EnvpoolVecEnv: step_async() called twice without step_wait().")
        a = np.asarray(actions)
        if a.shape != self._act_shape:
            try:
                a = a.reshape(self._act_shape)
            except ValueError:
                raise ValueError(
                    f"actions of shape {np.shape(actions)} do not fit {self._n} envs with action space "
                    f"{self.action_space} (expected shape {self._act_shape})."
                ) from None
        # send() casts with astype (a copy): envpool never holds the caller's buffer.
        self._pool.send(a)
        self._waiting = True

    def step_wait(self) -> VecEnvStepReturn:
        if not self._waiting:
            raise RuntimeError("EnvpoolVecEnv: step_wait() called without step_async().")
        self._waiting = False
        obs, rew, term, trunc, info = self._pool.recv()
        done = term | trunc
        # Episode returns are raw: on Atari ``rew`` may be clipped, info["reward"] is not.
        self._ep_ret += info["reward"] if self.atari else rew
        self._ep_len += 1
        if self.atari:
            infos: list[dict[str, Any]] = [{"lives": v} for v in info["lives"].tolist()]
        else:
            infos = [{} for _ in self._range]
        if done.any():
            finished = done.nonzero()[0]
            self._finish(finished, finished, obs, trunc, info, infos)
        return obs, rew, done, infos

    def step_some(self, actions: np.ndarray, env_ids: np.ndarray) -> VecEnvStepReturn:
        """Step only the envs ``env_ids`` (distinct, each ``actions[j]`` for env ``env_ids[j]``);
        the others stay where they are. Returns their ``(obs, rewards, dones, infos)`` in the order
        of ``env_ids``, with the same-step auto-reset and episode infos of :meth:`step_wait`. An env's
        course does not depend on which others step beside it: each has its own seeded generator."""
        if not self._has_reset:
            self._check_open()
            raise RuntimeError("EnvpoolVecEnv: call reset() before step_some().")
        if self._waiting:
            raise RuntimeError("EnvpoolVecEnv: step_some() called while a step_async() is pending.")
        ids = checked_env_ids(env_ids, self._n)
        a = np.asarray(actions).reshape((len(ids), *self._act_shape[1:]))
        self._pool.send(a, ids)
        obs, rew, term, trunc, info = self._pool.recv()
        order = np.argsort(info["env_id"])[np.argsort(np.argsort(ids))]  # recv's order -> the order of ids
        obs, rew, term, trunc = obs[order], rew[order], term[order], trunc[order]
        info = {key: value[order] for key, value in info.items() if isinstance(value, np.ndarray) and len(value) == len(ids)}
        done = term | trunc
        self._ep_ret[ids] += info["reward"] if self.atari else rew
        self._ep_len[ids] += 1
        infos: list[dict[str, Any]] = [{"lives": v} for v in info["lives"].tolist()] if self.atari else [{} for _ in ids]
        if done.any():
            finished = done.nonzero()[0]
            self._finish(finished, ids[finished], obs, trunc, info, infos)
        return obs, rew, done, infos

    def _finish(
        self, pos: np.ndarray, env: np.ndarray, obs: np.ndarray, trunc: np.ndarray, info: dict[str, Any], infos: list[dict[str, Any]]
    ) -> None:
        """Same-step reset of the finished envs ``env``, found at rows ``pos`` of the step's arrays
        (in place on ``obs``/``infos``; ``pos`` is ``env`` when every env stepped)."""
        terminal_obs = obs[pos]  # a copy: obs[pos] is overwritten below
        truncated = trunc[pos]
        real_end = None  # None: every done ends an episode
        if self.atari:  # envpool flags a time-limit step as truncated even if the game ended on it
            game_over = info["terminated"][pos] != 0
            truncated = truncated & ~game_over
        self._pool.send(self._zero_actions[: len(env)], env)  # the action is ignored: this is envpool's reset
        r_obs, _, r_term, r_trunc, r_info = self._pool.recv()
        if (r_term | r_trunc).any():  # pragma: no cover - envpool's reset never reports done
            raise RuntimeError("envpool reported done on a reset step")
        row = dict(zip(env.tolist(), pos.tolist()))
        obs[[row[i] for i in r_info["env_id"].tolist()]] = r_obs
        lives_by_env = None
        if self.atari:
            lives_by_env = dict(zip(r_info["env_id"].tolist(), r_info["lives"].tolist()))
            if self.episodic_life:
                # A life-loss done does not end the game (envpool continued it), unless the
                # continuation itself restarted the game (lives went up again).
                after = np.array([lives_by_env[i] for i in env.tolist()])
                real_end = game_over | trunc[pos] | (after > info["lives"][pos])
        for p, i, term_o, tr in zip(pos.tolist(), env.tolist(), terminal_obs, truncated.tolist()):
            infos[p]["terminal_observation"] = term_o
            infos[p]["TimeLimit.truncated"] = tr
            self.reset_infos[i] = {"lives": lives_by_env[i]} if lives_by_env is not None else {}
        ending = slice(None) if real_end is None else real_end
        ends, end_rows = env[ending], pos[ending]
        if len(ends):
            now = round(time.time() - self._t_start, 6)
            returns = self._ep_ret[ends].tolist()
            lengths = self._ep_len[ends].tolist()
            self._ep_ret[ends] = 0.0
            self._ep_len[ends] = 0
            for p, r, length in zip(end_rows.tolist(), returns, lengths):
                infos[p]["episode"] = {"r": round(r, 6), "l": length, "t": now}

    def _drain(self) -> None:
        if self._waiting:
            self._pool.recv()
            self._waiting = False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("EnvpoolVecEnv is closed.")

    def close(self) -> None:
        if self._closed:
            return
        try:
            self._drain()
        finally:
            self._pool = None  # envpool joins its worker threads when the pool is released
            self._closed = True
            self._has_reset = False

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed slot ``i`` with ``seed + i`` from the next :meth:`reset` on.

        envpool fixes seeds when the pool is built, so the next ``reset()`` rebuilds
        the pool (skipped when it was never stepped and already has this seed).
        """
        last = INT32_MAX - self._n + 1
        if seed is None:
            seed = int(np.random.randint(0, last + 1))
        seed = int(seed)
        if not 0 <= seed <= last:
            raise ValueError(f"seed={seed} is out of range for this pool (0 <= seed <= {last}).")
        self._pending_seed = seed
        self._seeds = [seed + i for i in self._range]
        return list(self._seeds)

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        if options is None or (isinstance(options, dict) and not options):
            return
        if isinstance(options, list) and not any(options):
            return
        raise NotImplementedError("EnvpoolVecEnv: envpool environments take no reset options.")

    def get_images(self) -> Sequence[np.ndarray | None]:
        warnings.warn("EnvpoolVecEnv has no render_mode (envpool rendering is not wired up); no images.")
        return [None for _ in self._range]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Attributes shared by all envs: this adapter's (``render_mode``, ``env_id``, ...),
        the pool's (``spec``, ...) or an envpool config key (``episodic_life``, ``seed``...)."""
        n = len(list(self._get_indices(indices)))
        if attr_name in ("render_mode", "env_id", "atari", "training", "episodic_life", "num_envs"):
            return [getattr(self, attr_name)] * n
        pool = self.__dict__.get("_pool")
        if pool is not None:
            if attr_name == "seed":
                return [self._seed + i for i in self._get_indices(indices)]
            if not attr_name.startswith("_") and hasattr(pool, attr_name):
                return [getattr(pool, attr_name)] * n
            config = pool.config
            if attr_name in config:
                return [config[attr_name]] * n
        raise AttributeError(f"EnvpoolVecEnv: envpool environments have no attribute {attr_name!r}.")

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise NotImplementedError(
            f"EnvpoolVecEnv cannot set {attr_name!r}: envpool environments live in C++ and are configured "
            "once when the pool is built; create a new one with make_vec_env(...) instead."
        )

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        raise NotImplementedError(
            f"EnvpoolVecEnv cannot call {method_name!r} on individual envs: envpool environments live in C++ and "
            "expose no per-env Python methods; use the gymnasium backend if you need env_method()."
        )

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        # The episode statistics follow SB3's Monitor exactly; no other wrapper exists.
        wrapped = isinstance(wrapper_class, type) and issubclass(Monitor, wrapper_class)
        return [wrapped for _ in self._get_indices(indices)]

    def __repr__(self) -> str:
        return f"EnvpoolVecEnv({self.env_id!r}, num_envs={self._n}, seed={self._seed}, training={self.training})"


def _sanitize_box(space: gym.Space) -> gym.Space:
    """envpool's LunarLander declares low = FLT_MIN (a bug); such a Box is really unbounded below."""
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
        tiny = np.finfo(np.float32).tiny
        if np.all(space.low == tiny):
            return gym.spaces.Box(-np.inf, np.inf, shape=space.shape, dtype=space.dtype)
    return space
