"""PQN (arXiv 2407.04811) on the project's collector, and the after-ABS rollout-length dial."""

from __future__ import annotations

import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from torch import nn

from adaptive_po.batch_scaling import AfterABS
from adaptive_po.hyperparams import LinearSchedule
from adaptive_po.pqn import PQN, ChannelLayerNorm, QNetwork, epsilon_greedy_log_probs, linear_epsilon, q_lambda_returns
from adaptive_po.update import StoredRollout


def _cartpole(n_envs: int = 4, seed: int = 0):  # type: ignore[no-untyped-def]
    return make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed)


# -- the targets -----------------------------------------------------------------------------------
def test_q_lambda_returns_by_hand_across_an_episode_end() -> None:
    # one environment, 3 steps; step 1 ends an episode (episode_starts[2] = 1); gamma = lambda = 0.5
    rewards = np.array([[1.0], [2.0], [3.0]])
    next_max_q = np.array([[10.0], [20.0], [30.0]])  # max_a Q(s_{t+1}, a)
    starts = np.array([[0.0], [0.0], [1.0]])
    returns = q_lambda_returns(rewards, next_max_q, starts, np.array([0.0]), gamma=0.5, q_lambda=0.5)
    # G_2 = 3 + 0.5 * 30 = 18 (the last step bootstraps from s_3)
    # G_1 = 2 (done: nothing after the episode's end counts, G_2 included)
    # G_0 = 1 + 0.5 * (0.5 * G_1 + 0.5 * 10) = 1 + 0.5 * (1 + 5) = 4
    np.testing.assert_allclose(returns[:, 0], [4.0, 2.0, 18.0])
    # a done at the last step: its own reward only
    done_last = q_lambda_returns(rewards, next_max_q, starts, np.array([1.0]), gamma=0.5, q_lambda=0.5)
    assert done_last[2, 0] == 3.0
    # lambda = 0: one-step Q-learning targets r + gamma (1 - d) max Q
    one_step = q_lambda_returns(rewards, next_max_q, starts, np.array([0.0]), gamma=0.5, q_lambda=0.0)
    np.testing.assert_allclose(one_step[:, 0], [1 + 0.5 * 10, 2.0, 3 + 0.5 * 30])


class _LineQ(nn.Module):
    """Q(s) = [s, 2 s] for a one-number observation: max_a Q(s, a) = 2 s (for s >= 0)."""

    def forward(self, obs: th.Tensor) -> th.Tensor:
        return th.cat([obs, 2 * obs], dim=-1)


class _OneNumberEnv(gym.Env):
    observation_space = spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        return np.zeros(1, np.float32), {}

    def step(self, action):  # type: ignore[no-untyped-def]
        return np.zeros(1, np.float32), 0.0, False, False, {}


def test_targets_of_a_stored_rollout_bootstrap_a_time_limit_from_the_true_last_observation() -> None:
    model = PQN("MlpPolicy", _OneNumberEnv(), gamma=0.5, q_lambda=0.5, n_steps=3, batch_size=3)
    model.policy.q_net = _LineQ()
    # one env, 3 steps, observations 1, 2, 3, then 4 after the last step; step 0 ends by a time limit
    # (its true last observation 7 is recorded), so step 1 starts a new episode
    rollout = StoredRollout(
        observations=np.array([[[1.0]], [[2.0]], [[3.0]]], np.float32), actions=np.zeros((3, 1, 1)),
        rewards=np.array([[1.0], [1.0], [1.0]], np.float32), episode_starts=np.array([[0.0], [1.0], [0.0]], np.float32),
        behaviour_log_prob=np.zeros((3, 1), np.float32), behaviour_params=np.zeros((3, 1, 2), np.float32),
        last_observation=np.array([[4.0]], np.float32), last_dones=np.array([0.0], np.float32),
        timeout_index=np.array([[0, 0]]), timeout_observations=np.array([[7.0]], np.float32),
    )
    q_start, targets = model._targets(rollout)
    # G_2 = 1 + 0.5 * max Q(4) = 1 + 0.5 * 8 = 5
    # G_1 = 1 + 0.5 * (0.5 * G_2 + 0.5 * max Q(3)) = 1 + 0.5 * (2.5 + 3) = 3.75
    # G_0 = 1 + 0.5 * max Q(7) = 1 + 7 = 8 (truncated: the true last observation, nothing of the next episode)
    np.testing.assert_allclose(targets[:, 0], [8.0, 3.75, 5.0])
    np.testing.assert_allclose(q_start.numpy(), [[1, 2], [2, 4], [3, 6]])


def test_one_update_equals_the_authors_loop_on_the_same_rollout() -> None:
    """One PQN update against the loop written out as the authors' reference code writes it
    (time-major batch, Q(lambda) backwards with the done mask on the whole bracket, shuffled
    minibatches, 0.5 MSE, gradient norm clipped at 10, RAdam): the same parameters after it."""
    import copy

    model = PQN("MlpPolicy", _cartpole(2, seed=3), n_steps=32, batch_size=16, n_epochs=2, learning_rate=1e-3, gamma=0.9, q_lambda=0.7, seed=3)
    seen: dict = {}
    real_train = model.train

    def train() -> None:
        if not seen:
            seen.update(net=copy.deepcopy(model.policy.q_net), batch=model.rollout_buffer.freeze(copy=True), rng=np.random.get_state())
            real_train()
            seen["after"] = {k: v.clone() for k, v in model.policy.q_net.state_dict().items()}

    model.train = train  # type: ignore[method-assign]
    model.learn(64)
    net, batch = seen["net"], seen["batch"]
    obs = th.as_tensor(batch.observations)  # (32, 2, 4)
    actions = th.as_tensor(batch.actions[..., 0]).long()
    rewards, starts = th.as_tensor(batch.rewards), th.as_tensor(batch.episode_starts)
    with th.no_grad():
        max_q = net(obs.reshape(64, 4)).max(-1).values.reshape(32, 2)
        last_max_q = net(th.as_tensor(batch.last_observation)).max(-1).values
    assert starts[1:].sum() > 0  # an episode ends inside the rollout
    returns = th.zeros(32, 2)
    for t in reversed(range(32)):
        if t == 31:
            returns[t] = rewards[t] + 0.9 * (1 - th.as_tensor(batch.last_dones)) * last_max_q
        else:
            returns[t] = rewards[t] + 0.9 * (1 - starts[t + 1]) * (0.7 * returns[t + 1] + 0.3 * max_q[t + 1])
    b_obs, b_actions, b_returns = obs.reshape(64, 4), actions.reshape(64), returns.reshape(64)
    optimizer = th.optim.RAdam(net.parameters(), lr=1e-3)
    np.random.set_state(seen["rng"])
    for _ in range(2):
        order = np.random.permutation(64)
        for start in range(0, 64, 16):
            index = th.as_tensor(order[start : start + 16])
            q = net(b_obs[index]).gather(1, b_actions[index, None]).squeeze(1)
            loss = 0.5 * ((q - b_returns[index]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 10.0)
            optimizer.step()
    for name, value in net.state_dict().items():
        np.testing.assert_allclose(seen["after"][name].numpy(), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


# -- acting ----------------------------------------------------------------------------------------
def test_epsilon_decays_linearly_then_stays() -> None:
    kw = dict(start=1.0, final=0.05, fraction=0.5)
    assert linear_epsilon(0, 1000, **kw) == 1.0
    assert linear_epsilon(250, 1000, **kw) == pytest.approx(0.525)
    assert linear_epsilon(500, 1000, **kw) == pytest.approx(0.05)
    assert linear_epsilon(900, 1000, **kw) == 0.05
    assert linear_epsilon(10, 1000, start=1.0, final=0.05, fraction=0.0) == 0.05
    model = PQN("MlpPolicy", _cartpole(2), n_steps=8, batch_size=16, exploration_fraction=0.5)
    seen = []
    model.add_update_listener(lambda stats: seen.append((model.num_timesteps, stats["epsilon"])))
    model.learn(64)
    assert [eps for _, eps in seen] == pytest.approx([linear_epsilon(t, 64, **kw) for t, _ in seen])


def test_epsilon_greedy_probabilities() -> None:
    q = th.tensor([[0.0, 3.0, 1.0], [5.0, 0.0, 0.0]])
    probs = epsilon_greedy_log_probs(q, 0.3).exp()
    np.testing.assert_allclose(probs.numpy(), [[0.1, 0.8, 0.1], [0.8, 0.1, 0.1]], rtol=1e-6)


def test_action_noise_perturbs_the_acting_q_values_before_the_argmax() -> None:
    obs = th.as_tensor(np.random.default_rng(0).normal(size=(256, 4)), dtype=th.float32)
    greedy_share = {}
    for sigma, recording in ((0.0, "actual"), (100.0, "actual"), (100.0, "policy")):
        model = PQN("MlpPolicy", _cartpole(2), action_noise=sigma, behaviour_log_prob=recording, seed=0)
        model.collector.epsilon = 0.05
        clean_greedy = model.policy.q_values(obs).argmax(-1)
        step = model.collector.act(obs)
        recorded_greedy = step.behaviour_params.argmax(-1)
        greedy_share[(sigma, recording)] = float((recorded_greedy == clean_greedy).float().mean())
        # the recorded log-probability is the recorded distribution's, at the action taken
        np.testing.assert_allclose(step.behaviour_log_prob, th.log_softmax(step.behaviour_params, -1).gather(1, step.actions[:, None]).squeeze(1))
    assert greedy_share[(0.0, "actual")] == 1.0
    assert greedy_share[(100.0, "actual")] < 0.8  # noise of std 100 on Q-values near 0 reorders them
    assert greedy_share[(100.0, "policy")] == 1.0  # "policy": the clean acting network's epsilon-greedy


# -- the network -----------------------------------------------------------------------------------
def test_layer_norm_sits_after_every_hidden_layer_before_its_activation() -> None:
    mlp = QNetwork(spaces.Box(-1, 1, (4,)), 2)
    assert [type(m) for m in mlp.layers] == [nn.Flatten, nn.Linear, nn.LayerNorm, nn.ReLU, nn.Linear, nn.LayerNorm, nn.ReLU, nn.Linear]
    assert [m.out_features for m in mlp.layers if isinstance(m, nn.Linear)] == [120, 84, 2]
    cnn = QNetwork(spaces.Box(0, 1, (4, 10, 10), np.uint8), 3, "minatar")
    assert [type(m) for m in cnn.layers] == [nn.Conv2d, ChannelLayerNorm, nn.ReLU, nn.Flatten, nn.Linear, nn.LayerNorm, nn.ReLU, nn.Linear]
    assert cnn.layers[4].in_features == 16 * 8 * 8 and cnn.layers[4].out_features == 128
    # the conv LayerNorm normalizes each position over its channels
    x = th.randn(2, 16, 8, 8) * 5 + 3
    y = cnn.layers[1](x)
    np.testing.assert_allclose(y.mean(dim=1).detach().numpy(), 0.0, atol=1e-5)
    nature = QNetwork(spaces.Box(0, 255, (4, 84, 84), np.uint8), 6, "nature")
    assert [type(m) for m in nature.layers].count(ChannelLayerNorm) == 3


# -- the dials -------------------------------------------------------------------------------------
def test_with_lag_the_acting_network_is_k_updates_old() -> None:
    model = PQN("MlpPolicy", _cartpole(2), n_steps=8, batch_size=16, policy_lag=2, seed=1)
    learner_after = [{k: v.clone() for k, v in model.policy.state_dict().items()}]  # update 0: the initial network
    acting_after = []

    def listen(stats: dict[str, float]) -> None:
        learner_after.append({k: v.clone() for k, v in model.policy.state_dict().items()})
        acting_after.append((stats["acting_update"], {k: v.clone() for k, v in model.collector.acting_policy.state_dict().items()}))

    model.add_update_listener(listen)
    model.learn(16 * 6)
    assert [u for u, _ in acting_after] == [0, 0, 1, 2, 3, 4]
    for update, (acting_update, acting) in enumerate(acting_after, start=1):
        assert acting_update == max(0, update - 2)
        for name, value in acting.items():
            assert th.equal(value, learner_after[acting_update][name]), name
    assert not th.equal(acting_after[-1][1]["q_net.layers.1.weight"], learner_after[-1]["q_net.layers.1.weight"])


def test_replay_trains_on_older_batches_too() -> None:
    model = PQN("MlpPolicy", _cartpole(2), n_steps=8, batch_size=16, replay=2, seed=1)
    sizes = []
    original = model._training_data
    model._training_data = lambda batches: (sizes.append(len(batches)), original(batches))[1]  # type: ignore[method-assign]
    model.learn(16 * 4)
    assert sizes == [1, 2, 3, 3]


# -- learning --------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_pqn_learns_cartpole(seed: int) -> None:
    # CleanRL's classic-control settings but lr 1e-3 (decayed to 0) and 50k steps: a test's budget.
    # Four seeds scored 79, 171, 101 and 101 (greedy, 10 episodes) when this was written, ~5 s each
    th.set_num_threads(1)
    started = time.time()
    model = PQN("MlpPolicy", _cartpole(4, seed=seed), learning_rate=LinearSchedule(1e-3), seed=seed)
    model.learn(50_000)
    returns, _ = evaluate_policy(model, _cartpole(1, seed=100), n_eval_episodes=10, deterministic=True)
    print(f"PQN CartPole-v1 seed {seed}, 50k steps: greedy mean return {returns:.1f} in {time.time() - started:.1f} s")
    assert returns > 60.0  # a uniform random policy scores 22


# -- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"q_lambda": 1.5}, "q_lambda must be a number in [0, 1], got 1.5"),
        ({"q_lambda": -0.1}, "got -0.1"),
        ({"epsilon_final": 0.0}, "epsilon_final must be a number in (0, 1], got 0.0"),
        ({"epsilon_final": 0.5, "epsilon_start": 0.2}, "epsilon_final=0.5 is above epsilon_start=0.2"),
        ({"exploration_fraction": 2}, "exploration_fraction must be a number in [0, 1], got 2"),
        ({"sampler_temperature": 1.2}, "sampler_temperature=1.2 is refused"),
        ({"sampler_precision": "bf16"}, "sampler_precision='bf16' is refused"),
        ({"batch_scaling": AfterABS(t_min=64, t_max=32, base=32)}, "t_min=64 is larger than t_max=32"),
    ],
)
def test_bad_settings_are_refused_naming_the_value(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        PQN("MlpPolicy", _cartpole(1), **kwargs)
    assert message in str(err.value)


def test_box_actions_are_refused() -> None:
    with pytest.raises(ValueError, match=r"PQN needs a Discrete action space .* got Box"):
        PQN("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1))


# -- after ABS -------------------------------------------------------------------------------------
def test_after_abs_rollout_lengths_on_a_scripted_divergence_sequence() -> None:
    dial = AfterABS().resolve(128)  # base 32, t_min 32, t_max 512, c = 0.05 * 128 = 6.4
    assert (dial.base, dial.t_min, dial.t_max, dial.c) == (32, 32, 512, pytest.approx(6.4))
    divergences = [0.05, 0.1, 0.5, 0.03, 0.01, 0.0, 0.2]
    # c / d steps, rounded to a multiple of 32, clipped to [32, 512]:
    # 128, 64, 12.8 -> 0 -> 32, 213.3 -> 224, 640 -> 512, inf -> 512, 32
    assert [dial.next_rollout_steps(d) for d in divergences] == [128, 64, 32, 224, 512, 512, 32]
    custom = AfterABS(c=10.0, base=4, t_min=8, t_max=40).resolve(999)
    assert [custom.next_rollout_steps(d) for d in (1.0, 0.5, 0.3, 0.1)] == [8, 20, 32, 40]
    with pytest.raises(ValueError, match="got 1.5"):
        dial.next_rollout_steps(1.5)
    with pytest.raises(ValueError, match="t_max=100 is not a whole multiple of base=32"):
        AfterABS(t_max=100).resolve(128)
    with pytest.raises(ValueError, match="c must be a finite number > 0, got -1"):
        AfterABS(c=-1)


def test_pqn_sets_each_rollout_from_the_last_updates_divergence() -> None:
    model = PQN("MlpPolicy", _cartpole(2), n_steps=16, batch_size=16, batch_scaling=AfterABS(c=0.8, base=4, t_min=4, t_max=64), seed=0)
    rows = []
    model.add_update_listener(lambda stats: rows.append((stats["rollout_steps"], stats["behaviour_divergence"])))
    model.learn(2 * 16 * 12)
    assert rows[0][0] == 16  # the first rollout: n_steps
    expected = [model.batch_scaling.next_rollout_steps(d) for _, d in rows[:-1]]
    assert [steps for steps, _ in rows[1:]] == expected
    assert len({steps for steps, _ in rows}) > 1  # the length moved


# -- the command line ------------------------------------------------------------------------------
def _cli(argv: list[str]) -> tuple[int, str, str]:
    import sys

    from cli_here import cli_here  # adaptive-po in this process

    done = cli_here([sys.executable, "-m", "adaptive_po", *argv])
    return done.returncode, done.stdout, done.stderr


def test_train_pqn_writes_a_run_folder_with_its_own_settings_and_columns(tmp_path) -> None:
    import csv
    import json

    code, out, err = _cli(["train", "--algo", "pqn", "--env", "CartPole-v1", "--timesteps", "2000", "--lag", "2",
                           "--out", str(tmp_path), "--no-progress", "--device", "cpu"])
    assert code == 0, err
    run = tmp_path / "train" / "CartPole-v1" / "pqn" / "lag2_noise0_replay0" / "seed-0"
    assert (run / "COMPLETE").is_file() and "(process engine)" in err
    assert "rollouts of 512 steps (n_envs 4 x n_steps 128)" in err  # PQN's rollout, not PPO's
    config = json.loads((run / "config.json").read_text())
    assert config["algo"] == "pqn" and config["policy_lag"] == 2 and config["policy"] == "mlp"
    assert config["hyperparams"]["q_lambda"] == 0.65 and config["hyperparams"]["learning_rate"] == "lin_0.00025"
    rows = list(csv.DictReader((run / "progress.csv").open()))
    assert len(rows) == 4 and [r["rollout_steps"] for r in rows] == ["128.0"] * 4
    assert float(rows[0]["epsilon"]) > float(rows[-1]["epsilon"]) > 0
    assert all(0.0 <= float(r["behaviour_divergence"]) <= 1.0 for r in rows)
    assert float(rows[-1]["kl_behaviour"]) > 0  # lag 2: the learner's epsilon-greedy differs from the actor's


def test_pqn_refusals_on_the_command_line(tmp_path) -> None:
    base = ["train", "--algo", "pqn", "--env", "CartPole-v1", "--timesteps", "2048", "--out", str(tmp_path), "--no-progress"]
    code, _, err = _cli([*base, "--engine", "population"])
    assert code == 2 and "the population engine does not train pqn" in err and "use --engine process" in err
    code, _, err = _cli([*base, "--variant", "n_epochs=x2"])
    assert code == 2 and "pqn takes no variants" in err
    envs = tmp_path / "envs"
    envs.mkdir()
    text = (Path(__file__).resolve().parents[1] / "adaptive_po" / "env_configs" / "CartPole-v1.yaml").read_text()
    (envs / "CartPole-v1.yaml").write_text(text + "pqn:\n  q_lambda: 1.5\n")
    code, _, err = _cli([*base, "--envs-dir", str(envs)])
    assert code == 2 and "pqn.q_lambda must be a number in [0, 1], got 1.5" in err
    assert not (tmp_path / "train").exists()


# -- after ABS on the policy objectives ------------------------------------------------------------
def test_total_variation_by_hand() -> None:
    from adaptive_po import distributions as D

    p = th.log(th.tensor([[0.5, 0.5, 0.0 + 1e-30], [0.2, 0.3, 0.5]]))
    q = th.log(th.tensor([[0.25, 0.25, 0.5], [0.2, 0.3, 0.5]]))
    np.testing.assert_allclose(D.total_variation("categorical", p, q).numpy(), [0.5, 0.0], atol=1e-6)
    with pytest.raises(ValueError, match="categorical distributions only, got 'gaussian'"):
        D.total_variation("gaussian", p, q)


def test_a_policy_objective_sets_each_rollout_from_the_last_updates_total_variation() -> None:
    from adaptive_po import PPO

    model = PPO("MlpPolicy", _cartpole(2), n_steps=16, batch_size=16, n_epochs=2, learning_rate=3e-3, seed=0,
                batch_scaling={"c": 0.16, "base": 4, "t_min": 4, "t_max": 64})
    rows = []
    model.add_update_listener(lambda stats: rows.append((stats["rollout_steps"], stats["behaviour_divergence"])))
    model.learn(2 * 16 * 10)
    assert rows[0][0] == 16 and all(0.0 < d < 1.0 for _, d in rows)
    assert [steps for steps, _ in rows[1:]] == [model.batch_scaling.next_rollout_steps(d) for _, d in rows[:-1]]
    assert len({steps for steps, _ in rows}) > 1


def test_after_abs_is_refused_where_it_cannot_run() -> None:
    from adaptive_po import PPO
    from adaptive_po.population import Member, PopulationLearner

    with pytest.raises(ValueError, match="total variation between Discrete policies; the action space Box"):
        PPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1), batch_scaling={})
    with pytest.raises(ValueError, match=r"the population engine does not run batch_scaling=\{\}: the stacked members' rollouts"):
        PopulationLearner(spaces.Box(-1, 1, (4,)), spaces.Discrete(2), [Member(seed=0)], batch_scaling={})


def test_an_environment_files_batch_scaling_reaches_a_policy_objective_on_the_process_engine(tmp_path) -> None:
    import csv

    envs = tmp_path / "envs"
    envs.mkdir()
    text = (Path(__file__).resolve().parents[1] / "adaptive_po" / "env_configs" / "CartPole-v1.yaml").read_text()
    (envs / "CartPole-v1.yaml").write_text(text + "  batch_scaling: {c: 1.6, t_max: 64}\n")  # under hyperparams
    code, _, err = _cli(["train", "--algo", "ppo", "--env", "CartPole-v1", "--timesteps", "2048", "--envs-dir", str(envs),
                         "--engine", "population", "--out", str(tmp_path), "--no-progress"])
    assert code == 0, err
    assert "(process engine)" in err  # the population engine's rollouts have one shape: the run went to the process engine
    run = tmp_path / "train" / "CartPole-v1" / "ppo" / "lag0_noise0_replay0" / "seed-0"
    rows = list(csv.DictReader((run / "progress.csv").open()))
    steps = [int(float(r["rollout_steps"])) for r in rows]
    assert steps[0] == 32 and all(s % 8 == 0 and 8 <= s <= 64 for s in steps)  # base 32 // 4 = 8
    assert all(0.0 <= float(r["behaviour_divergence"]) <= 1.0 for r in rows) and rows[0]["epsilon"] == ""
