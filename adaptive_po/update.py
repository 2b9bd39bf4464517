"""The training step, written once: what one update computes, from a stored rollout to the
optimizer step, as pure functions that both faces of the algorithm call for all of its maths:

* :class:`~adaptive_po.algorithms.BatchPolicyOptimization` (the SB3 class): one run, SB3's
  optimizer, logger and callbacks;
* :class:`~adaptive_po.population.PopulationLearner` (the population engine): :func:`minibatch_loss`
  per member under ``vmap(grad(...))`` with its stacked Adam.

Read it top to bottom: what an update trains on (:class:`StoredRollout`); the data, under the
learner's *current* critic (:func:`advantages_and_returns`: time limits bootstrapped, GAE or
V-trace; :func:`replay_information`); the minibatch loss (:func:`minibatch_loss`: advantage
normalization, the KL to the behaviour policy, the objective of :mod:`adaptive_po.objectives`,
the value loss, the entropy bonus); the update's loop (:func:`run_update`); the statistics
(:func:`reduce_statistics`). Which knobs each face runs is decided here too
(:func:`check_update_settings`, :data:`POPULATION_REFUSES`). Every function is shape-polymorphic
over leading dimensions where it says so, has no data-dependent Python branch and calls no
``.item()``: the population engine runs them per member under :func:`torch.func.vmap`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, Union

import numpy as np
import torch
from torch import Tensor

from adaptive_po import distributions as D
from adaptive_po.objectives import (
    ObjectiveSpec,
    PolicyBatch,
    batch_statistics,
    effective_sample_size_from_log_ratios,
)

#: knobs of the SB3 class that the population engine does not run, and why: the one place that
#: decides it (:func:`check_population_settings`); every other knob works in both faces
POPULATION_REFUSES: dict[str, str] = {
    "use_sde": "gSDE's exploration matrices are per environment and per rollout, not stacked per member",
    "target_kl": "early stopping ends the epochs of each member at a different minibatch; the stacked step "
    "takes one step for every member",
    "batch_scaling": "the stacked members' rollouts have one shape (n_steps x n_envs), and the after-ABS dial changes a run's "
    "rollout length from update to update",
    "optimizer_class": "the population engine runs its own stacked Adam (SB3's defaults, eps 1e-5)",
    "optimizer_kwargs": "the population engine runs its own stacked Adam (SB3's defaults, eps 1e-5)",
}


# -- settings ----------------------------------------------------------------------------------------
def check_update_settings(
    objective: ObjectiveSpec,
    *,
    batch_size: int,
    normalize_advantage: bool,
    advantage_estimator: str | None,
    clip_range_vf: Any = None,
    target_kl: Any = None,
) -> str:
    """Check the training step's own settings (both faces call this; the shared hyper-parameters
    are checked by :func:`adaptive_po.hyperparams.check_hyperparams`). Returns the advantage
    estimator in force (``None``: the objective's registry entry decides). ``ValueError`` names
    the first bad setting, as a :class:`~adaptive_po.hyperparams.HyperparameterError` (also an
    ``AssertionError``, what SB3's own checks raise)."""
    from adaptive_po.hyperparams import HyperparameterError, schedule

    if normalize_advantage and batch_size < 2:
        raise HyperparameterError(f"batch_size must be > 1 when normalize_advantage=True, got {batch_size!r}")
    estimator = advantage_estimator or objective.advantage_estimator
    if estimator not in ADVANTAGE_ESTIMATORS:
        raise HyperparameterError(f"advantage_estimator must be one of {ADVANTAGE_ESTIMATORS}, got {advantage_estimator!r}")
    if clip_range_vf is not None:
        schedule("clip_range_vf", clip_range_vf)
    if target_kl is not None and (
        isinstance(target_kl, bool) or not isinstance(target_kl, (int, float)) or not 0 < target_kl < math.inf
    ):
        raise HyperparameterError(f"target_kl must be a number > 0 or None, got {target_kl!r}")
    return estimator


def check_population_settings(**knobs: Any) -> None:
    """``ValueError`` for a knob of :data:`POPULATION_REFUSES` set to anything but its off value
    (``None``, ``False``, or absent); names the knob, the reason, and the engine that runs it."""
    for name, value in knobs.items():
        if name in POPULATION_REFUSES and value not in (None, False):
            raise ValueError(
                f"the population engine does not run {name}={value!r}: {POPULATION_REFUSES[name]}; "
                "use the process engine (the SB3 class)"
            )


# -- what an update trains on ---------------------------------------------------------------------
#: an observation batch: one array, or one array per key of a Dict observation space
Observations = Union[np.ndarray, dict[str, np.ndarray]]


def map_observations(fn: Callable[..., Any], *observations: Any) -> Any:
    """``fn`` on observation arrays, or on each key's parts of Dict observations, keeping the structure."""
    if isinstance(observations[0], dict):
        return {key: fn(*(o[key] for o in observations)) for key in observations[0]}
    return fn(*observations)


@dataclass
class StoredRollout:
    """One collected batch, frozen (:meth:`adaptive_po.buffers.BehaviourRolloutBuffer.freeze`):
    ``(n_steps, n_envs, ...)`` arrays (observations: a dict of them for Dict spaces), the behaviour
    distribution the actor sampled from, and each time-limit cut ``(step, env)`` with its true last observation."""

    observations: Observations
    actions: np.ndarray
    rewards: np.ndarray
    episode_starts: np.ndarray
    behaviour_log_prob: np.ndarray
    behaviour_params: np.ndarray
    last_observation: Observations
    last_dones: np.ndarray
    timeout_index: np.ndarray
    timeout_observations: Observations


# -- data preparation ----------------------------------------------------------------------------
#: how the training loops turn rewards and values into advantages and the critic's targets
ADVANTAGE_ESTIMATORS: tuple[str, ...] = ("gae", "vtrace")


def advantages_and_returns(
    estimator: str, rewards: np.ndarray, values: np.ndarray, episode_starts: np.ndarray, last_values: np.ndarray,
    last_dones: np.ndarray, *, gamma: float, gae_lambda: float, truncation_values: np.ndarray | None = None,
    log_rhos: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, returns)``, ``(n_steps, N)`` float32, under the critic that gave ``values``;
    ``truncation_values``: V(true last observation) where a time limit cut the episode (bootstrapped
    as ``r + gamma V``), 0 elsewhere; ``log_rhos``: log pi_current / pi_b at the actions (V-trace)."""
    if truncation_values is not None:
        rewards = rewards + gamma * truncation_values
    if estimator == "vtrace":
        if log_rhos is None:
            raise ValueError("the V-trace estimator needs log_rhos")
        return compute_vtrace(rewards, values, episode_starts, last_values, last_dones, log_rhos, gamma)
    if estimator != "gae":
        raise ValueError(f"advantage_estimator must be one of {ADVANTAGE_ESTIMATORS}, got {estimator!r}")
    return compute_gae(rewards, values, episode_starts, last_values, last_dones, gamma, gae_lambda)


def compute_gae(
    rewards: np.ndarray, values: np.ndarray, episode_starts: np.ndarray, last_values: np.ndarray, last_dones: np.ndarray,
    gamma: float, gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE over ``(n_steps, n_envs)`` arrays in SB3's convention (``episode_starts[t]``: the step before
    ended an episode; ``last_dones``: the last did): float32 ``(advantages, advantages + values)``."""
    n_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    last_gae = np.zeros(rewards.shape[1:], dtype=np.float32)
    for step in reversed(range(n_steps)):
        if step == n_steps - 1:
            next_non_terminal = 1.0 - last_dones.astype(np.float32)
            next_values = last_values
        else:
            next_non_terminal = 1.0 - episode_starts[step + 1]
            next_values = values[step + 1]
        delta = rewards[step] + gamma * next_values * next_non_terminal - values[step]
        last_gae = delta + gamma * gae_lambda * next_non_terminal * last_gae
        advantages[step] = last_gae
    return advantages, (advantages + values).astype(np.float32)


def compute_vtrace(
    rewards: np.ndarray,
    values: np.ndarray,
    episode_starts: np.ndarray,
    last_values: np.ndarray,
    last_dones: np.ndarray,
    log_rhos: np.ndarray,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """V-trace targets and policy-gradient advantages over ``(n_steps, n_envs)`` arrays.

    IMPALA (Espeholt et al. 2018, arXiv 1802.01561, section 4.1; google-deepmind/scalable_agent
    ``vtrace.py``), in :func:`compute_gae`'s convention (``episode_starts``, ``last_dones``,
    truncation bootstrapping folded into ``rewards``). With ``rho_t = exp(log_rhos[t])`` =
    pi_current / pi_b at the stored action, ``n_t`` the non-terminal flag of the next state:

    * ``delta_t = min(rho_bar, rho_t) * (r_t + gamma * n_t * V(s_{t+1}) - V(s_t))``
    * ``v_t - V(s_t) = delta_t + gamma * n_t * min(c_bar, rho_t) * (v_{t+1} - V(s_{t+1}))``, with
      ``v_n = V(s_n)`` = ``last_values`` after the last step;
    * advantage ``r_t + gamma * n_t * v_{t+1} - V(s_t)``.

    The advantage is *not* multiplied by ``min(rho_bar, rho_t)`` as in ``scalable_agent``: the
    policy loss applies that truncated weight itself (:func:`adaptive_po.objectives.truncated_is_loss`).
    With ``rho = 1`` everywhere (and ``rho_bar, c_bar >= 1``) this is :func:`compute_gae` at
    ``gae_lambda = 1``.

    :return: ``(advantages, returns)``, both ``(n_steps, n_envs)`` float32; ``returns`` are the
        V-trace targets ``v_t`` the critic regresses on.
    """
    if not rho_bar > 0 or not c_bar > 0:
        raise ValueError(f"rho_bar and c_bar must be > 0, got {rho_bar!r}, {c_bar!r}")
    rewards64 = np.asarray(rewards, dtype=np.float64)
    values64 = np.asarray(values, dtype=np.float64)
    starts64 = np.asarray(episode_starts, dtype=np.float64)
    log_rhos64 = np.asarray(log_rhos, dtype=np.float64)
    # clip in log space first, so that a huge log-ratio cannot overflow exp
    clipped_rhos = np.exp(np.minimum(log_rhos64, math.log(rho_bar)))
    cs = np.exp(np.minimum(log_rhos64, math.log(c_bar)))
    n_steps = rewards64.shape[0]
    vs = np.zeros_like(rewards64)
    advantages = np.zeros_like(rewards64)
    next_vs_minus_v = np.zeros(rewards64.shape[1:], dtype=np.float64)
    next_vs = np.asarray(last_values, dtype=np.float64).copy()
    for step in reversed(range(n_steps)):
        if step == n_steps - 1:
            next_non_terminal = 1.0 - np.asarray(last_dones, dtype=np.float64)
            next_values = np.asarray(last_values, dtype=np.float64)
        else:
            next_non_terminal = 1.0 - starts64[step + 1]
            next_values = values64[step + 1]
        delta = clipped_rhos[step] * (rewards64[step] + gamma * next_non_terminal * next_values - values64[step])
        vs_minus_v = delta + gamma * next_non_terminal * cs[step] * next_vs_minus_v
        vs[step] = values64[step] + vs_minus_v
        advantages[step] = rewards64[step] + gamma * next_non_terminal * next_vs - values64[step]
        next_vs_minus_v = vs_minus_v
        next_vs = vs[step]
    return advantages.astype(np.float32), vs.astype(np.float32)


def replay_information(proximal_log_prob: Tensor, behaviour_log_prob: Tensor, n_fresh: int) -> tuple[Tensor, Tensor]:
    """``(fresh, replay_ess)`` over the last dimension (the fresh rollout first): a float mask of the
    fresh transitions, and the normalized ESS of pi_prox/pi_b over the replayed ones (1 if none)."""
    n = proximal_log_prob.shape[-1]
    fresh = (torch.arange(n, device=proximal_log_prob.device) < n_fresh).to(proximal_log_prob.dtype)
    fresh = fresh.expand_as(proximal_log_prob)
    return fresh, whole_batch_ess(proximal_log_prob[..., n_fresh:], behaviour_log_prob[..., n_fresh:])


def whole_batch_ess(log_prob: Tensor, behaviour_log_prob: Tensor) -> Tensor:
    """The normalized ESS of pi/pi_b over the last dimension, no gradient, float64: ``()`` for one
    run's ``(N,)``, ``(K,)`` for a population's ``(K, N)``."""
    log_ratio = (log_prob - behaviour_log_prob).detach()
    if log_ratio.dim() == 1:
        return effective_sample_size_from_log_ratios(log_ratio)
    return torch.stack([effective_sample_size_from_log_ratios(row) for row in log_ratio])


# -- the minibatch loss --------------------------------------------------------------------------
def normalize_advantages(advantages: Tensor) -> Tensor:
    """SB3's ``(A - mean) / (std + 1e-8)``; a minibatch of one (static size: vmap-safe) as it is."""
    if advantages.shape[-1] < 2:
        return advantages
    return (advantages - advantages.mean()) / advantage_scale(advantages)


def advantage_scale(advantages: Tensor) -> Tensor:
    """What :func:`normalize_advantages` divides by: ``std + 1e-8``, or 1 for a minibatch of one."""
    if advantages.shape[-1] < 2:
        return torch.ones_like(advantages[..., :1].sum(-1))
    return advantages.std() + 1e-8


def minibatch_loss(
    objective: ObjectiveSpec, kind: D.Kind, dist_params: Tensor, values: Tensor, minibatch: Mapping[str, Tensor],
    arguments: Mapping[str, Any], *, normalize_advantage: bool, ent_coef: float, vf_coef: float,
    clip_range_vf: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """``(loss, statistics)`` of one minibatch from the learner's ``(B, P)`` distribution parameters and
    ``(B,)`` values (with gradient): ``minibatch`` holds :data:`MINIBATCH_KEYS`, ``replay_ess`` and
    ``batch_ess`` where the objective needs it; ``arguments``: the objective's, its state included;
    ``clip_range_vf``: SB3's value clipping around the update's start values (``None``: off)."""
    log_prob = D.log_prob(kind, dist_params, minibatch["actions"])
    entropy = D.entropy(kind, dist_params)
    advantages = minibatch["advantages"]
    query_dual = minibatch["query_dual"] if objective.query_dual is not None else None
    if normalize_advantage:
        # lambda is in the advantages' units (scale-equivariant, shift-invariant): rescaled with them
        query_dual = None if query_dual is None else query_dual / advantage_scale(advantages)
        advantages = normalize_advantages(advantages)
    kl_behaviour = D.kl(kind, dist_params, minibatch["behaviour_params"])
    if not objective.needs_kl:  # the statistic is always reported; the gradient only where the loss uses it
        kl_behaviour = kl_behaviour.detach()
    batch = PolicyBatch(
        log_prob=log_prob,
        behaviour_log_prob=minibatch["behaviour_log_prob"],
        advantages=advantages,
        kl_behaviour=kl_behaviour,
        proximal_log_prob=minibatch["proximal_log_prob"] if objective.needs_proximal else None,
        kl_reverse=D.kl(kind, minibatch["behaviour_params"], dist_params) if objective.needs_reverse_kl else None,
        fresh=minibatch["fresh"] if objective.needs_replay_info else None,
        replay_ess=minibatch["replay_ess"] if objective.needs_replay_info else None,
        batch_ess=minibatch["batch_ess"] if objective.needs_batch_ess else None,
        query_dual=query_dual,
    )
    output = objective.loss(batch, **arguments)
    if clip_range_vf is not None:
        start = minibatch["values"]
        values = start + torch.clamp(values - start, -clip_range_vf, clip_range_vf)
    value_loss = torch.mean((minibatch["returns"] - values) ** 2)
    entropy_loss = -torch.mean(entropy)
    loss = output.loss + ent_coef * entropy_loss + vf_coef * value_loss
    stats = {"value_loss": value_loss, "entropy": -entropy_loss, "loss": loss}
    stats = {**batch_statistics(batch), **output.stats, **{name: value.detach().to(torch.float64) for name, value in stats.items()}}
    stats["approx_kl"] = approx_kl(log_prob.detach() - minibatch["proximal_log_prob"])
    return loss, stats


# -- one update, start to end ---------------------------------------------------------------------
#: an update's per-transition columns (:func:`training_data`), and those a minibatch takes besides its observations
TRAINING_COLUMNS = ("observations", "actions", "behaviour_log_prob", "behaviour_params", "advantages", "returns", "values")
MINIBATCH_KEYS: tuple[str, ...] = (*TRAINING_COLUMNS[1:], "proximal_log_prob", "fresh")


def minibatch_columns(objective: ObjectiveSpec) -> tuple[str, ...]:
    """The update's per-transition columns a minibatch gathers: the observations, :data:`MINIBATCH_KEYS`,
    and ``query_dual`` where the objective computes one per update (:attr:`ObjectiveSpec.query_dual`)."""
    return ("observations", *MINIBATCH_KEYS, *(("query_dual",) if objective.query_dual is not None else ()))

#: an epoch listener: ``(epoch, that epoch's minibatch statistics, the update's data)``
EpochListener = Callable[[int, "list[dict[str, Tensor]]", "dict[str, Any]"], None]


class UpdateFace(Protocol):
    """What :func:`run_update` asks of one run (``algorithms._SB3Face``) or a stacked population
    (``population._StackedFace``, tensors with a leading member dimension): a stored batch's
    ``(values, advantages, returns)`` under the current critic; one ``(n_steps, n_envs, ...)`` column as
    ``(..., N, ...)`` transitions, every batch's as one; ``(..., N, P)`` distribution parameters; an
    epoch's minibatches; a step (:func:`minibatch_loss`, gradient, optimizer), True to stop (``target_kl``)."""

    def advantages(self, batch: Any) -> tuple[Any, Any, Any]: ...
    def flatten(self, column: str, values: Any) -> Any: ...
    def concatenate(self, parts: Sequence[Any]) -> Any: ...
    def dist_params(self, data: Mapping[str, Any]) -> Tensor: ...
    def epoch(self, data: Mapping[str, Any], n_samples: int) -> Iterable[dict[str, Any]]: ...
    def step(self, minibatch: Mapping[str, Any], arguments: Mapping[str, Any], clip_range_vf: float | None) -> tuple[dict[str, Tensor], bool]: ...
    def update_objective_state(self, reverse_kl: Tensor, ratio_variance: Tensor, schedule_values: Mapping[str, Any]) -> None: ...


def training_data(face: UpdateFace, batches: Sequence[Any]) -> dict[str, Any]:
    """The update's :data:`TRAINING_COLUMNS`, env-major as SB3's buffer yields them, the fresh batch
    first: each batch's advantages and targets under the learner's current critic."""
    columns: dict[str, list[Any]] = {name: [] for name in TRAINING_COLUMNS}
    for batch in batches:
        values, advantages, returns = face.advantages(batch)
        computed = {"advantages": advantages, "returns": returns, "values": values}
        for name in TRAINING_COLUMNS:
            columns[name].append(face.flatten(name, computed[name] if name in computed else getattr(batch, name)))
    return {name: face.concatenate(parts) for name, parts in columns.items()}


def run_update(
    face: UpdateFace, objective: ObjectiveSpec, kind: D.Kind, batches: Sequence[Any], *, n_fresh: int, n_epochs: int,
    schedule_values: Mapping[str, Any], objective_state: Mapping[str, Tensor], learning_rate: float,
    clip_range_vf: float | None = None, epoch_listeners: Sequence[EpochListener] = (),
) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """One update on ``batches`` (the fresh rollout of ``n_fresh`` transitions first): the data and
    pi_prox (the log-probs before the update); ``n_epochs`` passes of minibatch steps (the listeners
    after each; the face may stop early); the objective's state; the statistics. Returns ``(statistics, data)``."""
    data = training_data(face, batches)
    data["proximal_log_prob"] = D.log_prob(kind, face.dist_params(data), data["actions"]).detach()
    data["fresh"], replay_ess = replay_information(data["proximal_log_prob"], data["behaviour_log_prob"], n_fresh)
    arguments = {**schedule_values, **objective_state}
    if objective.query_dual is not None:  # once per update: a query is one environment lane of one rollout
        query_length = batches[0].rewards.shape[-2]
        data["query_dual"] = objective.query_dual(data["advantages"], query_length, **arguments).to(data["advantages"].dtype)
    rows: list[dict[str, Tensor]] = []
    for epoch in range(n_epochs):
        epoch_start, stop = len(rows), False
        for minibatch in face.epoch(data, data["advantages"].shape[-1]):
            minibatch["replay_ess"] = replay_ess
            if objective.needs_batch_ess:  # e of the whole update at the current parameters, before each step
                minibatch["batch_ess"] = whole_batch_ess(D.log_prob(kind, face.dist_params(data), data["actions"]), data["behaviour_log_prob"])
            stats, stop = face.step(minibatch, arguments, clip_range_vf)
            rows.append(stats)
            if stop:
                break
        for listener in epoch_listeners:
            listener(epoch, rows[epoch_start:], data)
        if stop:
            break
    dist_params = face.dist_params(data)
    log_prob = D.log_prob(kind, dist_params, data["actions"])
    if objective.update_state is not None:
        update_objective_state(face, kind, data, dist_params, log_prob, schedule_values)
    statistics = reduce_statistics(
        rows, approx_kl=approx_kl(log_prob - data["proximal_log_prob"]), learning_rate=learning_rate,
        values=data["values"][..., :n_fresh], returns=data["returns"][..., :n_fresh],
    )
    return statistics, data


@torch.no_grad()
def update_objective_state(
    face: UpdateFace, kind: D.Kind, data: Mapping[str, Any], dist_params: Tensor, log_prob: Tensor, schedule_values: Mapping[str, Any],
) -> None:
    """KL-PPO's coefficient, R2VPO's multiplier after an update's epochs, from the mean KL(pi_b || pi_theta)
    and the variance of pi_theta/pi_b over its data at the new parameters (the face stores them)."""
    reverse_kl = mean_reverse_kl(kind, data["behaviour_params"], dist_params)
    face.update_objective_state(reverse_kl, ratio_variance(log_prob, data["behaviour_log_prob"]), schedule_values)


# -- statistics ----------------------------------------------------------------------------------
def approx_kl(log_ratio: Tensor) -> Tensor:
    """SB3 PPO's KL estimate ``mean((r - 1) - log r)`` over the last dimension, float64."""
    log_ratio = log_ratio.to(torch.float64)
    return ((torch.exp(log_ratio) - 1.0) - log_ratio).mean(-1)


def mean_reverse_kl(kind: D.Kind, behaviour_params: Tensor, dist_params: Tensor) -> Tensor:
    """Mean analytic KL(pi_b || pi_theta) over the last data dimension, float32 accumulated in
    float64: what an objective's state update (KL-PPO's coefficient) sees after an update."""
    return D.kl(kind, behaviour_params, dist_params).to(torch.float64).mean(-1).to(torch.float32)


def ratio_variance(log_prob: Tensor, behaviour_log_prob: Tensor) -> Tensor:
    """Variance (second central moment) of pi_theta/pi_b over the last data dimension, computed in
    float64, returned in float32: what R2VPO's dual ascent sees after an update."""
    ratio = torch.exp((log_prob - behaviour_log_prob).to(torch.float64))
    return ratio.var(dim=-1, unbiased=False).to(torch.float32)


def explained_variance(values: Tensor, returns: Tensor) -> Tensor:
    """``1 - Var[returns - values] / Var[returns]`` over the last dimension, float64; NaN where the
    returns do not vary (SB3's)."""
    values, returns = values.to(torch.float64), returns.to(torch.float64)
    var_y = returns.var(dim=-1, unbiased=False)
    ratio = (returns - values).var(dim=-1, unbiased=False) / var_y
    return torch.where(var_y == 0, torch.full_like(var_y, float("nan")), 1.0 - ratio)


def reduce_statistics(
    rows: list[Mapping[str, Tensor]], *, approx_kl: Tensor, values: Tensor, returns: Tensor, learning_rate: float,
) -> dict[str, Tensor]:
    """The update's statistics, named as the run-folder contract's progress columns (plus ``loss``),
    float64 of the rows' shape (``()``, or ``(K,)`` for a population): the minibatches' mean of each
    of :func:`minibatch_loss`'s, but their max ``ratio_max``, the last ``loss``, the least ``ess`` as
    ``ess_min``; ``approx_kl`` (given); ``explained_variance`` of the fresh ``values`` and ``returns``."""
    column = {name: torch.stack([row[name] for row in rows], dim=-1) for name in rows[0]}
    stats = {name: stacked.mean(-1) for name, stacked in column.items()}
    stats["ratio_max"] = column["ratio_max"].amax(-1)
    stats["loss"] = column["loss"][..., -1]
    stats["approx_kl"] = approx_kl.to(torch.float64)
    stats["ess_min"] = column["ess"].amin(-1)
    stats["explained_variance"] = explained_variance(values, returns)
    stats["learning_rate"] = torch.full_like(stats["ess"], float(learning_rate))
    return stats
