"""What both learners share below them: the policy classes by name, the optimizer default, the one
forward pass of the training step, and the objective's schedules.

The SB3 face (:class:`~adaptive_po.algorithms.BatchPolicyOptimization`) and the population engine
(:class:`~adaptive_po.population.PopulationLearner`) are peers: each imports these, neither
imports the other, so a change to the forward pass or to the optimizer's default reaches both
engines at once, and the population engine carries no SB3 algorithm class.
"""

from __future__ import annotations

from typing import Any

import torch as th
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy
from stable_baselines3.common.utils import FloatSchedule

from adaptive_po import distributions as D
from adaptive_po.collector import distribution_params
from adaptive_po.networks import resolve_policy_kwargs

#: SB3's policy aliases: the names a configuration's ``policy`` may take, and the classes they build
POLICY_ALIASES: dict[str, type[ActorCriticPolicy]] = {
    "MlpPolicy": ActorCriticPolicy,
    "CnnPolicy": ActorCriticCnnPolicy,
    "MultiInputPolicy": MultiInputActorCriticPolicy,
}


def with_fused_adam(policy_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """``policy_kwargs`` resolved (:func:`~adaptive_po.networks.resolve_policy_kwargs`), defaulting
    to the fused Adam kernel: the same maths as SB3's default Adam, about 12% less time per update
    on small MLPs on CPU (benchmarks/learner.py). Every algorithm gets it, so comparisons stay fair;
    a user's own optimizer settings are left alone."""
    kwargs = resolve_policy_kwargs(policy_kwargs)
    if kwargs.get("optimizer_class", th.optim.Adam) is th.optim.Adam and "optimizer_kwargs" not in kwargs:
        kwargs["optimizer_kwargs"] = {"fused": True, "eps": 1e-5}  # SB3's eps for Adam in actor-critics
    return kwargs


def objective_schedules(objective_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Numbers and callables become SB3 schedules of the remaining progress; flags and strings stay."""
    return {
        k: (FloatSchedule(v) if isinstance(v, (int, float)) and not isinstance(v, bool) or callable(v) else v)
        for k, v in objective_kwargs.items()
    }


def objective_arguments(schedules: dict[str, Any], progress_remaining: float) -> dict[str, Any]:
    """The objective's keyword arguments for one update: schedules evaluated at ``progress_remaining``."""
    return {k: (v(progress_remaining) if callable(v) else v) for k, v in schedules.items()}


def policy_latents(policy: ActorCriticPolicy, observations: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
    """An SB3 actor-critic's latent codes ``(latent_pi, latent_vf)`` for ``observations``."""
    features = policy.extract_features(observations)  # type: ignore[arg-type]
    if policy.share_features_extractor:
        return policy.mlp_extractor(features)
    pi_features, vf_features = features
    return policy.mlp_extractor.forward_actor(pi_features), policy.mlp_extractor.forward_critic(vf_features)


def policy_heads(policy: ActorCriticPolicy, kind: D.Kind, observations: Any) -> tuple[th.Tensor, th.Tensor]:
    """An SB3 actor-critic's forward pass to ``(B, P)`` flat distribution parameters (the layouts
    of :mod:`adaptive_po.distributions`) and ``(B,)`` values: the one forward pass of the training
    step, for both engines (the population engine runs it per member under vmap). A Gaussian's
    log-std is the policy's parameter itself; gSDE's state-dependent std comes from SB3's own
    distribution."""
    latent_pi, latent_vf = policy_latents(policy, observations)
    if policy.use_sde:
        params = distribution_params(policy._get_action_dist_from_latent(latent_pi))
    else:
        params = policy.action_net(latent_pi)
        if kind == "gaussian":
            params = th.cat([params, policy.log_std.expand_as(params)], dim=-1)
    return params, policy.value_net(latent_vf).squeeze(-1)
