"""Variants: an algorithm with knob values other than its defaults (the sensitivity suite).

A variant is a canonical string of ``name=value`` pairs joined by commas, sorted by name:

* an objective's own knob, by its keyword name (``clip_range=0.3``, ``eps_high=4``,
  ``kl_target=0.03``): the value replaces the default. Where the environment's config tunes the
  knob with a linear schedule (CartPole's ``clip_range: lin_0.2``), the variant keeps the shape:
  ``clip_range=0.3`` means ``lin_0.3`` there;
* a knob every algorithm shares, as a factor of the environment's tuned value:
  ``n_epochs=x0.25`` (rounded, at least 1), ``learning_rate=x2`` (a schedule is scaled),
  ``batch_size=x2`` (rounded, at least 2, at most one rollout) and ``n_steps=x0.25`` (the rollout's
  length per environment, rounded, at least 1; a minibatch longer than the new rollout is cut to
  it);
* the update's schedule in its own terms: ``n_epochs=2`` (a whole number: passes over each
  rollout, whatever the environment's value) and ``batch_size=rollout`` (each optimizer step on the
  whole rollout). Together, ``batch_size=rollout,n_epochs=k`` is "k optimizer steps per rollout,
  each on the whole rollout", the schedule of the ESS objective's authors (FeynRL's
  ``train_steps_per_epoch``); the minibatch's ESS is then the whole step's;
* an objective's switch, by name and one of its choices: ``kl=sampled`` (the sampled k3 estimator
  ``log r + 1/r - 1`` at the taken action instead of the exact KL, for the objectives whose loss
  takes ``kl`` and whose entry does not fix it: ``esspo``, its ablations; :data:`OBJECTIVE_SWITCHES`);
* a learner setting, by name and one of its choices: ``precision=bf16`` runs the learner's network
  (its forward passes when acting, evaluating and updating) under bfloat16 autocast, the
  parameters, the optimizer and the objective's arithmetic staying float32 (the population
  engine's MLP learners; :data:`LEARNER_SETTINGS`). Float32 is the default and is never written;
* a data dial of the run, by name and one of its choices: ``batch_scaling=abs`` turns the after-ABS
  dial on (:mod:`adaptive_po.batch_scaling`), with the knobs of the environment file's
  ``batch_scaling`` where it has some, else its defaults (:data:`DIAL_SETTINGS`; every algorithm, PQN
  included; the process engine runs it);
* PQN's network (:data:`VALUE_KNOBS`): ``width=x4`` multiplies every hidden layer's width of its
  Q-network, the convolutions' channels and the dense units alike (``adaptive_po.pqn.QNetwork``).
  PQN takes no other variant: its settings are the environment file's ``pqn`` block.

The empty string is the default configuration. Runs of a variant live in the algorithm folder
``<algo>@<variant>`` (:func:`adaptive_po.contract.algo_label`).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from adaptive_po.hyperparams import VALUE_ALGORITHMS, Hyperparams, LinearSchedule
from adaptive_po.objectives import get_objective

#: knobs every algorithm shares, given as a factor of the environment's tuned value
SHARED_KNOBS: tuple[str, ...] = ("n_epochs", "learning_rate", "batch_size", "n_steps")
#: shared knobs that also take a value in their own terms (kind ``"fix"``): a whole number of
#: epochs, or the whole rollout as the minibatch
FIXED_FORMS: dict[str, str] = {"n_epochs": "a whole number >= 1", "batch_size": "'rollout'"}
#: the value of ``batch_size=rollout``
ROLLOUT = "rollout"
#: objectives' switches a variant may choose (kind ``"switch"``), by keyword, with their choices
#: other than the loss's default
OBJECTIVE_SWITCHES: dict[str, tuple[str, ...]] = {"kl": ("sampled",)}
#: learner settings a variant may choose, by name: their choices other than the default
LEARNER_SETTINGS: dict[str, tuple[str, ...]] = {"precision": ("bf16",)}
#: the learner's precision when a variant does not choose one
DEFAULT_PRECISION = "fp32"
#: data dials of the run a variant may turn on, by name: their choices other than off (kind ``"dial"``)
DIAL_SETTINGS: dict[str, tuple[str, ...]] = {"batch_scaling": ("abs",)}
#: the knobs a variant may give the algorithms of ``VALUE_ALGORITHMS`` (PQN) beside the dials, as a
#: factor (kind ``"scale"``) of the environment's value: the Q-network's width
VALUE_KNOBS: tuple[str, ...] = ("width",)


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


def objective_switches(algo: str) -> tuple[str, ...]:
    """The switches of :data:`OBJECTIVE_SWITCHES` that ``algo``'s loss takes as a keyword and its
    registry entry leaves free (``esspo``: ``kl``; ``esspo-sampled-kl`` fixes it)."""
    spec = get_objective(algo)
    params = inspect.signature(spec.loss).parameters
    return tuple(n for n in OBJECTIVE_SWITCHES if n in params and n not in spec.kwargs)


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what}: {text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{what}: must be a finite number > 0, got {text!r}")
    return value


def parse_variant(algo: str, variant: str) -> dict[str, tuple[str, Any]]:
    """``{name: (kind, value)}`` with kind ``"set"`` (objective knob), ``"scale"`` (shared knob, PQN's
    width), ``"fix"`` (a shared knob in its own terms), ``"switch"`` (objective switch), ``"choose"``
    (learner setting) or ``"dial"`` (a data dial turned on); raises ``ValueError`` naming a bad pair."""
    out: dict[str, tuple[str, Any]] = {}
    if variant == "":
        return out
    value_algorithm = algo in VALUE_ALGORITHMS
    knobs = () if value_algorithm else objective_knobs(algo)
    for pair in variant.split(","):
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"variant {variant!r}: {pair!r} is not name=value")
        if name in out:
            raise ValueError(f"variant {variant!r}: {name!r} is given twice")
        if name in DIAL_SETTINGS:
            if text not in DIAL_SETTINGS[name]:
                raise ValueError(f"variant {variant!r}: {name} takes one of {list(DIAL_SETTINGS[name])} (off is left out), got {text!r}")
            out[name] = ("dial", text)
        elif value_algorithm:
            if name not in VALUE_KNOBS:
                raise ValueError(
                    f"variant {variant!r}: {algo} takes no variants but {', '.join(f'{k}=x<factor>' for k in VALUE_KNOBS)} and "
                    f"{', '.join(f'{k}={c[0]}' for k, c in DIAL_SETTINGS.items())}; its other settings are the environment file's pqn block"
                )
            if not text.startswith("x"):
                raise ValueError(f"variant {variant!r}: {name} takes a factor such as x4, got {text!r}")
            out[name] = ("scale", _number(text[1:], f"variant {variant!r}, {name}"))
        elif name in SHARED_KNOBS:
            if text.startswith("x"):
                out[name] = ("scale", _number(text[1:], f"variant {variant!r}, {name}"))
            elif name == "n_epochs" and text.isdigit() and int(text) >= 1 and text == str(int(text)):
                out[name] = ("fix", int(text))
            elif name == "batch_size" and text == ROLLOUT:
                out[name] = ("fix", ROLLOUT)
            else:
                forms = f" or {FIXED_FORMS[name]}" if name in FIXED_FORMS else ""
                raise ValueError(f"variant {variant!r}: shared knob {name} takes a factor such as x0.5{forms}, got {text!r}")
        elif name in knobs:
            out[name] = ("set", _number(text, f"variant {variant!r}, {name}"))
        elif name in objective_switches(algo):
            if text not in OBJECTIVE_SWITCHES[name]:
                raise ValueError(
                    f"variant {variant!r}: {name} takes one of {list(OBJECTIVE_SWITCHES[name])} (the default is left out), got {text!r}"
                )
            out[name] = ("switch", text)
        elif name in LEARNER_SETTINGS:
            if text not in LEARNER_SETTINGS[name]:
                raise ValueError(
                    f"variant {variant!r}: {name} takes one of {list(LEARNER_SETTINGS[name])} (the default is left out), got {text!r}"
                )
            out[name] = ("choose", text)
        else:
            raise ValueError(
                f"variant {variant!r}: unknown knob {name!r} for {algo}; its own knobs: {list(knobs)}, "
                f"shared (as factors): {list(SHARED_KNOBS)}, switches: { {k: OBJECTIVE_SWITCHES[k] for k in objective_switches(algo)} }, "
                f"learner settings: {LEARNER_SETTINGS}, dials: {DIAL_SETTINGS}"
            )
    if variant != canonical_variant(out):
        raise ValueError(f"variant {variant!r} is not canonical; write it as {canonical_variant(out)!r}")
    return out


def canonical_variant(overrides: dict[str, tuple[str, Any]]) -> str:
    def text(kind: str, value: Any) -> str:
        if kind in ("choose", "switch", "dial") or isinstance(value, str):
            return str(value)
        return ("x" if kind == "scale" else "") + format(value, "g")

    return ",".join(f"{name}={text(*overrides[name])}" for name in sorted(overrides))


def make_variant(**values: float | str) -> str:
    """A canonical variant string from keyword values: numbers set an objective knob, strings
    ``"x0.5"`` scale a shared one (``make_variant(clip_range=0.3, n_epochs="x0.25")``), a shared
    knob in its own terms is an int or ``"rollout"`` (``n_epochs=2, batch_size="rollout"``), a
    switch, a learner setting or a dial takes its choice (``kl="sampled"``, ``precision="bf16"``,
    ``batch_scaling="abs"``)."""

    def kind(name: str, value: float | str) -> tuple[str, Any]:
        if name in DIAL_SETTINGS:
            return ("dial", value)
        if name in LEARNER_SETTINGS:
            return ("choose", value)
        if name in OBJECTIVE_SWITCHES:
            return ("switch", value)
        if name in SHARED_KNOBS and (value == ROLLOUT or (isinstance(value, int) and not isinstance(value, bool))):
            return ("fix", value)
        if isinstance(value, str):
            return ("scale", float(value[1:]))
        return ("set", float(value))

    return canonical_variant({k: kind(k, v) for k, v in values.items()})


def learner_precision(algo: str, variant: str) -> str:
    """The learner's precision a variant chooses: ``"bf16"`` or :data:`DEFAULT_PRECISION`."""
    return str(parse_variant(algo, variant).get("precision", ("choose", DEFAULT_PRECISION))[1])


def apply_variant(
    algo: str, variant: str, hp: Hyperparams, objective_kwargs: dict[str, Any]
) -> tuple[Hyperparams, dict[str, Any]]:
    """The environment's hyper-parameters and the objective's keyword arguments with the
    variant's values in place (PQN: its ``PQNHyperparams``, the dial and the width)."""
    overrides = parse_variant(algo, variant)
    kwargs = dict(objective_kwargs)
    changes: dict[str, Any] = {}
    if "batch_scaling" in overrides:  # on: the environment file's knobs where it has some, else every default
        changes["batch_scaling"] = hp.batch_scaling if hp.batch_scaling is not None else {}
    if algo in VALUE_ALGORITHMS:
        if "width" in overrides:
            changes["width"] = hp.width * overrides["width"][1]
        return (dataclasses.replace(hp, **changes) if changes else hp), kwargs
    n_steps = hp.n_steps
    if "n_steps" in overrides:  # first: the rollout bounds the minibatch
        n_steps = max(1, int(round(hp.n_steps * overrides["n_steps"][1])))
        if hp.n_envs * n_steps < 2:
            raise ValueError(f"variant {variant!r}: a rollout of {n_steps} steps x {hp.n_envs} environments is under 2 samples")
        changes["n_steps"] = n_steps
        changes["batch_size"] = min(hp.batch_size, hp.n_envs * n_steps)
    rollout = hp.n_envs * n_steps
    for name, (kind, value) in overrides.items():
        if kind in ("choose", "dial") or name == "n_steps":
            continue  # a learner setting: the engine reads it (learner_precision); the dial, the rollout: above
        if kind in ("set", "switch"):
            kwargs[name] = LinearSchedule(value) if isinstance(kwargs.get(name), LinearSchedule) else value
        elif name == "n_epochs":
            changes[name] = int(value) if kind == "fix" else max(1, int(round(hp.n_epochs * value)))
        elif name == "batch_size":
            changes[name] = rollout if kind == "fix" else min(rollout, max(2, int(round(hp.batch_size * value))))
        else:
            lr = hp.learning_rate
            changes[name] = LinearSchedule(lr.initial * value) if isinstance(lr, LinearSchedule) else lr * value
    return (dataclasses.replace(hp, **changes) if changes else hp), kwargs
