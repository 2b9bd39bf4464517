"""Vectorized environments behind Stable-Baselines3's ``VecEnv`` interface.

Two backends build the same environments with the same conventions:

* ``"envpool"``: envpool's C++ pool (classic control, LunarLander and the Atari v5
  games), adapted by :class:`EnvpoolVecEnv`.
* ``"gymnasium"``: any registered gymnasium id, each env wrapped in SB3's
  :class:`~stable_baselines3.common.monitor.Monitor` and vectorized with
  :class:`~stable_baselines3.common.vec_env.DummyVecEnv`.

Conventions shared by both backends (what an SB3 learner sees):

* **Same-step auto-reset.** When env ``i`` finishes at step ``t``, ``step_wait``
  returns the first observation of its next episode in ``obs[i]``, ``dones[i]=True``,
  ``infos[i]["terminal_observation"]`` is the last observation of the finished
  episode and ``infos[i]["TimeLimit.truncated"]`` is True iff it was truncated and
  not terminated.  envpool natively resets a finished env on the *next* step (that
  step ignores its action and returns the reset observation with reward 0);
  :class:`EnvpoolVecEnv` never lets such a junk step reach the learner: off Atari a
  pre-reset spare env takes over the finished env's slot and the finished env is
  reset inside the next regular step call; on Atari the finished envs are stepped
  once more right away, which runs envpool's own reset (see :class:`EnvpoolVecEnv`).
* **Episode statistics** like ``Monitor``: each finished episode puts
  ``{"r": return, "l": length, "t": seconds since the VecEnv was created}`` into
  ``infos[i]["episode"]``.  Returns are raw (unclipped) and, for Atari, cover the
  whole game (all lives).
* **Atari** (``Pong-v5`` or ``ALE/Pong-v5``, either spelling on either backend):
  84x84 grayscale (ALE palette), max-pool over the last two of 4 skipped frames,
  frame stack 4 as ``(4, 84, 84)`` uint8 channel-first, up to 30 no-op starts,
  FIRE on reset for games that have it, minimal action set, 27,000 agent steps
  (108,000 frames) per game, and sticky actions with
  ``repeat_action_probability = ATARI_REPEAT_ACTION_PROBABILITY`` (0.25, the ALE
  v5 default of Machado et al. 2018) on both backends.  ``training=True`` adds
  episodic life (``done`` at every life loss, the game then continues; a full
  reset only at game over) and reward clipping to {-1, 0, 1}; ``training=False``
  (evaluation) has neither.
* **Seeding**: env ``i`` is seeded with ``seed + i``; the same seed and the same
  actions give the same trajectories on the same backend (the two backends use
  different RNGs, so they agree in distribution, not in values).

Known differences between the backends (Atari): after a life loss envpool continues
the game with 1-30 no-op frames ending in FIRE, the gymnasium backend with one
4-frame FIRE (or NOOP) step; at a full reset envpool presses FIRE for one frame as the
last no-op, gymnasium for one 4-frame step after the no-ops; envpool's time limit
counts 27,000 agent steps, ALE's 108,000 frames (no-op frames included).  Reset
screens are otherwise bit-identical (tested on Pong).

Example::

    from adaptive_po.environments import make_vec_env
    venv = make_vec_env("CartPole-v1", n_envs=8, seed=0)           # envpool
    venv = make_vec_env("ALE/Pong-v5", 8, 0, backend="gymnasium")  # Atari on gymnasium
"""

from __future__ import annotations

import difflib
import functools
import importlib
import operator
import time
import warnings
from collections import deque
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

__all__ = [
    "ATARI_FRAME_SKIP",
    "ATARI_FRAME_STACK",
    "ATARI_MAX_EPISODE_STEPS",
    "ATARI_NOOP_MAX",
    "ATARI_REPEAT_ACTION_PROBABILITY",
    "ATARI_SCREEN_SIZE",
    "BACKENDS",
    "ENVPOOL_CLASSIC_IDS",
    "EnvpoolVecEnv",
    "atari_ids",
    "available_backends",
    "is_atari",
    "make_vec_env",
]

#: Backend names accepted by :func:`make_vec_env` (besides ``"auto"``), in order of preference.
BACKENDS: tuple[str, ...] = ("envpool", "gymnasium")

#: Sticky-action probability used for Atari on *both* backends: the ALE v5 default
#: (Machado et al., 2018).  envpool's own default is 0.0; we override it so that
#: ``Pong-v5`` means the same thing on envpool and on gymnasium's ``ALE/Pong-v5``.
ATARI_REPEAT_ACTION_PROBABILITY: float = 0.25
ATARI_FRAME_SKIP: int = 4
ATARI_FRAME_STACK: int = 4
ATARI_NOOP_MAX: int = 30
ATARI_SCREEN_SIZE: int = 84
#: Agent steps per game before truncation (= 108,000 frames, ALE's v5 default).
ATARI_MAX_EPISODE_STEPS: int = 27_000

#: Non-Atari ids served by the envpool backend (those whose envpool port follows
#: gymnasium's dynamics and spaces).  Other envpool families are not adapted here.
ENVPOOL_CLASSIC_IDS: tuple[str, ...] = (
    "CartPole-v0",
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
    "LunarLander-v3",
    "LunarLanderContinuous-v3",
)

_INT32_MAX = 2**31 - 1


# --------------------------------------------------------------------------------------
# Environment id resolution (cached; no environment is constructed here)
# --------------------------------------------------------------------------------------


@functools.cache
def _envpool_registry() -> dict[str, str]:
    """envpool id -> its import path (e.g. ``"envpool.atari"``); empty if envpool is missing."""
    try:
        import envpool.registration as reg
    except ImportError:  # pragma: no cover - envpool is a declared dependency
        return {}
    return {task_id: entry[0] for task_id, entry in reg.registry.specs.items()}


@functools.cache
def _envpool_atari() -> dict[str, str]:
    """lower-case ``game-v5`` -> envpool id."""
    return {k.lower(): k for k, path in _envpool_registry().items() if path == "envpool.atari"}


@functools.cache
def _register_ale() -> bool:
    try:
        import ale_py
    except ImportError:  # pragma: no cover - ale-py is a declared dependency
        return False
    gym.register_envs(ale_py)
    return True


def _is_ale_entry(spec: Any) -> bool:
    ep = spec.entry_point
    return isinstance(ep, str) and ep.startswith("ale_py")


@functools.cache
def _gym_atari() -> dict[str, str]:
    """lower-case ``game-v5`` -> gymnasium id ``ALE/Game-v5`` (image observations only)."""
    _register_ale()
    out = {}
    for k, spec in gym.registry.items():
        if k.startswith("ALE/") and k.endswith("-v5") and "-ram" not in k and _is_ale_entry(spec):
            out[k[4:].lower()] = k
    return out


def _atari_key(env_id: str) -> str:
    return (env_id[4:] if env_id.startswith("ALE/") else env_id).lower()


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` names an Atari v5 game (``Pong-v5`` or ``ALE/Pong-v5``)."""
    key = _atari_key(env_id)
    return key.endswith("-v5") and (key in _envpool_atari() or key in _gym_atari())


def atari_ids() -> list[str]:
    """All Atari v5 ids known to either backend, in envpool spelling (``Pong-v5``)."""
    names = {key: gym_id[4:] for key, gym_id in _gym_atari().items()}
    names.update(_envpool_atari())  # envpool's spelling wins (TicTacToe3d-v5 vs ALE/TicTacToe3D-v5)
    return sorted(names.values())


@functools.cache
def _gym_import_error(env_id: str) -> str | None:
    """None if gymnasium can build ``env_id`` (its module imports), else the reason it cannot."""
    _register_ale()
    spec = gym.registry.get(env_id)
    if spec is None:
        return f"{env_id!r} is not registered with gymnasium"
    ep = spec.entry_point
    if isinstance(ep, str):
        module = ep.split(":")[0]
        try:
            importlib.import_module(module)
        except Exception as exc:  # DependencyNotInstalled is not an ImportError subclass
            return f"gymnasium cannot import {module!r} ({type(exc).__name__}: {exc})"
    return None


def _envpool_id(env_id: str) -> str | None:
    if is_atari(env_id):
        return _envpool_atari().get(_atari_key(env_id))
    if env_id in ENVPOOL_CLASSIC_IDS and env_id in _envpool_registry():
        return env_id
    return None


def _gym_id(env_id: str) -> str | None:
    if is_atari(env_id):
        gid = _gym_atari().get(_atari_key(env_id))
    else:
        gid = env_id if env_id in gym.registry else None
        if gid is not None and _is_ale_entry(gym.registry[gid]):
            return None  # legacy ALE ids (v0/v4, NoFrameskip, -ram): see _legacy_atari_hint
    if gid is None or _gym_import_error(gid) is not None:
        return None
    return gid


def available_backends(env_id: str) -> list[str]:
    """The backends (in order of preference) that can build ``env_id``; empty if none."""
    if not isinstance(env_id, str):
        return []
    _register_ale()
    out = []
    if _envpool_id(env_id) is not None:
        out.append("envpool")
    if _gym_id(env_id) is not None:
        out.append("gymnasium")
    return out


def _legacy_atari_hint(env_id: str) -> str | None:
    spec = gym.registry.get(env_id)
    if spec is None or not _is_ale_entry(spec):
        return None
    game = spec.kwargs.get("game", "")
    name = "".join(part.capitalize() for part in str(game).split("_")) or "<Game>"
    return (
        f"{env_id!r} is a legacy ALE id; make_vec_env builds Atari games only from their v5 ids "
        f"with its own standard preprocessing: use {name + '-v5'!r} (or {'ALE/' + name + '-v5'!r})."
    )


def _unknown_id_message(env_id: str) -> str:
    candidates = set(ENVPOOL_CLASSIC_IDS) | set(atari_ids())
    candidates |= {k for k, s in gym.registry.items() if not _is_ale_entry(s)}
    close = difflib.get_close_matches(env_id, sorted(candidates), n=5, cutoff=0.6)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return (
        f"Unknown environment id {env_id!r}.{hint} "
        f"Classic control / Box2D (envpool and gymnasium): {', '.join(ENVPOOL_CLASSIC_IDS)}. "
        f"Atari: '<Game>-v5' or 'ALE/<Game>-v5' for {len(atari_ids())} games, e.g. Pong-v5, Breakout-v5 "
        "(adaptive_po.environments.atari_ids() lists them). "
        "With backend='gymnasium' any id registered with gymnasium works."
    )


# --------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------


def make_vec_env(
    env_id: str,
    n_envs: int,
    seed: int,
    backend: str = "auto",
    *,
    training: bool = True,
    envpool_threads: int | None = None,
) -> VecEnv:
    """Build ``n_envs`` copies of ``env_id`` behind SB3's ``VecEnv`` interface.

    :param env_id: a gymnasium/envpool id.  Atari games are accepted as ``Pong-v5`` or
        ``ALE/Pong-v5`` on both backends.
    :param n_envs: number of environments (>= 1).
    :param seed: env ``i`` is seeded with ``seed + i`` (0 <= seed, seed + 2 * n_envs - 1 < 2**31;
        envpool's spare envs, see :class:`EnvpoolVecEnv`, use the seeds after ``seed + n_envs - 1``).
    :param backend: ``"envpool"``, ``"gymnasium"`` or ``"auto"`` (envpool where it
        supports the id, else gymnasium).
    :param training: Atari only: ``True`` turns on episodic life and reward clipping
        (training), ``False`` turns both off (evaluation).  No effect on other envs.
    :param envpool_threads: envpool worker threads.  Default: 1 for classic control /
        Box2D (more threads beside torch stalled runs on small machines), envpool's
        own choice (``min(n_envs, cores)``) for Atari.  0 means envpool's choice.
        Ignored by the gymnasium backend.
    :return: an :class:`EnvpoolVecEnv` or a ``DummyVecEnv`` of ``Monitor``-wrapped envs.
    :raises ValueError: for an unknown id, an unknown backend, a backend that does not
        support the id, or bad ``n_envs`` / ``seed`` / ``envpool_threads``; raised before
        any environment is built.
    """
    if not isinstance(backend, str) or backend not in ("auto", *BACKENDS):
        raise ValueError(f"Unknown backend {backend!r}; expected one of 'auto', 'envpool', 'gymnasium'.")
    if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
        raise ValueError(f"n_envs must be an integer >= 1, got n_envs={n_envs!r}.")
    n_envs = int(n_envs)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got seed={seed!r}.")
    seed = int(seed)
    if seed < 0 or seed + 2 * n_envs - 1 > _INT32_MAX:
        raise ValueError(
            f"seed={seed} is out of range: need 0 <= seed and seed + 2 * n_envs - 1 <= {_INT32_MAX} "
            "(envpool seeds are int32 and its pools may hold 2 * n_envs envs)."
        )
    if envpool_threads is not None and (
        isinstance(envpool_threads, bool) or not isinstance(envpool_threads, (int, np.integer)) or envpool_threads < 0
    ):
        raise ValueError(f"envpool_threads must be None or an integer >= 0, got envpool_threads={envpool_threads!r}.")
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"Unknown environment id {env_id!r}: expected a non-empty string.")

    _register_ale()
    supported = available_backends(env_id)
    if not supported:
        hint = _legacy_atari_hint(env_id)
        if hint is not None:
            raise ValueError(hint)
        known = _envpool_id(env_id) is not None or env_id in gym.registry or is_atari(env_id)
        if not known:
            raise ValueError(_unknown_id_message(env_id))
        gid = _gym_atari().get(_atari_key(env_id)) if is_atari(env_id) else env_id
        reason = _gym_import_error(gid) if gid else "unknown to gymnasium"
        raise ValueError(f"Environment {env_id!r} is known but no backend can build it here: {reason}.")
    chosen = supported[0] if backend == "auto" else backend
    if chosen not in supported:
        extra = ""
        if chosen == "gymnasium":
            gid = _gym_atari().get(_atari_key(env_id)) if is_atari(env_id) else env_id
            err = _gym_import_error(gid) if gid in gym.registry else None
            extra = f" ({err})" if err else ""
        raise ValueError(
            f"Backend {chosen!r} does not support environment {env_id!r}{extra}; "
            f"backends that do: {', '.join(map(repr, supported))}."
        )

    atari = is_atari(env_id)
    if chosen == "envpool":
        threads = envpool_threads
        if threads is None:
            threads = 0 if atari else 1
        return EnvpoolVecEnv(
            _envpool_id(env_id),  # type: ignore[arg-type]
            n_envs,
            seed,
            atari=atari,
            training=training,
            num_threads=int(threads),
        )
    return _make_gymnasium_vec_env(_gym_id(env_id), n_envs, seed, atari=atari, training=training)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# envpool backend
# --------------------------------------------------------------------------------------


class EnvpoolVecEnv(VecEnv):
    """SB3 ``VecEnv`` over an envpool pool in sync mode, with SB3's same-step auto-reset.

    Build it with :func:`make_vec_env`.  A step is one ``send``/``recv`` pair into
    envpool plus numpy bookkeeping; Python loops run only over the envs that finished.
    When envpool's private ``_send``/``_recv`` exist (envpool 1.2.x) they are used
    directly, skipping the per-call conversions of envpool's gymnasium wrapper;
    otherwise (or with ``force_public_api=True``) the public ``send``/``recv``.

    envpool resets a finished env on its *next* step (ignoring that step's action).
    Two ways give SB3 the reset observation in the same step without a junk transition:

    * **Spare envs** (non-Atari; ``spare_envs=False`` turns them off): the pool holds ``2 * num_envs`` envs; slot
      ``i`` of the VecEnv is served by one of them.  When the env in slot ``i``
      finishes, a spare env that was already reset takes over the slot (its reset
      observation is returned in ``obs[i]``) and the finished env rides along in the
      *next* regular ``send`` to run envpool's auto-reset, becoming a spare.  No extra
      round trip into envpool: resets cost what they cost raw envpool.  Slot ``i``
      starts with the env seeded ``seed + i``; the spares have seeds
      ``seed + num_envs ... seed + 2 * num_envs - 1``.
    * **Immediate re-step** (Atari): the finished envs are stepped once more right
      away (one extra ``send``/``recv`` of just those envs), which runs envpool's own
      auto-reset: a full reset, or with episodic life and lives left envpool's in-game
      continuation (no-ops and FIRE, same game).  The game must continue in the same
      env, which is why Atari does not use spares; its steps are costly enough that
      the extra round trip does not show (measured: same throughput as raw envpool).

    ``env_is_wrapped(Monitor)`` is True: the ``episode`` infos follow SB3's
    ``Monitor`` (so ``evaluate_policy`` counts whole Atari games).
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
        spare_envs: bool | None = None,
        force_public_api: bool = False,
    ) -> None:
        self.env_id = env_id
        self.atari = bool(atari)
        self.training = bool(training)
        self.episodic_life = self.atari and self.training
        self.render_mode = None
        self._n = int(num_envs)
        self._spares_on = (not self.atari) if spare_envs is None else bool(spare_envs)
        if self._spares_on and self.atari:
            raise ValueError("spare_envs=True is not supported for Atari (a game must go on in its own env).")
        self._pool_size = 2 * self._n if self._spares_on else self._n
        self._num_threads = int(num_threads)
        self._force_public_api = bool(force_public_api)
        self._seed = int(seed)
        self._pool: Any = None
        self._build_pool(self._seed)
        obs_space = _sanitize_box(self._pool.observation_space)
        act_space = self._pool.action_space
        super().__init__(self._n, obs_space, act_space)
        self._act_dtype = np.dtype(np.int32) if isinstance(act_space, gym.spaces.Discrete) else np.dtype(act_space.dtype)
        self._act_shape = (self._n, *act_space.shape)
        self._zero_actions = np.zeros((self._pool_size, *act_space.shape), dtype=self._act_dtype)
        self._range = range(self._n)
        self._no_done = bytes(self._n)
        self._slot_env = np.arange(self._n, dtype=np.int32)  # envpool env serving each slot
        self._spare_obs: np.ndarray | None = None  # reset observation of each spare env
        self._spares: deque[int] = deque()
        self._pending = np.zeros(0, dtype=np.int32)  # finished envs to auto-reset in the next send
        self._pending_list: list[int] = []
        self._ep_ret = np.zeros(self._n, dtype=np.float64)
        self._ep_start = np.zeros(self._n, dtype=np.int64)
        self._t = 0
        self._t_start = time.time()
        self._pending_seed: int | None = None
        self._pool_fresh = True
        self._has_reset = False
        self._waiting = False
        self._closed = False

    # ---- pool construction / raw I/O -------------------------------------------------

    def envpool_make_kwargs(self, seed: int | None = None) -> dict[str, Any]:
        """The keyword arguments this adapter passes to ``envpool.make_gymnasium(env_id, ...)``."""
        seed = self._seed if seed is None else seed
        kw: dict[str, Any] = dict(
            num_envs=self._pool_size, batch_size=self._pool_size, seed=seed, num_threads=self._num_threads
        )
        if self.atari:
            kw.update(
                episodic_life=self.episodic_life,
                reward_clip=self.training,
                repeat_action_probability=ATARI_REPEAT_ACTION_PROBABILITY,
                stack_num=ATARI_FRAME_STACK,
                frame_skip=ATARI_FRAME_SKIP,
                noop_max=ATARI_NOOP_MAX,
                img_height=ATARI_SCREEN_SIZE,
                img_width=ATARI_SCREEN_SIZE,
                gray_scale=True,
                full_action_space=False,
                use_fire_reset=True,
                max_episode_steps=ATARI_MAX_EPISODE_STEPS,
            )
        return kw

    def _build_pool(self, seed: int) -> None:
        import envpool

        with warnings.catch_warnings():
            # envpool builds float32 Boxes from float64 bounds; gymnasium warns about that.
            warnings.filterwarnings("ignore", message=".*precision lowered by casting.*")
            pool = envpool.make_gymnasium(self.env_id, **self.envpool_make_kwargs(seed))
            _ = pool.observation_space, pool.action_space
        self._pool = pool
        self._seed = seed
        keys = list(getattr(pool, "_state_keys", ()))
        needed = ["obs", "reward", "done", "trunc", "info:env_id"]
        if self.atari:
            needed += ["info:reward", "info:terminated", "info:lives"]
        self._fast = (
            not self._force_public_api
            and hasattr(pool, "_send")
            and hasattr(pool, "_recv")
            and list(getattr(pool, "_action_keys", ())) == ["env_id", "players.env_id", "action"]
            and all(k in keys for k in needed)
        )
        if self._fast:
            self._i_obs, self._i_rew, self._i_done, self._i_trunc, self._i_eid = (keys.index(k) for k in needed[:5])
            self._get_main = operator.itemgetter(self._i_obs, self._i_rew, self._i_done, self._i_trunc)
            if self.atari:
                self._i_raw, self._i_over, self._i_lives = (keys.index(k) for k in needed[5:])

    def _recv(self) -> tuple[np.ndarray, ...]:
        """(obs, reward, done, trunc, env_id, raw_reward, game_over, lives); the last three None off Atari."""
        if self._fast:
            st = self._pool._recv()
            if self.atari:
                return (st[self._i_obs], st[self._i_rew], st[self._i_done], st[self._i_trunc], st[self._i_eid],
                        st[self._i_raw], st[self._i_over], st[self._i_lives])  # fmt: skip
            return st[self._i_obs], st[self._i_rew], st[self._i_done], st[self._i_trunc], st[self._i_eid], None, None, None
        obs, rew, term, trunc, info = self._pool.recv()
        done = np.logical_or(term, trunc)
        if self.atari:
            return obs, rew, done, trunc, info["env_id"], info["reward"], info["terminated"], info["lives"]
        return obs, rew, done, trunc, info["env_id"], None, None, None

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
        n = self._n
        self._slot_env = np.arange(n, dtype=np.int32)
        self._pending = np.zeros(0, dtype=np.int32)
        self._pending_list = []
        if self._spares_on:
            self._spare_obs = obs.copy()
            self._spares = deque(range(n, self._pool_size))
            obs = obs[:n].copy()
        self._ep_ret[:] = 0.0
        self._ep_start[:] = 0
        self._t = 0
        if self.atari:
            self.reset_infos = [{"lives": int(v)} for v in info["lives"][:n]]
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
        a = np.ascontiguousarray(actions, dtype=self._act_dtype)
        if a.shape != self._act_shape:
            try:
                a = a.reshape(self._act_shape)
            except ValueError:
                raise ValueError(
                    f"actions of shape {np.shape(actions)} do not fit {self._n} envs with action space "
                    f"{self.action_space} (expected shape {self._act_shape})."
                ) from None
        if a is actions or a.base is not None:
            a = a.copy()  # envpool may read the actions after we return: never hand it the caller's buffer
        if self._pending_list:  # finished envs ride along: stepping a done env runs envpool's auto-reset
            p = len(self._pending_list)
            ids = np.concatenate((self._slot_env, self._pending))
            a = np.concatenate((a, self._zero_actions[:p]))
        else:
            ids = self._slot_env
        if self._fast:
            self._pool._send([ids, ids, a])
        else:
            self._pool.send(a, ids)
        self._waiting = True

    def step_wait(self) -> VecEnvStepReturn:
        if not self._waiting:
            raise RuntimeError("EnvpoolVecEnv: step_wait() called without step_async().")
        self._waiting = False
        if self._fast and not self.atari:  # the hot path, inlined
            obs, rew, done, trunc = self._get_main(self._pool._recv())
            raw = over = lives = None
        else:
            obs, rew, done, trunc, _, raw, over, lives = self._recv()
        if self._pending_list:  # the rows after the n slots are the finished envs' reset observations
            n = self._n
            self._spare_obs[self._pending] = obs[n:]  # type: ignore[index]
            self._spares.extend(self._pending_list)
            self._pending_list = []
            obs, rew, done = obs[:n], rew[:n], done[:n]
        self._ep_ret += rew if raw is None else raw
        self._t += 1
        if lives is None:
            infos: list[dict[str, Any]] = [{} for _ in self._range]
        else:
            infos = [{"lives": v} for v in lives.tolist()]
        if done.tobytes() != self._no_done:  # the cheapest "any" for a few bools
            self._finish(done.nonzero()[0], obs, trunc, over, lives, infos)
        return obs, rew, done, infos

    def _finish(
        self,
        idx: np.ndarray,
        obs: np.ndarray,
        trunc: np.ndarray,
        over: np.ndarray | None,
        lives: np.ndarray | None,
        infos: list[dict[str, Any]],
    ) -> None:
        """Same-step reset of the finished slots ``idx`` (in place on ``obs``/``infos``)."""
        if self._spares_on:
            self._finish_with_spares(idx.tolist(), obs, trunc, infos)
        else:
            self._finish_with_restep(idx, obs, trunc, over, lives, infos)

    def _finish_with_spares(self, idx: list[int], obs: np.ndarray, trunc: np.ndarray, infos: list[dict[str, Any]]) -> None:
        # Usually one or two slots: scalar numpy access beats fancy indexing here.
        spares, spare_obs, slot_env = self._spares, self._spare_obs, self._slot_env
        ep_ret, ep_start, reset_infos = self._ep_ret, self._ep_start, self.reset_infos
        t = self._t
        now = round(time.time() - self._t_start, 6)
        pending = []
        for i in idx:
            env = spares.popleft()
            pending.append(slot_env.item(i))
            slot_env[i] = env
            infos[i] = {
                "terminal_observation": obs[i].copy(),
                "TimeLimit.truncated": trunc.item(i),
                "episode": {"r": round(ep_ret.item(i), 6), "l": t - ep_start.item(i), "t": now},
            }
            obs[i] = spare_obs[env]  # type: ignore[index]
            ep_ret[i] = 0.0
            ep_start[i] = t
            reset_infos[i] = {}
        self._pending_list = pending  # these envs are done in envpool: the next send resets them
        self._pending = np.array(pending, dtype=np.int32)

    def _finish_with_restep(
        self,
        idx: np.ndarray,
        obs: np.ndarray,
        trunc: np.ndarray,
        over: np.ndarray | None,
        lives: np.ndarray | None,
        infos: list[dict[str, Any]],
    ) -> None:
        terminal_obs = obs[idx]  # a copy: obs[idx] is overwritten below
        truncated = trunc[idx]
        real_end = None  # None: every done ends an episode
        lives_by_slot = None
        if self.atari:  # envpool flags a time-limit step as truncated even if the game ended on it
            game_over = over[idx] != 0  # type: ignore[index]
            truncated = truncated & ~game_over
        # Run envpool's auto-reset for these envs right now (the action is ignored).
        ids = self._slot_env[idx]
        if self._fast:
            self._pool._send([ids, ids, self._zero_actions[: len(ids)]])
        else:
            self._pool.send(self._zero_actions[: len(ids)], ids)
        r_obs, _, r_done, _, r_eid, _, _, r_lives = self._recv()
        if r_done.any():  # pragma: no cover - envpool's Reset never reports done
            raise RuntimeError("envpool reported done on a reset step")
        obs[r_eid] = r_obs  # slot == env id without spares
        if self.atari:
            lives_by_slot = dict(zip(r_eid.tolist(), r_lives.tolist()))
            if self.episodic_life:
                # A life-loss done does not end the game (envpool continued it), unless the
                # continuation itself restarted the game (lives went up again).
                after = np.array([lives_by_slot[i] for i in idx.tolist()])
                real_end = game_over | trunc[idx] | (after > lives[idx])  # type: ignore[index]
        for i, term_o, tr in zip(idx.tolist(), terminal_obs, truncated.tolist()):
            info = infos[i]
            info["terminal_observation"] = term_o
            info["TimeLimit.truncated"] = tr
            self.reset_infos[i] = {"lives": lives_by_slot[i]} if lives_by_slot is not None else {}
        ends = idx if real_end is None else idx[real_end]
        if len(ends):
            t = self._t
            now = round(time.time() - self._t_start, 6)
            returns = self._ep_ret[ends].tolist()
            lengths = (t - self._ep_start[ends]).tolist()
            self._ep_ret[ends] = 0.0
            self._ep_start[ends] = t
            for i, r, length in zip(ends.tolist(), returns, lengths):
                infos[i]["episode"] = {"r": round(r, 6), "l": length, "t": now}

    def _drain(self) -> None:
        if self._waiting:
            self._recv()
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
        last = _INT32_MAX - self._pool_size + 1
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


# --------------------------------------------------------------------------------------
# gymnasium backend
# --------------------------------------------------------------------------------------


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


def _make_gym_atari(gym_id: str, training: bool) -> gym.Env:
    """One gymnasium Atari env with the envpool-equivalent preprocessing, wrapped in ``Monitor``.

    Stack (inner to outer): ALE (frameskip 1, grayscale, sticky actions, 108k frames)
    -> AtariPreprocessing (noops, skip 4, max-pool, 84x84 INTER_AREA) -> FIRE on reset
    -> frame stack (4, 84, 84) -> life-loss continuation -> Monitor (raw rewards, whole
    games) -> [training: episodic life -> reward sign].
    """
    env = gym.make(
        gym_id,
        frameskip=1,
        obs_type="grayscale",
        repeat_action_probability=ATARI_REPEAT_ACTION_PROBABILITY,
        full_action_space=False,
        max_num_frames_per_episode=ATARI_MAX_EPISODE_STEPS * ATARI_FRAME_SKIP,
    )
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=ATARI_NOOP_MAX,
        frame_skip=ATARI_FRAME_SKIP,
        screen_size=ATARI_SCREEN_SIZE,
        terminal_on_life_loss=False,
        grayscale_obs=True,
        grayscale_newaxis=False,
        scale_obs=False,
    )
    env = _FireOnReset(env)
    env = gym.wrappers.FrameStackObservation(env, ATARI_FRAME_STACK)
    env = _LifeLossContinuation(env)
    env = Monitor(env)
    if training:
        env = _EpisodicLife(env)
        env = _SignReward(env)
    return env


def _make_gymnasium_vec_env(gym_id: str, n_envs: int, seed: int, *, atari: bool, training: bool) -> VecEnv:
    def thunk(rank: int):
        def _init() -> gym.Env:
            env = _make_gym_atari(gym_id, training) if atari else Monitor(gym.make(gym_id))
            env.action_space.seed(seed + rank)
            return env

        return _init

    venv = DummyVecEnv([thunk(i) for i in range(n_envs)])
    venv.seed(seed)  # applied at the first reset: env i gets seed + i
    return venv
