"""Vectorized environments behind Stable-Baselines3's ``VecEnv`` interface.

Two backends build the same environments with the same conventions:

* ``"envpool"``: envpool's C++ pool (classic control, LunarLander and the Atari v5
  games), adapted by :class:`EnvpoolVecEnv` (:mod:`.envpool_adapter`); CartPole's pool runs in
  this process in numpy (:mod:`.cartpole`, envpool's numbers bit for bit).
* ``"gymnasium"``: any registered gymnasium id, each env wrapped in SB3's
  :class:`~stable_baselines3.common.monitor.Monitor` and vectorized with
  :class:`~stable_baselines3.common.vec_env.DummyVecEnv` (:mod:`.gymnasium_backend`).

* ``"minatar"``: MinAtar's five games (``MinAtar/Breakout-v1``, ...), an optional extra,
  stepped in one Python loop by :class:`MinAtarVecEnv` (:mod:`.minatar`); Breakout's games
  all at once in numpy from 32 on (:mod:`.minatar_breakout`, the package's game step for step).

:mod:`.ids` resolves ids and picks the backend; :mod:`.atari` holds the Atari settings.

Conventions shared by both backends (what an SB3 learner sees):

* **Same-step auto-reset.** When env ``i`` finishes at step ``t``, ``step_wait``
  returns the first observation of its next episode in ``obs[i]``, ``dones[i]=True``,
  ``infos[i]["terminal_observation"]`` is the last observation of the finished
  episode and ``infos[i]["TimeLimit.truncated"]`` is True iff it was truncated and
  not terminated.  envpool natively resets a finished env on the *next* step (that
  step ignores its action and returns the reset observation with reward 0);
  :class:`EnvpoolVecEnv` steps the finished envs once more right away, which runs
  envpool's own reset, so no such junk step reaches the learner.
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

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from adaptive_po.environments.atari import (
    ATARI_FRAME_SKIP,
    ATARI_FRAME_STACK,
    ATARI_MAX_EPISODE_STEPS,
    ATARI_NOOP_MAX,
    ATARI_REPEAT_ACTION_PROBABILITY,
    ATARI_SCREEN_SIZE,
)
from adaptive_po.environments.envpool_adapter import INT32_MAX, EnvpoolVecEnv
from adaptive_po.environments.gymnasium_backend import make_gymnasium_vec_env
from adaptive_po.environments.minatar import MINATAR_GAMES, MinAtarVecEnv, is_minatar
from adaptive_po.environments.ids import (
    BACKENDS,
    ENVPOOL_CLASSIC_IDS,
    atari_ids,
    available_backends,
    choose_backend,
    envpool_id,
    gymnasium_id,
    is_atari,
)

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
    "MINATAR_GAMES",
    "MinAtarVecEnv",
    "is_minatar",
    "atari_ids",
    "available_backends",
    "is_atari",
    "make_vec_env",
    "resolve_backend",
    "resolve_device",
]


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


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
    :param seed: env ``i`` is seeded with ``seed + i`` (0 <= seed, seed + n_envs - 1 < 2**31).
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
        raise ValueError(f"Unknown backend {backend!r}; expected one of 'auto', {', '.join(map(repr, BACKENDS))}.")
    if not _is_int(n_envs) or n_envs < 1:
        raise ValueError(f"n_envs must be an integer >= 1, got n_envs={n_envs!r}.")
    n_envs = int(n_envs)
    if not _is_int(seed):
        raise ValueError(f"seed must be an integer, got seed={seed!r}.")
    seed = int(seed)
    if seed < 0 or seed + n_envs - 1 > INT32_MAX:
        raise ValueError(
            f"seed={seed} is out of range: need 0 <= seed and seed + n_envs - 1 <= {INT32_MAX} "
            "(envpool seeds are int32)."
        )
    if envpool_threads is not None and (not _is_int(envpool_threads) or envpool_threads < 0):
        raise ValueError(f"envpool_threads must be None or an integer >= 0, got envpool_threads={envpool_threads!r}.")
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"Unknown environment id {env_id!r}: expected a non-empty string.")

    chosen = choose_backend(env_id, backend)
    if chosen == "minatar":
        return MinAtarVecEnv(env_id, n_envs, seed)
    atari = is_atari(env_id)
    if chosen == "envpool":
        threads = envpool_threads
        if threads is None:
            threads = 0 if atari else 1
        return EnvpoolVecEnv(
            envpool_id(env_id),  # type: ignore[arg-type]
            n_envs,
            seed,
            atari=atari,
            training=training,
            num_threads=int(threads),
        )
    return make_gymnasium_vec_env(gymnasium_id(env_id), n_envs, seed, is_atari=atari, training=training)  # type: ignore[arg-type]


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; a requested device that does not
    exist is refused with a ValueError naming it (never silently replaced by the CPU)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but torch sees no CUDA device")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; use auto, cpu or cuda")
    if device.startswith("cuda:"):  # a device that does not exist is refused, not replaced by the CPU
        index = device.split(":", 1)[1]
        if not index.isdigit():
            raise ValueError(f"unknown device {device!r}; use cuda or cuda:N with N a device index")
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(index) >= count:
            seen = f"devices cuda:0 to cuda:{count - 1}" if count else "no CUDA device"
            raise ValueError(f"device {device!r} was requested but torch sees {seen}")
    return device


def resolve_backend(env_ids: dict[str, str], backend: str) -> tuple[str, str]:
    """(backend, id) for a suite entry: ``auto`` takes the first backend (envpool, gymnasium,
    minatar) whose id it lists and can build; otherwise the error names why each listed id cannot
    be built (:func:`adaptive_po.environments.ids.choose_backend`'s reasons, a missing extra among them)."""
    if backend not in ("auto", *BACKENDS):
        raise ValueError(f"unknown backend {backend!r}; use auto or one of {', '.join(BACKENDS)}")
    order = BACKENDS if backend == "auto" else (backend,)
    reasons = []
    for name in order:
        if name not in env_ids:
            continue
        if name in available_backends(env_ids[name]):
            return name, env_ids[name]
        try:
            choose_backend(env_ids[name], name)
        except ValueError as err:
            reasons.append(str(err))
    raise ValueError(f"no usable backend among {list(order)} for ids {env_ids}" + (": " + " ".join(reasons) if reasons else ""))
