"""The benchmark suite as data: one YAML file per environment in ``adaptive_po/envs/``, validated.

The suite ships inside the package (package data), so a non-editable install finds it; a user's
own suite is any folder of such files (``--envs-dir`` or ``$ADAPTIVE_PO_ENVS``).

Every problem is reported as a :class:`ConfigError` (a ``ValueError``) naming the file and the
key, before any compute starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from adaptive_po.hyperparams import Hyperparams

#: the suite shipped with the package (``envs/`` at the top of a checkout links here)
PACKAGED_ENVS_DIR = Path(__file__).resolve().parents[1] / "envs"
#: where the suite's YAML files live: ``$ADAPTIVE_PO_ENVS``, else the packaged suite
DEFAULT_ENVS_DIR = Path(os.environ.get("ADAPTIVE_PO_ENVS", PACKAGED_ENVS_DIR))


class ConfigError(ValueError):
    """A malformed or incomplete suite file; the message names the file and the key."""


@dataclass(frozen=True)
class EnvConfig:
    """One environment of the suite, as validated from ``<envs_dir>/<name>.yaml``."""

    name: str
    ids: dict[str, str]
    random_score: float
    solved_threshold: float
    normalize: bool
    budget: dict[str, int]
    eval_episodes: int
    eval_every: int
    hyperparams: Hyperparams
    path: Path = field(compare=False)


def _require(data: dict, key: str, where: str) -> Any:
    if key not in data:
        raise ConfigError(f"{where}: missing required key {key!r}")
    return data[key]


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    return float(value)


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} must be a positive integer, got {value!r}")
    return value


def load_env_config(path: str | Path) -> EnvConfig:
    """Read and validate one environment file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such environment file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    known = {"name", "ids", "random_score", "solved_threshold", "normalize", "budget", "evaluation", "hyperparams"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(known)}")

    name = _require(data, "name", str(path))
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: key 'name' must be a non-empty string, got {name!r}")
    ids = _require(data, "ids", str(path))
    if not isinstance(ids, dict) or not ids or not all(isinstance(k, str) and isinstance(v, str) for k, v in ids.items()):
        raise ConfigError(f"{path}: key 'ids' must map backend names to environment ids, got {ids!r}")
    bad_backends = sorted(set(ids) - {"envpool", "gymnasium"})
    if bad_backends:
        raise ConfigError(f"{path}: key 'ids' has unknown backend(s) {bad_backends}; allowed: envpool, gymnasium")
    random_score = _number(_require(data, "random_score", str(path)), f"{path}: key 'random_score'")
    solved = _number(_require(data, "solved_threshold", str(path)), f"{path}: key 'solved_threshold'")
    if solved == random_score:
        raise ConfigError(f"{path}: key 'solved_threshold' must differ from 'random_score' (it sets the normalization)")
    normalize = data.get("normalize", False)
    if not isinstance(normalize, bool):
        raise ConfigError(f"{path}: key 'normalize' must be true or false, got {normalize!r}")

    budget = _require(data, "budget", str(path))
    if not isinstance(budget, dict) or not budget:
        raise ConfigError(f"{path}: key 'budget' must map suite names to step counts, got {budget!r}")
    budget = {str(k): _positive_int(v if not isinstance(v, float) or not v.is_integer() else int(v), f"{path}: key 'budget.{k}'") for k, v in budget.items()}

    evaluation = _require(data, "evaluation", str(path))
    if not isinstance(evaluation, dict):
        raise ConfigError(f"{path}: key 'evaluation' must be a mapping, got {evaluation!r}")
    eval_episodes = _positive_int(_require(evaluation, "episodes", f"{path}: key 'evaluation'"), f"{path}: key 'evaluation.episodes'")
    eval_every = _positive_int(_require(evaluation, "every", f"{path}: key 'evaluation'"), f"{path}: key 'evaluation.every'")

    hp = _require(data, "hyperparams", str(path))
    if not isinstance(hp, dict):
        raise ConfigError(f"{path}: key 'hyperparams' must be a mapping, got {hp!r}")
    try:
        hyperparams = Hyperparams.from_mapping(hp, prefix="hyperparams.")
    except ValueError as err:
        raise ConfigError(f"{path}: key {err}") from None
    return EnvConfig(
        name=name,
        ids=dict(ids),
        random_score=random_score,
        solved_threshold=solved,
        normalize=normalize,
        budget=budget,
        eval_episodes=eval_episodes,
        eval_every=eval_every,
        hyperparams=hyperparams,
        path=path,
    )


def available_envs(envs_dir: str | Path | None = None) -> dict[str, Path]:
    """Environment name -> file, for every ``*.yaml`` in the suite folder."""
    folder = Path(envs_dir) if envs_dir is not None else DEFAULT_ENVS_DIR
    if not folder.is_dir():
        raise ConfigError(f"{folder}: the environment folder does not exist (set ADAPTIVE_PO_ENVS or pass --envs-dir)")
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


def get_env_config(name: str, envs_dir: str | Path | None = None) -> EnvConfig:
    """Load ``<envs_dir>/<name>.yaml``; an unknown name lists the known ones."""
    known = available_envs(envs_dir)
    if name not in known:
        raise ConfigError(f"unknown environment {name!r}; available: {sorted(known)}")
    config = load_env_config(known[name])
    if config.name != name:
        raise ConfigError(f"{known[name]}: key 'name' is {config.name!r} but the file is named {name!r}")
    return config
