"""The data dials: how a run's data is produced, in one frozen dataclass.

:class:`DataDials` owns the six dials (policy lag, action noise, replay, behaviour recording,
sampler temperature, sampler precision): their names, defaults, validation and the folder name of
a data condition. It sits at the bottom of the package: it imports nothing of adaptive_po (and no
torch), and the collector, the population engine, the bench's run specs and grid, the command line
and analysis all take their dials from here. One ``DataDials`` object travels from the command
line to the collector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import itertools
from typing import Any, Mapping, Sequence

#: how the behaviour log-probability is recorded: the distribution actually sampled from, or the
#: learner's clean float32 policy at T = 1
BEHAVIOUR_RECORDINGS: tuple[str, ...] = ("actual", "policy")
#: the sampler's number formats; ``fp32`` is the learner's own (no mismatch)
SAMPLER_PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2")
#: the sampler temperatures a run may take: logits / T and std x T stay far inside float32 (and
#: the low-precision samplers' formats) for the policies' scales. T = 1e-300 divides logits into
#: infinities and T = 1e308 multiplies a std into one; either fails the run at once, a failure of
#: the request, never of the objective
TEMPERATURE_RANGE: tuple[float, float] = (0.01, 100.0)
#: the largest action-noise std: noise added to logits or means stays finite in float32 and in the
#: log-probabilities' squares (1e308 overflows to infinity, and the run would fail as a "divergence")
MAX_ACTION_NOISE = 100.0


@dataclass(frozen=True, kw_only=True)
class DataDials:
    """How the data of a run is produced: the one owner of the six data dials, their defaults and
    their validation (the collector, the population engine's members, the harness's run specs,
    folder names and analysis all use this class).

    :param policy_lag: the actor acts with the learner's parameters from this many updates ago.
    :param action_noise: std of the Gaussian noise added to the actor's logits / means.
    :param replay: each update also trains on this many previous rollout batches.
    :param behaviour_log_prob: ``"actual"`` (record the distribution sampled from) or ``"policy"``
        (the learner's clean distribution).
    :param sampler_temperature: the sampler's temperature T (logits / T, or the std x T).
    :param sampler_precision: the sampler's number format, one of :data:`SAMPLER_PRECISIONS`.

    Construction raises ``ValueError`` naming the first bad dial.
    """

    policy_lag: int = 0
    action_noise: float = 0.0
    replay: int = 0
    behaviour_log_prob: str = "actual"
    sampler_temperature: float = 1.0
    sampler_precision: str = "fp32"

    def __post_init__(self) -> None:
        for name in ("policy_lag", "replay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        noise = self.action_noise
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not noise >= 0:
            raise ValueError(f"action_noise must be a number >= 0, got {noise!r}")
        if not noise <= MAX_ACTION_NOISE:
            raise ValueError(f"action_noise must be a number in [0, {MAX_ACTION_NOISE:g}], got {noise!r}")
        if self.behaviour_log_prob not in BEHAVIOUR_RECORDINGS:
            raise ValueError(f"behaviour_log_prob must be one of {BEHAVIOUR_RECORDINGS}, got {self.behaviour_log_prob!r}")
        temperature = self.sampler_temperature
        low, high = TEMPERATURE_RANGE
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (low <= temperature <= high):
            raise ValueError(f"sampler temperature must be a number in [{low:g}, {high:g}], got {temperature!r}")
        if self.sampler_precision not in SAMPLER_PRECISIONS:
            raise ValueError(f"sampler precision must be one of {SAMPLER_PRECISIONS}, got {self.sampler_precision!r}")
        # numbers as run folders record them: 0 and 0.0 are one condition with one config.json
        object.__setattr__(self, "action_noise", float(noise))
        object.__setattr__(self, "sampler_temperature", float(temperature))

    @classmethod
    def from_condition(cls, values: Mapping[str, Any]) -> "DataDials":
        """One data condition as a suite or a tuning plan writes it (``{"policy_lag": 16}``):
        ``ValueError`` naming an unknown key or a bad value."""
        unknown = sorted(set(values) - set(DIAL_NAMES))
        if unknown:
            raise ValueError(f"unknown data dial(s) {unknown} in condition {dict(values)}; the dials are {list(DIAL_NAMES)}")
        return cls(**values)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "DataDials":
        """The dials named in ``values`` (a config.json, a RunSpec's dict, a DataFrame row), the
        defaults for those it lacks (older run folders); other keys are ignored."""
        return cls(**{name: values[name] for name in DIAL_NAMES if name in values and values[name] is not None})

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in DIAL_NAMES}

    @property
    def condition(self) -> str:
        """The folder name of this data condition (:func:`condition_name`)."""
        return condition_name(**self.to_dict())

    @property
    def is_fresh(self) -> bool:
        """Fresh on-policy data: every dial at its default."""
        return self == DataDials()


#: the dials' names, in their order (the condition keys of a run)
DIAL_NAMES: tuple[str, ...] = (
    "policy_lag", "action_noise", "replay", "behaviour_log_prob", "sampler_temperature", "sampler_precision",
)
#: every dial's default value
DIAL_DEFAULTS: dict[str, Any] = dict(zip(DIAL_NAMES, (0, 0.0, 0, "actual", 1.0, "fp32")))


def condition_name(
    policy_lag: int,
    action_noise: float,
    replay: int,
    behaviour_log_prob: str = DIAL_DEFAULTS["behaviour_log_prob"],
    sampler_temperature: float = DIAL_DEFAULTS["sampler_temperature"],
    sampler_precision: str = DIAL_DEFAULTS["sampler_precision"],
) -> str:
    """The folder name of a data condition: ``lag4_noise0.5_replay0``, plus ``_T1.2`` for a sampler
    temperature other than 1, ``_fp8-e4m3`` for a sampler precision other than fp32, and
    ``_blp-policy`` when the behaviour log-probability was recorded from the clean policy."""
    name = f"lag{int(policy_lag)}_noise{format(float(action_noise), 'g')}_replay{int(replay)}"
    sampler = sampler_name(sampler_temperature, sampler_precision)
    name += f"_{sampler}" if sampler else ""
    return name if behaviour_log_prob == "actual" else f"{name}_blp-{behaviour_log_prob}"


def sampler_name(sampler_temperature: float = 1.0, sampler_precision: str = "fp32") -> str:
    """The sampler's part of a condition's name: ``T1.2`` for a temperature other than 1,
    ``fp8-e4m3`` for a precision other than fp32, both joined by ``_``; "" for the clean sampler
    (a study table's ``sampler`` cell)."""
    parts = [f"T{format(float(sampler_temperature), 'g')}"] if float(sampler_temperature) != 1.0 else []
    return "_".join(parts + ([sampler_precision] if sampler_precision != "fp32" else []))


def sampler_dials(name: str) -> dict[str, Any]:
    """The sampler dials a :func:`sampler_name` names (``{}`` for ""); a ``ValueError`` naming
    ``name`` where it is not one (an unknown precision, a temperature out of range, another order)."""
    dials: dict[str, Any] = {}
    try:
        for part in name.split("_") if name else ():
            if part in SAMPLER_PRECISIONS:
                dials["sampler_precision"] = part
            else:
                dials["sampler_temperature"] = float(part.removeprefix("T")) if part.startswith("T") else math.nan
        checked = DataDials(**dials)
    except ValueError:
        checked = None
    # what names it names it back (one order, no repeats, no default spelled out)
    if checked is None or sampler_name(checked.sampler_temperature, checked.sampler_precision) != name:
        raise ValueError(f"sampler {name!r} is not a sampler condition (T<temperature>, a precision of {list(SAMPLER_PRECISIONS[1:])}, "
                         "or both joined by '_', as the run folders name them)")
    return dials


def dials_from_arguments(dials: DataDials | None, **keywords: Any) -> DataDials:
    """The dials of a constructor that takes either one :class:`DataDials` or the six dials as
    keywords (the SB3-style ``ESSPO(..., policy_lag=4)``). Keywords at their defaults are ignored
    when ``dials`` is given; a keyword set besides ``dials`` is refused (``ValueError`` naming it)."""
    unknown = sorted(set(keywords) - set(DIAL_NAMES))
    if unknown:
        raise TypeError(f"unknown data dial(s) {unknown}; the dials are {list(DIAL_NAMES)}")
    if dials is None:
        return DataDials(**keywords)
    if not isinstance(dials, DataDials):
        raise TypeError(f"dials must be a DataDials, got {type(dials).__name__}")
    both = sorted(name for name, value in keywords.items() if value != DIAL_DEFAULTS[name])
    if both:
        raise ValueError(f"the data dials come either as dials=DataDials(...) or as keywords, not both: {both} given beside dials")
    return dials


def dial_product(*, limit: int | None = None, **levels: Sequence[Any] | None) -> list[DataDials]:
    """Every combination of the given levels of each dial (``dial_product(policy_lag=[0, 16])``),
    the dials not given (or given None) at their defaults, in :data:`DIAL_NAMES` order, each
    validated. ``ValueError`` names an unknown dial, an empty list or a bad level, and, before any
    combination is made, more than ``limit`` combinations (a grid's limit on its runs)."""
    unknown = sorted(set(levels) - set(DIAL_NAMES))
    if unknown:
        raise ValueError(f"unknown data dial(s) {unknown}; the dials are {list(DIAL_NAMES)}")
    axes = []
    for name in DIAL_NAMES:
        values = levels.get(name)
        values = [DIAL_DEFAULTS[name]] if values is None else list(values)
        if not values:
            raise ValueError(f"no levels selected for {name}")
        axes.append(values)
    count = math.prod(len(values) for values in axes)
    if limit is not None and count > limit:
        sizes = " x ".join(f"{len(values):,} {name}" for name, values in zip(DIAL_NAMES, axes) if len(values) > 1)
        raise ValueError(f"the dials' levels ({sizes}) make {count:,} data conditions, more than the limit of {limit:,} runs per grid")
    return [DataDials(**dict(zip(DIAL_NAMES, combination))) for combination in itertools.product(*axes)]
