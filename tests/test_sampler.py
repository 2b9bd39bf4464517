"""The sampler dials: temperature and precision, the same in both engines.

* fp8 quantization uses one scale per tensor (per member in the population engine), maps the
  largest magnitude to the format's largest value and rounds within the format's precision;
* temperature divides the logits / multiplies the std;
* the collector records the sampler's own distribution ("actual") or the learner's clean float32
  one at T = 1 ("policy"), and the population engine computes the same sampler distribution from
  the same parameters;
* bad settings are refused with the value named.
"""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.env_util import make_vec_env

from adaptive_po import BatchPolicyOptimization
from adaptive_po import distributions as D
from adaptive_po.collector import Collector, SamplerActor
from adaptive_po.population import Member, PopulationLearner
from adaptive_po.sampler import PRECISIONS, compute_dtype, quantize, temper, validate_sampler_settings


def test_fp8_per_tensor_scaling_maps_amax_to_the_largest_value_and_rounds_within_the_format():
    w = torch.tensor([[0.5, -3.0, 1e-3], [2.0, 0.0, -0.75]])
    for precision, dtype, mantissa_bits in (("fp8-e4m3", torch.float8_e4m3fn, 3), ("fp8-e5m2", torch.float8_e5m2, 2)):
        q = quantize(w, precision)
        assert q.dtype == torch.float32
        scale = 3.0 / torch.finfo(dtype).max
        assert q[0, 1].item() == pytest.approx(-3.0, rel=1e-6)  # amax is representable exactly
        assert q[1, 1].item() == 0.0
        big = w.abs() > 0.1  # normal numbers after scaling: relative error <= 2^-(m+1)
        rel = ((q - w).abs() / w.abs())[big]
        assert rel.max().item() <= 2.0 ** -(mantissa_bits + 1) + 1e-6
        assert rel.max().item() > 0  # it really rounds
        # the scaled values are exactly representable in the format
        scaled = (q / scale).to(dtype).to(torch.float32) * scale
        torch.testing.assert_close(scaled, q)


def test_quantize_scales_each_member_separately_and_casts_bf16_fp16():
    a = torch.tensor([1.0, 0.3])
    b = torch.tensor([100.0, 0.3])
    stacked = quantize(torch.stack([a, b]), "fp8-e4m3", batch_dims=1)
    torch.testing.assert_close(stacked[0], quantize(a, "fp8-e4m3"))
    torch.testing.assert_close(stacked[1], quantize(b, "fp8-e4m3"))
    # one scale per member: 0.3 lies on member 0's grid (amax 1: 0.3 * 448 = 134.4 -> 128) and on
    # member 1's (amax 100: 0.3 * 4.48 = 1.344 -> 1.375); one scale for the stack would round both
    # on member 1's grid, and member 0's amax 1 would no longer be exact
    assert stacked[0, 1].item() == pytest.approx(128 / 448, rel=1e-6)
    assert stacked[1, 1].item() == pytest.approx(1.375 * 100 / 448, rel=1e-6)
    assert stacked[0, 0].item() == 1.0 and quantize(torch.stack([a, b]), "fp8-e4m3")[0, 0].item() != 1.0
    assert quantize(a, "bf16").dtype == torch.bfloat16 and compute_dtype("bf16") == torch.bfloat16
    assert quantize(a, "fp16").dtype == torch.float16 and compute_dtype("fp16") == torch.float16
    assert quantize(a, "fp32") is a and compute_dtype("fp8-e5m2") == torch.float32


def test_temperature_divides_logits_and_scales_the_std():
    logits = torch.tensor([[1.0, 2.0, 0.5]])
    torch.testing.assert_close(temper("categorical", logits, 1.2), logits / 1.2)
    params = torch.tensor([[0.3, -0.2, math.log(0.5), math.log(2.0)]])
    out = temper("gaussian", params, 1.5)
    torch.testing.assert_close(out[:, :2], params[:, :2])
    torch.testing.assert_close(out[:, 2:].exp(), torch.tensor([[0.75, 3.0]]))


@pytest.mark.parametrize("temperature,precision", [(0.0, "fp32"), (-1.0, "fp32"), (float("inf"), "fp32"), (1.0, "fp4"), (True, "fp32")])
def test_bad_sampler_settings_are_refused_by_name(temperature, precision):
    with pytest.raises(ValueError, match="temperature|precision"):
        validate_sampler_settings(temperature, precision)
    env = make_vec_env("CartPole-v1", n_envs=1)
    with pytest.raises(ValueError, match="temperature|precision"):
        BatchPolicyOptimization("MlpPolicy", env, n_steps=8, batch_size=8, sampler_temperature=temperature, sampler_precision=precision)


def _model(env_id, **dials):
    env = make_vec_env(env_id, n_envs=2, seed=0)
    return BatchPolicyOptimization("MlpPolicy", env, n_steps=8, batch_size=8, seed=3, device="cpu", **dials)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_collector_records_the_sampler_or_the_learner(env_id):
    obs = torch.randn(64, *gym.make(env_id).observation_space.shape, generator=torch.Generator().manual_seed(1))
    clean_model = _model(env_id)
    clean = D.kind_of_space(clean_model.action_space)
    with torch.no_grad():
        from adaptive_po.collector import distribution_params

        learner_params = distribution_params(clean_model.policy.get_distribution(obs))
    # temperature only: the recorded distribution is the tempered learner; the log-prob is its own
    hot = _model(env_id, sampler_temperature=1.2)
    step = hot.collector.act(obs)
    expected = temper(clean, learner_params, 1.2)
    same = (lambda x: torch.log_softmax(x, -1)) if clean == "categorical" else (lambda x: x)  # logits up to a constant
    torch.testing.assert_close(same(step.behaviour_params), same(expected))
    torch.testing.assert_close(step.behaviour_log_prob, D.log_prob(clean, step.behaviour_params, step.actions))
    # fp8 with the learner's log-prob recorded: the clean float32 distribution
    trusted = _model(env_id, sampler_precision="fp8-e4m3", behaviour_log_prob="policy")
    step = trusted.collector.act(obs)
    torch.testing.assert_close(step.behaviour_params, learner_params)
    torch.testing.assert_close(step.behaviour_log_prob, D.log_prob(clean, learner_params, step.actions))
    # fp8 with its own log-prob: the forward pass with quantized weights, close to but not the learner
    own = _model(env_id, sampler_precision="fp8-e4m3")
    step = own.collector.act(obs)
    quantized = {n: quantize(p.detach(), "fp8-e4m3") for n, p in own.policy.named_parameters()}
    import copy

    module = copy.deepcopy(own.policy)
    for n, p in module.named_parameters():
        p.data = quantized[n]
    with torch.no_grad():
        expected = distribution_params(module.get_distribution(obs))
    torch.testing.assert_close(step.behaviour_params, expected, atol=1e-5, rtol=1e-5)
    gap = (step.behaviour_params - learner_params).abs().max().item()
    assert 1e-4 < gap < 0.5  # a real, small mismatch
    torch.testing.assert_close(step.behaviour_log_prob, D.log_prob(clean, step.behaviour_params, step.actions))


@pytest.mark.parametrize("precision,atol", [("fp8-e4m3", 1e-5), ("fp8-e5m2", 1e-5), ("fp16", 2e-3), ("bf16", 3e-2)])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_both_engines_compute_the_same_sampler(env_id, precision, atol):
    """The population engine's sampler (per member, at its own precision and temperature, next to
    an fp32 member) equals the collector's for the same parameters."""
    space = gym.make(env_id)
    obs = torch.randn(16, *space.observation_space.shape, generator=torch.Generator().manual_seed(2))
    members = [Member(3, sampler_temperature=1.2, sampler_precision=precision), Member(5)]
    learner = PopulationLearner(space.observation_space, space.action_space, members, n_steps=8, batch_size=8)
    _, _, recorded = learner.act(torch.stack([obs, obs]))
    for m, member in enumerate(members):
        model = _model(env_id, sampler_temperature=member.sampler_temperature, sampler_precision=member.sampler_precision)
        model.set_random_seed(member.seed)
        model.policy.load_state_dict({k[len("policy."):]: v[m] for k, v in learner.params.items()})
        model.collector.attach(model.policy)
        expected = model.collector.act(obs).behaviour_params
        if isinstance(space.action_space, gym.spaces.Discrete):  # logits are equal up to a constant per row
            expected, got = torch.log_softmax(expected, -1), torch.log_softmax(recorded[m], -1)
        else:
            got = recorded[m]
        torch.testing.assert_close(got, expected, atol=atol, rtol=atol)


def test_sampler_precision_follows_the_acting_parameters_after_updates():
    """At lag 0 the sampler's copy is re-quantized from the learner after every update."""
    model = _model("CartPole-v1", sampler_precision="fp16")
    model.learn(64)
    sampler = model.collector._sampler
    assert isinstance(sampler, SamplerActor)
    for name, p in model.policy.named_parameters():
        torch.testing.assert_close(dict(sampler.policy.named_parameters())[name], p.detach().to(torch.float16))


def test_sampler_precision_follows_the_lagged_acting_parameters():
    """At lag 1 the sampler's copy holds the acting (one update old) parameters, not the learner's."""
    model = _model("CartPole-v1", sampler_precision="fp16", policy_lag=1)
    model.learn(64)  # 4 updates of 16 steps
    sampler = dict(model.collector._sampler.policy.named_parameters())
    acting = dict(model.collector.acting_policy.named_parameters())
    assert model.collector.acting_snapshot_update == model.collector.updates_seen - 1 > 0
    for name, p in model.policy.named_parameters():
        torch.testing.assert_close(sampler[name], acting[name].detach().to(torch.float16))
    assert any(not torch.equal(sampler[name], p.detach().to(torch.float16)) for name, p in model.policy.named_parameters())


def test_every_precision_trains():
    for precision in PRECISIONS:
        model = _model("CartPole-v1", sampler_precision=precision, sampler_temperature=0.8)
        model.learn(32)
        assert np.isfinite(model.last_update_stats["ess"])
        if precision != "fp32":
            assert model.last_update_stats["kl_behaviour"] > 0
