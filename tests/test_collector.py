"""The collector: lagged parameters, action noise, honest behaviour recording, replay."""

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from torch.distributions import Categorical, Normal

from adaptive_po import ESSPO, PPO
from adaptive_po.collector import Collector


class RecordRollouts(BaseCallback):
    """Copies each filled rollout buffer and the learner's parameters when it was filled."""

    def __init__(self):
        super().__init__()
        self.rollouts = []
        self.learner_params_at_collection = []

    def _on_rollout_start(self):
        self.learner_params_at_collection.append({k: v.clone() for k, v in self.model.policy.state_dict().items()})

    def _on_rollout_end(self):
        buf = self.model.rollout_buffer
        self.rollouts.append(
            {
                "obs": buf.observations.copy(),
                "actions": buf.actions.copy(),
                "rewards": buf.rewards.copy(),
                "episode_starts": buf.episode_starts.copy(),
                "log_probs": buf.log_probs.copy(),
                "params": getattr(buf, "behaviour_params", np.zeros(1)).copy(),
            }
        )

    def _on_step(self):
        return True


def log_probs_under(model, state_dict, rollout):
    policy = model.policy
    current = {k: v.clone() for k, v in policy.state_dict().items()}
    policy.load_state_dict(state_dict)
    with torch.no_grad():
        obs = torch.as_tensor(rollout["obs"].reshape(-1, *rollout["obs"].shape[2:]))
        actions = torch.as_tensor(rollout["actions"].reshape(-1)).long()
        lp = policy.get_distribution(obs).log_prob(actions).numpy()
    policy.load_state_dict(current)
    return lp


@pytest.mark.parametrize("lag", [1, 3])
def test_actions_come_from_k_update_old_parameters(lag):
    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    model = ESSPO("MlpPolicy", env, n_steps=16, batch_size=64, n_epochs=2, learning_rate=1e-2, seed=0, device="cpu", policy_lag=lag)
    recorder = RecordRollouts()
    n_updates = 6
    model.learn(16 * 4 * n_updates, callback=recorder)
    snapshots = recorder.learner_params_at_collection  # snapshots[i] = learner after i updates
    assert len(recorder.rollouts) == len(snapshots) == n_updates  # the loop below checks every rollout
    for i, rollout in enumerate(recorder.rollouts):
        acting = max(0, i - lag)
        expected = log_probs_under(model, snapshots[acting], rollout)
        np.testing.assert_allclose(rollout["log_probs"].reshape(-1), expected, atol=1e-5)
        if i - lag >= 1:  # the learner has moved on: its own log-probs differ
            current = log_probs_under(model, snapshots[i], rollout)
            assert np.abs(current - rollout["log_probs"].reshape(-1)).max() > 1e-3


@pytest.mark.parametrize("recording", ["actual", "policy"])
def test_noise_and_behaviour_recording_discrete(recording):
    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    model = ESSPO("MlpPolicy", env, n_steps=16, batch_size=64, n_epochs=1, seed=0, device="cpu", action_noise=1.0, behaviour_log_prob=recording)
    recorder = RecordRollouts()
    model.learn(64, callback=recorder)
    rollout = recorder.rollouts[0]
    actions = torch.as_tensor(rollout["actions"].reshape(-1)).long()
    stored_params = torch.as_tensor(rollout["params"].reshape(len(actions), -1))
    clean = log_probs_under(model, recorder.learner_params_at_collection[0], rollout)
    stored = rollout["log_probs"].reshape(-1)
    # the stored log-prob is the one of the stored behaviour distribution
    np.testing.assert_allclose(Categorical(logits=stored_params).log_prob(actions).numpy(), stored, atol=1e-5)
    if recording == "actual":
        assert np.abs(stored - clean).max() > 0.05  # a perturbed distribution, not the clean one
    else:
        np.testing.assert_allclose(stored, clean, atol=1e-5)


def test_noise_on_box_actions_perturbs_the_mean():
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = ESSPO("MlpPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu", action_noise=0.5)
    recorder = RecordRollouts()
    model.learn(32, callback=recorder)
    rollout = recorder.rollouts[0]
    params = torch.as_tensor(rollout["params"].reshape(32, 2))
    actions = torch.as_tensor(rollout["actions"].reshape(32, 1))
    stored = Normal(params[:, :1], params[:, 1:].exp()).log_prob(actions).sum(-1).numpy()
    np.testing.assert_allclose(stored, rollout["log_probs"].reshape(-1), atol=1e-5)
    with torch.no_grad():
        obs = torch.as_tensor(rollout["obs"].reshape(32, -1))
        model.policy.load_state_dict(recorder.learner_params_at_collection[0])
        clean_mean = model.policy.get_distribution(obs).distribution.mean
    offsets = (params[:, :1] - clean_mean).numpy().ravel()
    assert 0.3 < offsets.std() < 0.7  # noise of scale 0.5 on the mean


def test_replay_trains_on_exactly_m_older_batches():
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    m = 2
    model = PPO("MlpPolicy", env, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu", replay=m)
    recorder = RecordRollouts()
    seen = []
    model.add_update_listener(lambda stats: seen.append(stats["n_samples"]))
    batches_per_update = []
    original = model.collector.training_batches

    def spy(current):
        batches = original(current)
        batches_per_update.append([b.observations.copy() for b in batches])
        return batches

    model.collector.training_batches = spy
    model.learn(32 * 5, callback=recorder)
    assert seen == [32, 64, 96, 96, 96]
    for i, batches in enumerate(batches_per_update):
        expected = [recorder.rollouts[j]["obs"] for j in range(i, max(-1, i - m - 1), -1)]
        assert len(batches) == len(expected) == min(i, m) + 1
        for got, want in zip(batches, expected):
            np.testing.assert_array_equal(got, want)


def test_on_policy_settings_reproduce_sb3_ppo_exactly():
    """k = m = sigma = 0: the same data (and, up to float rounding, the same updates) as SB3's PPO."""
    kwargs = dict(n_steps=32, batch_size=64, n_epochs=3, learning_rate=1e-3, gamma=0.98, gae_lambda=0.8, seed=3, device="cpu")
    rec_ours, rec_theirs = RecordRollouts(), RecordRollouts()
    # construct then learn one at a time: both seed the global RNGs at construction
    # SB3's own (unfused) Adam, so that the updates can match to float rounding
    ours = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=4, seed=3), policy_kwargs=dict(optimizer_kwargs={"eps": 1e-5}), **kwargs)
    ours.learn(32 * 4 * 3, callback=rec_ours)
    theirs = SB3PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=4, seed=3), **kwargs)
    theirs.learn(32 * 4 * 3, callback=rec_theirs)
    assert len(rec_ours.rollouts) == len(rec_theirs.rollouts) == 3
    for a, b in zip(rec_ours.rollouts, rec_theirs.rollouts):
        for key in ("obs", "actions", "rewards", "episode_starts"):
            np.testing.assert_array_equal(a[key], b[key])
        np.testing.assert_allclose(a["log_probs"], b["log_probs"], atol=1e-5)
    for p, q in zip(ours.policy.parameters(), theirs.policy.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), atol=1e-4)


def test_collector_validates_settings():
    for kwargs, name in (
        (dict(policy_lag=-1), "policy_lag"),
        (dict(policy_lag=1.5), "policy_lag"),
        (dict(replay=-1), "replay"),
        (dict(action_noise=-0.1), "action_noise"),
        (dict(action_noise=float("nan")), "action_noise"),
        (dict(behaviour_log_prob="clean"), "behaviour_log_prob"),
    ):
        with pytest.raises(ValueError, match=name):
            Collector(**kwargs)
