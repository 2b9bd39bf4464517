"""Variants: an algorithm with knob values other than its defaults (the sensitivity suite).

A variant is a canonical string of ``name=value`` pairs joined by commas, sorted by name:

* an objective's own knob, by its keyword name (``clip_range=0.3``, ``eps_high=4``,
  ``kl_target=0.03``): the value replaces the default. Where the environment's config tunes the
  knob with a linear schedule (CartPole's ``clip_range: lin_0.2``), the variant keeps the shape:
  ``clip_range=0.3`` means ``lin_0.3`` there;
* a knob every algorithm shares, as a factor of the environment's tuned value:
  ``n_epochs=x0.25`` (rounded, at least 1), ``learning_rate=x2`` (a schedule is scaled) and
  ``batch_size=x2`` (rounded, at least 2, at most one rollout);
* a learner setting, by name and one of its choices: ``precision=bf16`` runs the learner's network
  (its forward passes when acting, evaluating and updating) under bfloat16 autocast, the
  parameters, the optimizer and the objective's arithmetic staying float32 (the population
  engine's MLP learners; :data:`LEARNER_SETTINGS`). Float32 is the default and is never written.

The empty string is the default configuration. Runs of a variant live in the algorithm folder
``<algo>@<variant>`` (:func:`adaptive_po.contract.algo_label`).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from adaptive_po.hyperparams import Hyperparams, LinearSchedule
from adaptive_po.objectives import get_objective

#: knobs every algorithm shares, given as a factor of the environment's tuned value
SHARED_KNOBS: tuple[str, ...] = ("n_epochs", "learning_rate", "batch_size")
#: learner settings a variant may choose, by name: their choices other than the default
LEARNER_SETTINGS: dict[str, tuple[str, ...]] = {"precision": ("bf16",)}
#: the learner's precision when a variant does not choose one
DEFAULT_PRECISION = "fp32"


def objective_knobs(algo: str) -> tuple[str, ...]:
    """The numeric keyword knobs of an algorithm's objective that a variant may set (not its
    switches, not those its registry entry fixes, not its per-run state)."""
    spec = get_objective(algo)
    params = inspect.signature(spec.loss).parameters.values()
    numeric = [
        p.name for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and isinstance(p.default, (int, float)) and not isinstance(p.default, bool)
    ]
    return tuple(n for n in numeric if n not in spec.kwargs and n not in spec.state)


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what}: {text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{what}: must be a finite number > 0, got {text!r}")
    return value


def parse_variant(algo: str, variant: str) -> dict[str, tuple[str, Any]]:
    """``{name: (kind, value)}`` with kind ``"set"`` (objective knob), ``"scale"`` (shared knob) or
    ``"choose"`` (learner setting, a string); raises ``ValueError`` naming a bad pair."""
    out: dict[str, tuple[str, Any]] = {}
    if variant == "":
        return out
    knobs = objective_knobs(algo)
    for pair in variant.split(","):
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"variant {variant!r}: {pair!r} is not name=value")
        if name in out:
            raise ValueError(f"variant {variant!r}: {name!r} is given twice")
        if name in SHARED_KNOBS:
            if not text.startswith("x"):
                raise ValueError(f"variant {variant!r}: shared knob {name} takes a factor such as x0.5, got {text!r}")
            out[name] = ("scale", _number(text[1:], f"variant {variant!r}, {name}"))
        elif name in knobs:
            out[name] = ("set", _number(text, f"variant {variant!r}, {name}"))
        elif name in LEARNER_SETTINGS:
            if text not in LEARNER_SETTINGS[name]:
                raise ValueError(
                    f"variant {variant!r}: {name} takes one of {list(LEARNER_SETTINGS[name])} (the default is left out), got {text!r}"
                )
            out[name] = ("choose", text)
        else:
            raise ValueError(
                f"variant {variant!r}: unknown knob {name!r} for {algo}; its own knobs: {list(knobs)}, "
                f"shared (as factors): {list(SHARED_KNOBS)}, learner settings: {LEARNER_SETTINGS}"
            )
    if variant != canonical_variant(out):
        raise ValueError(f"variant {variant!r} is not canonical; write it as {canonical_variant(out)!r}")
    return out


def canonical_variant(overrides: dict[str, tuple[str, Any]]) -> str:
    def text(kind: str, value: Any) -> str:
        return value if kind == "choose" else ("x" if kind == "scale" else "") + format(value, "g")

    return ",".join(f"{name}={text(*overrides[name])}" for name in sorted(overrides))


def make_variant(**values: float | str) -> str:
    """A canonical variant string from keyword values: numbers set an objective knob, strings
    ``"x0.5"`` scale a shared one (``make_variant(clip_range=0.3, n_epochs="x0.25")``), a learner
    setting takes its choice (``precision="bf16"``)."""
    overrides = {
        k: ("choose", v) if k in LEARNER_SETTINGS else (("scale", float(v[1:])) if isinstance(v, str) else ("set", float(v)))
        for k, v in values.items()
    }
    return canonical_variant(overrides)


def learner_precision(algo: str, variant: str) -> str:
    """The learner's precision a variant chooses: ``"bf16"`` or :data:`DEFAULT_PRECISION`."""
    return str(parse_variant(algo, variant).get("precision", ("choose", DEFAULT_PRECISION))[1])


def apply_variant(
    algo: str, variant: str, hp: Hyperparams, objective_kwargs: dict[str, Any]
) -> tuple[Hyperparams, dict[str, Any]]:
    """The environment's hyper-parameters and the objective's keyword arguments with the
    variant's values in place."""
    overrides = parse_variant(algo, variant)
    kwargs = dict(objective_kwargs)
    changes: dict[str, Any] = {}
    for name, (kind, value) in overrides.items():
        if kind == "choose":
            continue  # a learner setting: the engine reads it (learner_precision)
        if kind == "set":
            kwargs[name] = LinearSchedule(value) if isinstance(kwargs.get(name), LinearSchedule) else value
        elif name == "n_epochs":
            changes[name] = max(1, int(round(hp.n_epochs * value)))
        elif name == "batch_size":
            changes[name] = min(hp.n_envs * hp.n_steps, max(2, int(round(hp.batch_size * value))))
        else:
            lr = hp.learning_rate
            changes[name] = LinearSchedule(lr.initial * value) if isinstance(lr, LinearSchedule) else lr * value
    return (dataclasses.replace(hp, **changes) if changes else hp), kwargs
