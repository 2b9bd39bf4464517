"""The benchmark suite as data: one YAML file per environment in ``envs/``, validated.

Every problem is reported as a :class:`ConfigError` (a ``ValueError``) naming the file and the
key, before any compute starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

#: where the suite's YAML files live: ``$ADAPTIVE_PO_ENVS``, else ``envs/`` beside the package
DEFAULT_ENVS_DIR = Path(os.environ.get("ADAPTIVE_PO_ENVS", Path(__file__).resolve().parents[2] / "envs"))

#: hyper-parameters an env file may set, with their checks; the algorithm's own defaults
#: (SB3's PPO defaults) apply to the rest
_POSITIVE_INT = ("n_envs", "n_steps", "batch_size", "n_epochs")
_UNIT_INTERVAL = ("gamma", "gae_lambda")
_NON_NEGATIVE = ("ent_coef", "vf_coef", "max_grad_norm")
_SCHEDULES = ("learning_rate", "clip_range")
_ALLOWED_HYPERPARAMS = {"source", "policy", "policy_kwargs", "normalize_advantage", *_POSITIVE_INT, *_UNIT_INTERVAL, *_NON_NEGATIVE, *_SCHEDULES}
_POLICIES = ("MlpPolicy", "CnnPolicy")


class ConfigError(ValueError):
    """A malformed or incomplete suite file; the message names the file and the key."""


@dataclass(frozen=True)
class EnvConfig:
    """One environment of the suite, as validated from ``envs/<name>.yaml``."""

    name: str
    ids: dict[str, str]
    random_score: float
    solved_threshold: float
    normalize: bool
    budget: dict[str, int]
    eval_episodes: int
    eval_every: int
    hyperparams: dict[str, Any]
    path: Path = field(compare=False)

    @property
    def clip_range(self) -> Any:
        return self.hyperparams.get("clip_range", 0.2)

    def training_hyperparams(self, uses_clip: bool) -> dict[str, Any]:
        """Constructor keyword arguments shared by every algorithm (``clip_range`` only if used)."""
        out = {k: v for k, v in self.hyperparams.items() if k not in ("source", "policy", "n_envs", "clip_range")}
        if uses_clip:
            out["clip_range"] = self.clip_range
        return out


def parse_schedule(value: Any, where: str) -> float | Callable[[float], float]:
    """``3e-4`` -> constant; ``"lin_1e-3"`` -> linear decay from 1e-3 to 0 over training."""
    if isinstance(value, bool):
        raise ConfigError(f"{where} must be a number or 'lin_<number>', got {value!r}")
    if isinstance(value, (int, float)):
        if not value > 0:
            raise ConfigError(f"{where} must be > 0, got {value!r}")
        return float(value)
    if isinstance(value, str) and value.startswith("lin_"):
        try:
            initial = float(value[4:])
        except ValueError:
            raise ConfigError(f"{where} must be a number or 'lin_<number>', got {value!r}") from None
        if not initial > 0:
            raise ConfigError(f"{where} must be > 0, got {value!r}")
        return LinearSchedule(initial)
    raise ConfigError(f"{where} must be a number or 'lin_<number>', got {value!r}")


@dataclass(frozen=True)
class LinearSchedule:
    """Linear decay to zero over training; SB3 calls it with the remaining progress (1 -> 0)."""

    initial: float

    def __call__(self, progress_remaining: float) -> float:
        return progress_remaining * self.initial

    def __repr__(self) -> str:
        return f"lin_{self.initial:g}"


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
    unknown = sorted(set(hp) - _ALLOWED_HYPERPARAMS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {['hyperparams.' + k for k in unknown]}; allowed: {sorted(_ALLOWED_HYPERPARAMS)}")
    for key in ("source", "policy", "n_envs", "n_steps", "batch_size", "learning_rate"):
        _require(hp, key, f"{path}: key 'hyperparams'")
    if hp["policy"] not in _POLICIES:
        raise ConfigError(f"{path}: key 'hyperparams.policy' must be one of {_POLICIES}, got {hp['policy']!r}")
    hyperparams: dict[str, Any] = {"source": str(hp["source"]), "policy": hp["policy"]}
    for key in _POSITIVE_INT:
        if key in hp:
            hyperparams[key] = _positive_int(hp[key], f"{path}: key 'hyperparams.{key}'")
    for key in _UNIT_INTERVAL:
        if key in hp:
            value = _number(hp[key], f"{path}: key 'hyperparams.{key}'")
            if not 0 <= value <= 1:
                raise ConfigError(f"{path}: key 'hyperparams.{key}' must lie in [0, 1], got {value!r}")
            hyperparams[key] = value
    for key in _NON_NEGATIVE:
        if key in hp:
            value = _number(hp[key], f"{path}: key 'hyperparams.{key}'")
            if value < 0:
                raise ConfigError(f"{path}: key 'hyperparams.{key}' must be >= 0, got {value!r}")
            hyperparams[key] = value
    for key in _SCHEDULES:
        if key in hp:
            hyperparams[key] = parse_schedule(hp[key], f"{path}: key 'hyperparams.{key}'")
    if "normalize_advantage" in hp:
        if not isinstance(hp["normalize_advantage"], bool):
            raise ConfigError(f"{path}: key 'hyperparams.normalize_advantage' must be true or false")
        hyperparams["normalize_advantage"] = hp["normalize_advantage"]
    if "policy_kwargs" in hp:
        if not isinstance(hp["policy_kwargs"], dict):
            raise ConfigError(f"{path}: key 'hyperparams.policy_kwargs' must be a mapping")
        hyperparams["policy_kwargs"] = dict(hp["policy_kwargs"])
    rollout = hyperparams["n_steps"] * hyperparams["n_envs"]
    if hyperparams["batch_size"] > rollout:
        raise ConfigError(
            f"{path}: key 'hyperparams.batch_size' ({hyperparams['batch_size']}) is larger than the rollout "
            f"n_steps * n_envs = {rollout}"
        )
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


def hyperparams_for_json(hyperparams: dict[str, Any]) -> dict[str, Any]:
    """A JSON-friendly view (schedules as ``lin_<x>`` strings)."""
    return {k: (repr(v) if isinstance(v, LinearSchedule) else v) for k, v in hyperparams.items()}
