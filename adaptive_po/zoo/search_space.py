"""Optuna samplers for the Zoo's ``-optimize``, one per registry entry.

Every objective gets the search space of the Zoo's own PPO sampler for the knobs all of them
share (rollout and minibatch sizes, discount, GAE lambda, learning rate, entropy coefficient,
epochs, gradient clip, network), without PPO's clip range, plus the objective's own numeric
knobs (:func:`adaptive_po.bench.variants.objective_knobs`): ``clip_range`` for the clipped
entries, ``eps_high`` for CISPO, ``kl_target`` for adaptive-KL PPO, ... The ESS objective has no
clip and no knob of its own, so its search is the shared space alone.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from adaptive_po.bench.variants import objective_knobs
from adaptive_po.objectives import get_objective

#: search ranges of the objectives' own knobs: a list (categorical) or ``(low, high)`` (log scale);
#: a knob not listed is searched over [default / 4, default * 4], log scale
KNOB_RANGES: dict[str, list[float] | tuple[float, float]] = {
    "clip_range": [0.1, 0.2, 0.3, 0.4],  # the Zoo's PPO choices
    "clip_range_high": (0.1, 0.5),
    "is_truncation": (0.5, 4.0),
    "eps_high": (0.1, 4.0),
    "eps": (0.05, 0.5),
    "kl_target": (0.003, 0.05),
    "variance_target": (0.005, 0.08),  # R2VPO: a ratio std of about 0.07 to 0.28
    "dual_step": (1.0, 100.0),
    "initial_multiplier": (0.1, 10.0),
    "radius": (0.002, 0.05),  # after QUATRO: a KL per update of 0.002 to 0.05 nats
}


def knob_space(objective: str) -> dict[str, list[float] | tuple[float, float]]:
    """The search space of an objective's own knobs (empty for the ESS objective)."""
    params = inspect.signature(get_objective(objective).loss).parameters
    space: dict[str, list[float] | tuple[float, float]] = {}
    for name in objective_knobs(objective):
        default = float(params[name].default)
        space[name] = KNOB_RANGES.get(name, (default / 4, default * 4))
    return space


def _sample_shared(trial: Any) -> dict[str, Any]:
    """The Zoo's PPO sampler's shared knobs (its names and ranges), without ``clip_range``."""
    return {
        "batch_size_pow": trial.suggest_int("batch_size_pow", 2, 10),
        "n_steps_pow": trial.suggest_int("n_steps_pow", 5, 12),
        "one_minus_gamma": trial.suggest_float("one_minus_gamma", 0.0001, 0.03, log=True),
        "one_minus_gae_lambda": trial.suggest_float("one_minus_gae_lambda", 0.0001, 0.1, log=True),
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 0.002, log=True),
        "ent_coef": trial.suggest_float("ent_coef", 0.00000001, 0.1, log=True),
        "n_epochs": trial.suggest_categorical("n_epochs", [1, 5, 10, 20]),
        "max_grad_norm": trial.suggest_float("max_grad_norm", 0.3, 2),
        "net_arch": trial.suggest_categorical("net_arch", ["tiny", "small", "medium"]),
        "activation_fn": trial.suggest_categorical("activation_fn", ["tanh", "relu"]),
    }


def convert_params(sampled: dict[str, Any]) -> dict[str, Any]:
    """Sampled values -> constructor arguments (the Zoo's on-policy converter, and a minibatch no
    larger than a rollout: ``batch_size <= n_steps``, where SB3's PPO would only warn and our
    classes refuse). Also what the Zoo uses to load a stored trial (``--trial-id``)."""
    from rl_zoo3.hyperparams_opt import convert_onpolicy_params

    params = convert_onpolicy_params(sampled)
    if "batch_size" in params and "n_steps" in params:
        params["batch_size"] = min(params["batch_size"], params["n_steps"])
    return params


def sampler_for(objective: str) -> Callable[..., dict[str, Any]]:
    """The Zoo sampler ``(trial, n_actions, n_envs, additional_args) -> arguments`` of one entry."""
    space = knob_space(objective)

    def sample(trial: Any, n_actions: int, n_envs: int, additional_args: dict) -> dict[str, Any]:
        sampled = _sample_shared(trial)
        for name, choices in space.items():
            if isinstance(choices, list):
                sampled[name] = trial.suggest_categorical(name, choices)
            else:
                sampled[name] = trial.suggest_float(name, *choices, log=True)
        params = convert_params(sampled)
        for name in ("gamma", "n_steps", "batch_size"):
            trial.set_user_attr(name, params[name])  # the true values, as the Zoo's sampler shows them
        return params

    sample.__name__ = f"sample_{objective.replace('-', '_')}_params"
    sample.__doc__ = f"Zoo sampler for {objective}: the shared on-policy knobs" + (
        f" and {', '.join(space)}." if space else " (no clip, no knob of its own)."
    )
    return sample
