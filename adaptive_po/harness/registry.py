"""The algorithms a benchmark can run. Adding one is one entry in :data:`ALGORITHMS`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adaptive_po.algorithms import ESSPO, PPO, BatchPolicyOptimization, DecoupledPPO


@dataclass(frozen=True)
class AlgorithmSpec:
    """How to build one benchmarked algorithm.

    :param cls: the SB3 algorithm class.
    :param kwargs: fixed constructor arguments (objective switches).
    :param uses_clip: whether the environment's tuned ``clip_range`` is passed in.
    """

    cls: type[BatchPolicyOptimization]
    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    uses_clip: bool = False


ALGORITHMS: dict[str, AlgorithmSpec] = {
    "esspo": AlgorithmSpec(ESSPO, "ESS objective: weight capped at e_B, (1 - e_B) analytic KL to the behaviour policy"),
    "esspo-cap-only": AlgorithmSpec(ESSPO, "ablation: the e_B cap without the KL regularizer", {"ess_regularizer": False}),
    "esspo-reg-only": AlgorithmSpec(ESSPO, "ablation: the (1 - e_B) KL regularizer with the uncapped importance weight", {"ess_cap": False}),
    "esspo-sampled-kl": AlgorithmSpec(ESSPO, "ESS objective with the reference code's sampled KL estimator", {"kl": "sampled"}),
    "ppo": AlgorithmSpec(PPO, "PPO, Zoo-tuned clip, clipping against the behaviour policy", uses_clip=True),
    "decoupled-ppo": AlgorithmSpec(DecoupledPPO, "decoupled PPO: clip against the proximal policy, behaviour weight truncated at 1", uses_clip=True),
    "tis-pg": AlgorithmSpec(
        BatchPolicyOptimization,
        "score-function gradient with importance weight truncated at a fixed 1 (no KL, no clip)",
        {"objective": "truncated_is", "objective_kwargs": {"is_truncation": 1.0}},
    ),
}


def get_algorithm(name: str) -> AlgorithmSpec:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; available: {sorted(ALGORITHMS)}") from None
