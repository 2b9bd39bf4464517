"""The training step written once (adaptive_po.update): its functions, and proof that both faces
(the SB3 class and the population engine) run through them.

Equivalence of the two faces' updates is tests/test_population.py's job; here: the shared pieces
compute what they say, a knob either works in both faces or is refused in one place, and the data
dials have one owner.
"""

import dataclasses
from pathlib import Path
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.logger import configure

from adaptive_po import ESSPO, BatchPolicyOptimization, update
from adaptive_po.collector import Collector
from adaptive_po.update import compute_gae
from adaptive_po import contract, dials
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.objectives import get_objective
from adaptive_po.population import Member, PopulationLearner
from test_population import SMALL, _stack, _stored_rollout


# -- data preparation ---------------------------------------------------------------------------------
def test_truncations_are_bootstrapped_with_the_value_of_the_true_last_observation():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(5, 3)).astype(np.float32)
    values = rng.normal(size=(5, 3)).astype(np.float32)
    starts = np.zeros((5, 3), np.float32)
    starts[3, 1] = 1.0  # env 1's episode was cut at step 2
    truncation = np.zeros((5, 3), np.float32)
    truncation[2, 1] = 7.5
    last_values, last_dones = rng.normal(size=3).astype(np.float32), np.zeros(3, np.float32)
    adv, ret = update.advantages_and_returns(
        "gae", rewards, values, starts, last_values, last_dones, gamma=0.9, gae_lambda=0.8, truncation_values=truncation
    )
    bootstrapped = rewards.copy()
    bootstrapped[2, 1] += 0.9 * 7.5
    expected_adv, expected_ret = compute_gae(bootstrapped, values, starts, last_values, last_dones, 0.9, 0.8)
    np.testing.assert_allclose(adv, expected_adv, rtol=1e-6)
    np.testing.assert_allclose(ret, expected_ret, rtol=1e-6)
    # the cut step's advantage is r + gamma V(s_last) - V(s), not r - V(s)
    assert adv[2, 1] == pytest.approx(rewards[2, 1] + 0.9 * 7.5 - values[2, 1], rel=1e-5)


def test_vtrace_on_policy_equals_gae_at_lambda_one_and_needs_log_rhos():
    rng = np.random.default_rng(1)
    args = [rng.normal(size=(6, 2)).astype(np.float32), rng.normal(size=(6, 2)).astype(np.float32),
            np.zeros((6, 2), np.float32), rng.normal(size=2).astype(np.float32), np.zeros(2, np.float32)]
    gae = update.advantages_and_returns("gae", *args, gamma=0.95, gae_lambda=1.0)
    vtrace = update.advantages_and_returns("vtrace", *args, gamma=0.95, gae_lambda=0.3, log_rhos=np.zeros((6, 2), np.float32))
    np.testing.assert_allclose(gae[0], vtrace[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gae[1], vtrace[1], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="log_rhos"):
        update.advantages_and_returns("vtrace", *args, gamma=0.95, gae_lambda=1.0)
    with pytest.raises(ValueError, match="'retrace'"):
        update.advantages_and_returns("retrace", *args, gamma=0.95, gae_lambda=1.0)


def test_replay_information_marks_the_fresh_rollout_and_measures_the_replayed_ess():
    proximal = torch.tensor([0.0, 0.0, 0.0, 1.0, -1.0])
    behaviour = torch.zeros(5)
    fresh, ess = update.replay_information(proximal, behaviour, n_fresh=3)
    assert fresh.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    r = np.exp([1.0, -1.0])
    assert ess.item() == pytest.approx(r.sum() ** 2 / (2 * (r**2).sum()))
    # stacked: one ESS per member
    fresh_k, ess_k = update.replay_information(torch.stack([proximal, proximal * 0]), torch.zeros(2, 5), n_fresh=3)
    assert fresh_k.shape == (2, 5) and ess_k.shape == (2,)
    assert ess_k[0].item() == pytest.approx(ess.item()) and ess_k[1].item() == pytest.approx(1.0)


# -- the minibatch loss --------------------------------------------------------------------------
def test_advantage_normalization_standardizes_and_leaves_a_single_sample_alone():
    a = torch.tensor([1.0, 2.0, 6.0, -3.0])
    n = update.normalize_advantages(a)
    assert n.mean().abs().item() < 1e-6 and n.std().item() == pytest.approx(1.0, rel=1e-6)
    single = torch.tensor([4.0])
    assert update.normalize_advantages(single).item() == 4.0


def _minibatch(n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "actions": torch.randint(0, 3, (n,), generator=g),
        "behaviour_log_prob": torch.log(torch.full((n,), 1 / 3)),
        "behaviour_params": torch.zeros(n, 3),
        "advantages": torch.randn(n, generator=g),
        "returns": torch.randn(n, generator=g),
        "values": torch.zeros(n),
        "proximal_log_prob": torch.log(torch.full((n,), 1 / 3)),
        "fresh": torch.ones(n),
        "replay_ess": torch.ones((), dtype=torch.float64),
    }


def test_value_clipping_keeps_the_new_value_within_the_range_of_the_start_value():
    mb = _minibatch()
    params = torch.zeros(8, 3)
    values = torch.full((8,), 5.0)  # far from the start values (0)
    spec = get_objective("ppo")
    kw = dict(normalize_advantage=True, ent_coef=0.0, vf_coef=1.0)
    _, free = update.minibatch_loss(spec, "categorical", params, values, mb, {"clip_range": 0.2}, **kw)
    _, clipped = update.minibatch_loss(spec, "categorical", params, values, mb, {"clip_range": 0.2}, clip_range_vf=0.5, **kw)
    assert free["value_loss"].item() == pytest.approx(((mb["returns"] - 5.0) ** 2).mean().item(), rel=1e-6)
    assert clipped["value_loss"].item() == pytest.approx(((mb["returns"] - 0.5) ** 2).mean().item(), rel=1e-6)


def test_the_kl_to_the_behaviour_policy_has_gradient_only_for_objectives_that_use_it():
    mb = _minibatch()
    for name, wants_gradient in (("esspo", True), ("ppo", False)):
        params = (0.3 * torch.randn(8, 3)).requires_grad_()
        seen = {}
        spec = get_objective(name)

        def loss(batch, _spec=spec, **kwargs):
            seen["grad"] = batch.kl_behaviour.requires_grad
            return _spec.loss(batch, **kwargs)

        spec = dataclasses.replace(spec, loss=loss)
        update.minibatch_loss(spec, "categorical", params, torch.zeros(8), mb, {"clip_range": 0.2} if name == "ppo" else {},
                              normalize_advantage=True, ent_coef=0.0, vf_coef=0.5)
        assert seen["grad"] is wants_gradient, name


# -- statistics ----------------------------------------------------------------------------------
def test_the_reduction_of_a_population_equals_each_members_own_reduction():
    g = torch.Generator().manual_seed(3)
    _, reported = update.minibatch_loss(get_objective("tis-pg"), "categorical", torch.zeros(8, 3), torch.zeros(8), _minibatch(), {},
                                        normalize_advantage=True, ent_coef=0.0, vf_coef=0.5)
    names = tuple(reported)  # what a minibatch reports: every objective's three, the defaults where tis-pg has none
    assert set(names) == {"ess", "ratio_max", "ratio_mean", "ratio_above_2", "kl_behaviour", "kl_behaviour_sampled",
                          "cap_fraction", "kl_weight", "policy_loss", "value_loss", "entropy", "loss", "approx_kl"}
    assert all(v.dtype == torch.float64 and v.dim() == 0 for v in reported.values())
    rows = [{n: torch.rand(4, generator=g, dtype=torch.float64) for n in names} for _ in range(5)]
    values, returns = torch.randn(4, 20, generator=g), torch.randn(4, 20, generator=g)
    kl = torch.rand(4, generator=g, dtype=torch.float64)
    stacked = update.reduce_statistics(rows, approx_kl=kl, values=values, returns=returns, learning_rate=1e-3)
    assert set(contract.UPDATE_STATISTICS) <= set(stacked)
    for m in range(4):
        own = update.reduce_statistics([{n: r[n][m] for n in names} for r in rows], approx_kl=kl[m],
                                       values=values[m], returns=returns[m], learning_rate=1e-3)
        for name, value in own.items():
            torch.testing.assert_close(stacked[name][m], value, msg=name)
    assert stacked["ess_min"][0].item() == min(r["ess"][0].item() for r in rows)
    assert stacked["ratio_max"][0].item() == max(r["ratio_max"][0].item() for r in rows)
    assert stacked["loss"][0].item() == rows[-1]["loss"][0].item()
    expected_ev = 1 - np.var((returns[0].double() - values[0].double()).numpy()) / np.var(returns[0].double().numpy())
    assert stacked["explained_variance"][0].item() == pytest.approx(expected_ev, rel=1e-9)
    constant = update.explained_variance(torch.zeros(3), torch.ones(3))
    assert torch.isnan(constant)


# -- both faces run the one training step --------------------------------------------------------
def test_both_faces_call_the_shared_advantage_normalization(monkeypatch):
    """A change to the shared step is one edit that both engines pick up."""
    calls = {"n": 0}
    original = update.normalize_advantages

    def counting(advantages):
        calls["n"] += 1
        return original(advantages)

    monkeypatch.setattr(update, "normalize_advantages", counting)
    member = Member(3, policy_lag=1, action_noise=0.3)
    rollout, env = _stored_rollout("CartPole-v1", "esspo", member)
    model = BatchPolicyOptimization("MlpPolicy", env, objective="esspo", seed=3, device="cpu", policy_lag=1, action_noise=0.3, **SMALL)
    model.rollout_buffer.freeze = lambda copy: rollout
    model.set_logger(configure(None, []))
    calls["n"] = 0
    model.train()
    n_minibatches = SMALL["n_epochs"] * (SMALL["n_steps"] * 2 // SMALL["batch_size"])
    assert calls["n"] == n_minibatches
    learner = PopulationLearner(env.observation_space, env.action_space, [member], objective="esspo", **SMALL)
    calls["n"] = 0
    learner.update(_stack([rollout], True), 0.9)
    assert calls["n"] >= 1  # traced once per vmap call at least


def test_value_clipping_works_in_the_population_engine_as_in_the_sb3_class():
    member = Member(5, policy_lag=1, action_noise=0.2)
    rollout, env = _stored_rollout("Pendulum-v1", "ppo", member)
    kwargs = dict(objective="ppo", objective_kwargs={"clip_range": 0.2}, clip_range_vf=0.05, **SMALL)
    model = BatchPolicyOptimization("MlpPolicy", env, seed=5, device="cpu", policy_lag=1, action_noise=0.2, **kwargs)
    model.rollout_buffer.freeze = lambda copy: rollout
    model._current_progress_remaining = 0.7
    model.set_logger(configure(None, []))
    np.random.seed(105)
    model.train()
    learner = PopulationLearner(env.observation_space, env.action_space, [member], **kwargs)
    learner.permutation_rngs = [np.random.RandomState(105)]
    stats = learner.update(_stack([rollout], False), 0.7)
    for name, value in model.policy.state_dict().items():
        if f"policy.{name}" in learner.params:
            torch.testing.assert_close(learner.params[f"policy.{name}"][0], value, atol=2e-6, rtol=1e-5)
    assert stats["value_loss"][0].item() == pytest.approx(model.last_update_stats["value_loss"], rel=1e-4)
    # and the clipping acted: without it the update differs
    unclipped = PopulationLearner(env.observation_space, env.action_space, [member], **{**kwargs, "clip_range_vf": None})
    unclipped.permutation_rngs = [np.random.RandomState(105)]
    unclipped.update(_stack([rollout], False), 0.7)
    assert not torch.allclose(unclipped.params["policy.value_net.weight"], learner.params["policy.value_net.weight"])


@pytest.mark.parametrize(
    "knob, value", [("target_kl", 0.01), ("use_sde", True), ("optimizer_class", torch.optim.SGD)],
)
def test_the_population_engine_refuses_what_it_does_not_run_naming_the_knob(knob, value):
    env = gym.make("CartPole-v1")
    kwargs = {"policy_kwargs": {knob: value}} if knob == "optimizer_class" else {knob: value}
    with pytest.raises(ValueError, match=f"does not run {knob}.*process engine"):
        PopulationLearner(env.observation_space, env.action_space, [Member(0)], **kwargs)
    assert set(update.POPULATION_REFUSES) >= {knob}


# -- the data dials have one owner ---------------------------------------------------------------
@pytest.mark.parametrize(
    "bad, named",
    [
        (dict(policy_lag=-1), "policy_lag"),
        (dict(replay=1.5), "replay"),
        (dict(action_noise=float("nan")), "action_noise"),
        (dict(behaviour_log_prob="clean"), "behaviour_log_prob"),
        (dict(sampler_temperature=0), "temperature"),
        (dict(sampler_precision="int4"), "precision"),
    ],
)
def test_every_face_refuses_a_bad_dial_with_the_same_message(bad, named):
    with pytest.raises(ValueError, match=named) as own:
        dials.DataDials(**bad)
    with pytest.raises(ValueError) as member:
        Member(0, **bad)
    with pytest.raises(ValueError) as model:
        ESSPO("MlpPolicy", "CartPole-v1", **bad)
    with pytest.raises(ValueError) as collector:
        Collector(**bad)
    assert str(member.value) == str(model.value) == str(collector.value) == str(own.value)


def test_one_dials_object_travels_from_the_grid_to_the_collector(tmp_path):
    """The bench hands the collector the very DataDials its grid expanded: no flat copies."""
    from adaptive_po.bench.process_engine import build_training

    condition = dials.DataDials(policy_lag=2, action_noise=0.25)
    spec = RunSpec("s", "CartPole-v1", "ppo", 0, 1024, dials=condition, out=str(tmp_path))
    assert RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    model, train_env, eval_env, *_ = build_training(spec)
    try:
        assert model.dials == condition and model.collector.dials == condition
    finally:
        train_env.close()
        eval_env.close()
    with pytest.raises(ValueError, match="not both"):
        ESSPO("MlpPolicy", "CartPole-v1", dials=condition, policy_lag=1)


def test_the_dials_name_the_condition_and_fill_defaults_for_older_folders():
    assert dials.DataDials().condition == "lag0_noise0_replay0"
    assert dials.DataDials(policy_lag=4, sampler_precision="fp8-e4m3", behaviour_log_prob="policy").condition == (
        "lag4_noise0_replay0_fp8-e4m3_blp-policy"
    )
    old_config = {"policy_lag": 2, "action_noise": 0.5, "replay": 0, "env": "CartPole-v1"}
    old = dials.DataDials.from_mapping(old_config)
    assert old.sampler_temperature == 1.0 and old.sampler_precision == "fp32" and old.policy_lag == 2
    assert dials.DIAL_NAMES == tuple(f.name for f in dataclasses.fields(dials.DataDials))
    assert dials.DIAL_DEFAULTS == dials.DataDials().to_dict()
    spec = RunSpec("s", "CartPole-v1", "esspo", 0, 1000, dials=dials.DataDials(policy_lag=3, sampler_temperature=1.2))
    assert spec.dials == dials.DataDials(policy_lag=3, sampler_temperature=1.2)
    assert spec.condition == "lag3_noise0_replay0_T1.2"
    assert Member(7, policy_lag=3).seed == 7
    assert dials.DataDials().is_fresh and not dials.DataDials(policy_lag=1).is_fresh


def test_members_of_one_population_share_their_replay_depth():
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="share one replay depth"):
        PopulationLearner(env.observation_space, env.action_space, [Member(0, replay=1), Member(1, replay=2)], **SMALL)
    learner = PopulationLearner(env.observation_space, env.action_space, [Member(0, replay=2), Member(1, replay=2)], **SMALL)
    assert learner.replay == 2


# -- what one update owes the loss (update.run_update) --------------------------------------------------
def test_one_update_hands_the_loss_the_replayed_batches_ess_and_the_objectives_state():
    """Every minibatch of an update on replayed data gets the replayed part's ESS of pi_prox/pi_b
    (P3O reads it); an objective's per-run state reaches its loss as updated after the previous
    update (adaptive KL-PPO's coefficient); the update's explained variance is the fresh rollout's."""
    from adaptive_po.environments import make_vec_env

    n_steps, n_envs = 16, 2
    n_fresh = n_steps * n_envs
    for algo in ("p3o", "kl-ppo"):
        model = BatchPolicyOptimization(
            "MlpPolicy", make_vec_env("CartPole-v1", n_envs=n_envs, seed=0), objective=algo, n_steps=n_steps,
            batch_size=16, n_epochs=2, learning_rate=3e-3, seed=0, device="cpu", replay=1,
        )
        spec = model.objective_spec
        calls: list[tuple[int, object, dict]] = []
        states: list[dict[str, float]] = [{k: float(v) for k, v in model.objective_state.items()}]
        datas: list[dict] = []
        stats: list[dict[str, float]] = []

        def spy(batch, **kwargs):  # type: ignore[no-untyped-def]
            calls.append((len(stats), batch, kwargs))
            return spec.loss(batch, **kwargs)

        def after_update(update_stats: dict[str, float]) -> None:
            stats.append(update_stats)
            states.append({k: float(v) for k, v in model.objective_state.items()})

        model.objective_spec = dataclasses.replace(spec, loss=spy)
        model.add_epoch_listener(lambda epoch, rows, data: datas.append(data) if epoch == 0 else None)
        model.add_update_listener(after_update)
        model.learn(4 * n_fresh)
        assert len(stats) == 4 and len(datas) == 4
        for update_index, data in enumerate(datas):
            n = data["advantages"].shape[-1]
            assert n == n_fresh * (1 if update_index == 0 else 2)  # the fresh batch, then one replayed
            ev = update.explained_variance(data["values"][:n_fresh], data["returns"][:n_fresh])
            assert stats[update_index]["explained_variance"] == pytest.approx(float(ev), rel=1e-6)
            if update_index:
                whole = update.explained_variance(data["values"], data["returns"])
                assert float(whole) != pytest.approx(float(ev), rel=1e-3)
        if algo == "p3o":
            for update_index, batch, _ in calls:
                data = datas[update_index]
                expected = update.whole_batch_ess(data["proximal_log_prob"][n_fresh:], data["behaviour_log_prob"][n_fresh:])
                assert float(batch.replay_ess) == pytest.approx(float(expected), rel=1e-6)
            assert min(float(b.replay_ess) for u, b, _ in calls if u > 0) < 0.999  # replayed data is off-policy
        else:
            assert len({s["kl_coef"] for s in states}) > 1  # the coefficient moved
            for update_index, _, kwargs in calls:
                assert float(kwargs["kl_coef"]) == pytest.approx(states[update_index]["kl_coef"])


def test_the_counted_update_path_covers_every_function_one_esspo_update_runs():
    """``benchmarks/update_path.py`` counts the lines of one ESSPO update from a hand-kept list of
    definitions; a function renamed or added on the way would drop out of the count unseen. One
    real update, traced, names any code it ran in the counted files that the list does not cover."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "update_path.py"
    spec = importlib.util.spec_from_file_location("update_path", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.uncounted() == []
    assert {file for file, *_ in module.ranges()} == {
        "adaptive_po/algorithms.py", "adaptive_po/update.py", "adaptive_po/objectives.py", "adaptive_po/distributions.py",
    }
