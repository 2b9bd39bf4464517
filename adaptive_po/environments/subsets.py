"""What every backend's ``step_some`` (stepping only some of a vector env's environments) accepts."""

from __future__ import annotations

import numpy as np


def checked_env_ids(env_ids: object, n_envs: int) -> np.ndarray:
    """``env_ids`` as a flat int32 array, once checked to be distinct envs of ``0..n_envs - 1``;
    a ValueError naming them otherwise."""
    ids = np.asarray(env_ids, dtype=np.int32).reshape(-1)
    if len(ids) and (ids.min() < 0 or ids.max() >= n_envs or _repeats(ids)):
        raise ValueError(f"env_ids must be distinct envs of 0..{n_envs - 1}, got {ids.tolist()}")
    return ids


def _repeats(ids: np.ndarray) -> bool:
    """Whether an id occurs twice; increasing ids (what the engine's evaluation sends) are checked
    without sorting them."""
    return bool((ids[1:] <= ids[:-1]).any()) and len(np.unique(ids)) != len(ids)
