"""How the analysis orders and names things: algorithms, conditions and their levels.

Every table, figure and report takes its order and labels from here:

* algorithms: the ESS objective (:data:`ESS_ALGO`) first, then the baseline (:data:`BASELINE_ALGO`,
  PPO), then the others in alphabetical order (:func:`order_algos`); the ESS objective is set in
  bold in Markdown and named as such in legends;
* conditions: the paper's headline conditions by their names and in their order, any other by
  :func:`pretty_condition`, after them (:func:`condition_label`, :func:`condition_sort_key`);
* levels of one dial: sampler precision from the learner's own to the coarsest, recorded
  behaviour log-prob ``actual`` first, numbers ascending (:func:`level_key`, :func:`fmt_level`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from adaptive_po.dials import DIAL_DEFAULTS


from adaptive_po.contract import CONDITION_KEYS

from .conditions import HEADLINE_CONDITIONS

__all__ = [
    "ESS_ALGO",
    "BASELINE_ALGO",
    "PRECISION_ORDER",
    "AXIS_LABELS",
    "order_algos",
    "algo_markdown",
    "algo_legend",
    "config_name",
    "pretty_condition",
    "condition_label",
    "condition_sort_key",
    "level_key",
    "fmt_level",
]

#: the objective the paper proposes; listed first, drawn emphasized and judged against the others
ESS_ALGO = "esspo"
#: the tuned baseline; listed right after the ESS objective
BASELINE_ALGO = "ppo"
#: the sampler's number formats from the learner's own to the coarsest (mismatch increases)
PRECISION_ORDER: tuple[str, ...] = ("fp32", "fp16", "bf16", "fp8-e4m3", "fp8-e5m2")
#: axis titles of the figures over one dial
AXIS_LABELS = {
    "policy_lag": "policy lag k (updates behind)",
    "sampler_temperature": "sampler temperature T",
    "sampler_precision": "sampler precision (learner fp32)",
    "behaviour_log_prob": "recorded behaviour log-prob",
    "action_noise": "action noise sigma",
    "replay": "replayed batches",
}


def order_algos(algos: Iterable[str], ess_algo: str = ESS_ALGO, baseline: str = BASELINE_ALGO) -> list[str]:
    """The distinct ``algos``: ``ess_algo``, then ``baseline``, then the others alphabetically."""
    algos = sorted(set(algos))
    first = [a for a in dict.fromkeys((ess_algo, baseline)) if a in algos]
    return first + [a for a in algos if a not in first]


def algo_markdown(algo: str, ess_algo: str = ESS_ALGO) -> str:
    """An algorithm's name in a Markdown table: the ESS objective in bold."""
    return f"**{algo}**" if algo == ess_algo else algo


def algo_legend(algo: str, ess_algo: str = ESS_ALGO) -> str:
    """An algorithm's name in a figure legend: the ESS objective named as such."""
    return f"{algo} (ESS objective)" if algo == ess_algo else algo


def config_name(variant: str) -> str:
    """A knob configuration's name: its variant, ``default`` for the tuned knobs."""
    return variant if variant else "default"


def pretty_condition(
    policy_lag: int, action_noise: float, replay: int,
    behaviour_log_prob: str = DIAL_DEFAULTS["behaviour_log_prob"],
    sampler_temperature: float = DIAL_DEFAULTS["sampler_temperature"],
    sampler_precision: str = DIAL_DEFAULTS["sampler_precision"],
) -> str:
    """A short human label for plots: ``lag 4, noise 0.5`` (replay, the sampler's temperature and
    precision and the behaviour log-prob shown only when not at their defaults), e.g.
    ``lag 0, noise 0, T=1.2`` or ``lag 0, noise 0, fp8-e4m3, learner log-prob``. The arguments
    follow ``CONDITION_KEYS``."""
    parts = [f"lag {int(policy_lag)}", f"noise {format(float(action_noise), 'g')}"]
    if int(replay):
        parts.append(f"replay {int(replay)}")
    if float(sampler_temperature) != DIAL_DEFAULTS["sampler_temperature"]:
        parts.append(f"T={format(float(sampler_temperature), 'g')}")
    if sampler_precision != DIAL_DEFAULTS["sampler_precision"]:
        parts.append(str(sampler_precision))
    if behaviour_log_prob == "policy":
        parts.append("learner log-prob")
    elif behaviour_log_prob != DIAL_DEFAULTS["behaviour_log_prob"]:
        parts.append(f"blp {behaviour_log_prob}")
    return ", ".join(parts)


def condition_label(values: Mapping[str, Any]) -> str:
    """The headline label of a condition (``fresh``, ``lag 16``, ...) or :func:`pretty_condition`."""
    for cond in HEADLINE_CONDITIONS:
        if cond.matches(values):
            return cond.label
    return pretty_condition(*(values[k] for k in CONDITION_KEYS))


def condition_sort_key(values: Mapping[str, Any]) -> tuple:
    """Headline conditions first, in their order; then the others by each dial's level order."""
    for i, cond in enumerate(HEADLINE_CONDITIONS):
        if cond.matches(values):
            return (0, i)
    return (1,) + tuple(level_key(k, values[k]) for k in CONDITION_KEYS)


def level_key(axis: str, level) -> tuple:
    """Sort key of a dial's level: precision by :data:`PRECISION_ORDER`, blp ``actual`` first,
    numbers ascending."""
    if axis == "sampler_precision":
        return (PRECISION_ORDER.index(level), "") if level in PRECISION_ORDER else (len(PRECISION_ORDER), str(level))
    if axis == "behaviour_log_prob":
        return (0 if level == DIAL_DEFAULTS["behaviour_log_prob"] else 1, str(level))
    return (float(level), "")


def fmt_level(axis: str, level) -> str:
    """A dial's level as a tick label (the learner's log-prob as ``learner``, numbers as ``%g``)."""
    if axis in ("sampler_precision", "behaviour_log_prob"):
        return "learner" if level == "policy" else str(level)
    return format(float(level), "g")
