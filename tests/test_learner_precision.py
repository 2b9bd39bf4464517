"""The bf16 learner (the variant ``precision=bf16``): an explicit, recorded choice, never a silent one.

1. The variant names it, canonically; anything else for ``precision`` is refused by name.
2. It is recorded: the run's folder (``<algo>@precision=bf16``) and ``config.json``
   (``learner_precision``); float32 runs' configurations stay exactly as they were.
3. What cannot honour it is refused before compute: the process engine, CNN policies.
4. It does what it says: the network's forward passes round to bf16 (outputs differ from float32's
   by bf16's rounding, not more), while the parameters, Adam's state and the statistics stay
   float32; the compiled bf16 step tracks the eager one; acting and learning round alike, so at
   lag 0 the ratio stays 1.
"""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from adaptive_po.bench.jobs import plan_jobs
from adaptive_po.bench.population_engine import execute_population
from adaptive_po.bench.run_folder import RunSpec, config_for
from adaptive_po.bench.variants import learner_precision, make_variant, parse_variant
from adaptive_po.dials import DataDials
from adaptive_po.population import Member, PopulationLearner, StackedRollout
from conftest import compiled_or_skip

SPACES = {
    "discrete": (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2)),
    "continuous": (gym.spaces.Box(-np.inf, np.inf, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,), np.float32)),
}
SMALL = dict(n_steps=8, batch_size=16, n_epochs=2, learning_rate=3e-3, policy_kwargs={"net_arch": [32, 32]})


def _learner(kind, precision, compiled=False):
    observation_space, action_space = SPACES[kind]
    members = [Member(3), Member(4, policy_lag=1)]
    return PopulationLearner(observation_space, action_space, members, objective="esspo", compile_step=compiled, precision=precision, **SMALL)


def _obs(learner, rows, seed=0):
    return 3.0 * torch.randn(learner.k, rows, learner.observation_space.shape[0], generator=torch.Generator().manual_seed(seed))


def _rollout(learner, seed, n_envs=2):
    """A rollout acted one collector step at a time, as the engine acts."""
    k, t = learner.k, learner.n_steps
    g = torch.Generator().manual_seed(seed)
    obs = 3.0 * torch.randn(k, t, n_envs, learner.observation_space.shape[0], generator=g)
    acted = [learner.act(obs[:, step]) for step in range(t)]
    actions, blp, params = (torch.stack([a[i] for a in acted], dim=1) for i in range(3))
    shape = (k, t, n_envs)
    return StackedRollout(
        obs, actions, torch.randn(shape, generator=g), torch.zeros(shape), blp, params, torch.zeros(shape, dtype=torch.bool),
        torch.zeros_like(obs), obs[:, -1], torch.zeros(k, n_envs),
    )


# -- 1. named by the variant ------------------------------------------------------------------------
def test_the_variant_names_the_precision_canonically():
    assert parse_variant("esspo", "precision=bf16") == {"precision": ("choose", "bf16")}
    assert make_variant(precision="bf16", clip_range=0.3) == "clip_range=0.3,precision=bf16"
    assert parse_variant("ppo", "clip_range=0.3,precision=bf16")["clip_range"] == ("set", 0.3)
    assert learner_precision("ppo", "clip_range=0.3,precision=bf16") == "bf16"
    assert learner_precision("esspo", "") == "fp32" and learner_precision("ppo", "clip_range=0.3") == "fp32"


@pytest.mark.parametrize(
    "variant,match",
    [("precision=fp32", "default is left out"), ("precision=fp16", "'fp16'"), ("precision=bf16,clip_range=0.3", "canonical")],
)
def test_other_precisions_are_refused_by_name(variant, match):
    with pytest.raises(ValueError, match=match):
        parse_variant("ppo", variant)


# -- 2. recorded -------------------------------------------------------------------------------------
def test_the_choice_is_recorded_and_float32_configurations_are_unchanged(tmp_path):
    fp32 = RunSpec("t", "CartPole-v1", "esspo", 0, 1000, out=str(tmp_path))
    bf16 = RunSpec("t", "CartPole-v1", "esspo", 0, 1000, variant="precision=bf16", out=str(tmp_path))
    assert "learner_precision" not in config_for(fp32)
    assert config_for(bf16)["learner_precision"] == "bf16"
    assert {k: v for k, v in config_for(bf16).items() if k not in ("variant", "learner_precision")} == {
        k: v for k, v in config_for(fp32).items() if k != "variant"
    }
    assert bf16.relative_dir.parts[2] == "esspo@precision=bf16" and fp32.relative_dir != bf16.relative_dir


def test_a_bf16_population_trains_into_its_own_recorded_folders(tmp_path):
    specs = [
        RunSpec("t", "CartPole-v1", "esspo", seed, 768, dials=DataDials(policy_lag=lag), variant="precision=bf16", out=str(tmp_path), tensorboard=False)
        for seed, lag in ((0, 0), (1, 2))
    ]
    results = execute_population(specs)
    assert [r["status"] for r in results] == ["complete", "complete"], results
    for spec in specs:
        config = json.loads((spec.run_dir / "config.json").read_text())
        assert config["learner_precision"] == "bf16" and config["variant"] == "precision=bf16"
        assert "esspo@precision=bf16" in str(spec.run_dir)


# -- 3. refused where it cannot be honoured ---------------------------------------------------------
def test_the_process_engine_and_cnn_policies_refuse_bf16_before_compute(tmp_path):
    bf16 = RunSpec("t", "CartPole-v1", "esspo", 0, 1000, variant="precision=bf16", out=str(tmp_path))
    with pytest.raises(ValueError, match=r"CartPole-v1/esspo@precision=bf16.*population engine only"):
        plan_jobs([bf16], engine="process")
    assert plan_jobs([bf16], engine="population")[0].population
    minatar = RunSpec("t", "Breakout-MinAtar", "esspo", 0, 1000, variant="precision=bf16", out=str(tmp_path))
    with pytest.raises(ValueError, match="MLP policies only; Breakout-MinAtar uses CnnPolicy"):
        plan_jobs([minatar], engine="population")
    image = gym.spaces.Box(0, 255, (1, 36, 36), np.uint8)
    with pytest.raises(ValueError, match="MLP policies only"):
        PopulationLearner(image, gym.spaces.Discrete(3), [Member(0)], policy="CnnPolicy", precision="bf16", n_steps=8, batch_size=8)
    with pytest.raises(ValueError, match="unknown learner precision 'fp16'"):
        _learner("discrete", "fp16")


# -- 4. it does what it says ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(SPACES))
def test_the_forward_rounds_to_bf16_and_the_state_stays_float32(kind):
    fp32, bf16 = _learner(kind, "fp32"), _learner(kind, "bf16")
    for name, value in fp32.params.items():
        assert torch.equal(bf16.params[name], value)  # the same members, seeded alike
    obs = _obs(fp32, 64)
    (dist32, value32), (dist16, value16) = fp32.forward(fp32.params, obs), bf16.forward(bf16.params, obs)
    assert dist16.dtype == value16.dtype == torch.float32
    for low, high in ((dist16, dist32), (value16, value32)):
        gap = (low - high).abs().max()
        assert gap > 0  # autocast is on: not float32's numbers
        assert gap <= 0.05 * high.abs().max() + 1e-3  # and only bf16's rounding away from them
    stats = bf16.update(_rollout(bf16, seed=1), 0.9)
    reference = fp32.update(_rollout(fp32, seed=1), 0.9)
    assert all(v.dtype == torch.float32 for v in bf16.params.values())
    assert all(v.dtype == torch.float32 for v in (*bf16._adam_m.values(), *bf16._adam_v.values()))
    assert stats.keys() == reference.keys()
    assert all(torch.isfinite(v).all() and v.dtype == reference[k].dtype for k, v in stats.items())
    np.testing.assert_allclose(stats["ess"].numpy(), reference["ess"].numpy(), atol=1e-3)


def test_acting_and_learning_round_alike_so_lag_0_stays_on_policy():
    learner = _learner("discrete", "bf16")
    rollout = _rollout(learner, seed=2)
    k, t, e = rollout.rewards.shape
    relearned = learner._log_prob(learner.params, rollout.observations.reshape(k, t * e, -1), rollout.actions.reshape(k, t * e))
    lagged = learner.lags.index(0)
    np.testing.assert_allclose(relearned[lagged].numpy(), rollout.behaviour_log_prob[lagged].reshape(t * e).numpy(), atol=1e-6)


@pytest.mark.xdist_group("compiled-steps")  # with tests/test_compiled_step.py's: one compiler start
def test_the_compiled_bf16_step_tracks_the_eager_one():
    eager, compiled = _learner("continuous", "bf16"), _learner("continuous", "bf16", compiled=True)
    for learner in (eager, compiled):
        learner.update(_rollout(learner, seed=3), 1.0)
    from adaptive_po import compiled as CP

    compiled_or_skip(CP._COMPILED.get(compiled._step_key, "missing") is None, "the engine runs the eager step (said in one line)")
    for name, value in eager.params.items():
        # both round the network to bf16, not always at the same places: bf16's tolerance, not float32's
        torch.testing.assert_close(compiled.params[name], value, atol=2e-3, rtol=2e-2, msg=name)


def test_train_refuses_bf16_on_the_process_engine_before_making_a_folder(tmp_path):
    import sys

    from cli_here import cli_here

    out = tmp_path / "runs"
    done = cli_here(
        [sys.executable, "-m", "adaptive_po", "train", "--env", "CartPole-v1", "--algo", "esspo", "--variant", "precision=bf16",
         "--timesteps", "512", "--out", str(out), "--no-progress"],
    )
    assert done.returncode == 2, done.stderr
    assert "esspo@precision=bf16" in done.stderr and "population engine only" in done.stderr
    assert not out.exists() or not any(out.rglob("config.json"))
