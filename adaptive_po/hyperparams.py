"""Training hyper-parameters, typed and validated in one place.

:class:`Hyperparams` is one environment's settings (the RL Zoo's tuned PPO values, read from
``adaptive_po/env_configs/<name>.yaml``); its fields carry their documentation and their check. The
algorithms validate their constructor arguments with the same checks (:func:`check_hyperparams`),
so a rule is written once, whoever the value comes from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

Schedule = Callable[[float], float]


@dataclass(frozen=True)
class LinearSchedule:
    """Linear decay to zero over training; SB3 calls it with the remaining progress (1 -> 0)."""

    initial: float

    def __call__(self, progress_remaining: float) -> float:
        return progress_remaining * self.initial

    def __repr__(self) -> str:
        return f"lin_{self.initial:g}"


@dataclass(frozen=True)
class _SB3Defaults:
    """SB3's PPO defaults: the one home of these numbers. The SB3-style classes take their
    signature defaults from here and :class:`Hyperparams` its optional fields."""

    learning_rate: float = 3e-4
    n_steps: int = 2048
    batch_size: int = 64
    n_epochs: int = 10
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    normalize_advantage: bool = True
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5


#: SB3's PPO defaults (``SB3_DEFAULTS.learning_rate`` = 3e-4, ...)
SB3_DEFAULTS = _SB3Defaults()


class HyperparameterError(ValueError, AssertionError):
    """A bad hyper-parameter value; the message names the argument and the value.

    A :class:`ValueError` (the right type for a bad argument) that is also an
    :class:`AssertionError`, the type Stable-Baselines3's PPO raises for the same mistakes
    (``assert`` statements: a negative ``clip_range_vf``, ``n_steps * n_envs == 1`` with advantage
    normalization), so code written against SB3 that catches ``AssertionError`` keeps working
    with these classes. Unlike an ``assert``, it is raised under ``python -O`` too.
    """


# -- the checks (each raises HyperparameterError naming the value) --------------------------------
def positive_int(name: str, value: Any) -> int:
    # numpy integers are fine; bools are not numbers here
    if isinstance(value, bool) or not hasattr(value, "__index__") or value < 1:
        raise HyperparameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


#: the most parallel environments one run may step (the suites use 4 to 64; envpool on a big machine
#: a few hundred): more is a typo, and each environment is a process or a simulator's slot
MAX_N_ENVS = 4096
#: the most steps per environment in one rollout (the suites use 16 to 1,024; SB3's default 2,048)
MAX_N_STEPS = 65_536
#: the most transitions one rollout holds (``n_envs * n_steps``): the rollout buffer keeps them all
#: in memory (observations included), and the suites' largest is 16,384 (64 times less)
MAX_ROLLOUT_STEPS = 1_048_576


def at_most(limit: int, what: str) -> Callable[[str, Any], int]:
    """The check of a positive integer of at most ``limit`` ``what`` (:func:`positive_int`, then
    an error naming the value and the limit)."""

    def check(name: str, value: Any) -> int:
        number = positive_int(name, value)
        if number > limit:
            raise HyperparameterError(f"{name} is {number:,}, above the limit of {limit:,} {what}")
        return number

    return check


def unit_interval(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise HyperparameterError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < float("inf"):
        raise HyperparameterError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise HyperparameterError(f"{name} must be true or false, got {value!r}")
    return value


def schedule(name: str, value: Any) -> float | Schedule:
    """A number > 0, ``"lin_<number>"`` (linear decay to 0) or any callable of the remaining progress."""
    if isinstance(value, LinearSchedule) or (callable(value) and not isinstance(value, type)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not 0 < value < float("inf"):
            raise HyperparameterError(f"{name} must be > 0, got {value!r}")
        return float(value)
    if isinstance(value, str) and value.startswith("lin_"):
        try:
            initial = float(value[4:])
        except ValueError:
            initial = float("nan")
        if not 0 < initial < float("inf"):
            raise HyperparameterError(f"{name} must be a number > 0 or 'lin_<number > 0>', got {value!r}")
        return LinearSchedule(initial)
    raise HyperparameterError(f"{name} must be a number > 0 or 'lin_<number>', got {value!r}")


#: the longest ``source`` text accepted: a citation, not a document (it is copied into every run's
#: config.json)
MAX_SOURCE_CHARS = 2000


def non_empty_text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise HyperparameterError(f"{name} must be a non-empty string, got {value!r}")
    if len(value) > MAX_SOURCE_CHARS:
        raise HyperparameterError(f"{name} must be at most {MAX_SOURCE_CHARS} characters, got {len(value):,} ({value[:40]!r}...)")
    return value


def policy_name(name: str, value: Any) -> str:
    if value not in POLICIES:
        raise HyperparameterError(f"{name} must be one of {POLICIES}, got {value!r}")
    return value


def sample_frequency(name: str, value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__") or value < -1:
        raise HyperparameterError(f"{name} must be an integer >= -1 (-1: once per rollout), got {value!r}")
    return int(value)


def mapping(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise HyperparameterError(f"{name} must be a mapping, got {value!r}")
    return dict(value)


# -- policy keyword arguments ---------------------------------------------------------------------
#: the policy's constructor arguments the algorithm passes itself (``use_sde`` is a field here)
RESERVED_POLICY_KEYWORDS: tuple[str, ...] = ("observation_space", "action_space", "lr_schedule", "use_sde")
#: ``net_arch`` bounds: layers per network, units per layer, and weights between hidden layers per
#: network (sum of the products of consecutive widths; 5e7 weights are 200 MB in float32). A config
#: beyond them is a typo or a bomb, not a policy for this benchmark.
MAX_POLICY_LAYERS = 32
MAX_LAYER_WIDTH = 16384
MAX_HIDDEN_WEIGHTS = 50_000_000


def _layer_widths(name: str, value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_POLICY_LAYERS:
        raise HyperparameterError(f"{name} must be a list of at most {MAX_POLICY_LAYERS} layer widths, got {value!r}")
    widths = [positive_int(f"{name}[{i}]", w) for i, w in enumerate(value)]
    too_wide = [w for w in widths if w > MAX_LAYER_WIDTH]
    if too_wide:
        raise HyperparameterError(f"{name}: a layer of {too_wide[0]:,} units is wider than the limit of {MAX_LAYER_WIDTH:,}")
    weights = sum(a * b for a, b in zip(widths, widths[1:]))
    if weights > MAX_HIDDEN_WEIGHTS:
        raise HyperparameterError(f"{name}: {weights:,} weights between hidden layers, more than the limit of {MAX_HIDDEN_WEIGHTS:,}")
    return widths


def _net_arch(name: str, value: Any) -> Any:
    """SB3's ``net_arch``: a list of widths shared by actor and critic, or ``{pi: [...], vf: [...]}``."""
    if isinstance(value, dict):
        unknown = sorted(map(str, set(value) - {"pi", "vf"}))
        if unknown:
            raise HyperparameterError(f"{name} as a mapping takes the keys pi and vf, got {unknown}")
        return {k: _layer_widths(f"{name}.{k}", v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _layer_widths(name, value)
    raise HyperparameterError(f"{name} must be a list of layer widths or {{pi: [...], vf: [...]}}, got {value!r}")


def _finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) < float("inf"):
        raise HyperparameterError(f"{name} must be a finite number, got {value!r}")
    return value


def _module_class(name: str, value: Any) -> type:
    # YAML cannot name a class: these come from Python callers (SB3-style construction)
    if not isinstance(value, type):
        raise HyperparameterError(f"{name} must be a Python class (e.g. torch.nn.ReLU), got {value!r}; a YAML file cannot set it")
    return value


#: the features extractors a YAML file can name (the classes: :data:`adaptive_po.networks.FEATURES_EXTRACTORS`;
#: the names live here so that reading a config imports no torch)
FEATURES_EXTRACTOR_NAMES: tuple[str, ...] = ("FlattenExtractor", "MinAtarCNN", "NatureCNN")


#: the activation functions a YAML file can name (``torch.nn`` classes)
ACTIVATION_NAMES: tuple[str, ...] = ("ELU", "LeakyReLU", "ReLU", "SiLU", "Tanh")


def _named_class(kind: str, names: tuple[str, ...]) -> Callable[[str, Any], Any]:
    """The check of a policy keyword that takes a class: the class itself (Python callers), or one
    of ``names`` (how a YAML file gives one; :mod:`adaptive_po.networks` resolves it)."""

    def check(name: str, value: Any) -> Any:
        if isinstance(value, str):
            if value not in names:
                raise HyperparameterError(f"{name}: unknown {kind} {value!r}; a YAML file can name {list(names)}")
            return value
        return _module_class(name, value)

    return check


def _keywords(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise HyperparameterError(f"{name} must be a mapping of keyword names to values, got {value!r}")
    return value


#: the value check of each SB3 actor-critic policy keyword (the keys are checked against the
#: policy class's signature in :func:`check_policy_keywords`)
POLICY_KEYWORD_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "net_arch": _net_arch,
    "activation_fn": _named_class("activation", ACTIVATION_NAMES),
    "ortho_init": flag,
    "log_std_init": _finite,
    "full_std": flag,
    "use_expln": flag,
    "squash_output": flag,
    "features_extractor_class": _named_class("features extractor", FEATURES_EXTRACTOR_NAMES),
    "features_extractor_kwargs": _keywords,
    "share_features_extractor": flag,
    "normalize_images": flag,
    "optimizer_class": _module_class,
    "optimizer_kwargs": _keywords,
}


def policy_keywords(name: str, value: Any) -> dict[str, Any]:
    """SB3 policy keyword arguments: a mapping whose known keys hold values of the right shape
    (``net_arch`` a list of at most :data:`MAX_POLICY_LAYERS` widths, flags true or false, ...).
    Its keys are checked against the policy class by :func:`check_policy_keywords`."""
    kwargs = mapping(name, value)
    for key, item in kwargs.items():
        if not isinstance(key, str):
            raise HyperparameterError(f"{name}: keys must be keyword names, got {key!r}")
        if key in RESERVED_POLICY_KEYWORDS:
            raise HyperparameterError(f"{name}: {key!r} is set by the algorithm, not by policy_kwargs")
        if key in POLICY_KEYWORD_CHECKS:
            POLICY_KEYWORD_CHECKS[key](f"{name}.{key}", item)
    return kwargs


def policy_class_keywords(policy: str) -> tuple[str, ...]:
    """The keyword arguments the SB3 class behind ``policy`` takes from ``policy_kwargs``, read
    from its constructor's signature (imports stable_baselines3, hence torch)."""
    import inspect

    from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy

    cls = {"MlpPolicy": ActorCriticPolicy, "CnnPolicy": ActorCriticCnnPolicy, "MultiInputPolicy": MultiInputActorCriticPolicy}[policy]
    params = inspect.signature(cls.__init__).parameters
    return tuple(p for p in params if p != "self" and p not in RESERVED_POLICY_KEYWORDS)


def check_policy_keywords(name: str, policy: str, kwargs: Mapping[str, Any]) -> None:
    """``HyperparameterError`` naming a key of ``kwargs`` that the policy class does not take."""
    if not kwargs:  # nothing to check: no need to import SB3
        return
    allowed = policy_class_keywords(policy)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise HyperparameterError(f"{name}: unknown keyword(s) {unknown} for {policy}; it takes {sorted(allowed)}")


POLICIES: tuple[str, ...] = ("MlpPolicy", "CnnPolicy", "MultiInputPolicy")


#: the after-ABS dial's knobs (``adaptive_po.batch_scaling.AfterABS``)
AFTER_ABS_KNOBS: tuple[str, ...] = ("c", "base", "t_min", "t_max")


def _batch_scaling(name: str, value: Any) -> dict[str, Any] | None:
    """``None`` (off) or the after-ABS knobs as a mapping (``{}``: every default)."""
    if value is None:
        return None
    knobs = mapping(name, value)
    unknown = sorted(map(str, set(knobs) - set(AFTER_ABS_KNOBS)))
    if unknown:
        raise HyperparameterError(f"{name} takes the after-ABS knobs {list(AFTER_ABS_KNOBS)}, got unknown {unknown}")
    return knobs


def _field(check: Callable[[str, Any], Any], doc: str, *, default: Any = dataclasses.MISSING, role: str = "algorithm", quiet_default: bool = False, **kw: Any) -> Any:
    """A dataclass field with its check, its documentation and its role:
    ``algorithm`` (a constructor argument of every algorithm), ``tuned`` (an argument only of the
    objectives that declare it) or ``run`` (used by the runner, not the algorithm).
    ``quiet_default``: left out of :meth:`Hyperparams.to_json` at its default, so that the
    ``config.json`` of runs made before the field existed still matches on resume."""
    metadata = {"check": check, "doc": doc, "role": role, "quiet_default": quiet_default}
    if "default_factory" in kw:
        return field(default_factory=kw["default_factory"], metadata=metadata)
    return field(default=default, metadata=metadata)


def _settings_json(settings: Any) -> dict[str, Any]:
    """A settings dataclass's fields as JSON-friendly values: schedules as ``lin_<x>`` strings, a field
    of ``quiet_default`` only when it differs from its default."""
    return {
        f.name: (repr(v) if isinstance(v, LinearSchedule) else v)
        for f in dataclasses.fields(settings)
        for v in [getattr(settings, f.name)]
        if not (f.metadata["quiet_default"] and v == f.default)
    }


@dataclass(frozen=True)
class Hyperparams:
    """One environment's training hyper-parameters; defaults are SB3 PPO's.

    Every field is checked when the object is built (:class:`ValueError` naming the field), so a
    :class:`Hyperparams` is always valid. ``learning_rate`` and ``clip_range`` are numbers or
    :class:`LinearSchedule` (``"lin_<x>"`` in YAML).
    """

    source: str = _field(non_empty_text, "where the values come from (e.g. the RL Zoo's ppo.yml)", role="run")
    policy: str = _field(policy_name, "SB3 policy: MlpPolicy or CnnPolicy (NatureCNN, or policy_kwargs.features_extractor_class: MinAtarCNN)", role="run")
    n_envs: int = _field(at_most(MAX_N_ENVS, "parallel environments per run"), "parallel environments per run (at most MAX_N_ENVS)", role="run")
    n_steps: int = _field(at_most(MAX_N_STEPS, "steps per environment per rollout"), "steps per environment per rollout (at most MAX_N_STEPS; a rollout is n_envs * n_steps transitions, at most MAX_ROLLOUT_STEPS)")
    batch_size: int = _field(positive_int, "minibatch size (transitions)")
    learning_rate: float | Schedule = _field(schedule, "Adam step size, constant or linearly decayed to 0")
    n_epochs: int = _field(positive_int, "passes over each update's data", default=SB3_DEFAULTS.n_epochs)
    gamma: float = _field(unit_interval, "discount factor", default=SB3_DEFAULTS.gamma)
    gae_lambda: float = _field(unit_interval, "GAE lambda", default=SB3_DEFAULTS.gae_lambda)
    ent_coef: float = _field(non_negative, "entropy bonus coefficient", default=SB3_DEFAULTS.ent_coef)
    vf_coef: float = _field(non_negative, "value loss coefficient", default=SB3_DEFAULTS.vf_coef)
    max_grad_norm: float = _field(non_negative, "global gradient-norm clip", default=SB3_DEFAULTS.max_grad_norm)
    normalize_advantage: bool = _field(flag, "normalize advantages per minibatch", default=SB3_DEFAULTS.normalize_advantage)
    policy_kwargs: dict[str, Any] = _field(policy_keywords, "SB3 policy keyword arguments (net_arch, ortho_init, ...), checked against the policy class", default_factory=dict)
    clip_range: float | Schedule = _field(schedule, "PPO-style clip range (a tuned knob: only objectives that declare it get it)", default=SB3_DEFAULTS.clip_range, role="tuned")
    use_sde: bool = _field(flag, "gSDE exploration (the process engine runs it; the population engine does not)", default=False, quiet_default=True)
    sde_sample_freq: int = _field(sample_frequency, "with gSDE, steps between new exploration matrices (-1: once per rollout)", default=-1, quiet_default=True)
    batch_scaling: dict[str, Any] | None = _field(_batch_scaling, "the after-ABS dial's knobs (null: off; {}: its defaults); Discrete actions, the process engine", default=None, role="run", quiet_default=True)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))
        check_policy_keywords("policy_kwargs", self.policy, self.policy_kwargs)
        rollout = self.n_steps * self.n_envs
        if rollout > MAX_ROLLOUT_STEPS:
            raise HyperparameterError(
                f"n_envs x n_steps is {self.n_envs:,} x {self.n_steps:,} = {rollout:,} transitions per rollout, above the "
                f"limit of {MAX_ROLLOUT_STEPS:,}"
            )
        if self.batch_size > rollout:
            raise ValueError(f"batch_size ({self.batch_size}) is larger than the rollout n_steps * n_envs = {rollout}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], prefix: str = "") -> Hyperparams:
        """Build from a plain mapping (a YAML file's ``hyperparams``); an unknown or missing key or
        a bad value is a :class:`ValueError` naming the key as ``<prefix><key>``."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown key(s) {[prefix + k for k in unknown]}; allowed: {sorted(known)}")
        missing = [prefix + f.name for f in dataclasses.fields(cls) if f.name not in data and _required(f)]
        if missing:
            raise ValueError(f"missing required key(s) {missing}")
        try:
            return cls(**data)
        except ValueError as err:  # every check's message starts with the field's name
            raise type(err)(f"{prefix}{err}") from None

    def algorithm_kwargs(self) -> dict[str, Any]:
        """Constructor arguments every algorithm takes (the ``algorithm`` fields); the ``tuned``
        ones go to the objectives that declare them (:meth:`tuned_values`)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata["role"] == "algorithm"}

    def tuned_values(self, tuned: tuple[str, ...]) -> dict[str, Any]:
        """The environment's values of the tuned knobs an objective declares."""
        names = {f.name for f in dataclasses.fields(self) if f.metadata["role"] == "tuned"}
        bad = sorted(set(tuned) - names)
        if bad:
            raise ValueError(f"unknown tuned hyper-parameter(s) {bad}; environment configs tune: {sorted(names)}")
        return {name: getattr(self, name) for name in tuned}

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly view (schedules as ``lin_<x>`` strings; quiet fields only when set)."""
        return _settings_json(self)


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]


def check_hyperparams(**values: Any) -> None:
    """Check algorithm constructor arguments with the rules of the :class:`Hyperparams` fields of
    the same names (a :class:`HyperparameterError`, a ``ValueError``, names the first bad one)."""
    fields = {f.name: f for f in dataclasses.fields(Hyperparams)}
    for name, value in values.items():
        fields[name].metadata["check"](name, value)


# -- PQN ------------------------------------------------------------------------------------------
#: the algorithms that are not a policy objective of ``adaptive_po.objectives.OBJECTIVES``: a name the
#: bench and the command line take beside the objectives, with its own class and settings
VALUE_ALGORITHMS: tuple[str, ...] = ("pqn",)
#: PQN's Q-network bodies (``adaptive_po.pqn.NETWORKS``)
PQN_NETWORKS: tuple[str, ...] = ("mlp", "minatar", "nature")
#: hidden widths of each body's dense layers when ``net_arch`` is not given: CleanRL's classic-control
#: MLP (120, 84), purejaxql's MinAtar dense 128, the Nature CNN's 512
PQN_NET_ARCH: dict[str, tuple[int, ...]] = {"mlp": (120, 84), "minatar": (128,), "nature": (512,)}


def open_unit_interval(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
        raise HyperparameterError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


def _pqn_network(name: str, value: Any) -> str:
    if value not in PQN_NETWORKS:
        raise HyperparameterError(f"{name} must be one of {PQN_NETWORKS}, got {value!r}")
    return value


def _optional_widths(name: str, value: Any) -> list[int] | None:
    return None if value is None else _layer_widths(name, value)


def _width_factor(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < float("inf"):
        raise HyperparameterError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class PQNHyperparams:
    """PQN's settings for one environment: a preset (:data:`PQN_PRESETS`, chosen by the environment's
    network family, :func:`pqn_preset`) with the keys of the environment file's ``pqn`` block over it.
    Every field is checked when the object is built (``ValueError`` naming the field)."""

    source: str = _field(non_empty_text, "where the values come from", role="run")
    n_envs: int = _field(at_most(MAX_N_ENVS, "parallel environments per run"), "parallel environments per run", role="run")
    n_steps: int = _field(at_most(MAX_N_STEPS, "steps per environment per rollout"), "steps per environment per rollout")
    batch_size: int = _field(positive_int, "minibatch size (transitions)")
    n_epochs: int = _field(positive_int, "passes over each update's data")
    learning_rate: float | Schedule = _field(schedule, "RAdam step size, constant or linearly decayed to 0 ('lin_<x>')")
    gamma: float = _field(unit_interval, "discount factor")
    q_lambda: float = _field(unit_interval, "lambda of the Q(lambda) targets")
    epsilon_start: float = _field(open_unit_interval, "epsilon-greedy's epsilon at the start")
    epsilon_final: float = _field(open_unit_interval, "epsilon after the decay")
    exploration_fraction: float = _field(unit_interval, "share of the budget over which epsilon decays linearly")
    max_grad_norm: float = _field(non_negative, "global gradient-norm clip")
    network: str = _field(_pqn_network, "Q-network body: mlp, minatar (conv 16 3x3) or nature (the Nature DQN CNN)", role="run")
    net_arch: list[int] | None = _field(_optional_widths, "dense hidden widths (null: the body's default)", default=None, role="run")
    batch_scaling: dict[str, Any] | None = _field(_batch_scaling, "the after-ABS dial's knobs (null: off; {}: its defaults)", default=None, role="run")
    width: float = _field(
        _width_factor, "factor of every hidden layer's width of the Q-network (convolutions' channels and dense units; the variant width=x<f>)",
        default=1.0, role="run", quiet_default=True,
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))
        rollout = self.n_steps * self.n_envs
        if rollout > MAX_ROLLOUT_STEPS:
            raise HyperparameterError(f"n_envs x n_steps is {rollout:,} transitions per rollout, above the limit of {MAX_ROLLOUT_STEPS:,}")
        if self.batch_size > rollout:
            raise HyperparameterError(f"batch_size ({self.batch_size}) is larger than the rollout n_steps * n_envs = {rollout}")
        if self.epsilon_final > self.epsilon_start:
            raise HyperparameterError(f"epsilon_final={self.epsilon_final!r} is above epsilon_start={self.epsilon_start!r}; epsilon decays")
        if self.width != 1.0:  # the widened dense layers within the limits a net_arch has
            widths = self.net_arch if self.net_arch is not None else PQN_NET_ARCH[self.network]
            _layer_widths(f"width x{self.width:g}: net_arch", [max(1, round(w * self.width)) for w in widths])

    @classmethod
    def from_preset(cls, preset: str, overrides: Mapping[str, Any] | None = None, prefix: str = "pqn.") -> PQNHyperparams:
        """The preset's values with ``overrides`` (an environment file's ``pqn`` block) over them;
        an unknown key or a bad value is a ``ValueError`` naming it as ``<prefix><key>``."""
        overrides = dict(overrides or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(map(str, set(overrides) - known))
        if unknown:
            raise ValueError(f"unknown key(s) {[prefix + k for k in unknown]}; allowed: {sorted(known)}")
        try:
            return cls(**{**PQN_PRESETS[preset], **overrides})
        except ValueError as err:
            raise type(err)(f"{prefix}{err}") from None

    def algorithm_kwargs(self) -> dict[str, Any]:
        """The ``PQN`` class's constructor arguments (``batch_scaling`` and the network go separately)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata["role"] == "algorithm"}

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly view (schedules as ``lin_<x>`` strings; ``width`` only when set, so that the
        ``config.json`` of runs made before it existed still matches on resume)."""
        return _settings_json(self)


#: PQN's authors' settings per network family, the defaults of an environment file's ``pqn`` block
PQN_PRESETS: dict[str, dict[str, Any]] = {
    "classic": dict(
        source="CleanRL cleanrl/pqn.py (classic control)", n_envs=4, n_steps=128, batch_size=128, n_epochs=4,
        learning_rate="lin_2.5e-4", gamma=0.99, q_lambda=0.65, epsilon_start=1.0, epsilon_final=0.05, exploration_fraction=0.5,
        max_grad_norm=10.0, network="mlp",
    ),
    "minatar": dict(
        source="purejaxql (MinAtar)", n_envs=128, n_steps=32, batch_size=128, n_epochs=2, learning_rate="lin_5e-4", gamma=0.99,
        q_lambda=0.65, epsilon_start=1.0, epsilon_final=0.05, exploration_fraction=0.1, max_grad_norm=10.0, network="minatar",
    ),
    "atari": dict(
        source="purejaxql (Atari)", n_envs=128, n_steps=32, batch_size=128, n_epochs=2, learning_rate="lin_2.5e-4", gamma=0.99,
        q_lambda=0.65, epsilon_start=1.0, epsilon_final=0.001, exploration_fraction=0.1, max_grad_norm=10.0, network="nature",
    ),
}


def pqn_preset(policy: str, policy_kwargs: Mapping[str, Any]) -> str:
    """The :data:`PQN_PRESETS` entry for an environment whose PPO settings use ``policy``: an MLP
    (classic control, Box2D) -> ``classic``; the MinAtar CNN -> ``minatar``; another CNN (ALE frames) -> ``atari``."""
    if policy != "CnnPolicy":
        return "classic"
    extractor = policy_kwargs.get("features_extractor_class")
    return "minatar" if getattr(extractor, "__name__", extractor) == "MinAtarCNN" else "atari"
