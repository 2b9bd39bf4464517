"""ESSPO as a Stable-Baselines3 user sees it: learn, predict, save/load, callbacks, logging."""

import numpy as np
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from adaptive_po.dials import DataDials
from adaptive_po import ESSPO, PPO, DecoupledPPO
from adaptive_po.contract import UPDATE_STATISTICS

CARTPOLE_ZOO = dict(n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8, learning_rate=1e-3)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_learn_predict_save_load_round_trip(tmp_path, env_id):
    env = make_vec_env(env_id, n_envs=2, seed=0)
    model = ESSPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu", policy_lag=1, action_noise=0.1)
    model.learn(256)
    obs = env.reset()
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape[0] == 2 and env.action_space.contains(actions[0])

    model.save(tmp_path / "model.zip")
    loaded = ESSPO.load(tmp_path / "model.zip", env=env, device="cpu")
    loaded_actions, _ = loaded.predict(obs, deterministic=True)
    np.testing.assert_allclose(loaded_actions, actions)
    for p, q in zip(model.policy.parameters(), loaded.policy.parameters()):
        assert torch.equal(p, q)
    # the data dial and the objective switches survive the round trip
    assert loaded.collector.dials == loaded.dials == DataDials(policy_lag=1, action_noise=0.1)
    assert (loaded.kl, loaded.ess_cap, loaded.ess_regularizer) == ("analytic", True, True)
    before = [p.detach().clone() for p in loaded.policy.parameters()]
    loaded.learn(128)  # and training continues: one more rollout and update
    assert loaded.num_timesteps == 128
    assert any(not torch.equal(p, q) for p, q in zip(before, loaded.policy.parameters()))


@pytest.mark.slow
def test_esspo_learns_cartpole():
    env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
    model = ESSPO("MlpPolicy", env, seed=0, device="cpu", **CARTPOLE_ZOO)
    model.learn(25_000)
    mean_return, _ = evaluate_policy(model, make_vec_env("CartPole-v1", n_envs=4, seed=123), n_eval_episodes=10)
    # A random policy scores about 22. At this budget ESSPO's score over seeds is wide: seeds 0-7
    # scored 121-498 (mean 323) on the current code and 144-500 (mean 340) before the training step
    # was shared (a float32-rounding change to one update): 100 is clear learning on every seed seen.
    assert mean_return > 100, mean_return


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(batch_size=-4), "batch_size"),
        (dict(batch_size=0), "batch_size"),
        (dict(kl="backward"), "kl"),
        (dict(batch_size=1024, n_steps=32), "batch_size"),
        (dict(n_steps=0), "n_steps"),
        (dict(gamma=1.5), "gamma"),
        (dict(policy_lag=-1), "policy_lag"),
        (dict(replay=-2), "replay"),
        (dict(action_noise=-0.5), "action_noise"),
        (dict(behaviour_log_prob="trainer"), "behaviour_log_prob"),
        (dict(ess_cap="yes"), "ess_cap"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    with pytest.raises(ValueError, match=name):
        ESSPO("MlpPolicy", env, device="cpu", **kwargs)


def test_baselines_reject_bad_clip_range():
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    with pytest.raises(ValueError, match="clip_range"):
        PPO("MlpPolicy", env, clip_range=-0.1, device="cpu")


def test_tensorboard_callbacks_and_progress_bar(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    class CountSteps(BaseCallback):
        def __init__(self):
            super().__init__()
            self.calls = 0
            self.rollouts = 0

        def _on_step(self):
            self.calls += 1
            return True

        def _on_rollout_end(self):
            self.rollouts += 1

    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = ESSPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=2, seed=0, device="cpu", tensorboard_log=str(tmp_path), policy_lag=2)
    callback = CountSteps()
    model.learn(64 * 4, callback=callback, progress_bar=True, tb_log_name="esspo")
    assert callback.calls == 128 and callback.rollouts == 4

    run_dirs = list(tmp_path.glob("esspo_*"))
    assert len(run_dirs) == 1
    events = EventAccumulator(str(run_dirs[0]))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    # one name per statistic: TensorBoard's train/<name> are the progress.csv columns of the contract
    for key in (*(f"train/{name}" for name in UPDATE_STATISTICS), "rollout/ep_rew_mean", "time/fps"):
        assert key in tags, (key, sorted(tags))
    assert not tags & {"train/policy_gradient_loss", "train/entropy_loss", "train/clip_fraction"}
    ess_values = [e.value for e in events.Scalars("train/ess")]
    assert all(0 < v <= 1 for v in ess_values)


def test_callback_can_stop_training():
    class StopAt(BaseCallback):
        def _on_step(self):
            return self.num_timesteps < 40

    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = ESSPO("MlpPolicy", env, n_steps=16, batch_size=32, n_epochs=1, device="cpu")
    model.learn(1000, callback=StopAt())
    assert model.num_timesteps == 40


@pytest.mark.parametrize("cls", [PPO, DecoupledPPO])
def test_baselines_train_on_box_and_discrete(cls):
    for env_id in ("CartPole-v1", "Pendulum-v1"):
        env = make_vec_env(env_id, n_envs=2, seed=0)
        model = cls("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=2, seed=0, device="cpu", policy_lag=2, replay=1)
        model.learn(256)
        stats = model.last_update_stats
        assert 0 < stats["ess"] <= 1 and np.isfinite(stats["loss"])
        # the analytic KL to the behaviour policy and the learner's own step, for every algorithm
        assert stats["kl_behaviour"] > 0 and stats["kl_behaviour_sampled"] > 0 and stats["approx_kl"] >= 0


def test_esspo_analytic_kl_statistic_matches_behaviour_distribution_on_stale_data():
    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    model = ESSPO("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=4, seed=0, device="cpu", policy_lag=3, learning_rate=3e-3)
    model.learn(128 * 8)
    stats = model.last_update_stats
    # lagged data: the learner has moved away from the actor
    assert stats["kl_behaviour"] > 0 and stats["ess"] < 1 and stats["kl_weight"] == pytest.approx(1 - stats["ess"], abs=1e-9)


def test_decayed_schedules_stay_non_negative_when_the_budget_overshoots():
    # 300 is not a multiple of the 64-step rollout: the last update ends past the budget
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu",
                learning_rate=lambda p: 1e-3 * p, clip_range=lambda p: 0.2 * p)
    rates = []
    model.add_update_listener(lambda stats: rates.append(stats["learning_rate"]))
    model.learn(300)
    assert model.num_timesteps == 320 and rates[-1] == 0.0 and min(rates) >= 0.0


def test_default_optimizer_is_sb3_adam_fused():
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    defaults = ESSPO("MlpPolicy", env, device="cpu").policy.optimizer.defaults
    assert isinstance(ESSPO("MlpPolicy", env, device="cpu").policy.optimizer, torch.optim.Adam)
    assert defaults["fused"] is True and defaults["eps"] == 1e-5  # SB3's actor-critic Adam eps
    custom = ESSPO("MlpPolicy", env, device="cpu", policy_kwargs=dict(optimizer_kwargs={"eps": 1e-7})).policy.optimizer.defaults
    assert custom["eps"] == 1e-7 and not custom.get("fused")


def test_esspo_shows_the_signature_it_takes():
    """ESSPO forwards its arguments to the SB3 class without re-listing them, and still shows
    help() and editors the whole signature: SB3's PPO arguments with their defaults, the data dials
    by keyword, its ESS switches, and neither PPO's trust-region knobs nor an objective to choose."""
    import inspect

    from adaptive_po import ESSPO
    from adaptive_po.hyperparams import SB3_DEFAULTS

    parameters = inspect.signature(ESSPO).parameters
    assert list(parameters)[:3] == ["policy", "env", "learning_rate"]
    assert parameters["learning_rate"].default == SB3_DEFAULTS.learning_rate and parameters["n_epochs"].default == SB3_DEFAULTS.n_epochs
    assert parameters["policy_lag"].kind is inspect.Parameter.KEYWORD_ONLY and parameters["kl"].default == "analytic"
    assert not {"clip_range", "clip_range_vf", "target_kl", "objective", "objective_kwargs"} & set(parameters)
    model = ESSPO("MlpPolicy", "CartPole-v1", 1e-3, 64, n_epochs=2, kl="sampled", policy_lag=1)
    assert (model.learning_rate, model.n_steps, model.n_epochs, model.kl, model.dials.policy_lag) == (1e-3, 64, 2, "sampled", 1)
