"""After QUATRO (``quatro``): the per-query KL trust region, by hand.

The dual's solution against a brute-force grid of the dual function; the loss and its gradient
against a second formula and finite differences; the limits (a radius near 0: no step; a radius
past ``log T``: the plain importance-weighted score-function step); the trust region's own claim
(the Lagrangian's maximizer is pi_old exp(A / lambda) / Z, at KL = radius); and the update's wiring
(a query is one environment lane of one rollout, lambda rescaled with the minibatch's advantages).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from adaptive_po.objectives import (
    OBJECTIVES,
    PolicyBatch,
    check_arguments,
    get_objective,
    quatro_dual,
    quatro_loss,
    quatro_query_duals,
    tilted_kl,
)
from adaptive_po.update import advantage_scale, minibatch_columns, minibatch_loss


def brute_force_dual(advantages: np.ndarray, radius: float) -> float:
    """argmin over a fine log grid of g(lambda) = lambda radius + lambda log mean exp(A / lambda)."""
    grid = np.logspace(-3, 3, 600_001)
    z = advantages[:, None] / grid[None, :]
    top = z.max(0)
    g = grid * radius + grid * (top + np.log(np.exp(z - top).mean(0)))
    return float(grid[g.argmin()])


@pytest.mark.parametrize("radius", [0.003, 0.01, 0.1, 0.5])
@pytest.mark.parametrize("size", [2, 5, 16])
def test_the_dual_is_the_brute_force_minimizer_of_the_dual_function(radius, size):
    rng = np.random.default_rng(size)
    advantages = rng.normal(size=(3, size)) * np.array([[0.5], [1.0], [3.0]])
    solved = quatro_dual(torch.as_tensor(advantages), radius=radius).numpy()
    for row, value in zip(advantages, solved):
        if radius >= math.log(size):  # slack: handled by the limits test
            continue
        assert value == pytest.approx(brute_force_dual(row, radius), rel=2e-4)
    # and the tilt at the solution sits on the radius
    kl = tilted_kl(torch.as_tensor(advantages), torch.as_tensor(solved)).numpy()
    assert kl == pytest.approx(np.full(3, radius), rel=1e-6)


def test_the_dual_is_shift_invariant_scale_equivariant_and_zero_without_spread():
    a = torch.tensor([[1.0, -0.5, 2.0, 0.25]], dtype=torch.float64)
    base = quatro_dual(a, radius=0.02)
    assert quatro_dual(a + 7.0, radius=0.02) == pytest.approx(base.item(), rel=1e-9)
    assert quatro_dual(3.0 * a, radius=0.02) == pytest.approx(3.0 * base.item(), rel=1e-9)
    assert quatro_dual(torch.full((1, 4), 2.5), radius=0.02).item() == 0.0
    # a smaller radius is a tighter region: a larger multiplier
    assert quatro_dual(a, radius=0.005).item() > base.item() > quatro_dual(a, radius=0.2).item()


def test_the_dual_limits_slack_above_log_t_and_capped_below():
    a = torch.tensor([[1.0, -1.0, 0.0, 0.5]], dtype=torch.float64)
    spread = (a - a.mean()).abs().max().item()  # the largest |A - mean|: 1.125
    # a radius past log T (the greedy tilt's KL when one sample is best) never binds: lambda at its floor
    assert quatro_dual(a, radius=math.log(4) + 0.1).item() == pytest.approx(1e-3 * spread, rel=1e-6)
    # a vanishing radius: lambda at its ceiling
    assert quatro_dual(a, radius=1e-12).item() == pytest.approx(1e3 * spread, rel=1e-6)


def test_the_query_duals_group_consecutive_samples_and_keep_leading_dimensions():
    torch.manual_seed(0)
    advantages = torch.randn(2, 12)  # two members, 3 queries of 4 samples each
    duals = quatro_query_duals(advantages, 4, radius=0.05)
    assert duals.shape == (2, 12)
    for member in range(2):
        for query in range(3):
            block = advantages[member, 4 * query : 4 * query + 4]
            expected = quatro_dual(block[None].double(), radius=0.05).item()
            assert torch.allclose(duals[member, 4 * query : 4 * query + 4], torch.full((4,), expected, dtype=torch.float64))
    with pytest.raises(ValueError, match="12 samples do not split into queries of 5"):
        quatro_query_duals(advantages, 5, radius=0.05)


def batch(log_ratios, advantages, duals) -> PolicyBatch:
    log_prob = torch.tensor(log_ratios, dtype=torch.float64, requires_grad=True)
    return PolicyBatch(
        log_prob=log_prob, behaviour_log_prob=torch.zeros(len(log_ratios), dtype=torch.float64),
        advantages=torch.tensor(advantages, dtype=torch.float64), kl_behaviour=torch.zeros(len(log_ratios), dtype=torch.float64),
        query_dual=torch.tensor(duals, dtype=torch.float64),
    )


def test_the_loss_and_its_gradient_by_a_second_formula_and_by_finite_differences():
    log_ratios, advantages, duals = [0.3, -0.2, 0.0, 1.1], [1.0, -2.0, 0.5, -0.7], [0.5, 0.5, 2.0, 2.0]
    b = batch(log_ratios, advantages, duals)
    out = quatro_loss(b)
    r = np.exp(log_ratios)
    by_hand = -np.mean(r * np.array(advantages) - np.array(duals) * (r * np.array(log_ratios) - r + 1.0))
    assert out.loss.item() == pytest.approx(by_hand, rel=1e-12)
    out.loss.backward()
    # d/d log pi of r (A - lambda (r log r - r + 1)) is r (A - lambda log r)
    second = -(r * (np.array(advantages) - np.array(duals) * np.array(log_ratios))) / len(r)
    assert b.log_prob.grad.numpy() == pytest.approx(second, rel=1e-10)
    for i in range(len(r)):
        step = np.zeros(len(r))
        step[i] = 1e-6
        up = quatro_loss(batch(list(np.array(log_ratios) + step), advantages, duals)).loss.item()
        down = quatro_loss(batch(list(np.array(log_ratios) - step), advantages, duals)).loss.item()
        assert (up - down) / 2e-6 == pytest.approx(second[i], rel=1e-6, abs=1e-9)
    assert out.stats["kl_weight"].item() == pytest.approx(np.mean(duals))
    assert out.stats["cap_fraction"].item() == pytest.approx(0.5)  # 0.3 and 1.1 leave [0.8, 1.2]


def test_at_the_behaviour_policy_the_gradient_is_the_plain_score_function_whatever_lambda():
    small = batch([0.0, 0.0, 0.0], [1.0, -1.0, 0.5], [0.1, 0.1, 0.1])
    large = batch([0.0, 0.0, 0.0], [1.0, -1.0, 0.5], [50.0, 50.0, 50.0])
    quatro_loss(small).loss.backward()
    quatro_loss(large).loss.backward()
    assert torch.allclose(small.log_prob.grad, large.log_prob.grad)
    assert torch.allclose(small.log_prob.grad, -torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64) / 3)


def maximize_lagrangian(advantages: torch.Tensor, radius: float, steps: int = 3000) -> torch.Tensor:
    """One query whose T samples are T actions of a uniform pi_old, each once: free logits trained on
    quatro's loss, with the query's dual from :func:`quatro_dual`; returns pi_theta."""
    t = advantages.numel()
    dual = quatro_dual(advantages[None].double(), radius=radius).expand(t).clone()
    logits = torch.zeros(t, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([logits], max_iter=steps, tolerance_grad=1e-12, tolerance_change=1e-14, line_search_fn="strong_wolfe")
    old = torch.full((t,), -math.log(t), dtype=torch.float64)

    def closure():
        optimizer.zero_grad()
        log_prob = torch.log_softmax(logits, 0)
        b = PolicyBatch(log_prob=log_prob, behaviour_log_prob=old, advantages=advantages.double(), kl_behaviour=torch.zeros(t, dtype=torch.float64), query_dual=dual)
        loss = quatro_loss(b, radius=radius).loss
        loss.backward()
        return loss

    optimizer.step(closure)
    return torch.softmax(logits.detach(), 0)


@pytest.mark.parametrize("radius", [0.002, 0.05, 0.3])
def test_the_lagrangians_maximizer_is_the_trust_region_step_at_the_radius(radius):
    advantages = torch.tensor([1.0, -0.5, 0.25, 2.0, -1.5])
    policy = maximize_lagrangian(advantages, radius)
    dual = quatro_dual(advantages[None].double(), radius=radius).item()
    closed_form = torch.softmax(advantages.double() / dual, 0)
    assert torch.allclose(policy, closed_form, atol=1e-6)
    kl = (policy * torch.log(policy * advantages.numel())).sum().item()
    assert kl == pytest.approx(radius, rel=1e-3)


def test_a_vanishing_radius_takes_no_step_and_a_radius_past_log_t_the_plain_score_function_step():
    advantages = torch.tensor([1.0, -0.5, 0.25, 2.0, -1.5])
    still = maximize_lagrangian(advantages, 1e-9)
    # lambda is at its ceiling, 1e3 x the spread: every log-ratio within 2 x spread / lambda = 2e-3
    assert torch.log(still * 5).abs().max().item() <= 2e-3
    assert (still * torch.log(still * 5)).sum().item() < 1e-6
    # past log T the multiplier sits at its floor (1e-3 x spread): the loss's gradient is the
    # importance-weighted score function's, -mean(r A), up to that floor's pull
    log_ratios, a = [0.4, -0.3, 0.1, 0.0, 0.2], [1.0, -0.5, 0.25, 2.0, -1.5]
    dual = quatro_dual(torch.tensor([a], dtype=torch.float64), radius=math.log(5) + 1.0).item()
    b = batch(log_ratios, a, [dual] * 5)
    quatro_loss(b).loss.backward()
    plain = batch(log_ratios, a, [0.0] * 5)
    (-(torch.exp(plain.log_prob) * plain.advantages).mean()).backward()
    assert torch.allclose(b.log_prob.grad, plain.log_prob.grad, atol=1e-3)


def test_the_registry_entry_declares_its_column_and_its_knob():
    spec = get_objective("quatro")
    assert spec.loss is quatro_loss and spec.query_dual is quatro_query_duals
    assert "after QUATRO" in spec.description
    assert minibatch_columns(spec)[-1] == "query_dual" and "query_dual" not in minibatch_columns(OBJECTIVES["ppo"])
    check_arguments(spec, {"radius": 0.05})
    with pytest.raises(ValueError, match="radius must be > 0, got 0"):
        check_arguments(spec, {"radius": 0})
    with pytest.raises(TypeError, match="clip_range"):
        check_arguments(spec, {"clip_range": 0.2})


def test_the_minibatch_loss_rescales_lambda_with_the_normalized_advantages():
    spec = get_objective("quatro")
    torch.manual_seed(1)
    n = 6
    advantages = torch.randn(n) * 4.0 + 1.0
    dist = torch.randn(n, 3, requires_grad=True)
    actions = torch.tensor([0, 1, 2, 0, 1, 2])
    behaviour = torch.randn(n, 3)
    behaviour_log_prob = torch.log_softmax(behaviour, -1)[torch.arange(n), actions]
    duals = torch.full((n,), 2.0)
    minibatch = {
        "actions": actions, "behaviour_log_prob": behaviour_log_prob, "behaviour_params": behaviour, "advantages": advantages,
        "returns": torch.zeros(n), "values": torch.zeros(n), "proximal_log_prob": behaviour_log_prob, "fresh": torch.ones(n),
        "replay_ess": torch.ones((), dtype=torch.float64), "query_dual": duals,
    }
    _, stats = minibatch_loss(spec, "categorical", dist, torch.zeros(n), minibatch, {}, normalize_advantage=True, ent_coef=0.0, vf_coef=0.0)
    assert stats["kl_weight"].item() == pytest.approx(2.0 / advantage_scale(advantages).item(), rel=1e-6)
    _, raw = minibatch_loss(spec, "categorical", dist, torch.zeros(n), minibatch, {}, normalize_advantage=False, ent_coef=0.0, vf_coef=0.0)
    assert raw["kl_weight"].item() == pytest.approx(2.0)


def test_an_update_gives_each_lane_of_each_rollout_its_own_dual_from_its_advantages():
    """The SB3 class with replay: the update's data (fresh rollout first, then the replayed one) holds
    each transition's lambda, that of its own lane (n_steps consecutive env-major transitions) of its
    own rollout, solved on that lane's advantages at the entry's radius."""
    from adaptive_po.algorithms import BatchPolicyOptimization
    from adaptive_po.environments import make_vec_env

    n_steps, n_envs = 16, 3
    model = BatchPolicyOptimization(
        "MlpPolicy", make_vec_env("CartPole-v1", n_envs=n_envs, seed=2), objective="quatro", seed=2, device="cpu",
        n_steps=n_steps, batch_size=24, n_epochs=1, replay=1, objective_kwargs={"radius": 0.03},
    )
    datas = []
    model.add_epoch_listener(lambda epoch, rows, data: datas.append(data))
    model.learn(3 * n_steps * n_envs)
    data = datas[-1]
    n = data["advantages"].shape[-1]
    assert n == 2 * n_steps * n_envs  # the fresh rollout and one replayed
    lanes = data["advantages"].reshape(2 * n_envs, n_steps).double()
    expected = quatro_dual(lanes, radius=0.03)
    got = data["query_dual"].reshape(2 * n_envs, n_steps)
    assert torch.allclose(got, expected[:, None].expand(-1, n_steps).to(got.dtype))
    assert len(set(expected.tolist())) == 2 * n_envs  # six queries, six multipliers
