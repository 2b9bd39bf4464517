"""The objectives against the worked numbers of ALGORITHM.md and float64 references."""

import math

import pytest
import torch

from adaptive_po.objectives import (
    OBJECTIVES,
    PolicyBatch,
    batch_statistics,
    categorical_kl,
    decoupled_ppo_loss,
    diag_gaussian_kl,
    effective_sample_size,
    effective_sample_size_from_log_ratios,
    ess_policy_loss,
    get_objective,
    ppo_clip_loss,
    sampled_kl,
    truncated_is_loss,
)


def t(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


# -- effective sample size -----------------------------------------------------------------------
def test_ess_worked_example():
    assert effective_sample_size(t([4.0, 1.0, 1.0, 1.0])) == pytest.approx(49 / 76, abs=1e-12)
    assert effective_sample_size(t([4.0, 1.0, 1.0, 1.0])) == pytest.approx(0.644737, abs=1e-6)  # 49/76 as a decimal


def test_ess_is_scale_invariant():
    assert effective_sample_size(t([8.0, 2.0, 2.0, 2.0])) == pytest.approx(49 / 76, abs=1e-12)
    assert effective_sample_size(t([4e30, 1e30, 1e30, 1e30], torch.float64)) == pytest.approx(49 / 76, abs=1e-12)


def test_ess_near_uniform():
    ess = effective_sample_size(t([1.1, 1.0, 0.9, 1.0]))
    assert round(ess, 3) == 0.995
    assert 1 - ess == pytest.approx(0.005, abs=5e-4)


@pytest.mark.parametrize("value", [1e-6, 0.3, 1.0, 7.0, 1e6])
def test_ess_all_equal_is_one(value):
    assert effective_sample_size(torch.full((17,), value)) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("k,n", [(1, 4), (3, 10), (5, 5), (2, 64)])
def test_ess_k_of_n_nonzero(k, n):
    ratios = torch.zeros(n)
    ratios[:k] = 2.5
    assert effective_sample_size(ratios) == pytest.approx(k / n, abs=1e-12)
    log_ratios = torch.full((n,), -math.inf)
    log_ratios[:k] = math.log(2.5)
    assert effective_sample_size_from_log_ratios(log_ratios).item() == pytest.approx(k / n, abs=1e-12)


def test_ess_empty_and_non_finite_give_one():
    assert effective_sample_size(torch.zeros(0)) == 1.0
    assert effective_sample_size(t([1.0, float("nan")])) == 1.0
    assert effective_sample_size(t([1.0, float("inf")])) == 1.0
    assert effective_sample_size_from_log_ratios(torch.zeros(0)).item() == 1.0
    assert effective_sample_size_from_log_ratios(t([0.0, float("nan")])).item() == 1.0


def test_ess_from_log_ratios_matches_ratios_and_survives_extremes():
    log_ratios = torch.randn(100, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    direct = effective_sample_size(log_ratios.exp())
    assert effective_sample_size_from_log_ratios(log_ratios).item() == pytest.approx(direct, rel=1e-12)
    # +-50 would overflow float32 squares; +-800 would overflow float64 exp: log-sum-exp copes
    extreme = t([50.0, -50.0, 0.0, 0.0])
    assert effective_sample_size_from_log_ratios(extreme).item() == pytest.approx(0.25, abs=1e-12)
    huge = torch.tensor([800.0, 800.0, 0.0, 0.0], dtype=torch.float64)
    assert effective_sample_size_from_log_ratios(huge).item() == pytest.approx(0.5, abs=1e-12)


def test_ess_returns_float64_without_gradient():
    log_ratios = torch.randn(8, requires_grad=True)
    ess = effective_sample_size_from_log_ratios(log_ratios)
    assert ess.dtype == torch.float64 and not ess.requires_grad


# -- the ESS loss ---------------------------------------------------------------------------------
def make_batch(log_ratios, advantages, behaviour_log_prob=None, kl=None):
    log_ratios = torch.as_tensor(log_ratios, dtype=torch.float32)
    blp = (
        torch.as_tensor(behaviour_log_prob, dtype=torch.float32)
        if behaviour_log_prob is not None
        else torch.full_like(log_ratios, -0.7)
    )
    log_prob = (blp + log_ratios).clone().requires_grad_(True)
    return PolicyBatch(log_prob=log_prob, behaviour_log_prob=blp, advantages=torch.as_tensor(advantages, dtype=torch.float32), kl_behaviour=kl)


def test_fresh_batch_reduces_to_plain_score_function():
    advantages = torch.tensor([1.0, -2.0, 0.5, 3.0])
    batch = make_batch([0.0, 0.0, 0.0, 0.0], advantages, kl=torch.zeros(4, requires_grad=True))
    out = ess_policy_loss(batch)
    expected = -(batch.log_prob * advantages).mean()
    assert out.loss.item() == pytest.approx(expected.item(), abs=1e-7)
    assert batch_statistics(batch)["ess"].item() == 1.0
    assert out.stats["kl_weight"].item() == 0.0
    out.loss.backward()
    assert torch.allclose(batch.log_prob.grad, -advantages / 4)


def test_sampled_form_per_sample_gradient_matches_formula():
    log_ratios = torch.tensor([0.9, -0.4, 0.2, -1.3, 0.05])
    advantages = torch.tensor([1.5, -0.5, 2.0, 0.7, -1.1])
    batch = make_batch(log_ratios, advantages)
    out = ess_policy_loss(batch, kl="sampled")
    out.loss.backward()
    rho = log_ratios.double().exp()
    e = effective_sample_size(rho)
    expected = (-torch.minimum(rho, torch.tensor(e, dtype=torch.float64)) * advantages.double() + (1 - e) * (1 - 1 / rho)) / len(rho)
    assert torch.allclose(batch.log_prob.grad.double(), expected, atol=1e-6)
    batch.kl_behaviour = torch.zeros(5)
    assert batch_statistics(batch)["ess"].item() == pytest.approx(e, abs=1e-6)  # float32 log-ratio rounding


def test_no_gradient_reaches_ess_or_weight():
    # If e_B or the weight carried gradient, d loss / d log_prob would differ from the formula
    # above; check directly too: the statistics are detached and the cap is applied to rho.
    log_ratios = torch.tensor([2.0, 0.0, 0.0, 0.0])
    advantages = torch.tensor([1.0, 1.0, 1.0, 1.0])
    batch = make_batch(log_ratios, advantages)
    out = ess_policy_loss(batch, kl="sampled", regularizer=False)
    assert all(not v.requires_grad for v in out.stats.values())
    out.loss.backward()
    e = effective_sample_size(log_ratios.exp())
    # w = min(rho, e) = e for the first (rho = e^2 > e) and min(1, e) = e for the rest
    assert torch.allclose(batch.log_prob.grad, torch.full((4,), -e / 4), atol=1e-7)
    assert out.stats["cap_fraction"].item() == 1.0


def test_cap_off_uses_the_uncapped_importance_weight():
    log_ratios = torch.tensor([1.0, -1.0, 0.0])
    advantages = torch.tensor([1.0, 1.0, 1.0])
    batch = make_batch(log_ratios, advantages)
    ess_policy_loss(batch, kl="sampled", cap=False, regularizer=False).loss.backward()
    assert torch.allclose(batch.log_prob.grad, -log_ratios.exp() / 3, atol=1e-6)


def test_regularizer_switch_and_analytic_kl_term():
    log_ratios = torch.tensor([1.0, -0.5, 0.3, 0.0])
    advantages = torch.tensor([0.2, -0.1, 0.4, 1.0])
    kl = torch.tensor([0.3, 0.1, 0.05, 0.2], requires_grad=True)
    with_reg = ess_policy_loss(make_batch(log_ratios, advantages, kl=kl))
    without = ess_policy_loss(make_batch(log_ratios, advantages, kl=kl), regularizer=False)
    e = batch_statistics(make_batch(log_ratios, advantages, kl=kl))["ess"].item()
    assert with_reg.loss.item() - without.loss.item() == pytest.approx((1 - e) * kl.mean().item(), abs=1e-6)
    with_reg.loss.backward()
    assert torch.allclose(kl.grad, torch.full((4,), (1 - e) / 4), atol=1e-7)


def test_analytic_form_requires_behaviour_distribution():
    with pytest.raises(ValueError, match="analytic"):
        ess_policy_loss(make_batch([0.1, 0.2], [1.0, 1.0]))
    with pytest.raises(ValueError, match="kl"):
        ess_policy_loss(make_batch([0.1, 0.2], [1.0, 1.0]), kl="backward")


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_losses_finite_at_extreme_log_ratios(name):
    # SPO's penalty and R2VPO's variance are quadratic in the ratio: faithful to their formulas, they
    # overflow float32 past a log-ratio of about 44, so they are checked at +-20
    extreme = 20.0 if name in ("spo", "r2vpo") else 50.0
    log_ratios = torch.tensor([extreme, -extreme, 0.0, 3.0, -3.0, extreme])
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0])
    batch = make_batch(log_ratios, advantages, kl=torch.full((6,), 5.0, requires_grad=True))
    batch.proximal_log_prob = batch.behaviour_log_prob + 1.0
    batch.kl_reverse = torch.full((6,), 7.0, requires_grad=True)
    batch.fresh = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    batch.replay_ess = torch.tensor(0.3, dtype=torch.float64)
    batch.batch_ess = torch.tensor(0.2, dtype=torch.float64)
    batch.query_dual = torch.full((6,), 2.0)
    spec = get_objective(name)
    out = spec.loss(batch, **spec.kwargs, **{k: torch.tensor(v) for k, v in spec.state.items()})
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert torch.isfinite(batch.log_prob.grad).all()
    assert all(torch.isfinite(v) for v in out.stats.values())
    assert all(torch.isfinite(v) for v in batch_statistics(batch).values())


def test_statistics_keys_and_values():
    batch = make_batch([math.log(4), 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], kl=torch.tensor([0.5, 0.1, 0.1, 0.1]))
    out = ess_policy_loss(batch, kl="sampled")
    s = {k: v.item() for k, v in {**batch_statistics(batch), **out.stats}.items()}
    assert set(s) == {"ess", "ratio_max", "ratio_mean", "ratio_above_2", "kl_behaviour", "kl_behaviour_sampled", "cap_fraction", "kl_weight", "policy_loss"}
    assert s["kl_behaviour"] == pytest.approx(0.2)
    # log r + 1/r - 1 at r = 4 and three times 0
    assert s["kl_behaviour_sampled"] == pytest.approx((math.log(4) + 0.25 - 1) / 4, rel=1e-6)
    assert s["ess"] == pytest.approx(49 / 76, abs=1e-6)
    assert s["ratio_max"] == pytest.approx(4.0, rel=1e-6)
    assert s["ratio_mean"] == pytest.approx(7 / 4, rel=1e-6)
    assert s["ratio_above_2"] == pytest.approx(0.25)
    assert s["cap_fraction"] == pytest.approx(1.0)  # 4 > e and 1 > e
    assert s["kl_weight"] == pytest.approx(1 - 49 / 76, abs=1e-6)


def test_an_objectives_output_fills_the_statistics_it_leaves_out():
    batch = make_batch([0.5, -0.5], [1.0, -1.0], kl=torch.zeros(2))
    out = truncated_is_loss(batch)
    s = out.stats
    assert s["kl_weight"].item() == 0.0 and s["policy_loss"].item() == pytest.approx(out.loss.item())
    assert s["cap_fraction"].item() == 0.5  # rho = e^0.5 > 1 is truncated


def test_batch_statistics_need_the_analytic_kl():
    with pytest.raises(ValueError, match="kl_behaviour"):
        batch_statistics(make_batch([0.1], [1.0]))


def test_unknown_objective_is_named():
    with pytest.raises(ValueError, match="'nope'"):
        get_objective("nope")


# -- analytic KL vs float64 references ------------------------------------------------------------
def test_categorical_kl_matches_float64_reference():
    g = torch.Generator().manual_seed(1)
    p_logits, q_logits = torch.randn(5, 6, generator=g), torch.randn(5, 6, generator=g) * 2
    p = torch.softmax(p_logits.double(), -1)
    q = torch.softmax(q_logits.double(), -1)
    reference = (p * (p.log() - q.log())).sum(-1)
    assert torch.allclose(categorical_kl(p_logits, q_logits).double(), reference, atol=1e-6)
    ref_torch = torch.distributions.kl_divergence(
        torch.distributions.Categorical(logits=p_logits.double()), torch.distributions.Categorical(logits=q_logits.double())
    )
    assert torch.allclose(reference, ref_torch, atol=1e-12)
    assert torch.allclose(categorical_kl(p_logits, p_logits), torch.zeros(5), atol=1e-7)


def test_diag_gaussian_kl_matches_float64_reference():
    g = torch.Generator().manual_seed(2)
    mp, mq = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    lp, lq = torch.randn(4, 3, generator=g) * 0.5, torch.randn(4, 3, generator=g) * 0.5
    sp, sq = lp.double().exp(), lq.double().exp()
    reference = (torch.log(sq / sp) + (sp**2 + (mp.double() - mq.double()) ** 2) / (2 * sq**2) - 0.5).sum(-1)
    assert torch.allclose(diag_gaussian_kl(mp, lp, mq, lq).double(), reference, atol=1e-5)
    # and against a Monte-Carlo-free closed form of torch for one dimension
    ref_torch = torch.distributions.kl_divergence(
        torch.distributions.Normal(mp.double(), sp), torch.distributions.Normal(mq.double(), sq)
    ).sum(-1)
    assert torch.allclose(reference, ref_torch, atol=1e-10)


def test_sampled_kl_is_zero_on_policy_and_positive_off():
    lp = torch.tensor([-0.5, -1.0])
    assert torch.allclose(sampled_kl(lp, lp), torch.zeros(2))
    assert (sampled_kl(lp + 0.3, lp) > 0).all() and (sampled_kl(lp - 0.3, lp) > 0).all()


# -- the baselines --------------------------------------------------------------------------------
def test_ppo_clip_matches_hand_computation():
    log_ratios = torch.tensor([math.log(1.5), math.log(0.5), 0.0])
    advantages = torch.tensor([1.0, 1.0, -1.0])
    out = ppo_clip_loss(make_batch(log_ratios, advantages), clip_range=0.2)
    # min(1.5, 1.2) = 1.2 ; min(0.5, 0.8) = 0.5 ; min(-1, -1) = -1
    assert out.loss.item() == pytest.approx(-(1.2 + 0.5 - 1.0) / 3, abs=1e-6)
    assert out.stats["cap_fraction"].item() == pytest.approx(2 / 3)


def test_decoupled_ppo_on_policy_equals_ppo():
    log_ratios = torch.tensor([0.1, -0.3, 0.25, 0.0])
    advantages = torch.tensor([1.0, -0.5, 0.3, 2.0])
    a = make_batch(log_ratios, advantages)
    a.proximal_log_prob = a.behaviour_log_prob.clone()
    b = make_batch(log_ratios, advantages)
    assert decoupled_ppo_loss(a, clip_range=0.2).loss.item() == pytest.approx(ppo_clip_loss(b, clip_range=0.2).loss.item(), abs=1e-7)
    with pytest.raises(ValueError, match="proximal"):
        decoupled_ppo_loss(b)


def test_truncated_is_caps_at_constant():
    log_ratios = torch.tensor([math.log(3.0), math.log(0.5)])
    batch = make_batch(log_ratios, torch.tensor([1.0, 1.0]))
    truncated_is_loss(batch, is_truncation=1.0).loss.backward()
    assert torch.allclose(batch.log_prob.grad, torch.tensor([-0.5, -0.25]), atol=1e-6)


def test_decayed_clip_range_of_zero_is_allowed():
    # a linearly decayed clip range reaches 0 at the last update of a run
    batch = make_batch([0.3, -0.2], [1.0, -1.0])
    out = ppo_clip_loss(batch, clip_range=0.0)
    assert torch.isfinite(out.loss) and out.stats["cap_fraction"].item() == 1.0
    with pytest.raises(ValueError, match="clip_range"):
        ppo_clip_loss(make_batch([0.3], [1.0]), clip_range=-0.1)
