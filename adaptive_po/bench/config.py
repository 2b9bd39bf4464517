"""The benchmark suite as data: one YAML file per environment in ``adaptive_po/env_configs/``, validated.

The suite ships inside the package (package data), so a non-editable install finds it; a user's
own suite is any folder of such files (``--envs-dir`` or ``$ADAPTIVE_PO_ENVS``).

Every problem is reported as a :class:`ConfigError` (a ``ValueError``) naming the file and the
key, before any compute starts. A file is read with bounds (:func:`read_yaml`: its size, its
nodes after alias expansion, its nesting, its strings), and a run's size with upper bounds a
user can raise (:data:`RUN_LIMITS`, checked by :func:`check_run_limits` when a grid is expanded).
"""

from __future__ import annotations

import copy
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from adaptive_po import contract
from adaptive_po.contract import check_name
from adaptive_po.hyperparams import VALUE_ALGORITHMS, Hyperparams, PQNHyperparams, pqn_preset

#: the suite shipped with the package (``env_configs/`` at the top of a checkout links here)
PACKAGED_ENVS_DIR = Path(__file__).resolve().parents[1] / "env_configs"
#: where the suite's YAML files live: ``$ADAPTIVE_PO_ENVS``, else the packaged suite (an empty or
#: blank ``ADAPTIVE_PO_ENVS`` counts as unset: ``Path("")`` would be the current directory)
DEFAULT_ENVS_DIR = Path(os.environ.get("ADAPTIVE_PO_ENVS", "").strip() or PACKAGED_ENVS_DIR)


class ConfigError(ValueError):
    """A malformed or incomplete suite file; the message names the file and the key."""


# -- reading a YAML file with bounds ----------------------------------------------------------------
#: an environment file is a page of settings: larger files, deeper nesting, more nodes (aliases
#: expanded) or longer strings than these are refused before their values are used
MAX_FILE_BYTES = 256 * 1024
MAX_YAML_NODES = 10_000
MAX_YAML_DEPTH = 32
MAX_STRING_CHARS = 4096


#: plain YAML 1.1 integers that do not read as written (YAML's safe loader): a leading zero makes
#: an octal number (``010`` is 8) and colons a base-60 one (``1:30`` is 90)
_OCTAL = re.compile(r"^[-+]?0[0-7_]+$")
_BASE_60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")


def _read_as_written(node: yaml.Node, path: Path, where: str) -> None:
    """Refuse a plain scalar that YAML 1.1 reads as another number than the digits say (a
    :class:`ConfigError` naming the file, the line, the key and both readings)."""
    if not isinstance(node, yaml.ScalarNode) or node.style is not None:  # quoted: a string, as written
        return
    value, line = node.value, node.start_mark.line + 1
    if node.tag == "tag:yaml.org,2002:int" and _OCTAL.match(value):
        read = yaml.safe_load(value)
        raise ConfigError(
            f"{path}: line {line}: {where}{value} is an octal number in YAML (it reads as {read}); write {read} if that is "
            f"meant, or {int(value.replace('_', ''), 10)} without the leading zero"
        )
    if node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and _BASE_60.match(value):
        read = yaml.safe_load(value)
        raise ConfigError(f"{path}: line {line}: {where}{value} is a base-60 number in YAML (it reads as {read}); write {read} if that is meant")


def _expanded(node: yaml.Node, path: Path, memo: dict[int, tuple[int, int]], open_nodes: set[int], depth: int) -> tuple[int, int]:
    """(nodes, height) of ``node`` with every alias expanded, without expanding it: each node of
    the composed graph is visited once (an alias is the same node object as its anchor)."""
    key = id(node)
    if key in open_nodes:
        raise ConfigError(f"{path}: a YAML alias refers to a node that contains it (a recursive structure); aliases must not nest themselves")
    if key in memo:
        size, height = memo[key]
    else:
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(f"{path}: nested more than {MAX_YAML_DEPTH} levels deep (aliases expanded)")
        if isinstance(node, yaml.ScalarNode):
            if len(node.value) > MAX_STRING_CHARS:
                raise ConfigError(f"{path}: a value of {len(node.value):,} characters at line {node.start_mark.line + 1}; the limit is {MAX_STRING_CHARS:,}")
            children: list[yaml.Node] = []
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
            for item in children:
                _read_as_written(item, path, "")
        else:
            children = [item for pair in node.value for item in pair]
            seen: dict[str, int] = {}
            for name, value in node.value:
                _read_as_written(value, path, f"key {name.value!r}: " if isinstance(name, yaml.ScalarNode) else "")
            for name, _ in node.value:  # YAML's loader keeps the last of two equal keys, silently
                if isinstance(name, yaml.ScalarNode) and name.tag != "tag:yaml.org,2002:merge":
                    if name.value in seen:
                        raise ConfigError(
                            f"{path}: the key {name.value!r} is given twice (lines {seen[name.value]} and "
                            f"{name.start_mark.line + 1}); keep one"
                        )
                    seen[name.value] = name.start_mark.line + 1
        open_nodes.add(key)
        size, height = 1, 1
        for child in children:
            child_size, child_height = _expanded(child, path, memo, open_nodes, depth + 1)
            size += child_size
            height = max(height, child_height + 1)
            if size > MAX_YAML_NODES:
                raise ConfigError(
                    f"{path}: more than {MAX_YAML_NODES:,} values once its aliases are expanded "
                    "(a YAML alias bomb, or far more settings than an environment file holds)"
                )
        open_nodes.discard(key)
        memo[key] = size, height
    if depth + height - 1 > MAX_YAML_DEPTH:
        raise ConfigError(f"{path}: nested more than {MAX_YAML_DEPTH} levels deep (aliases expanded)")
    return size, height


def read_yaml(path: str | Path) -> Any:
    """The document in ``path``, parsed with YAML's safe loader after the bounds above are checked
    on the composed node graph (so an alias bomb is refused before it is built or copied):
    :class:`ConfigError` naming the file otherwise."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes; an environment file is at most {MAX_FILE_BYTES:,} bytes")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror or err})") from None
    if len(raw) > MAX_FILE_BYTES:  # it grew since stat
        raise ConfigError(f"{path}: more than {MAX_FILE_BYTES:,} bytes; an environment file is at most that")
    if raw not in _PARSED:
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
        _PARSED[raw] = _parse_yaml(raw, path)
    return copy.deepcopy(_PARSED[raw])


#: documents parsed, by their bytes (a study checks thousands of rows against a few files; an
#: edited file is other bytes, so it is parsed again); a copy is returned each time
_PARSED: dict[bytes, Any] = {}
_PARSED_LIMIT = 256


def _parse_yaml(raw: bytes, path: Path) -> Any:
    try:
        text = raw.decode("utf-8-sig") if raw[:3] == b"\xef\xbb\xbf" else raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ConfigError(f"{path}: not UTF-8 text (byte {raw[err.start]:#04x} at line {line}); an environment file is UTF-8 YAML") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded(node, path, {}, set(), 1)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read") from None
    finally:
        loader.dispose()


# -- upper bounds on a run's and a grid's size --------------------------------------------------------
#: the most environment steps one run may train by default (the contract's, which the reports read too);
#: ``ADAPTIVE_PO_MAX_TIMESTEPS`` raises it (:data:`RUN_LIMITS`)
MAX_TIMESTEPS = contract.MAX_TIMESTEPS
#: the most runs one grid may hold (environments x algorithm configurations x data conditions x
#: seeds): 25 times the largest suite's grid (the classic suite's 4,250 runs), and far more than one
#: sweep finishes; checked on the axes' sizes before the grid (or its conditions) is built, so a
#: mistyped ``--seeds 1000000`` is one line at once, not minutes and gigabytes of run specs
MAX_GRID_RUNS = 100_000

#: what a run may ask for at most, and the environment variable that raises each limit for a user
#: who means it (read when a grid is expanded, in the driver only: workers never check it)
RUN_LIMITS: dict[str, tuple[str, int, str]] = {
    "timesteps": ("ADAPTIVE_PO_MAX_TIMESTEPS", MAX_TIMESTEPS, "environment steps per run"),
    "eval_episodes": ("ADAPTIVE_PO_MAX_EVAL_EPISODES", 1_000, "episodes per evaluation"),
    "evaluations": ("ADAPTIVE_PO_MAX_EVALUATIONS", 10_000, "evaluations per run (budget / evaluation.every)"),
}


def run_limit(name: str) -> int:
    """The limit ``name`` of :data:`RUN_LIMITS`: its environment variable when set, else the default."""
    variable, default, what = RUN_LIMITS[name]
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(float(text)) if "e" in text.lower() else int(text)
    except (ValueError, OverflowError):
        raise ValueError(f"{variable}={text!r} must be a positive integer (the limit on {what})") from None
    if value < 1:
        raise ValueError(f"{variable}={text!r} must be a positive integer (the limit on {what})")
    return value


def above_limit(name: str, where: str, value: float) -> ConfigError:
    """The error of ``value`` (given by ``where``) above the limit ``name`` of :data:`RUN_LIMITS`,
    naming the value, the limit and the variable that raises it."""
    variable, _, what = RUN_LIMITS[name]
    return ConfigError(
        f"{where} is {value:,}, above the limit of {run_limit(name):,} {what}; "
        f"if you mean it, set {variable} to a larger number"
    )


def check_run_limits(config: EnvConfig, total_timesteps: int, budget_from: str) -> None:
    """:class:`ConfigError` when a run of ``config`` for ``total_timesteps`` steps (given by
    ``budget_from``: ``"--timesteps"`` or the YAML key) exceeds a limit of :data:`RUN_LIMITS`
    (:func:`above_limit`)."""
    if total_timesteps > run_limit("timesteps"):
        raise above_limit("timesteps", budget_from, total_timesteps)
    if config.eval_episodes > run_limit("eval_episodes"):
        raise above_limit("eval_episodes", f"{config.path}: key 'evaluation.episodes'", config.eval_episodes)
    evaluations = total_timesteps // config.eval_every
    if evaluations > run_limit("evaluations"):
        raise above_limit("evaluations", f"{config.path}: key 'evaluation.every' ({config.eval_every:,}) with {total_timesteps:,} steps: the number of evaluations", evaluations)


def check_budget(value: Any, where: str) -> int:
    """``value`` as a run's budget given by ``where`` (``"<file>: task 1 (Acrobot-v1): budget"``):
    a whole number of environment steps (an integer, not a float or a string), at least 1 and at
    most the ``timesteps`` limit (:data:`MAX_TIMESTEPS` unless raised); else a :class:`ConfigError`
    naming ``where`` and the value."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > run_limit("timesteps"):
        raise above_limit("timesteps", where, value)
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ConfigError(f"{where} {value!r} is not a whole number of steps")
    if value < 1:
        raise ConfigError(f"{where} {value!r} must be at least 1 step")
    return int(value)


# -- what a budget gives: whole rollouts and evaluation points ----------------------------------------
#: fewer evaluation points than this make a learning curve that says little (a warning says so)
MIN_EVALUATION_POINTS = 3


def algorithm_settings(config: EnvConfig, algo: str | None) -> Any:
    """The settings ``algo`` trains with: PQN's (``config.pqn``) or the policy objectives' (``config.hyperparams``)."""
    return config.pqn if algo in VALUE_ALGORITHMS else config.hyperparams


def trained_timesteps(config: EnvConfig, total_timesteps: int, algo: str | None = None) -> int:
    """The steps a run of ``algo`` with a budget of ``total_timesteps`` trains: both engines collect
    whole rollouts (``n_envs * n_steps`` transitions) until the budget is reached, so the budget is
    rounded up to the next whole rollout (3,000 -> 3,072 with CartPole's 256-step rollouts). With
    PQN's after-ABS dial the rollouts' lengths vary: this is the count at its first rollout's length."""
    hp = algorithm_settings(config, algo)
    rollout = hp.n_envs * hp.n_steps
    return -(-int(total_timesteps) // rollout) * rollout


def evaluation_timesteps(config: EnvConfig, total_timesteps: int, algo: str | None = None) -> list[int]:
    """The step counts at which a run evaluates: 0, the first vector step at or past each multiple
    of ``evaluation.every`` that comes before the budget (the schedule of
    :meth:`~adaptive_po.bench.recorder.RunRecorder.evaluation_due`), and the end of training."""
    n_envs, every = algorithm_settings(config, algo).n_envs, config.eval_every
    points, due = [0], every
    while True:
        step = -(-due // n_envs) * n_envs  # steps advance n_envs at a time
        if step >= total_timesteps:
            break
        points.append(step)
        due = (step // every + 1) * every
    points.append(trained_timesteps(config, total_timesteps, algo))
    return points


def budget_notes(config: EnvConfig, total_timesteps: int, algo: str | None = None) -> list[str]:
    """What a user should know about a run's budget before it starts, one line each: that it is
    rounded up to whole rollouts (naming both numbers and why), and a warning when the evaluation
    schedule gives fewer than :data:`MIN_EVALUATION_POINTS` points on the learning curve."""
    hp = algorithm_settings(config, algo)
    notes = []
    trained = trained_timesteps(config, total_timesteps, algo)
    if trained != total_timesteps:
        notes.append(
            f"note: {config.name}: a budget of {total_timesteps:,} steps trains {trained:,}: runs collect whole rollouts "
            f"of {hp.n_envs * hp.n_steps:,} steps (n_envs {hp.n_envs} x n_steps {hp.n_steps}), so the budget is rounded up"
        )
    points = evaluation_timesteps(config, total_timesteps, algo)
    if len(points) < MIN_EVALUATION_POINTS:
        enough = -(-config.eval_every // hp.n_envs) * hp.n_envs + 1
        notes.append(
            f"warning: {config.name}: only {len(points)} evaluation points per run (at steps "
            f"{' and '.join(f'{p:,}' for p in points)}): it evaluates every {config.eval_every:,} steps "
            f"(evaluation.every in {config.path.name}), so the learning curve is a straight line between two points; "
            f"give --timesteps {enough:,} or more for at least {MIN_EVALUATION_POINTS} points"
        )
    return notes


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
    #: PQN's settings: the preset of the environment's network family with the file's ``pqn`` block over it
    pqn: PQNHyperparams
    path: Path = field(compare=False)


def _require(data: dict, key: str, where: str) -> Any:
    if key not in data:
        raise ConfigError(f"{where}: missing required key {key!r}")
    return data[key]


def _number(value: Any, where: str) -> float:
    """A finite number (``.nan`` and ``.inf`` would make every score of the environment NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value if isinstance(value, float) else 0.0):
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    try:
        return float(value)
    except OverflowError:
        raise ConfigError(f"{where} must be a finite number, got {value!r}") from None


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} must be a positive integer, got {value!r}")
    return value


def load_env_config(path: str | Path) -> EnvConfig:
    """Read and validate one environment file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such environment file")
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    known = {"name", "ids", "random_score", "solved_threshold", "normalize", "budget", "evaluation", "hyperparams", "pqn"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(known)}")

    name = _require(data, "name", str(path))
    try:
        check_name("environment name", name)
    except ValueError as err:
        raise ConfigError(f"{path}: key 'name': {err}") from None
    ids = _require(data, "ids", str(path))
    if not isinstance(ids, dict) or not ids or not all(isinstance(k, str) and isinstance(v, str) for k, v in ids.items()):
        raise ConfigError(f"{path}: key 'ids' must map backend names to environment ids, got {ids!r}")
    bad_backends = sorted(set(ids) - {"envpool", "gymnasium", "minatar"})
    if bad_backends:
        raise ConfigError(f"{path}: key 'ids' has unknown backend(s) {bad_backends}; allowed: envpool, gymnasium, minatar")
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
    pqn = data.get("pqn") or {}
    if not isinstance(pqn, dict):
        raise ConfigError(f"{path}: key 'pqn' must be a mapping, got {pqn!r}")
    try:
        pqn_settings = PQNHyperparams.from_preset(pqn_preset(hyperparams.policy, hyperparams.policy_kwargs), pqn)
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
        pqn=pqn_settings,
        path=path,
    )


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" did you mean 'CartPole-v1'?"`` for the registered name closest to ``name`` (case
    ignored; :func:`difflib.get_close_matches`), or ``""`` when none is close: the middle of an
    "unknown X" error message that goes on to list every choice."""
    import difflib

    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(str(choice).lower(), str(choice))
    close = difflib.get_close_matches(str(name).lower(), list(by_lower), n=1, cutoff=0.6)
    return f" did you mean {by_lower[close[0]]!r}?" if close else ""


def available_envs(envs_dir: str | Path | None = None) -> dict[str, Path]:
    """Environment name -> file, for every ``*.yaml`` in the suite folder."""
    folder = Path(envs_dir) if envs_dir is not None else DEFAULT_ENVS_DIR
    if not folder.is_dir():
        raise ConfigError(f"{folder}: the environment folder does not exist (set ADAPTIVE_PO_ENVS or pass --envs-dir)")
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


def get_env_config(name: str, envs_dir: str | Path | None = None) -> EnvConfig:
    """Load ``<envs_dir>/<name>.yaml``; an unknown name lists the known ones."""
    check_name("environment name", name)
    known = available_envs(envs_dir)
    if name not in known:
        raise ConfigError(f"unknown environment {name!r};{did_you_mean(name, known)} available: {sorted(known)}")
    config = load_env_config(known[name])
    if config.name != name:
        raise ConfigError(f"{known[name]}: key 'name' is {config.name!r} but the file is named {name!r}")
    return config


def check_policy(config: EnvConfig, backend: str = "auto") -> None:
    """Build the environment's policy once, on the spaces of one environment, with its
    ``policy_kwargs``: a keyword the policy, its features extractor or its optimizer refuses is a
    :class:`ConfigError` here, in the driver, not in every worker. Without ``policy_kwargs``
    (every shipped file) there is nothing to check and nothing is built."""
    hp = config.hyperparams
    if not hp.policy_kwargs:
        return
    from adaptive_po.collector import validate_policy_settings
    from adaptive_po.environments import make_vec_env, resolve_backend
    from adaptive_po.policy import POLICY_ALIASES, with_fused_adam

    where = f"{config.path}: key 'hyperparams.policy_kwargs'"
    backend_name, env_id = resolve_backend(config.ids, backend)
    env = make_vec_env(env_id, 1, 0, backend_name, training=False)
    try:
        validate_policy_settings(hp.use_sde, "fp32", hp.policy_kwargs)
        policy_class = POLICY_ALIASES[hp.policy]
        policy_class(env.observation_space, env.action_space, lambda _: 1e-3, use_sde=hp.use_sde, **with_fused_adam(hp.policy_kwargs))
    except Exception as err:  # noqa: BLE001 - whatever the policy raises, the config is at fault
        raise ConfigError(f"{where} does not build a {hp.policy} for {config.name}: {type(err).__name__}: {err}") from None
    finally:
        env.close()


def write_env_config_copy(
    env: str, out_dir: str | Path, *, name: str | None = None, file_name: str | None = None,
    envs_dir: str | Path | None = None, **changes: Any,
) -> Path:
    """Write a copy of environment ``env``'s YAML file into ``out_dir`` with ``changes`` made, and
    return the copy's path; ``out_dir`` then serves as an ``envs_dir`` (``--envs-dir``, ``RunSpec.envs_dir``).

    A change ``section__key=value`` sets ``data[section][key]`` (``hyperparams__n_envs=2``,
    ``evaluation__episodes=1``; one ``__`` per level), a plain ``key=value`` a top-level key, and
    the value None removes the key. ``name`` renames the environment: its ``name`` key and the file
    (an envs folder finds an environment by its file's name); ``file_name`` names the file apart
    from that. ``env`` is read from ``envs_dir`` (default :data:`DEFAULT_ENVS_DIR`). The copy is
    written as it is, even when invalid: :func:`load_env_config` checks it where it is used.
    """
    known = available_envs(envs_dir)
    if env not in known:
        raise ConfigError(f"unknown environment {env!r};{did_you_mean(env, known)} available: {sorted(known)}")
    data = read_yaml(known[env])
    if name is not None:
        data["name"] = name
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = data
        for key in parents:
            node = node[key]
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{file_name or name or env}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
