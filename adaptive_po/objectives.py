"""Policy objectives as pure functions of tensors.

Every loss the benchmark compares lives here, side by side: the batch-adaptive ESS objective
("Trust the Batch, On- or Off-Policy", arXiv 2605.12380), its ablations, PPO's clipped surrogate
and the off-policy corrections practitioners use instead of it. An ablation is a different
function (or different keyword arguments), never a flag threaded through the agent.

Conventions
-----------
* ``B`` is the number of transitions in the minibatch that enters one loss evaluation.
* ``log_prob``: ``(B,)`` log pi_theta(a|s) of the taken actions, carrying gradient.
* ``behaviour_log_prob``: ``(B,)`` log pi_b(a|s) recorded by the collector when the action was
  sampled (the distribution actually sampled from). Never recomputed by the learner.
* ``advantages``: ``(B,)`` advantage estimates (already normalized if the agent normalizes).
* Ratios are always formed in log space: rho = exp(log pi_theta - log pi_b).
* Every objective returns an :class:`ObjectiveOutput`: the scalar loss to *minimize* and a dict of
  detached 0-dim statistics of its own (``cap_fraction``, ``kl_weight``, ``policy_loss``; those it
  leaves out default to 0, 0 and the loss). The statistics of the batch itself (ESS, ratios, KL
  to the behaviour policy) are computed once by the training loop, :func:`batch_statistics`.
* Objectives are pure and vmap-friendly: no data-dependent Python branches, no ``.item()``.
* :data:`OBJECTIVES` is the registry: one :class:`ObjectiveSpec` per algorithm name, declaring
  what the training loop must give the loss. Adding an objective is one function and one entry.

The cited systems (``../shared/reference/OBJECTIVES.md``) are restated for one action per sample:
CISPO, DAPO, SPO, PPO with the adaptive KL penalty, V-trace, the 2019 P3O and R2VPO are registered. GSPO
is not: its sequence-level ratio is the geometric mean over a sequence's tokens, which with one
action per sample is the ratio itself, so GSPO reduces to PPO's clip ("ppo"). R2VPO is registered
"after R2VPO" (``r2vpo``): its papers' public text fixes the construction (a constraint on the
ratio's variance, a primal-dual scheme), not every detail; :func:`r2vpo_loss` names each choice.

This module imports torch and :mod:`adaptive_po.distributions` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

import torch
from torch import Tensor

from adaptive_po.distributions import categorical_kl, diag_gaussian_kl  # noqa: F401 - re-exported

KLForm = Literal["analytic", "sampled", "forward"]
KL_FORMS: tuple[str, ...] = ("analytic", "sampled", "forward")
#: where the ESS objective takes e from: the minibatch that enters the loss (the paper's), or the
#: whole batch of the update at the current parameters (``batch.batch_ess``)
ESSSource = Literal["minibatch", "batch"]
ESS_SOURCES: tuple[str, ...] = ("minibatch", "batch")

# The +-10 clamp of the sampled KL estimator's exponent, as in the reference implementation.
SAMPLED_KL_CLAMP = 10.0


@dataclass
class PolicyBatch:
    """What one policy-loss evaluation needs, ``(B,)``: the taken actions' ``log_prob`` (with gradient)
    and ``behaviour_log_prob`` (recorded at sampling), ``advantages``, the analytic KL(pi_theta || pi_b)
    per state ``kl_behaviour``. Only for the objectives that declare them (:class:`ObjectiveSpec`):
    ``proximal_log_prob`` (pi_prox, the update's start), ``kl_reverse`` (KL(pi_b || pi_theta)), ``fresh``
    (1 fresh, 0 replayed) with ``replay_ess`` (e of pi_prox/pi_b over the replayed, 1 if none), ``batch_ess``
    (e of the whole update before this step; 0-dim), ``query_dual`` (each sample's query's trust-region
    dual variable, :func:`quatro_query_duals`). ``ess``, computed once here: the normalized ESS of
    this batch's pi_theta/pi_b (0-dim float64, no gradient)."""

    log_prob: Tensor
    behaviour_log_prob: Tensor
    advantages: Tensor
    kl_behaviour: Tensor | None = None
    proximal_log_prob: Tensor | None = None
    kl_reverse: Tensor | None = None
    fresh: Tensor | None = None
    replay_ess: Tensor | None = None
    batch_ess: Tensor | None = None
    query_dual: Tensor | None = None
    ess: Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.ess = effective_sample_size_from_log_ratios(self.log_prob - self.behaviour_log_prob)


@dataclass
class ObjectiveOutput:
    """A policy loss (to minimize) and its statistics, detached float64 0-dim: ``cap_fraction``,
    ``kl_weight`` and ``policy_loss``; those an objective leaves out are 0 (nothing capped, no KL term)
    and the loss."""

    loss: Tensor
    stats: dict[str, Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        loss = _detached(self.loss)
        given = {"cap_fraction": loss.new_zeros(()), "kl_weight": loss.new_zeros(()), "policy_loss": loss, **self.stats}
        self.stats = {name: _detached(value) for name, value in given.items()}


# ----------------------------------------------------------------------------------------------
# The effective sample size
# ----------------------------------------------------------------------------------------------
def effective_sample_size_from_log_ratios(log_ratios: Tensor) -> Tensor:
    """Normalized ESS ``(sum r)^2 / (n sum r^2)`` of ``r = exp(log_ratios)``, a detached 0-dim
    float64 in ``[1/n, 1]``, by log-sum-exp (exact and finite for any finite log-ratio); 1 for an
    empty batch or a NaN or +inf log-ratio (-inf, a zero ratio, is fine)."""
    with torch.no_grad():
        lr = log_ratios.detach().reshape(-1).to(torch.float64)
        n = lr.numel()
        one = torch.ones((), dtype=torch.float64, device=lr.device)
        if n == 0:
            return one
        bad = torch.isnan(lr).any() | torch.isposinf(lr).any()
        shifted = lr - lr.max()
        log_e = 2.0 * torch.logsumexp(shifted, 0) - math.log(n) - torch.logsumexp(2.0 * shifted, 0)
        e = torch.exp(log_e).clamp(max=1.0)
        return torch.where(bad | ~torch.isfinite(e), one, e)


def effective_sample_size(ratios: Tensor) -> float:
    """Normalized effective sample size of a batch of importance ratios.

    ``(sum r)^2 / (n * sum r^2)``, in float64 without gradient; lies in ``[1/n, 1]``; 1.0 for an
    empty batch or any non-finite or negative ratio. Scale-free: multiplying every ratio by one
    positive constant leaves it unchanged.

    :param ratios: any shape, non-negative importance ratios pi_theta / pi_b.
    """
    with torch.no_grad():
        r = ratios.detach().reshape(-1).to(torch.float64)
        if r.numel() == 0 or not torch.isfinite(r).all() or (r < 0).any() or not (r > 0).any():
            return 1.0
        r = r / r.max()
        value = (r.sum() ** 2 / (r.numel() * (r * r).sum())).item()
        return min(value, 1.0)


# ----------------------------------------------------------------------------------------------
# KL divergences: the analytic ones live with the distributions (imported here for the objectives)
# ----------------------------------------------------------------------------------------------
def sampled_kl(log_prob: Tensor, behaviour_log_prob: Tensor) -> Tensor:
    """The reference code's per-sample KL estimator at the taken action.

    ``k = (log pi_theta - log pi_b) + exp(clamp(log pi_b - log pi_theta, -10, 10)) - 1``.
    Actions come from pi_b, so this estimates KL(pi_theta || pi_b) only near pi_theta = pi_b.
    """
    log_ratio = log_prob - behaviour_log_prob
    return log_ratio + torch.exp(torch.clamp(-log_ratio, -SAMPLED_KL_CLAMP, SAMPLED_KL_CLAMP)) - 1.0


# ----------------------------------------------------------------------------------------------
# Shared statistics
# ----------------------------------------------------------------------------------------------
def batch_statistics(batch: PolicyBatch) -> dict[str, Tensor]:
    """What every algorithm reports of a minibatch, detached float64: ``ess``, ``ratio_max``,
    ``ratio_mean``, ``ratio_above_2`` of pi_theta/pi_b, and KL(pi_theta || pi_b), analytic
    (``kl_behaviour``) and sampled at the taken actions (``kl_behaviour_sampled``, biased off-policy)."""
    if batch.kl_behaviour is None:
        raise ValueError("batch_statistics needs batch.kl_behaviour (the analytic KL to the behaviour policy)")
    with torch.no_grad():
        log_prob = batch.log_prob.detach()
        ratio = torch.exp((log_prob - batch.behaviour_log_prob).to(torch.float64))
        return {
            "ess": batch.ess,
            "ratio_max": ratio.max() if ratio.numel() else ratio.new_ones(()),
            "ratio_mean": ratio.mean() if ratio.numel() else ratio.new_ones(()),
            "ratio_above_2": (ratio > 2.0).to(torch.float64).mean() if ratio.numel() else ratio.new_zeros(()),
            "kl_behaviour": batch.kl_behaviour.detach().mean().to(torch.float64),
            "kl_behaviour_sampled": sampled_kl(log_prob, batch.behaviour_log_prob).mean().to(torch.float64),
        }


def _detached(value: Tensor) -> Tensor:
    return value.detach().to(torch.float64)


# ----------------------------------------------------------------------------------------------
# Objectives
# ----------------------------------------------------------------------------------------------
def _kl_values(batch: PolicyBatch, kl: KLForm) -> Tensor:
    """Per-sample KL with gradient: ``"analytic"`` KL(pi_theta || pi_b), ``"sampled"`` its estimate at the
    taken action, ``"forward"`` KL(pi_b || pi_theta) (mass-covering: unbounded as pi_theta narrows below pi_b)."""
    if kl == "sampled":
        return sampled_kl(batch.log_prob, batch.behaviour_log_prob)
    values, field_name = (batch.kl_behaviour, "kl_behaviour") if kl == "analytic" else (batch.kl_reverse, "kl_reverse")
    if values is None:
        raise ValueError(f"kl={kl!r} needs batch.{field_name}, which is None (the objective must declare it)")
    return values


def ess_policy_loss(
    batch: PolicyBatch, *, kl: KLForm = "analytic", cap: bool = True, regularizer: bool = True, ess: ESSSource = "minibatch",
) -> ObjectiveOutput:
    """The batch-adaptive ESS objective (to minimize):
    ``L = -mean_i[w_i log pi_theta(a_i|s_i) A_i] + (1 - e) mean_i[KL_i]``, ``w_i = min(rho_i, e)`` detached;
    ``kl``: the KL's form (:func:`_kl_values`); ablations: ``cap=False`` (the weight ``rho``),
    ``regularizer=False`` (no KL term); ``ess``: e of the minibatch's ratios (the paper's) or of the
    whole update's at the current parameters (``"batch"``, a pre-registered variant for small minibatches).
    """
    if kl not in KL_FORMS or ess not in ESS_SOURCES:
        raise ValueError(f"kl must be one of {KL_FORMS} and ess one of {ESS_SOURCES}, got kl={kl!r}, ess={ess!r}")
    if ess == "batch" and batch.batch_ess is None:
        raise ValueError("ess='batch' needs batch.batch_ess (declare needs_batch_ess)")
    e = batch.batch_ess.detach().to(torch.float64) if ess == "batch" else batch.ess
    with torch.no_grad():
        ratio = torch.exp((batch.log_prob.detach() - batch.behaviour_log_prob).to(torch.float64))
        weight64 = torch.minimum(ratio, e) if cap else ratio
        capped = (ratio > e).to(torch.float64).mean() if cap else ratio.new_zeros(())
        weight = weight64.to(batch.log_prob.dtype)
    policy_term = -(weight * batch.log_prob * batch.advantages).mean()
    kl_weight = (1.0 - e).to(batch.log_prob.dtype)
    loss = policy_term + kl_weight * _kl_values(batch, kl).mean() if regularizer else policy_term
    shown_weight = (1.0 - e) if regularizer else e.new_zeros(())
    return ObjectiveOutput(loss, {"cap_fraction": capped, "kl_weight": shown_weight, "policy_loss": policy_term})


def _check_range(name: str, value: Any, *, strict: bool) -> None:
    """``ValueError`` unless the number ``value`` is > 0 (``strict``) or >= 0. A 0-dim tensor is not
    branched on (the population engine's compiled step passes its schedule values as tensors, and a
    branch on a tensor's value cannot be compiled); the engine checks those itself
    on Python numbers first (:func:`check_arguments`)."""
    if isinstance(value, Tensor):
        return
    if not (value > 0 if strict else value >= 0):
        raise ValueError(f"{name} must be {'>' if strict else '>='} 0, got {value!r}")


def ppo_clip_loss(batch: PolicyBatch, *, clip_range: float = 0.2) -> ObjectiveOutput:
    """PPO's clipped surrogate, with the behaviour policy as the "old" policy.

    ``L = -mean(min(r A, clip(r, 1 - eps, 1 + eps) A))`` with ``r = pi_theta / pi_b``. On stale data
    this is what an asynchronous PPO does: it clips against whatever policy produced the batch.
    ``cap_fraction`` reports the clipped fraction (``|r - 1| > eps``).
    """
    # >= 0, not > 0: a linearly decayed clip range reaches 0 at the last update
    _check_range("clip_range", clip_range, strict=False)
    log_ratio = batch.log_prob - batch.behaviour_log_prob
    ratio = torch.exp(log_ratio)
    surrogate = torch.min(
        ratio * batch.advantages, torch.clamp(ratio, 1.0 - clip_range, 1.0 + clip_range) * batch.advantages
    )
    loss = -surrogate.mean()
    clipped = ((ratio.detach() - 1.0).abs() > clip_range).to(torch.float64).mean()
    return ObjectiveOutput(loss, {"cap_fraction": clipped})


def decoupled_ppo_loss(
    batch: PolicyBatch, *, clip_range: float = 0.2, is_truncation: float = 1.0
) -> ObjectiveOutput:
    """Decoupled PPO (Hilton et al. 2021, "Batch size-invariance for policy optimization").

    The clip is taken against the proximal policy (the learner at the start of this update) and the
    off-policyness is corrected by an importance weight against the behaviour policy, truncated
    at ``is_truncation`` as in IMPALA/V-trace:
    ``L = -mean(min(pi_prox/pi_b, c) * min(r A, clip(r, 1 - eps, 1 + eps) A))``, ``r = pi_theta/pi_prox``.
    """
    if batch.proximal_log_prob is None:
        raise ValueError("decoupled_ppo_loss needs batch.proximal_log_prob")
    # >= 0, not > 0: a linearly decayed clip range reaches 0 at the last update
    _check_range("clip_range", clip_range, strict=False)
    _check_range("is_truncation", is_truncation, strict=True)
    with torch.no_grad():
        behaviour_weight = torch.exp(batch.proximal_log_prob - batch.behaviour_log_prob).clamp(max=is_truncation)
    prox_ratio = torch.exp(batch.log_prob - batch.proximal_log_prob)
    surrogate = torch.min(
        prox_ratio * batch.advantages,
        torch.clamp(prox_ratio, 1.0 - clip_range, 1.0 + clip_range) * batch.advantages,
    )
    loss = -(behaviour_weight * surrogate).mean()
    clipped = ((prox_ratio.detach() - 1.0).abs() > clip_range).to(torch.float64).mean()
    return ObjectiveOutput(loss, {"cap_fraction": clipped})


def truncated_is_loss(batch: PolicyBatch, *, is_truncation: float = 1.0) -> ObjectiveOutput:
    """Score-function gradient with a fixed truncated importance weight (the 2019 P3O's ``c = 1``).

    ``L = -mean(min(rho, c) * log pi_theta * A)``, weight detached; no KL term, no clip. The same as
    :func:`ess_policy_loss` with a constant cap instead of the batch's ESS.
    """
    _check_range("is_truncation", is_truncation, strict=True)
    log_ratio = batch.log_prob - batch.behaviour_log_prob
    with torch.no_grad():
        ratio = torch.exp(log_ratio.detach().to(torch.float64))
        weight = ratio.clamp(max=is_truncation).to(batch.log_prob.dtype)
    loss = -(weight * batch.log_prob * batch.advantages).mean()
    truncated = (ratio > is_truncation).to(torch.float64).mean()
    return ObjectiveOutput(loss, {"cap_fraction": truncated})


# ----------------------------------------------------------------------------------------------
# The objectives of the systems the paper cites (one action per sample; see the module docstring)
# ----------------------------------------------------------------------------------------------
def _as_tensor_like(value: Any, like: Tensor) -> Tensor:
    """``value`` (a Python number or a 0-dim tensor, possibly vmapped) in ``like``'s dtype and device."""
    if isinstance(value, Tensor):
        return value.to(dtype=like.dtype, device=like.device)
    return torch.tensor(float(value), dtype=like.dtype, device=like.device)


def cispo_loss(batch: PolicyBatch, *, eps_high: float = 0.28) -> ObjectiveOutput:
    """CISPO: clipped, detached importance-sampling weight (MiniMax-M1, arXiv 2506.13585).

    ``L = -mean(sg(min(rho, 1 + eps_high)) * log pi_theta * A)``, ``rho = pi_theta / pi_b``. Only the
    weight is clipped, so every sample keeps its score-function gradient (a PPO clip zeroes it).
    No lower bound, as in the paper (FeynRL's ``algs/CISPO/cispo.py`` clamps both sides at 1 +- 0.2).
    ``cap_fraction`` is the fraction with ``rho > 1 + eps_high``.
    """
    _check_range("eps_high", eps_high, strict=True)
    log_ratio = batch.log_prob - batch.behaviour_log_prob
    with torch.no_grad():
        ratio = torch.exp(log_ratio.detach().to(torch.float64))
        weight = ratio.clamp(max=1.0 + eps_high).to(batch.log_prob.dtype)
        capped = (ratio > 1.0 + eps_high).to(torch.float64).mean()
    loss = -(weight * batch.log_prob * batch.advantages).mean()
    return ObjectiveOutput(loss, {"cap_fraction": capped})


def dapo_loss(batch: PolicyBatch, *, clip_range: float = 0.2, clip_range_high: float = 0.28) -> ObjectiveOutput:
    """DAPO's clip-higher: PPO's clipped surrogate with an asymmetric range (arXiv 2503.14476).

    ``L = -mean(min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A))`` with ``eps_low = clip_range``,
    ``eps_high = clip_range_high`` and the behaviour policy as the old policy (source: the DAPO
    paper; FeynRL ``algs/DAPO``). ``cap_fraction`` is the fraction of ratios outside
    ``[1 - eps_low, 1 + eps_high]``.
    """
    # >= 0 as for PPO: a decayed clip range may reach 0
    _check_range("clip_range", clip_range, strict=False)
    _check_range("clip_range_high", clip_range_high, strict=False)
    ratio = torch.exp(batch.log_prob - batch.behaviour_log_prob)
    surrogate = torch.min(
        ratio * batch.advantages,
        torch.clamp(ratio, 1.0 - clip_range, 1.0 + clip_range_high) * batch.advantages,
    )
    loss = -surrogate.mean()
    r = ratio.detach()
    clipped = ((r < 1.0 - clip_range) | (r > 1.0 + clip_range_high)).to(torch.float64).mean()
    return ObjectiveOutput(loss, {"cap_fraction": clipped})


def spo_loss(batch: PolicyBatch, *, eps: float = 0.2) -> ObjectiveOutput:
    """Simple Policy Optimization (Xie et al.; repo MyRepositories-hub/Simple-Policy-Optimization,
    ``atari/trainer.py``): a quadratic penalty on the ratio instead of a clip.

    ``L = -mean(rho A - |A| / (2 eps) * (rho - 1)^2)``, ``rho = pi_theta / pi_b``; per sample the
    surrogate is maximized at ``rho = 1 + eps * sign(A)``. ``cap_fraction`` is the fraction with
    ``|rho - 1| > eps`` (the region PPO would clip). The penalty is quadratic in rho, so a
    log-ratio above about 44 overflows float32, as in the reference code.
    """
    _check_range("eps", eps, strict=True)
    ratio = torch.exp(batch.log_prob - batch.behaviour_log_prob)
    advantages = batch.advantages
    surrogate = ratio * advantages - advantages.abs() / (2.0 * eps) * (ratio - 1.0) ** 2
    loss = -surrogate.mean()
    outside = ((ratio.detach() - 1.0).abs() > eps).to(torch.float64).mean()
    return ObjectiveOutput(loss, {"cap_fraction": outside})


def kl_ppo_loss(batch: PolicyBatch, *, kl_coef: Tensor | float, kl_target: float = 0.01) -> ObjectiveOutput:
    """PPO with an adaptive KL penalty (arXiv 1707.06347, section 4), pi_old = pi_b.

    ``L = -mean(rho A) + beta * mean(KL(pi_b(.|s) || pi_theta(.|s)))`` with ``beta = kl_coef``, the
    per-run state (a 0-dim tensor; one per member under vmap) that :func:`kl_ppo_update` adapts
    after each update. ``kl_target`` is accepted so that the objective's arguments serve both
    functions; the loss does not use it. Needs ``batch.kl_reverse``.
    """
    if batch.kl_reverse is None:
        raise ValueError("kl_ppo_loss needs batch.kl_reverse (KL(pi_b || pi_theta), with gradient)")
    ratio = torch.exp(batch.log_prob - batch.behaviour_log_prob)
    policy_term = -(ratio * batch.advantages).mean()
    beta = _as_tensor_like(kl_coef, batch.log_prob)
    loss = policy_term + beta * batch.kl_reverse.mean()
    return ObjectiveOutput(loss, {"kl_weight": beta, "policy_loss": policy_term})


def kl_ppo_update(state: Mapping[str, Any], kl: Tensor | float, *, kl_target: float = 0.01, **_: Any) -> dict[str, Tensor]:
    """PPO's adaptive KL coefficient rule (arXiv 1707.06347, section 4), as pure tensor code.

    With ``d`` the mean KL(pi_b || pi_theta) after the update: ``d < d_targ / 1.5 -> beta / 2``;
    ``d > 1.5 d_targ -> 2 beta``; otherwise beta is unchanged.
    """
    beta = state["kl_coef"]
    if not isinstance(beta, Tensor):
        beta = torch.tensor(float(beta), dtype=torch.float64)
    d = kl if isinstance(kl, Tensor) else torch.tensor(float(kl), dtype=torch.float64, device=beta.device)
    new = torch.where(d < kl_target / 1.5, beta / 2.0, torch.where(d > 1.5 * kl_target, beta * 2.0, beta))
    return {"kl_coef": new.to(beta.dtype)}


def r2vpo_loss(
    batch: PolicyBatch,
    *,
    multiplier: Tensor | float,
    variance_target: float = 0.02,
    dual_step: float = 10.0,
    initial_multiplier: float = 1.0,
) -> ObjectiveOutput:
    """After R2VPO, ratio-variance regularized policy optimization (Luo et al., arXiv 2601.03320
    and 2605.26784): the clip replaced by a constraint on the variance of the policy ratio over
    the batch, enforced by a Lagrange multiplier adapted by dual ascent.

    ``L = -mean(rho A) + lambda * (Var_B(rho) - v)``, ``rho = pi_theta / pi_b`` with gradient (the
    importance-weighted policy-gradient surrogate), ``Var_B(rho) = mean((rho - mean(rho))^2)`` the
    minibatch's second central moment, ``lambda = multiplier`` the per-run state that
    :func:`r2vpo_update` adapts between updates, ``v = variance_target``.

    What the papers' public text fixes: the variance (second central moment) of the ratio as the
    constrained quantity, a primal-dual scheme, stale data down-weighted rather than discarded.
    What is chosen here, since no formula details or code are public:

    * ratios against the behaviour policy, as the other stale-data corrections here take them, so
      the constraint also bounds how far the learner may move from stale data;
    * the multiplier updated once per update, not per minibatch, by projected dual ascent
      ``lambda <- max(0, lambda + dual_step * (Var_D(rho) - v))`` on the whole update's data under
      the updated parameters (the objective-state mechanism adaptive KL-PPO uses);
    * ``variance_target`` 0.02 (a ratio standard deviation of about 0.14, the spread of ratios
      that PPO's 0.2 clip leaves roughly untouched), ``dual_step`` 10 (a violation of 0.1 moves
      lambda by 1 in one update), ``initial_multiplier`` 1 (the start value of the state; the
      loss itself reads ``multiplier``). All three are the objective's tuned knobs.

    ``kl_weight`` reports lambda (the constraint's strength), ``cap_fraction`` the fraction of
    ratios outside [0.8, 1.2] (what PPO's clip would have cut), for comparison with the others.
    The variance is quadratic in rho: past a log-ratio of about 44 it overflows float32, as SPO's
    penalty does.
    """
    del dual_step, initial_multiplier  # the state update's and the state's start (same arguments)
    ratio = torch.exp(batch.log_prob - batch.behaviour_log_prob)
    policy_term = -(ratio * batch.advantages).mean()
    variance = ((ratio - ratio.mean()) ** 2).mean()
    lam = _as_tensor_like(multiplier, batch.log_prob)
    loss = policy_term + lam * (variance - variance_target)
    outside = ((ratio.detach() - 1.0).abs() > 0.2).to(torch.float64).mean()
    return ObjectiveOutput(loss, {"kl_weight": lam, "policy_loss": policy_term, "cap_fraction": outside})


def r2vpo_update(
    state: Mapping[str, Any], kl: Tensor | float, *, ratio_variance: Tensor | float, variance_target: float = 0.02,
    dual_step: float = 10.0, **_: Any,
) -> dict[str, Tensor]:
    """Projected dual ascent on R2VPO's multiplier: ``lambda <- max(0, lambda + dual_step *
    (ratio_variance - variance_target))``, with ``ratio_variance`` the variance of pi_theta/pi_b
    over the whole update's data under the updated parameters (``kl`` is not used)."""
    lam = state["multiplier"]
    if not isinstance(lam, Tensor):
        lam = torch.tensor(float(lam), dtype=torch.float64)
    v = ratio_variance if isinstance(ratio_variance, Tensor) else torch.tensor(float(ratio_variance), dtype=lam.dtype, device=lam.device)
    new = torch.clamp(lam + dual_step * (v.to(lam.dtype) - variance_target), min=0.0)
    return {"multiplier": new}


def p3o_loss(batch: PolicyBatch, *, kl: KLForm = "analytic") -> ObjectiveOutput:
    """P3O, Policy-on Policy-off Policy Optimization (Fakoor et al. 2019, arXiv 1905.01756;
    rasoolfa/P3O ``algs/P3O/p3o.py``), its on-policy step and replay steps in one loss.

    Fresh samples (``batch.fresh == 1``) get the on-policy A2C term ``-log pi_theta * A``; replayed
    samples get ``-sg(min(rho, e_R)) * log pi_theta * A``, ``e_R = batch.replay_ess`` the normalized
    ESS of the whole replayed data. Then

    ``L = mean_i(policy term_i) + (1 - e_R) * sum_i(KL_i (1 - fresh_i)) / max(n_replayed, 1)``

    with ``KL_i`` = KL(pi_theta || pi_b) (``kl="analytic"``: ``batch.kl_behaviour``; ``"sampled"``:
    :func:`sampled_kl`), with gradient. ``cap_fraction`` is among replayed samples.
    """
    if kl not in KL_FORMS:
        raise ValueError(f"kl must be one of {KL_FORMS}, got {kl!r}")
    if batch.fresh is None or batch.replay_ess is None:
        raise ValueError("p3o_loss needs batch.fresh and batch.replay_ess (needs_replay_info)")
    kl_values = _kl_values(batch, kl)
    dtype = batch.log_prob.dtype
    fresh = batch.fresh.to(dtype)
    replayed = 1.0 - fresh
    e_r = batch.replay_ess
    with torch.no_grad():
        ratio = torch.exp((batch.log_prob.detach() - batch.behaviour_log_prob).to(torch.float64))
        e_r64 = e_r.detach().to(torch.float64)
        weight = torch.where(fresh > 0.5, torch.ones_like(ratio), torch.minimum(ratio, e_r64)).to(dtype)
        n_replayed = replayed.sum().clamp(min=1.0)
        capped = ((ratio > e_r64).to(dtype) * replayed).sum().to(torch.float64) / n_replayed.to(torch.float64)
    policy_term = -(weight * batch.log_prob * batch.advantages).mean()
    kl_weight = (1.0 - e_r.detach()).to(dtype)
    loss = policy_term + kl_weight * (kl_values * replayed).sum() / n_replayed
    stats = {"cap_fraction": capped, "kl_weight": kl_weight, "policy_loss": policy_term}
    return ObjectiveOutput(loss, stats)


# ----------------------------------------------------------------------------------------------
# After QUATRO: a per-query KL trust region, solved by its dual (see :func:`quatro_loss`)
# ----------------------------------------------------------------------------------------------
#: the dual variable is searched over [QUATRO_DUAL_RANGE[0], QUATRO_DUAL_RANGE[1]] x the query's
#: advantage spread (largest |A - mean|), by this many bisection steps on its logarithm
QUATRO_DUAL_RANGE: tuple[float, float] = (1e-3, 1e3)
QUATRO_BISECTION_STEPS = 40


def tilted_kl(advantages: Tensor, dual: Tensor) -> Tensor:
    """``KL(q || uniform)`` of the tilt ``q_i ∝ exp(A_i / lambda)`` over the last dimension, in nats:
    the divergence from pi_old of the policy the trust region's Lagrangian picks for a query whose
    samples (drawn from pi_old) have advantages ``A`` (``(..., T)``), at ``dual = lambda`` (``(...,)``,
    > 0). ``sum_i q_i z_i - (logsumexp(z) - log T)`` with ``z = A / lambda``: finite for any finite
    input, non-increasing in lambda, from ``log(T / #argmax)`` (lambda -> 0) to 0 (lambda -> inf)."""
    z = advantages / dual.unsqueeze(-1)
    log_mean = torch.logsumexp(z, -1) - math.log(advantages.shape[-1])
    return (torch.softmax(z, -1) * z).sum(-1) - log_mean


@torch.no_grad()
def quatro_dual(advantages: Tensor, *, radius: float | Tensor) -> Tensor:
    """Each query's dual variable of the KL trust region ``E_old[r log r] <= radius``: ``advantages``
    ``(..., Q, T)``, the ``T`` samples of each of ``Q`` queries (pi_old's), gives ``(..., Q)`` float64.

    The dual ``g(lambda) = lambda * radius + lambda * log mean_i exp(A_i / lambda)`` is convex with
    ``g'(lambda) = radius - tilted_kl(A, lambda)``, so its minimizer solves ``tilted_kl = radius``
    (:func:`tilted_kl` decreases in lambda). Found by :data:`QUATRO_BISECTION_STEPS` bisection steps on
    ``log lambda`` between :data:`QUATRO_DUAL_RANGE` times the query's spread ``s = max|A - mean A|``:
    where even the lowest lambda keeps the tilt within the radius (a radius at or above
    ``log(T / #argmax)``), the lowest (the constraint is slack: ``g`` increases, its minimum is at the
    lower end); where even the highest does not (a radius below ~1e-7), the highest. ``s = 0`` (all
    advantages equal: every policy scores the same) gives 0. No data-dependent branch: vmap-safe,
    compilable; shift-invariant and scale-equivariant in ``A`` (``lambda(cA + b) = c lambda(A)``)."""
    a = advantages.detach().to(torch.float64)
    spread = (a - a.mean(-1, keepdim=True)).abs().amax(-1)
    scale = torch.where(spread > 0, spread, torch.ones_like(spread))
    unit = a / scale.unsqueeze(-1)
    low = torch.full_like(spread, math.log(QUATRO_DUAL_RANGE[0]))
    high = torch.full_like(spread, math.log(QUATRO_DUAL_RANGE[1]))
    radius = _as_tensor_like(radius, spread)
    for _ in range(QUATRO_BISECTION_STEPS):  # invariant: the tilt at ``high`` is within the radius, or high is the top
        middle = 0.5 * (low + high)
        inside = tilted_kl(unit, torch.exp(middle)) <= radius
        low, high = torch.where(inside, low, middle), torch.where(inside, middle, high)
    log_dual = high
    return torch.where(spread > 0, torch.exp(log_dual) * scale, torch.zeros_like(spread))


def quatro_query_duals(advantages: Tensor, query_length: int, *, radius: float | Tensor = 0.01, **_: Any) -> Tensor:
    """:func:`quatro_dual` per sample: ``advantages`` ``(..., N)`` laid out as consecutive queries of
    ``query_length`` samples each (one environment lane of one rollout, env-major as the update's data
    is), gives ``(..., N)`` float64, each sample its query's lambda."""
    n = advantages.shape[-1]
    if query_length < 1 or n % query_length:
        raise ValueError(f"{n} samples do not split into queries of {query_length}")
    lead = advantages.shape[:-1]
    grouped = advantages.reshape(*lead, n // query_length, query_length)
    duals = quatro_dual(grouped, radius=radius)
    return duals.unsqueeze(-1).expand(*duals.shape, query_length).reshape(*lead, n)


def quatro_loss(batch: PolicyBatch, *, radius: float = 0.01) -> ObjectiveOutput:
    """After QUATRO (Query-Adaptive Trust Region Policy Optimization, arXiv 2602.04620): a KL trust
    region per query, in Lagrangian form with each query's own dual variable, no clip.

    For each query x (here one environment lane of one rollout, ``batch.query_dual`` its lambda_x):
    maximize ``E_old[r A]`` subject to ``E_old[r log r] <= radius``, ``r = pi_theta / pi_old``,
    pi_old = the behaviour policy (the actor that sampled the data, as GRPO's old policy is the
    sampler's). Its Lagrangian, per sample (to minimize, mean over the minibatch)::

        L = -mean_i[ r_i A_i - lambda_x(i) (r_i log r_i - r_i + 1) ]

    The penalty ``r log r - r + 1`` is the per-sample KL(pi_theta || pi_old) estimate whose expectation
    under pi_old is exactly the KL (``E_old[r] = 1``), non-negative, 0 with zero gradient at ``r = 1``;
    it differs from the textbook ``r log r`` by ``r - 1``, zero in expectation for every theta: the same
    objective with less variance. The gradient is ``grad r * (A - lambda log r)``: the plain
    importance-weighted score function at ``r = 1``, pulled back by the log-ratio term (the
    "stabilizing log-ratio term") as the policy leaves pi_old, and every sample keeps a gradient.
    Maximized alone, each query's term moves ``log r`` toward ``A / lambda_x`` (up to a constant):
    the closed-form trust-region step, whose KL is the radius.

    ``batch.query_dual`` is computed once per update from the update's advantages
    (:func:`quatro_query_duals`, :func:`adaptive_po.update.run_update`) and rescaled to the
    minibatch's advantage normalization (lambda is equivariant to the advantages' scale). Knob:
    ``radius`` (delta, nats), default 0.01, TRPO's ``max_kl`` (arXiv 1502.05477; SB3-contrib's TRPO
    ``target_kl``). ``kl_weight`` reports the mean lambda; ``cap_fraction`` the share of ratios outside
    [0.8, 1.2] (what PPO's clip would cut; nothing is cut here), as for ``r2vpo``.
    """
    if batch.query_dual is None:
        raise ValueError("quatro_loss needs batch.query_dual (declare needs_query_dual)")
    _check_range("radius", radius, strict=True)
    log_ratio = batch.log_prob - batch.behaviour_log_prob
    ratio = torch.exp(log_ratio)
    dual = batch.query_dual.detach().to(batch.log_prob.dtype)
    penalty = ratio * log_ratio - ratio + 1.0
    policy_term = -(ratio * batch.advantages).mean()
    loss = policy_term + (dual * penalty).mean()
    outside = ((ratio.detach() - 1.0).abs() > 0.2).to(torch.float64).mean()
    return ObjectiveOutput(loss, {"kl_weight": dual.mean(), "policy_loss": policy_term, "cap_fraction": outside})


Objective = Callable[..., ObjectiveOutput]

@dataclass(frozen=True)
class ObjectiveSpec:
    """A registered objective: ``loss(batch, **kwargs) -> ObjectiveOutput``, one line of ``description``
    (``adaptive-po list``, ``config.json``), fixed ``kwargs`` (ablations), and what the loop owes it:
    ``needs_kl``, the gradient of ``batch.kl_behaviour`` (always computed, detached otherwise); the
    :class:`PolicyBatch` fields ``needs_proximal``, ``needs_reverse_kl``, ``needs_replay_info`` (``fresh``,
    ``replay_ess``), ``needs_batch_ess``; ``tuned`` hyper-parameters passed to the loss (``clip_range``).
    ``state``: per-run 0-dim tensors (per member in a population) passed to the loss, from these start
    values (or the keyword ``initial_<name>``), then ``update_state(state, kl, *, ratio_variance, **arguments)``
    (pure) after each update from the mean KL(pi_b || pi_theta) and Var(pi_theta/pi_b) over its data.
    ``advantage_estimator``: ``"gae"`` or ``"vtrace"``; ``replay``: rollouts the algorithm replays (P3O)
    where the run's dial is 0. ``query_dual``: ``(advantages (..., N), query_length, **arguments) -> (..., N)``,
    each transition's per-query dual variable, computed once per update (``batch.query_dual``; after QUATRO)."""

    loss: Objective
    description: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    needs_kl: bool = False
    needs_proximal: bool = False
    tuned: tuple[str, ...] = ()
    needs_reverse_kl: bool = False
    needs_replay_info: bool = False
    state: Mapping[str, float] = field(default_factory=dict)
    update_state: Callable[..., dict[str, Tensor]] | None = None
    advantage_estimator: str = "gae"
    replay: int = 0
    needs_batch_ess: bool = False
    query_dual: Callable[..., Tensor] | None = None


def initial_state(spec: ObjectiveSpec, kwargs: Mapping[str, Any]) -> dict[str, float]:
    """The objective's per-run state at the start of training: each entry of ``spec.state``, or the
    value of the keyword ``initial_<name>`` in ``kwargs`` where given (a variant, the tuner)."""
    return {name: float(kwargs.get(f"initial_{name}", value)) for name, value in spec.state.items()}


def check_arguments(spec: ObjectiveSpec, arguments: Mapping[str, Any], state: Mapping[str, Any] | None = None) -> None:
    """Evaluate the loss once on a two-sample batch, filled as the training loop fills it (the fields
    ``spec`` declares, the KL with gradient where it needs it), with ``arguments`` (the objective's
    keyword arguments as Python numbers) and ``state`` (its start values if ``None``; a population's
    first member): a keyword the loss does not take (``TypeError``), a bad value or a field it uses
    but does not declare (the loss's own ``ValueError``: an unknown KL form, a clip range <= 0) is
    named. Both faces call it before the first rollout; the population engine's compiled step, whose
    numbers are tensors that the objectives do not branch on, also when they change."""
    pair, one = torch.zeros(2), torch.ones((), dtype=torch.float64)
    probe = PolicyBatch(
        log_prob=pair.clone().requires_grad_(), behaviour_log_prob=pair, advantages=torch.tensor([1.0, -1.0]),
        kl_behaviour=pair.clone().requires_grad_(spec.needs_kl), proximal_log_prob=pair if spec.needs_proximal else None,
        kl_reverse=pair.clone().requires_grad_() if spec.needs_reverse_kl else None,
        fresh=torch.tensor([1.0, 0.0]) if spec.needs_replay_info else None, replay_ess=one if spec.needs_replay_info else None,
        batch_ess=one if spec.needs_batch_ess else None, query_dual=pair if spec.query_dual is not None else None,
    )
    state = initial_state(spec, arguments) if state is None else state
    state = {name: torch.as_tensor(value).reshape(-1)[0].cpu() for name, value in state.items()}
    with torch.no_grad():
        try:
            spec.loss(probe, **{**arguments, **state})
        except TypeError as error:
            raise TypeError(f"objective_kwargs {dict(arguments)!r}: {error}") from None


#: algorithm name -> objective. Adding an objective is one function above and one entry here.
OBJECTIVES: dict[str, ObjectiveSpec] = {
    "esspo": ObjectiveSpec(
        ess_policy_loss, "ESS objective: weight capped at e_B, (1 - e_B) analytic KL to the behaviour policy", needs_kl=True
    ),
    "esspo-cap-only": ObjectiveSpec(
        ess_policy_loss, "ablation: the e_B cap without the KL regularizer", {"regularizer": False}, needs_kl=True
    ),
    "esspo-reg-only": ObjectiveSpec(
        ess_policy_loss, "ablation: the (1 - e_B) KL regularizer with the uncapped importance weight", {"cap": False}, needs_kl=True
    ),
    "esspo-sampled-kl": ObjectiveSpec(
        ess_policy_loss, "ESS objective with the reference code's sampled KL estimator", {"kl": "sampled"}
    ),
    # the fresh-data diagnosis's pre-registered variants (docs/results/README.md, "Why the ESS objective loses on fresh data")
    "esspo-batch-ess": ObjectiveSpec(
        ess_policy_loss,
        "pre-registered fresh-data variant: e of the whole update's batch at the current parameters instead of the minibatch's",
        {"ess": "batch"},
        needs_kl=True,
        needs_batch_ess=True,
    ),
    "esspo-forward-kl": ObjectiveSpec(
        ess_policy_loss,
        "pre-registered fresh-data variant: the (1 - e_B) pull in the mass-covering direction KL(pi_b || pi_theta)",
        {"kl": "forward"},
        needs_reverse_kl=True,
    ),
    "ppo": ObjectiveSpec(ppo_clip_loss, "PPO, Zoo-tuned clip, clipping against the behaviour policy", tuned=("clip_range",)),
    "decoupled-ppo": ObjectiveSpec(
        decoupled_ppo_loss,
        "decoupled PPO: clip against the proximal policy, behaviour weight truncated at 1",
        needs_proximal=True,
        tuned=("clip_range",),
    ),
    "tis-pg": ObjectiveSpec(
        truncated_is_loss,
        "score-function gradient with importance weight truncated at a fixed 1 (no KL, no clip)",
        {"is_truncation": 1.0},
    ),
    "cispo": ObjectiveSpec(cispo_loss, "CISPO: detached importance weight clipped above at 1 + 0.28, every sample keeps its gradient"),
    "dapo": ObjectiveSpec(dapo_loss, "DAPO clip-higher: PPO clip with the asymmetric range [1 - 0.2, 1 + 0.28]"),
    "spo": ObjectiveSpec(spo_loss, "SPO: rho A minus the quadratic penalty |A| (rho - 1)^2 / (2 * 0.2), no clip"),
    "kl-ppo": ObjectiveSpec(
        kl_ppo_loss,
        "PPO's adaptive KL penalty: rho A - beta KL(pi_b || pi_theta), beta halved/doubled around KL 0.01",
        needs_reverse_kl=True,
        state={"kl_coef": 1.0},
        update_state=kl_ppo_update,
    ),
    "vtrace": ObjectiveSpec(
        truncated_is_loss,
        "IMPALA V-trace: weight truncated at 1 on V-trace advantages, critic on V-trace targets",
        {"is_truncation": 1.0},
        advantage_estimator="vtrace",
    ),
    "p3o": ObjectiveSpec(
        p3o_loss,
        "P3O (2019): on-policy A2C on the fresh batch, replayed batches capped at e_R with (1 - e_R) KL",
        needs_kl=True,
        needs_replay_info=True,
        replay=2,
    ),
    "r2vpo": ObjectiveSpec(
        r2vpo_loss,
        "after R2VPO (arXiv 2601.03320, 2605.26784): rho A minus lambda (Var(rho) - 0.02), lambda by projected dual ascent after each update",
        state={"multiplier": 1.0},
        update_state=r2vpo_update,
    ),
    "quatro": ObjectiveSpec(
        quatro_loss,
        "after QUATRO (arXiv 2602.04620): rho A minus lambda_x (rho log rho - rho + 1), lambda_x the dual of a KL <= 0.01 trust region per query (one env lane of a rollout), no clip",
        query_dual=quatro_query_duals,
    ),
}


def get_objective(name: str) -> ObjectiveSpec:
    """Look up a registered objective; a clear error lists the known ones."""
    from adaptive_po.hyperparams import VALUE_ALGORITHMS

    try:
        return OBJECTIVES[name]
    except KeyError:
        import difflib

        if name in VALUE_ALGORITHMS:
            raise ValueError(f"{name!r} is not a policy objective: it trains with its own class (adaptive_po.pqn.PQN), not the objective loop") from None
        known = [*OBJECTIVES, *VALUE_ALGORITHMS]
        close = difflib.get_close_matches(str(name).lower(), known, n=1, cutoff=0.6)
        hint = f" did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown algorithm {name!r};{hint} available: {sorted(known)}") from None
