"""Environment ids: which backend can build which id, and the errors when none can.

Everything here is cached and builds no environment.  Atari games are accepted as
``Pong-v5`` (envpool's spelling) or ``ALE/Pong-v5`` (gymnasium's) for either backend.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
from typing import Any

import gymnasium as gym

from adaptive_po.environments.cartpole import IDS as IN_PROCESS_IDS
from adaptive_po.environments.minatar import MINATAR_GAMES, MINATAR_GYMNAX_GAMES, is_minatar, minatar_available

#: Backend names accepted by :func:`~adaptive_po.environments.make_vec_env` (besides
#: ``"auto"``), in order of preference.
BACKENDS: tuple[str, ...] = ("envpool", "gymnasium", "minatar")

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
def register_ale() -> bool:
    """Register ale-py's ids with gymnasium (once); False if ale-py is missing."""
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
    register_ale()
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
    register_ale()
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


def envpool_id(env_id: str) -> str | None:
    """envpool's id for ``env_id`` (``ALE/Pong-v5`` -> ``Pong-v5``), or None if envpool cannot build it."""
    if is_atari(env_id):
        return _envpool_atari().get(_atari_key(env_id))
    # the ids that step in this process (CartPole's) need envpool installed, not its registry read:
    # reading it imports envpool, every family it has (half a second)
    if env_id in ENVPOOL_CLASSIC_IDS and (env_id in IN_PROCESS_IDS and _envpool_installed() or env_id in _envpool_registry()):
        return env_id
    return None


@functools.cache
def _envpool_installed() -> bool:
    """Whether envpool can be imported (asked without importing it)."""
    return importlib.util.find_spec("envpool") is not None


def gymnasium_id(env_id: str) -> str | None:
    """gymnasium's id for ``env_id`` (``Pong-v5`` -> ``ALE/Pong-v5``), or None if gymnasium cannot build it."""
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
    if is_minatar(env_id):
        return ["minatar"] if minatar_available() is None else []
    register_ale()
    out = []
    if envpool_id(env_id) is not None:
        out.append("envpool")
    if gymnasium_id(env_id) is not None:
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
    candidates = set(ENVPOOL_CLASSIC_IDS) | set(atari_ids()) | set(MINATAR_GAMES) | set(MINATAR_GYMNAX_GAMES)
    candidates |= {k for k, s in gym.registry.items() if not _is_ale_entry(s)}
    close = difflib.get_close_matches(env_id, sorted(candidates), n=5, cutoff=0.6)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return (
        f"Unknown environment id {env_id!r}.{hint} "
        f"Classic control / Box2D (envpool and gymnasium): {', '.join(ENVPOOL_CLASSIC_IDS)}. "
        f"Atari: '<Game>-v5' or 'ALE/<Game>-v5' for {len(atari_ids())} games, e.g. Pong-v5, Breakout-v5 "
        "(adaptive_po.environments.atari_ids() lists them). "
        f"MinAtar (optional extra): {', '.join(sorted(MINATAR_GAMES))}. "
        "With backend='gymnasium' any id registered with gymnasium works."
    )


def choose_backend(env_id: str, backend: str) -> str:
    """The backend that builds ``env_id``: ``backend`` itself, or for ``"auto"`` the first that can.

    :raises ValueError: naming the reason (unknown id, legacy ALE id, missing dependency,
        or the backends that do support the id).
    """
    register_ale()
    supported = available_backends(env_id)
    if not supported and is_minatar(env_id):
        raise ValueError(f"Environment {env_id!r}: {minatar_available()}.")
    if not supported:
        hint = _legacy_atari_hint(env_id)
        if hint is not None:
            raise ValueError(hint)
        known = envpool_id(env_id) is not None or env_id in gym.registry or is_atari(env_id)
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
    return chosen
