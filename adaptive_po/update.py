"""The training step, written once: what one update computes, as pure functions.

Both faces of the algorithm call these functions and nothing else for the maths of an update:

* :class:`~adaptive_po.algorithms.BatchPolicyOptimization` (the SB3 class) drives them with
  SB3's optimizer, logger and callbacks, one run at a time;
* :class:`~adaptive_po.population.PopulationLearner` (the population engine) applies
  :func:`minibatch_loss` per member under ``vmap(grad(...))`` with its stacked Adam.

The step has three parts:

1. **data preparation** (:func:`advantages_and_returns`, :func:`replay_information`): advantages
   and the critic's targets under the learner's *current* critic (time-limit truncations
   bootstrapped with the value of the true last observation; GAE or V-trace), and which
   transitions are fresh;
2. **the minibatch loss** (:func:`minibatch_loss`), over the flat distribution parameters of
   :mod:`adaptive_po.distributions`: advantage normalization, the KL to the behaviour policy (with
   gradient only for objectives that declare it), the objective, the value loss with optional
   clipping, the entropy bonus, and the minibatch statistics;
3. **the statistics reduction** (:func:`reduce_statistics`) into the run-folder contract's names.

Which knobs each face runs is decided here too (:func:`check_update_settings`,
:data:`POPULATION_REFUSES`). Every function is shape-polymorphic over leading dimensions where it
says so, has no data-dependent Python branch and calls no ``.item()``: the population engine
runs them per member under :func:`torch.func.vmap`.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np
import torch
from torch import Tensor

from adaptive_po import distributions as D
from adaptive_po.buffers import ADVANTAGE_ESTIMATORS, compute_gae, compute_vtrace
from adaptive_po.objectives import (
    ObjectiveSpec,
    PolicyBatch,
    batch_statistics,
    effective_sample_size_from_log_ratios,
    objective_statistics,
)

#: the minibatch statistics :func:`minibatch_loss` returns (detached float64 0-dim tensors); each
#: gives the update's statistic of that name (:func:`reduce_statistics`)
MINIBATCH_STATISTICS: tuple[str, ...] = (
    "ess", "ratio_max", "ratio_mean", "ratio_above_2", "kl_behaviour", "kl_behaviour_sampled",
    "cap_fraction", "kl_weight", "policy_loss", "value_loss", "entropy", "loss", "approx_kl",
)

#: knobs of the SB3 class that the population engine does not run, and why: the one place that
#: decides it (:func:`check_population_settings`); every other knob works in both faces
POPULATION_REFUSES: dict[str, str] = {
    "use_sde": "gSDE's exploration matrices are per environment and per rollout, not stacked per member",
    "target_kl": "early stopping ends the epochs of each member at a different minibatch; the stacked step "
    "takes one step for every member",
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


# -- data preparation ----------------------------------------------------------------------------
def advantages_and_returns(
    estimator: str,
    rewards: np.ndarray,
    values: np.ndarray,
    episode_starts: np.ndarray,
    last_values: np.ndarray,
    last_dones: np.ndarray,
    *,
    gamma: float,
    gae_lambda: float,
    truncation_values: np.ndarray | None = None,
    log_rhos: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, returns)`` of ``(n_steps, N)`` float32 arrays (``N`` columns: one run's
    environments, or every member's), under the critic that produced ``values``.

    :param truncation_values: ``(n_steps, N)``, the value of the true last observation where the
        episode was cut by a time limit at that step, 0 elsewhere: bootstrapped as
        ``reward + gamma * V(s_last)`` (``None``: no truncation).
    :param log_rhos: ``(n_steps, N)`` log pi_current / pi_b at the stored actions (V-trace only).
    """
    if truncation_values is not None:
        rewards = rewards + gamma * truncation_values
    if estimator == "vtrace":
        if log_rhos is None:
            raise ValueError("the V-trace estimator needs log_rhos")
        return compute_vtrace(rewards, values, episode_starts, last_values, last_dones, log_rhos, gamma)
    if estimator != "gae":
        raise ValueError(f"advantage_estimator must be one of {ADVANTAGE_ESTIMATORS}, got {estimator!r}")
    return compute_gae(rewards, values, episode_starts, last_values, last_dones, gamma, gae_lambda)


def replay_information(proximal_log_prob: Tensor, behaviour_log_prob: Tensor, n_fresh: int) -> tuple[Tensor, Tensor]:
    """``(fresh, replay_ess)`` of one update's data (the fresh rollout first, replayed ones after):
    a ``(..., N)`` float mask of the fresh transitions and the normalized ESS of pi_prox/pi_b over
    the replayed ones (1 when none), over the last dimension: ``()`` or ``(K,)``."""
    n = proximal_log_prob.shape[-1]
    fresh = (torch.arange(n, device=proximal_log_prob.device) < n_fresh).to(proximal_log_prob.dtype)
    fresh = fresh.expand_as(proximal_log_prob)
    return fresh, whole_batch_ess(proximal_log_prob[..., n_fresh:], behaviour_log_prob[..., n_fresh:])


def whole_batch_ess(log_prob: Tensor, behaviour_log_prob: Tensor) -> Tensor:
    """The normalized ESS of pi_theta/pi_b over all of an update's transitions (the last
    dimension), no gradient, float64: ``()`` for one run's ``(N,)``, ``(K,)`` for a population's
    ``(K, N)``. Both drivers call it before every minibatch step of an objective that declares
    ``needs_batch_ess``, with ``log_prob`` under the current parameters; :func:`replay_information`
    calls it on the replayed part with pi_prox."""
    log_ratio = (log_prob - behaviour_log_prob).detach()
    if log_ratio.dim() == 1:
        return effective_sample_size_from_log_ratios(log_ratio)
    return torch.stack([effective_sample_size_from_log_ratios(row) for row in log_ratio])


# -- the minibatch loss --------------------------------------------------------------------------
def normalize_advantages(advantages: Tensor) -> Tensor:
    """Per-minibatch standardization, SB3's: ``(A - mean) / (std + 1e-8)``; a minibatch of one is
    left as it is (its std is undefined). The branch is on the static size, vmap-safe."""
    if advantages.shape[-1] < 2:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def minibatch_loss(
    objective: ObjectiveSpec,
    kind: D.Kind,
    dist_params: Tensor,
    values: Tensor,
    minibatch: Mapping[str, Tensor],
    arguments: Mapping[str, Any],
    *,
    normalize_advantage: bool,
    ent_coef: float,
    vf_coef: float,
    clip_range_vf: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """One minibatch's loss and statistics, from the learner's outputs on it.

    :param dist_params: ``(B, P)`` flat distribution parameters of pi_theta (with gradient).
    :param values: ``(B,)`` the critic's values (with gradient).
    :param minibatch: ``actions``, ``behaviour_log_prob``, ``behaviour_params``, ``advantages``,
        ``returns``, ``values`` (the critic's at the start of the update), ``proximal_log_prob``
        (the learner's at the start of the update), ``fresh`` and ``replay_ess``; ``batch_ess``
        (:func:`whole_batch_ess`) for objectives that declare ``needs_batch_ess``.
    :param arguments: the objective's keyword arguments for this update, its per-run state included.
    :param clip_range_vf: SB3 PPO's value clipping around the update's start values (``None``: off).
    :return: ``(loss, stats)``: the scalar to minimize and :data:`MINIBATCH_STATISTICS`.
    """
    log_prob = D.log_prob(kind, dist_params, minibatch["actions"])
    entropy = D.entropy(kind, dist_params)
    advantages = minibatch["advantages"]
    if normalize_advantage:
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
    )
    output = objective.loss(batch, **arguments)
    if clip_range_vf is not None:
        start = minibatch["values"]
        values = start + torch.clamp(values - start, -clip_range_vf, clip_range_vf)
    value_loss = torch.mean((minibatch["returns"] - values) ** 2)
    entropy_loss = -torch.mean(entropy)
    loss = output.loss + ent_coef * entropy_loss + vf_coef * value_loss
    stats = {**batch_statistics(batch), **objective_statistics(output)}
    stats["value_loss"] = value_loss.detach().to(torch.float64)
    stats["entropy"] = -entropy_loss.detach().to(torch.float64)
    stats["loss"] = loss.detach().to(torch.float64)
    stats["approx_kl"] = approx_kl(log_prob.detach() - minibatch["proximal_log_prob"])
    return loss, stats


# -- one update, start to end ---------------------------------------------------------------------
#: the per-transition columns of an update's data, assembled by :func:`training_data`
TRAINING_COLUMNS: tuple[str, ...] = (
    "observations", "actions", "behaviour_log_prob", "behaviour_params", "advantages", "returns", "values",
)
#: the columns a minibatch takes besides its observations
MINIBATCH_KEYS: tuple[str, ...] = (
    "actions", "behaviour_log_prob", "behaviour_params", "advantages", "returns", "values", "proximal_log_prob", "fresh",
)

#: an epoch listener: ``(epoch, that epoch's minibatch statistics, the update's data)``
EpochListener = Callable[[int, "list[dict[str, Tensor]]", "dict[str, Any]"], None]


class UpdateFace(Protocol):
    """What a face of the algorithm supplies to :func:`run_update`: only what differs between one
    run with SB3's optimizer (``algorithms._SB3Face``) and a stacked population
    (``population._StackedFace``), whose leading member dimension every tensor below may carry.
    """

    def advantages(self, batch: Any) -> tuple[Any, Any, Any]:
        """``(values, advantages, returns)`` of one stored batch under the current critic."""

    def flatten(self, column: str, values: Any) -> Any:
        """One batch's ``(n_steps, n_envs, ...)`` column as ``(..., N, ...)`` transitions."""

    def concatenate(self, parts: Sequence[Any]) -> Any:
        """The flattened batches of one column as one tensor on the learner's device."""

    def dist_params(self, data: Mapping[str, Any]) -> Tensor:
        """``(..., N, P)`` distribution parameters of every transition under the current parameters."""

    def epoch(self, data: Mapping[str, Any], n_samples: int) -> Iterable[dict[str, Any]]:
        """One epoch's minibatches in the face's order: each the observations and the
        :data:`MINIBATCH_KEYS` columns of its transitions."""

    def step(self, minibatch: Mapping[str, Any], arguments: Mapping[str, Any], clip_range_vf: float | None) -> tuple[dict[str, Tensor], bool]:
        """Forward, :func:`minibatch_loss`, gradient and optimizer step on one minibatch; returns
        its statistics and whether the update stops here (SB3's ``target_kl``, before the step)."""

    def update_objective_state(self, reverse_kl: Tensor, ratio_variance: Tensor, schedule_values: Mapping[str, Any]) -> None:
        """Advance the objective's per-run state (adaptive KL-PPO's coefficient, R2VPO's
        multiplier) after the epochs, from the update's mean KL(pi_b || pi_theta) and ratio variance."""


def training_data(face: UpdateFace, batches: Sequence[Any]) -> dict[str, Any]:
    """One update's transitions (the fresh batch first, then the replayed ones), each batch's
    advantages and targets computed under the learner's current critic, as flat columns
    (:data:`TRAINING_COLUMNS`), env-major as SB3's own buffer yields them."""
    columns: dict[str, list[Any]] = {name: [] for name in TRAINING_COLUMNS}
    for batch in batches:
        values, advantages, returns = face.advantages(batch)
        computed = {"advantages": advantages, "returns": returns, "values": values}
        for name in TRAINING_COLUMNS:
            columns[name].append(face.flatten(name, computed[name] if name in computed else getattr(batch, name)))
    return {name: face.concatenate(parts) for name, parts in columns.items()}


def run_update(
    face: UpdateFace,
    objective: ObjectiveSpec,
    kind: D.Kind,
    batches: Sequence[Any],
    *,
    n_fresh: int,
    n_epochs: int,
    schedule_values: Mapping[str, Any],
    objective_state: Mapping[str, Tensor],
    learning_rate: float,
    clip_range_vf: float | None = None,
    epoch_listeners: Sequence[EpochListener] = (),
) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """One update, start to end: what every face of the algorithm runs.

    1. the data: advantages and targets under the current critic, the learner's log-probs before
       the update (pi_prox), which transitions are fresh, the ESS of the replayed ones;
    2. ``n_epochs`` passes of minibatch steps in the face's order (the whole batch's ESS before
       each step, for objectives that declare ``needs_batch_ess``); the epoch listeners after
       each epoch; the face may stop early (SB3's ``target_kl``);
    3. the end: approx KL of the update, the objective's state, the statistics reduced into the
       run-folder contract's names.

    ``batches`` are the fresh rollout first, then replayed ones; ``n_fresh`` is the fresh rollout's
    number of transitions. Returns ``(statistics, data)``.
    """
    data = training_data(face, batches)
    data["proximal_log_prob"] = D.log_prob(kind, face.dist_params(data), data["actions"]).detach()
    n_samples = data["advantages"].shape[-1]
    data["fresh"], replay_ess = replay_information(data["proximal_log_prob"], data["behaviour_log_prob"], n_fresh)
    arguments = {**schedule_values, **objective_state}

    rows: list[dict[str, Tensor]] = []
    for epoch in range(n_epochs):
        epoch_start, stop = len(rows), False
        for minibatch in face.epoch(data, n_samples):
            minibatch["replay_ess"] = replay_ess
            if objective.needs_batch_ess:
                log_prob = D.log_prob(kind, face.dist_params(data), data["actions"])
                minibatch["batch_ess"] = whole_batch_ess(log_prob, data["behaviour_log_prob"])
            stats, stop = face.step(minibatch, arguments, clip_range_vf)
            rows.append(stats)
            if stop:
                break
        for listener in epoch_listeners:
            listener(epoch, rows[epoch_start:], data)
        if stop:
            break

    with torch.no_grad():
        dist_params = face.dist_params(data)
        log_prob = D.log_prob(kind, dist_params, data["actions"])
        final_kl = approx_kl(log_prob - data["proximal_log_prob"])
        if objective.update_state is not None:
            face.update_objective_state(
                mean_reverse_kl(kind, data["behaviour_params"], dist_params),
                ratio_variance(log_prob, data["behaviour_log_prob"]),
                schedule_values,
            )
    statistics = reduce_statistics(
        rows, approx_kl=final_kl, values=data["values"][..., :n_fresh], returns=data["returns"][..., :n_fresh],
        learning_rate=learning_rate,
    )
    return statistics, data


# -- statistics ----------------------------------------------------------------------------------
def approx_kl(log_ratio: Tensor) -> Tensor:
    """``mean((r - 1) - log r)`` over the last dimension, ``r = pi_new / pi_old``, in float64: the
    KL estimate SB3 PPO logs and stops early on."""
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
    """``1 - Var[returns - values] / Var[returns]`` over the last dimension in float64; NaN where
    the returns do not vary (SB3's convention)."""
    values, returns = values.to(torch.float64), returns.to(torch.float64)
    var_y = returns.var(dim=-1, unbiased=False)
    ratio = (returns - values).var(dim=-1, unbiased=False) / var_y
    return torch.where(var_y == 0, torch.full_like(var_y, float("nan")), 1.0 - ratio)


#: how a minibatch statistic becomes the update's: the mean over the minibatches unless named here
_REDUCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "ratio_max": lambda column: column.amax(-1),
    "loss": lambda column: column[..., -1],  # the last minibatch's
}


def reduce_statistics(
    rows: list[Mapping[str, Tensor]],
    *,
    approx_kl: Tensor,
    values: Tensor,
    returns: Tensor,
    learning_rate: float,
) -> dict[str, Tensor]:
    """The update's statistics, keyed by the run-folder contract's progress columns (plus
    ``loss``), from the minibatch rows of :func:`minibatch_loss`: each of
    :data:`MINIBATCH_STATISTICS` reduced over the minibatches (:data:`_REDUCTIONS`), ``approx_kl``
    the whole update's (given), ``ess_min``, ``explained_variance`` and ``learning_rate``.

    Shapes: each row's statistics are ``()`` (one run) or ``(K,)`` (a population); ``approx_kl``
    has that shape too; ``values`` and ``returns`` are the fresh rollout's ``(..., N)`` start
    values and targets. Every result has the row shape, float64.
    """
    column = {name: torch.stack([row[name] for row in rows], dim=-1) for name in MINIBATCH_STATISTICS}
    mean = lambda column: column.mean(-1)  # noqa: E731
    stats = {name: _REDUCTIONS.get(name, mean)(column[name]) for name in MINIBATCH_STATISTICS}
    stats["approx_kl"] = approx_kl.to(torch.float64)
    stats["ess_min"] = column["ess"].amin(-1)
    stats["explained_variance"] = explained_variance(values, returns)
    stats["learning_rate"] = torch.full_like(stats["ess"], float(learning_rate))
    return stats
