"""The objectives of the cited systems (CISPO, DAPO, SPO, adaptive-KL PPO, P3O, V-trace, R2VPO) against
numbers worked out by hand here, their gradients, and their behaviour under vmap(grad)."""

import math

import numpy as np
import pytest
import torch

from adaptive_po.update import compute_gae, compute_vtrace
from adaptive_po.objectives import (
    OBJECTIVES,
    PolicyBatch,
    cispo_loss,
    dapo_loss,
    get_objective,
    kl_ppo_loss,
    kl_ppo_update,
    initial_state,
    p3o_loss,
    r2vpo_loss,
    r2vpo_update,
    sampled_kl,
    spo_loss,
    truncated_is_loss,
)

D = torch.float64


def leaf(values):
    return torch.tensor(values, dtype=D, requires_grad=True)


def batch_with_ratios(log_prob, ratios, advantages, **extra):
    """A batch whose pi_theta/pi_b are exactly ``ratios``: log pi_b = log pi_theta - log rho."""
    lp = leaf(log_prob)
    blp = torch.tensor([l - math.log(r) for l, r in zip(log_prob, ratios)], dtype=D)
    return PolicyBatch(lp, blp, torch.tensor(advantages, dtype=D), **extra)


# -- CISPO ----------------------------------------------------------------------------------------
def test_cispo_loss_gradient_and_cap_fraction():
    lp = [-0.5, -1.0, -2.0, -0.3]
    rho = [2.0, 0.5, 1.1, 3.0]
    adv = [1.0, -2.0, 0.5, -1.0]
    batch = batch_with_ratios(lp, rho, adv)
    out = cispo_loss(batch, eps_high=0.28)
    cap = 1.0 + 0.28
    w = [cap, 0.5, 1.1, cap]  # min(rho, 1.28): samples 0 and 3 are capped, none zeroed
    expected = -(w[0] * lp[0] * adv[0] + w[1] * lp[1] * adv[1] + w[2] * lp[2] * adv[2] + w[3] * lp[3] * adv[3]) / 4
    assert out.loss.item() == pytest.approx(expected, abs=1e-12)
    out.loss.backward()
    # the weight is detached: d/d log pi = -w A / B, also above the cap (unlike a PPO clip)
    assert batch.log_prob.grad.tolist() == pytest.approx([-cap * 1.0 / 4, -0.5 * -2.0 / 4, -1.1 * 0.5 / 4, -cap * -1.0 / 4])
    assert out.stats["cap_fraction"].item() == pytest.approx(2 / 4)
    assert out.stats["cap_fraction"].dtype == D


def test_cispo_has_no_lower_bound():
    # rho = 0.1 keeps its own weight 0.1 (no clamp at 1 - eps)
    batch = batch_with_ratios([-1.0], [0.1], [1.0])
    cispo_loss(batch).loss.backward()
    assert batch.log_prob.grad.item() == pytest.approx(-0.1)
    with pytest.raises(ValueError, match="eps_high"):
        cispo_loss(batch, eps_high=0.0)


# -- DAPO -----------------------------------------------------------------------------------------
def test_dapo_asymmetric_clip_values_and_zero_gradient_regions():
    rho = [1.5, 1.25, 0.7, 0.7, 1.5]
    adv = [1.0, 1.0, -1.0, 1.0, -1.0]
    batch = batch_with_ratios([-1.0] * 5, rho, adv)
    out = dapo_loss(batch, clip_range=0.2, clip_range_high=0.28)
    # per sample min(rho A, clip(rho, 0.8, 1.28) A)
    s0 = min(1.5 * 1.0, 1.28 * 1.0)  # 1.28, clipped above: no gradient
    s1 = min(1.25 * 1.0, 1.25 * 1.0)  # 1.25 inside [0.8, 1.28] (a symmetric 0.2 clip would cut it)
    s2 = min(0.7 * -1.0, 0.8 * -1.0)  # -0.8, clipped below: no gradient
    s3 = min(0.7 * 1.0, 0.8 * 1.0)  # 0.7, unclipped branch: gradient
    s4 = min(1.5 * -1.0, 1.28 * -1.0)  # -1.5, unclipped branch: gradient
    assert out.loss.item() == pytest.approx(-(s0 + s1 + s2 + s3 + s4) / 5, abs=1e-12)
    out.loss.backward()
    # d(rho A)/d log pi = rho A where the unclipped branch is active, 0 where clipped
    assert batch.log_prob.grad.tolist() == pytest.approx([0.0, -1.25 / 5, 0.0, -0.7 / 5, 1.5 / 5])
    assert out.stats["cap_fraction"].item() == pytest.approx(4 / 5)  # 1.5, 0.7, 0.7, 1.5 outside


def test_dapo_with_symmetric_range_is_ppo_and_validates():
    from adaptive_po.objectives import ppo_clip_loss

    a = batch_with_ratios([-1.0, -0.5, -2.0], [1.3, 0.6, 1.0], [1.0, -1.0, 2.0])
    b = batch_with_ratios([-1.0, -0.5, -2.0], [1.3, 0.6, 1.0], [1.0, -1.0, 2.0])
    assert dapo_loss(a, clip_range=0.2, clip_range_high=0.2).loss.item() == pytest.approx(
        ppo_clip_loss(b, clip_range=0.2).loss.item(), abs=1e-12
    )
    with pytest.raises(ValueError, match="clip_range_high"):
        dapo_loss(a, clip_range_high=-0.1)


# -- SPO ------------------------------------------------------------------------------------------
def test_spo_loss_and_gradient():
    eps = 0.2
    rho = [1.5, 0.5, 1.0]
    adv = [1.0, -2.0, 0.5]
    batch = batch_with_ratios([-0.7, -1.2, -0.1], rho, adv)
    out = spo_loss(batch, eps=eps)
    # rho A - |A| / (2 eps) (rho - 1)^2
    s0 = 1.5 * 1.0 - 1.0 / 0.4 * 0.5**2  # 0.875
    s1 = 0.5 * -2.0 - 2.0 / 0.4 * 0.5**2  # -2.25
    s2 = 1.0 * 0.5 - 0.5 / 0.4 * 0.0  # 0.5
    assert out.loss.item() == pytest.approx(-(s0 + s1 + s2) / 3, abs=1e-12)
    out.loss.backward()
    # d/d log pi of the surrogate: rho A - |A| / eps (rho - 1) rho
    g0 = 1.5 * 1.0 - 1.0 / eps * 0.5 * 1.5  # -2.25: past the optimum 1 + eps, pushed back
    g1 = 0.5 * -2.0 - 2.0 / eps * -0.5 * 0.5  # 1.5: past the optimum 1 - eps, pushed back up
    g2 = 1.0 * 0.5 - 0.0  # on-policy: the plain policy gradient
    assert batch.log_prob.grad.tolist() == pytest.approx([-g0 / 3, -g1 / 3, -g2 / 3])
    assert out.stats["cap_fraction"].item() == pytest.approx(2 / 3)


def test_spo_surrogate_peaks_at_one_plus_eps_sign_a():
    # zero gradient exactly at rho = 1 + eps (A > 0) and rho = 1 - eps (A < 0)
    batch = batch_with_ratios([-1.0, -1.0], [1.2, 0.8], [3.0, -3.0])
    spo_loss(batch, eps=0.2).loss.backward()
    assert batch.log_prob.grad.tolist() == pytest.approx([0.0, 0.0], abs=1e-12)
    with pytest.raises(ValueError, match="eps"):
        spo_loss(batch, eps=0.0)


# -- PPO with the adaptive KL penalty --------------------------------------------------------------
def test_kl_ppo_loss_and_gradient():
    rho = [1.5, 0.5, 1.0]
    adv = [1.0, -1.0, 2.0]
    batch = batch_with_ratios([-1.0, -0.4, -2.0], rho, adv)
    batch.kl_reverse = leaf([0.1, 0.3, 0.2])
    coef = torch.tensor(2.0, dtype=D)
    out = kl_ppo_loss(batch, kl_coef=coef)
    policy = -(1.5 * 1.0 + 0.5 * -1.0 + 1.0 * 2.0) / 3
    assert out.loss.item() == pytest.approx(policy + 2.0 * (0.1 + 0.3 + 0.2) / 3, abs=1e-12)
    out.loss.backward()
    assert batch.log_prob.grad.tolist() == pytest.approx([-1.5 / 3, 0.5 / 3, -2.0 / 3])
    assert batch.kl_reverse.grad.tolist() == pytest.approx([2.0 / 3] * 3)
    stats = out.stats
    assert stats["kl_weight"].item() == 2.0 and stats["kl_weight"].dtype == D
    assert stats["policy_loss"].item() == pytest.approx(policy)
    assert stats["cap_fraction"].item() == 0.0


def test_kl_ppo_needs_the_reverse_kl_and_accepts_a_float_coefficient():
    batch = batch_with_ratios([-1.0], [1.0], [1.0])
    with pytest.raises(ValueError, match="kl_reverse"):
        kl_ppo_loss(batch, kl_coef=1.0)
    batch.kl_reverse = leaf([0.5])
    assert kl_ppo_loss(batch, kl_coef=0.5, kl_target=0.02).loss.item() == pytest.approx(-1.0 + 0.25)


def test_kl_ppo_update_three_branches():
    beta = torch.tensor(1.0, dtype=D)
    # d < d_targ / 1.5 -> halve; d > 1.5 d_targ -> double; in between -> unchanged
    assert kl_ppo_update({"kl_coef": beta}, torch.tensor(0.001, dtype=D))["kl_coef"].item() == 0.5
    assert kl_ppo_update({"kl_coef": beta}, torch.tensor(0.05, dtype=D))["kl_coef"].item() == 2.0
    assert kl_ppo_update({"kl_coef": beta}, torch.tensor(0.01, dtype=D))["kl_coef"].item() == 1.0
    # just inside the band on either side: unchanged (0.01 / 1.5 = 0.00667, 1.5 * 0.01 = 0.015)
    assert kl_ppo_update({"kl_coef": beta}, torch.tensor(0.007, dtype=D))["kl_coef"].item() == 1.0
    assert kl_ppo_update({"kl_coef": beta}, torch.tensor(0.014, dtype=D))["kl_coef"].item() == 1.0
    # the target is the same keyword the loss takes; extra arguments are ignored
    assert kl_ppo_update({"kl_coef": beta}, torch.tensor(0.1, dtype=D), kl_target=0.1, other=3)["kl_coef"].item() == 1.0
    # a Python float state (the registry's initial value) works too
    assert kl_ppo_update({"kl_coef": 1.0}, 0.001)["kl_coef"].item() == 0.5


def test_kl_ppo_update_is_elementwise_and_vmaps():
    beta = torch.tensor([1.0, 1.0, 4.0], dtype=D)
    kl = torch.tensor([0.001, 0.05, 0.01], dtype=D)
    expected = [0.5, 2.0, 4.0]
    assert kl_ppo_update({"kl_coef": beta}, kl)["kl_coef"].tolist() == expected
    mapped = torch.func.vmap(lambda b, d: kl_ppo_update({"kl_coef": b}, d)["kl_coef"])(beta, kl)
    assert mapped.tolist() == expected


# -- P3O ------------------------------------------------------------------------------------------
def p3o_batch():
    lp = [-1.0, -0.5, -2.0, -0.8]
    rho = [2.0, 0.5, 1.5, 0.4]
    adv = [1.0, -1.0, 2.0, -0.5]
    return lp, rho, adv, batch_with_ratios(
        lp,
        rho,
        adv,
        kl_behaviour=leaf([0.3, 0.1, 0.2, 0.4]),
        fresh=torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=D),
        replay_ess=torch.tensor(0.6, dtype=D),
    )


def test_p3o_fresh_and_replayed_mix():
    lp, rho, adv, batch = p3o_batch()
    out = p3o_loss(batch)
    e = 0.6
    # fresh: weight 1 whatever rho (A2C); replayed: min(rho, e_R)
    w = [1.0, 1.0, min(1.5, e), min(0.4, e)]
    policy = -sum(w[i] * lp[i] * adv[i] for i in range(4)) / 4
    kl_term = (1 - e) * (0.2 + 0.4) / 2  # mean KL over the 2 replayed samples only
    assert out.loss.item() == pytest.approx(policy + kl_term, abs=1e-12)
    out.loss.backward()
    assert batch.log_prob.grad.tolist() == pytest.approx([-w[i] * adv[i] / 4 for i in range(4)])
    assert batch.kl_behaviour.grad.tolist() == pytest.approx([0.0, 0.0, (1 - e) / 2, (1 - e) / 2])
    assert out.stats["cap_fraction"].item() == pytest.approx(1 / 2)  # 1.5 > 0.6, 0.4 is not
    assert out.stats["kl_weight"].item() == pytest.approx(1 - e)
    assert out.stats["policy_loss"].item() == pytest.approx(policy)


def test_p3o_all_fresh_is_a2c():
    lp, rho, adv, batch = p3o_batch()
    batch.fresh = torch.ones(4, dtype=D)
    batch.replay_ess = torch.tensor(1.0, dtype=D)
    out = p3o_loss(batch)
    assert out.loss.item() == pytest.approx(-sum(lp[i] * adv[i] for i in range(4)) / 4, abs=1e-12)
    assert out.stats["cap_fraction"].item() == 0.0 and out.stats["kl_weight"].item() == 0.0


def test_p3o_sampled_kl_and_validation():
    lp, rho, adv, batch = p3o_batch()
    out = p3o_loss(batch, kl="sampled")
    k = [math.log(r) + 1 / r - 1 for r in rho]
    w = [1.0, 1.0, 0.6, 0.4]
    expected = -sum(w[i] * lp[i] * adv[i] for i in range(4)) / 4 + 0.4 * (k[2] + k[3]) / 2
    assert out.loss.item() == pytest.approx(expected, abs=1e-12)
    assert sampled_kl(batch.log_prob, batch.behaviour_log_prob)[2].item() == pytest.approx(k[2])
    batch.fresh = None
    with pytest.raises(ValueError, match="fresh"):
        p3o_loss(batch)
    _, _, _, batch = p3o_batch()
    batch.kl_behaviour = None
    with pytest.raises(ValueError, match="analytic"):
        p3o_loss(batch)


# -- after R2VPO: the ratio-variance constraint and its multiplier ----------------------------------------
def test_r2vpo_loss_gradient_and_statistics():
    rho = [1.5, 0.5, 1.0, 1.0]
    adv = [1.0, -1.0, 2.0, 0.0]
    batch = batch_with_ratios([-1.0, -0.4, -2.0, -0.7], rho, adv)
    lam = torch.tensor(3.0, dtype=D)
    out = r2vpo_loss(batch, multiplier=lam, variance_target=0.05)
    # mean rho = 1, Var(rho) = (0.25 + 0.25 + 0 + 0) / 4 = 0.125
    policy = -(1.5 * 1.0 + 0.5 * -1.0 + 1.0 * 2.0 + 0.0) / 4
    assert out.loss.item() == pytest.approx(policy + 3.0 * (0.125 - 0.05), abs=1e-12)
    out.loss.backward()
    # d/d log pi_i = rho_i * dL/d rho_i; dL/d rho_i = -A_i / B + lambda * 2 (rho_i - mean rho) / B
    # (the mean's own derivative sums to zero against sum(rho - mean) = 0)
    expected = [r * (-a / 4 + 3.0 * 2 * (r - 1.0) / 4) for r, a in zip(rho, adv)]
    assert batch.log_prob.grad.tolist() == pytest.approx(expected, abs=1e-12)
    stats = out.stats
    assert stats["kl_weight"].item() == 3.0 and stats["policy_loss"].item() == pytest.approx(policy)
    assert stats["cap_fraction"].item() == pytest.approx(2 / 4)  # 1.5 and 0.5 lie outside [0.8, 1.2]
    # on-policy data (rho = 1 everywhere) has no variance: the plain policy gradient, shifted by -lambda v
    fresh = batch_with_ratios([-1.0, -0.5], [1.0, 1.0], [1.0, -3.0])
    assert r2vpo_loss(fresh, multiplier=2.0).loss.item() == pytest.approx(-(1.0 - 3.0) / 2 - 2.0 * 0.02)


def test_r2vpo_multiplier_by_projected_dual_ascent():
    lam = torch.tensor(1.0, dtype=D)
    # violated: lambda + 10 * (0.12 - 0.02) = 2; satisfied: 1 + 10 * (0.0 - 0.02) = 0.8
    assert r2vpo_update({"multiplier": lam}, 0.0, ratio_variance=torch.tensor(0.12, dtype=D))["multiplier"].item() == pytest.approx(2.0)
    assert r2vpo_update({"multiplier": lam}, 0.0, ratio_variance=torch.tensor(0.0, dtype=D))["multiplier"].item() == pytest.approx(0.8)
    # projected onto lambda >= 0
    assert r2vpo_update({"multiplier": torch.tensor(0.1, dtype=D)}, 0.0, ratio_variance=0.0, dual_step=50.0)["multiplier"].item() == 0.0
    # its own knobs, the loss's keywords; other arguments (the KL, the loss's knobs) are ignored
    out = r2vpo_update({"multiplier": lam}, 5.0, ratio_variance=0.5, variance_target=0.3, dual_step=2.0, initial_multiplier=7.0)
    assert out["multiplier"].item() == pytest.approx(1.4)
    # elementwise under vmap: one multiplier per member
    lams, rvs = torch.tensor([1.0, 0.05, 2.0], dtype=D), torch.tensor([0.12, 0.0, 0.02], dtype=D)
    mapped = torch.func.vmap(lambda m, v: r2vpo_update({"multiplier": m}, 0.0, ratio_variance=v)["multiplier"])(lams, rvs)
    assert mapped.tolist() == pytest.approx([2.0, 0.0, 2.0])


def test_r2vpo_knobs_are_declared_and_its_start_value_is_one():
    from adaptive_po.bench.variants import objective_knobs
    from adaptive_po.zoo.search_space import knob_space

    assert objective_knobs("r2vpo") == ("variance_target", "dual_step", "initial_multiplier")
    assert set(knob_space("r2vpo")) == {"variance_target", "dual_step", "initial_multiplier"}
    spec = get_objective("r2vpo")
    assert initial_state(spec, {}) == {"multiplier": 1.0}
    assert initial_state(spec, {"initial_multiplier": 4.0}) == {"multiplier": 4.0}


def test_r2vpo_multiplier_follows_the_data_in_both_engines():
    """The SB3 class on stale data: after each update the multiplier moves by dual_step x (the
    variance of pi_theta/pi_b over the update's data under the updated parameters - the target),
    projected onto >= 0; the population engine starts its members at the same knob."""
    import dataclasses

    from adaptive_po import BatchPolicyOptimization
    from adaptive_po import distributions as Dist
    from adaptive_po.environments import make_vec_env
    from adaptive_po.population import Member, PopulationLearner

    kwargs = dict(n_steps=16, batch_size=32, n_epochs=2, learning_rate=3e-3)
    model = BatchPolicyOptimization(
        "MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=1), objective="r2vpo", seed=1, device="cpu",
        policy_lag=2, objective_kwargs={"initial_multiplier": 0.5, "variance_target": 0.001}, **kwargs,
    )
    spec = model.objective_spec
    steps, datas, checked = [], [], []

    def spy(state, kl, *, ratio_variance, **arguments):  # type: ignore[no-untyped-def]
        new = spec.update_state(state, kl, ratio_variance=ratio_variance, **arguments)
        steps.append((float(state["multiplier"]), float(ratio_variance), float(new["multiplier"])))
        return new

    def after(stats):  # type: ignore[no-untyped-def]
        data = datas[-1]
        with torch.no_grad():
            log_prob = Dist.log_prob(model.kind, model._dist_params(data), data["actions"])
        rho = torch.exp((log_prob - data["behaviour_log_prob"]).double())
        checked.append(float(rho.var(unbiased=False)))

    model.objective_spec = dataclasses.replace(spec, update_state=spy)
    model.add_epoch_listener(lambda epoch, rows, data: datas.append(data))
    model.add_update_listener(after)
    model.learn(4 * 32)
    assert len(steps) == len(checked) == 4 and steps[0][0] == 0.5
    for (old, variance, new), expected_variance in zip(steps, checked):
        assert variance == pytest.approx(expected_variance, rel=1e-4)
        assert new == pytest.approx(max(0.0, old + 10.0 * (variance - 0.001)), rel=1e-5)
    assert steps[-1][2] > 0.5  # lag 2 with a small target: the constraint binds and lambda grows
    env = make_vec_env("CartPole-v1", n_envs=2, seed=1)
    learner = PopulationLearner(env.observation_space, env.action_space, [Member(1), Member(2)], objective="r2vpo",
                                objective_kwargs={"initial_multiplier": 0.5}, **kwargs)
    assert learner.objective_state["multiplier"].tolist() == [0.5, 0.5]


# -- vmap(grad) over a population ------------------------------------------------------------------
def test_kl_ppo_under_vmap_grad_with_per_member_coefficients():
    blp = torch.tensor([-1.0, -0.5, -2.0, -0.3], dtype=D)
    adv = torch.tensor([1.0, -1.0, 0.5, 2.0], dtype=D)
    lps = blp + torch.tensor([[0.1, -0.2, 0.0, 0.3], [0.0, 0.0, 0.0, 0.0], [-0.4, 0.2, 0.1, -0.1]], dtype=D)
    coefs = torch.tensor([0.0, 1.0, 3.0], dtype=D)

    def loss(lp, coef):
        kl_rev = 0.5 * (lp - blp) ** 2  # a stand-in KL with a known gradient, lp - blp
        out = kl_ppo_loss(PolicyBatch(lp, blp, adv, kl_reverse=kl_rev), kl_coef=coef)
        return out.loss, out.stats

    grads, stats = torch.func.vmap(torch.func.grad(loss, has_aux=True))(lps, coefs)
    for m in range(3):
        for i in range(4):
            x = (lps[m, i] - blp[i]).item()
            expected = (-math.exp(x) * adv[i].item() + coefs[m].item() * x) / 4
            assert grads[m, i].item() == pytest.approx(expected, abs=1e-12)
    assert stats["kl_weight"].tolist() == [0.0, 1.0, 3.0]


def test_p3o_under_vmap_grad_with_per_member_replay_ess():
    blp = torch.tensor([-1.0, -0.5, -2.0, -0.3], dtype=D)
    adv = torch.tensor([1.0, -1.0, 0.5, 2.0], dtype=D)
    fresh = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=D)
    lps = blp + torch.tensor([[0.1, -0.2, 0.0, 0.3], [0.0, 0.0, 0.0, 0.0], [-0.4, 0.2, 0.1, -0.1]], dtype=D)
    ess = torch.tensor([1.0, 0.5, 0.9], dtype=D)

    def loss(lp, e):
        kl = (lp - blp) ** 2  # stand-in KL with gradient 2 (lp - blp)
        out = p3o_loss(PolicyBatch(lp, blp, adv, kl_behaviour=kl, fresh=fresh, replay_ess=e))
        return out.loss, out.stats

    grads, stats = torch.func.vmap(torch.func.grad(loss, has_aux=True))(lps, ess)
    for m in range(3):
        e = ess[m].item()
        caps = 0
        for i in range(4):
            x = (lps[m, i] - blp[i]).item()
            replayed = 1.0 - fresh[i].item()
            w = 1.0 if not replayed else min(math.exp(x), e)
            caps += replayed * (math.exp(x) > e)
            expected = -w * adv[i].item() / 4 + (1 - e) * replayed * 2 * x / 3
            assert grads[m, i].item() == pytest.approx(expected, abs=1e-12)
        assert stats["kl_weight"][m].item() == pytest.approx(1 - e)
        assert stats["cap_fraction"][m].item() == pytest.approx(caps / 3)


@pytest.mark.parametrize("fn", [cispo_loss, dapo_loss, spo_loss])
def test_knob_only_objectives_vmap(fn):
    blp = torch.tensor([-1.0, -0.5, -2.0], dtype=D)
    adv = torch.tensor([1.0, -1.0, 0.5], dtype=D)
    lps = blp + torch.tensor([[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]], dtype=D)
    grads = torch.func.vmap(torch.func.grad(lambda lp: fn(PolicyBatch(lp, blp, adv)).loss))(lps)
    for m in range(2):
        lp = lps[m].clone().requires_grad_(True)
        fn(PolicyBatch(lp, blp, adv)).loss.backward()
        assert torch.allclose(grads[m], lp.grad)


# -- V-trace --------------------------------------------------------------------------------------
def test_vtrace_three_steps_with_a_terminal_in_the_middle():
    gamma = 0.9
    rewards = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    values = np.array([[0.5], [1.0], [2.0]], dtype=np.float32)
    # step 2 began an episode, so the transition at step 1 ended one
    episode_starts = np.array([[1.0], [0.0], [1.0]], dtype=np.float32)
    last_values = np.array([4.0], dtype=np.float32)
    last_dones = np.array([0.0], dtype=np.float32)
    log_rhos = np.array([[math.log(2.0)], [math.log(0.5)], [math.log(0.8)]], dtype=np.float32)
    adv, ret = compute_vtrace(rewards, values, episode_starts, last_values, last_dones, log_rhos, gamma)
    # the recursion by hand, rho_bar = c_bar = 1: clipped rho = c = (1, 0.5, 0.8)
    delta2 = 0.8 * (3.0 + gamma * 4.0 - 2.0)  # not terminal: bootstrap on last_values
    v2 = 2.0 + delta2
    delta1 = 0.5 * (2.0 + 0.0 - 1.0)  # terminal: no bootstrap, the trace is cut
    v1 = 1.0 + delta1
    delta0 = 1.0 * (1.0 + gamma * 1.0 - 0.5)
    v0 = 0.5 + delta0 + gamma * 1.0 * (v1 - 1.0)  # c_0 = min(1, 2) = 1
    assert ret[:, 0].tolist() == pytest.approx([v0, v1, v2], abs=1e-6)
    assert ret[:, 0].tolist() == pytest.approx([2.35, 1.5, 5.68], abs=1e-5)  # the same, worked out
    # the policy-gradient advantage r + gamma v_{s+1} - V(s), v after the last step = last_values
    a0 = 1.0 + gamma * v1 - 0.5
    a1 = 2.0 + 0.0 - 1.0
    a2 = 3.0 + gamma * 4.0 - 2.0
    assert adv[:, 0].tolist() == pytest.approx([a0, a1, a2], abs=1e-6)
    assert adv.dtype == np.float32 and ret.dtype == np.float32


def test_vtrace_truncation_levels_and_last_done():
    # rho_bar = 2, c_bar = 0.5, and the rollout ending on a terminal
    gamma = 0.5
    rewards = np.array([[1.0], [1.0]], dtype=np.float32)
    values = np.array([[0.0], [0.5]], dtype=np.float32)
    starts = np.zeros((2, 1), dtype=np.float32)
    log_rhos = np.array([[math.log(3.0)], [math.log(1.5)]], dtype=np.float32)
    adv, ret = compute_vtrace(rewards, values, starts, np.array([10.0], np.float32), np.array([1.0], np.float32),
                              log_rhos, gamma, rho_bar=2.0, c_bar=0.5)
    v1 = 0.5 + 1.5 * (1.0 + 0.0 - 0.5)  # terminal after the last step: last_values ignored
    v0 = 0.0 + 2.0 * (1.0 + gamma * 0.5 - 0.0) + gamma * 0.5 * (v1 - 0.5)  # min(2, 3), min(0.5, 3): the trace is c_bar's
    assert ret[:, 0].tolist() == pytest.approx([v0, v1], abs=1e-6)
    assert adv[:, 0].tolist() == pytest.approx([1.0 + gamma * v1 - 0.0, 1.0 - 0.5], abs=1e-6)
    with pytest.raises(ValueError, match="rho_bar"):
        compute_vtrace(rewards, values, starts, values[0], starts[0], log_rhos, gamma, rho_bar=0.0)


def test_vtrace_on_policy_equals_gae_lambda_one():
    rng = np.random.default_rng(0)
    n_steps, n_envs = 7, 3
    rewards = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    values = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    starts = (rng.random((n_steps, n_envs)) < 0.3).astype(np.float32)
    last_values = rng.normal(size=n_envs).astype(np.float32)
    last_dones = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    args = (rewards, values, starts, last_values, last_dones)
    adv, ret = compute_vtrace(*args, np.zeros((n_steps, n_envs), np.float32), 0.97)
    gae_adv, gae_ret = compute_gae(*args, 0.97, 1.0)
    np.testing.assert_allclose(adv, gae_adv, atol=1e-5)
    np.testing.assert_allclose(ret, gae_ret, atol=1e-5)


def test_vtrace_huge_log_ratios_do_not_overflow():
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        adv, ret = compute_vtrace(
            np.ones((2, 1), np.float32), np.zeros((2, 1), np.float32), np.zeros((2, 1), np.float32),
            np.zeros(1, np.float32), np.zeros(1, np.float32), np.array([[1000.0], [-1000.0]], np.float32), 1.0,
        )
    assert np.isfinite(adv).all() and np.isfinite(ret).all()
    assert ret[:, 0].tolist() == pytest.approx([1.0, 0.0])  # rho 1 (capped) then rho 0


# -- the registry ---------------------------------------------------------------------------------
NEW = ("cispo", "dapo", "spo", "kl-ppo", "vtrace", "p3o", "r2vpo", "quatro")


def test_new_registry_entries():
    for name in NEW:
        spec = get_objective(name)
        assert spec.description and "\n" not in spec.description
    assert get_objective("cispo").loss is cispo_loss
    assert get_objective("dapo").loss is dapo_loss
    assert get_objective("spo").loss is spo_loss
    kl = get_objective("kl-ppo")
    assert kl.loss is kl_ppo_loss and kl.needs_reverse_kl and kl.update_state is kl_ppo_update
    assert dict(kl.state) == {"kl_coef": 1.0}
    vt = get_objective("vtrace")
    assert vt.loss is truncated_is_loss and dict(vt.kwargs) == {"is_truncation": 1.0}
    assert vt.advantage_estimator == "vtrace"
    p3o = get_objective("p3o")
    assert p3o.loss is p3o_loss and p3o.needs_kl and p3o.needs_replay_info and p3o.replay == 2
    r2 = get_objective("r2vpo")
    assert r2.loss is r2vpo_loss and r2.update_state is r2vpo_update and dict(r2.state) == {"multiplier": 1.0}
    assert not (r2.needs_kl or r2.needs_reverse_kl or r2.needs_proximal or r2.needs_replay_info)
    assert list(OBJECTIVES)[-len(NEW):] == list(NEW)
    assert "gspo" not in OBJECTIVES


@pytest.mark.parametrize("name", NEW)
def test_new_entries_finite_at_extreme_log_ratios(name):
    spec = get_objective(name)
    # SPO's penalty and R2VPO's variance are quadratic in rho: exp(2 * 50) overflows float32, so they get +-20
    big = 20.0 if name in ("spo", "r2vpo") else 50.0
    log_ratios = torch.tensor([big, -50.0, 0.0, 3.0, -3.0, big])
    lp = (torch.full((6,), -1.0) + log_ratios).requires_grad_(True)
    batch = PolicyBatch(
        lp,
        torch.full((6,), -1.0),
        torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0]),
        kl_behaviour=torch.full((6,), 5.0, requires_grad=True),
        kl_reverse=torch.full((6,), 5.0, requires_grad=True),
        fresh=torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 0.0]),
        replay_ess=torch.tensor(0.3, dtype=D),
        query_dual=torch.full((6,), 3.0),
    )
    state = {k: torch.tensor(v) for k, v in spec.state.items()}
    out = spec.loss(batch, **spec.kwargs, **state)
    out.loss.backward()
    assert torch.isfinite(out.loss) and out.loss.dtype == torch.float32
    assert torch.isfinite(lp.grad).all()
    stats = out.stats
    assert all(torch.isfinite(v) and v.dtype == D for v in stats.values())


def test_the_list_command_shows_r2vpo_with_its_knobs_and_source(capsys):
    from adaptive_po.cli import main

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    line = out[out.index("  r2vpo "):].splitlines()
    assert "arXiv 2601.03320" in line[0]
    assert line[1].split() == ["knobs:", "variance_target", "0.02,", "dual_step", "10,", "initial_multiplier", "1"]
