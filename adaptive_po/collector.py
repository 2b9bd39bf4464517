"""How data is produced: which parameters act, with what noise, which older batches are replayed.

The :class:`Collector` is the dial that makes off-policyness controllable, identically for every
algorithm. It knows nothing about the objective that will consume the data; it only records the
behaviour distribution honestly.

* ``policy_lag = k``: the actor acts with the policy parameters from ``k`` updates ago (a queue of
  parameter snapshots, as in asynchronous actor-learner systems). An *update* is one ``train()``
  call (one rollout's worth of gradient steps). Before ``k`` updates have happened the actor uses
  the oldest snapshot it has (the initial parameters).
* ``replay = m``: each update also trains on the ``m`` previous rollout batches, each with the
  behaviour distribution stored when it was collected.
* ``action_noise = sigma``: the actor samples from a perturbed policy: Gaussian noise of scale
  sigma added to the logits (Discrete, MultiDiscrete, MultiBinary) or to the mean (Box), drawn
  fresh at every step for every environment: the analogue of a sampler whose numerics differ
  from the trainer's.
* ``sampler_temperature = T`` and ``sampler_precision``: the sampler's numerics differ from the
  learner's (:mod:`adaptive_po.sampler`): it samples at temperature T, from a copy of the acting
  parameters held and computed in bf16, fp16 or (per-tensor scaled) fp8.
* ``behaviour_log_prob = "actual" | "policy"``: record the log-probability (and distribution)
  actually sampled from (the honest default), or the acting policy's clean float32 one at T = 1
  (the common mistake of trusting the trainer's own probabilities), so the cost of that mistake
  is measurable.

The dials compose in one order in both engines: precision (the forward pass), then action noise,
then temperature.

With gSDE (``use_sde=True``) the actor samples as SB3 does, ``mean + latent_sde @ W`` with the
acting policy's exploration matrix ``W`` (resampled by :meth:`Collector.reset_noise`, which the
algorithm calls where SB3's ``collect_rollouts`` calls ``reset_noise``); the behaviour distribution
recorded per transition is the diagonal Gaussian SB3 evaluates that action under, the mean and
the state-dependent std. Noise moves the mean, the temperature scales ``latent_sde @ W``. The
precision dial is refused with gSDE (:func:`validate_policy_settings`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from torch import nn
from torch.distributions import Bernoulli, Categorical, Normal

from adaptive_po import distributions as D
from adaptive_po import sampler as S
from adaptive_po.dials import BEHAVIOUR_RECORDINGS, DataDials, dials_from_arguments  # noqa: F401 - re-exported
from adaptive_po.staleness import StaleQueue
from adaptive_po.update import StoredRollout

BehaviourRecording = Literal["actual", "policy"]


def validate_policy_settings(use_sde: bool, sampler_precision: str, policy_kwargs: dict[str, Any] | None) -> None:
    """Raise ``ValueError`` for a policy setting the behaviour recording cannot serve exactly:
    the precision dial with gSDE (the sampler computes the mean only, not gSDE's state-dependent
    std), or a tanh-squashed Gaussian (``squash_output``: the stored Gaussian would not be the
    distribution of the action taken)."""
    if use_sde and sampler_precision != "fp32":
        raise ValueError(
            f"sampler_precision={sampler_precision!r} cannot be combined with use_sde=True: the low-precision "
            "sampler computes the action mean only, not gSDE's state-dependent std; use the fp32 sampler or use_sde=False"
        )
    if (policy_kwargs or {}).get("squash_output", False):
        raise ValueError(
            "squash_output=True is not supported: the behaviour distribution is stored as a diagonal Gaussian, "
            "and a tanh-squashed action's log-probability needs the squashing correction; actions are clipped to the "
            "Box bounds instead, as SB3's PPO does by default"
        )


def distribution_params(distribution: Distribution) -> th.Tensor:
    """The parameters that define an SB3 action distribution, flat per state (the layouts of
    :mod:`adaptive_po.distributions`).

    Categorical, MultiCategorical (components concatenated), Bernoulli: ``(B, P)`` logits.
    Diagonal Gaussian and gSDE: ``(B, 2 d)`` = ``[mean, log_std]`` (gSDE's std is the per-state
    ``sqrt(latent_sde^2 @ std_W^2 + epsilon)`` SB3 evaluates log-probs with).
    """
    if isinstance(distribution, CategoricalDistribution):
        return distribution.distribution.logits
    if isinstance(distribution, MultiCategoricalDistribution):
        return th.cat([component.logits for component in distribution.distribution], dim=-1)
    if isinstance(distribution, BernoulliDistribution):
        return distribution.distribution.logits
    if isinstance(distribution, (DiagGaussianDistribution, StateDependentNoiseDistribution)):
        normal = distribution.distribution
        return th.cat([normal.mean, th.log(normal.stddev)], dim=-1)
    raise ValueError(f"unsupported action distribution {type(distribution).__name__}")


def distribution_kind(distribution: Distribution) -> D.Kind:
    if isinstance(distribution, CategoricalDistribution):
        return "categorical"
    if isinstance(distribution, MultiCategoricalDistribution):
        return D.MultiCategorical(tuple(int(n) for n in distribution.action_dims))
    if isinstance(distribution, BernoulliDistribution):
        return "bernoulli"
    if isinstance(distribution, (DiagGaussianDistribution, StateDependentNoiseDistribution)):
        return "gaussian"
    raise ValueError(f"unsupported action distribution {type(distribution).__name__}")


def frozen_copy(policy: ActorCriticPolicy) -> ActorCriticPolicy:
    """A copy of ``policy`` (an SB3 policy: an actor-critic, or PQN's Q-network) for acting only (eval mode, no gradients). gSDE's distribution holds
    the exploration matrices drawn with ``rsample`` (tensors with a graph, which ``deepcopy``
    refuses): the copy gets them detached, and the per-forward state is rebuilt on its first use."""
    dist = getattr(policy, "action_dist", None)  # a Q-network policy (PQN) has none
    saved = {}
    if isinstance(dist, StateDependentNoiseDistribution):
        state = ("exploration_mat", "exploration_matrices", "weights_dist", "_latent_sde", "distribution")
        saved = {k: dist.__dict__.pop(k) for k in state if k in dist.__dict__}
    try:
        clone = copy.deepcopy(policy)
    finally:
        if saved:
            dist.__dict__.update(saved)
    for name in ("exploration_mat", "exploration_matrices"):
        if name in saved:
            setattr(clone.action_dist, name, saved[name].detach().clone())
    clone.set_training_mode(False)
    for p in clone.parameters():
        p.requires_grad_(False)
    return clone


def kl_to_behaviour(distribution: Distribution, behaviour_params: th.Tensor) -> th.Tensor:
    """Analytic ``KL(pi_theta(.|s) || pi_b(.|s))`` per state, ``(B,)``, with gradient through pi_theta."""
    return D.kl(distribution_kind(distribution), distribution_params(distribution), behaviour_params)


class SamplerActor(nn.Module):
    """An SB3 actor-critic's actor path (observation -> flat distribution parameters) computed in
    the sampler's dtype: weights must already be in :func:`adaptive_po.sampler.compute_dtype` (see
    :func:`adaptive_po.sampler.quantize`); the parameters come back as float32. Both engines use
    it: the collector on a quantized copy of the acting policy, the population engine through
    ``functional_call`` with quantized stacked parameters."""

    def __init__(self, policy: ActorCriticPolicy, kind: D.Kind, precision: str) -> None:
        super().__init__()
        self.policy = policy
        self.kind = kind
        self.dtype = S.compute_dtype(precision)

    def forward(self, obs: th.Tensor | dict[str, th.Tensor]) -> th.Tensor:
        policy = self.policy
        pre = preprocess_obs(obs, policy.observation_space, normalize_images=policy.normalize_images)
        pre = {k: v.to(self.dtype) for k, v in pre.items()} if isinstance(pre, dict) else pre.to(self.dtype)
        extractor = policy.features_extractor if policy.share_features_extractor else policy.pi_features_extractor
        latent = policy.mlp_extractor.forward_actor(extractor(pre))  # type: ignore[arg-type]
        out = policy.action_net(latent).float()
        if self.kind == "gaussian":
            out = th.cat([out, policy.log_std.float().expand_as(out)], dim=-1)
        return out


def env_actions(actions: np.ndarray, action_space: spaces.Space) -> np.ndarray:
    """Flat sampled actions ``(n, ...)`` as the environments take them: the space's shape, and
    Box actions clipped to the bounds (SB3's PPO convention). Both engines' rollout loops use it."""
    if action_space.shape:
        actions = actions.reshape((-1, *action_space.shape))
    if isinstance(action_space, spaces.Box):
        return np.clip(actions, action_space.low, action_space.high)
    return actions


def truncations(dones: np.ndarray, infos: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    """``(env index, true last observation)`` of the episodes a time limit cut at this step (their
    returns are bootstrapped with the value of that observation). Both engines' rollout loops use it."""
    out = []
    for idx in np.flatnonzero(dones):
        info = infos[idx]
        if info.get("terminal_observation") is not None and info.get("TimeLimit.truncated", False):
            out.append((int(idx), info["terminal_observation"]))
    return out


@dataclass
class ActorStep:
    """What the actor did at one vectorized step."""

    actions: th.Tensor  #: (n_envs,) or (n_envs, d): the sampled actions (unclipped, flat)
    behaviour_log_prob: th.Tensor  #: (n_envs,) log-prob under the recorded behaviour distribution
    behaviour_params: th.Tensor  #: (n_envs, P) parameters of the recorded behaviour distribution


class Collector:
    """Produces data with controllable staleness and mismatch for any on-policy learner.

    :param dials: the data dials (:class:`~adaptive_po.dials.DataDials`): policy lag k >= 0 (see
        the module docstring), replay m >= 0 older batches trained on at each update, action noise
        sigma >= 0 on the logits / means, the behaviour recording (``"actual"`` or ``"policy"``),
        the sampler's temperature T > 0 and precision. The six may also be given as keywords.
    :param seed: seeds the noise generator (kept apart from the action-sampling RNG, so that
        sigma = 0 consumes exactly the random numbers an ordinary rollout does).
    """

    def __init__(self, dials: DataDials | None = None, seed: int | None = None, **dial_keywords: Any) -> None:
        self.dials = dials_from_arguments(dials, **dial_keywords)
        self._sampler: SamplerActor | None = None
        self.seed = seed
        #: the lag's snapshots (state dicts) and the replayed rollouts, as the population learner keeps its members'
        self._stale: StaleQueue[dict[str, th.Tensor], StoredRollout] = StaleQueue([self.dials.policy_lag], self.dials.replay)
        self._actor: ActorCriticPolicy | None = None
        self._learner: ActorCriticPolicy | None = None
        self._noise_generator: th.Generator | None = None

    @property
    def updates_seen(self) -> int:
        """Updates seen since :meth:`attach`."""
        return self._stale.updates

    # -- wiring ----------------------------------------------------------------------------------
    def attach(self, policy: ActorCriticPolicy) -> None:
        """Bind to the learner's policy; the actor starts with its current (initial) parameters."""
        self._learner = policy
        if self.dials.policy_lag > 0:
            self._actor = frozen_copy(policy)
            self._stale.start(self._snapshot(policy))
        else:  # the learner acts: no snapshot kept
            self._actor = None
            self._stale.start(None)
        if self.dials.action_noise > 0:
            self._noise_generator = th.Generator(device=policy.device)
            self._noise_generator.manual_seed(0 if self.seed is None else int(self.seed) + 7919)
        if self.dials.sampler_precision != "fp32":
            module = frozen_copy(policy)
            self._sampler = SamplerActor(module, D.kind_of_space(policy.action_space), self.dials.sampler_precision)
            self._refresh_sampler()

    def _refresh_sampler(self) -> None:
        """Load the acting parameters into the sampler's copy, cast to its precision."""
        if self._sampler is None:
            return
        source = dict(self.acting_policy.named_parameters())
        for name, p in self._sampler.policy.named_parameters():
            p.data = S.quantize(source[name].detach(), self.dials.sampler_precision)

    @staticmethod
    def _snapshot(policy: ActorCriticPolicy) -> dict[str, th.Tensor]:
        return {k: v.detach().clone() for k, v in policy.state_dict().items()}

    @property
    def acting_policy(self) -> ActorCriticPolicy:
        """The parameters that act now: the learner itself at lag 0, else a k-old copy."""
        if self._learner is None:
            raise RuntimeError("Collector.attach(policy) must be called first")
        return self._actor if self._actor is not None else self._learner

    @property
    def acting_snapshot_update(self) -> int:
        """Index of the update whose parameters act now (0 = initial parameters)."""
        return self._stale.acting_updates[0]

    def reset_noise(self, n_envs: int) -> None:
        """gSDE: a new exploration matrix per environment for the acting parameters (the learner
        at lag 0, the lagged copy otherwise), drawn from their own exploration std."""
        self.acting_policy.reset_noise(n_envs)

    # -- acting ----------------------------------------------------------------------------------
    @th.no_grad()
    def act(self, obs: th.Tensor) -> ActorStep:
        """Sample actions for a batch of observations and record the behaviour distribution."""
        policy = self.acting_policy
        distribution = policy.get_distribution(obs)
        if self.dials.action_noise == 0.0 and self.dials.sampler_temperature == 1.0 and self._sampler is None:
            actions = distribution.get_actions(deterministic=False)
            return ActorStep(actions, distribution.log_prob(actions), distribution_params(distribution))

        clean_params = distribution_params(distribution)
        kind = distribution_kind(distribution)
        noise = None
        if self.dials.action_noise > 0.0:
            noise_shape = D.sampling_noise_shape(kind, clean_params.shape)
            noise = th.randn(noise_shape, generator=self._noise_generator, device=clean_params.device)
        perturbed = S.behaviour_params(
            kind, clean_params if self._sampler is None else self._sampler(obs),
            sigma=self.dials.action_noise if noise is not None else None, standard_normal=noise,
            temperature=self.dials.sampler_temperature if self.dials.sampler_temperature != 1.0 else None,
        )
        if kind == "categorical":
            sampler = Categorical(logits=perturbed)
            actions = sampler.sample()
            if self.dials.behaviour_log_prob == "actual":
                return ActorStep(actions, sampler.log_prob(actions), sampler.logits)
            return ActorStep(actions, distribution.log_prob(actions), clean_params)
        if kind != "gaussian":  # multicategorical, bernoulli: sampled as SB3 samples them
            if kind == "bernoulli":
                actions = Bernoulli(logits=perturbed).sample()
            else:
                components = th.split(perturbed, kind.sizes, dim=-1)  # type: ignore[union-attr]
                actions = th.stack([Categorical(logits=logits).sample() for logits in components], dim=1)
            if self.dials.behaviour_log_prob == "actual":
                return ActorStep(actions, D.log_prob(kind, perturbed, actions), perturbed)
            return ActorStep(actions, distribution.log_prob(actions), clean_params)

        mean, log_std = perturbed.chunk(2, dim=-1)
        sampler = Normal(mean, log_std.exp())
        if isinstance(distribution, StateDependentNoiseDistribution):
            # gSDE's own exploration noise latent_sde @ W, scaled by the temperature, around the moved mean
            actions = mean + self.dials.sampler_temperature * distribution.get_noise(distribution._latent_sde)
        else:
            actions = sampler.sample()
        if self.dials.behaviour_log_prob == "actual":
            return ActorStep(actions, sampler.log_prob(actions).sum(-1), perturbed)
        return ActorStep(actions, distribution.log_prob(actions), clean_params)

    # -- after each update ------------------------------------------------------------------------
    def training_batches(self, current: StoredRollout) -> list[StoredRollout]:
        """The batches the next update trains on: the current one, then up to m older ones."""
        return self._stale.batches(current)

    def after_update(self, policy: ActorCriticPolicy, trained_on: StoredRollout) -> None:
        """Advance the snapshot queue and keep ``trained_on`` for replay."""
        self._stale.after_update(trained_on, self._snapshot(policy) if self._actor is not None else None)
        if self._actor is not None:
            self._actor.load_state_dict(self._stale.snapshots[self._stale.acting_slots()[0]])
        self._refresh_sampler()
