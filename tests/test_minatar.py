"""The MinAtar tier: MinAtar's games behind our VecEnv conventions, its YAML files, and a population
of MinAtar CNN members end to end with uint8 rollout storage in both engines."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from adaptive_po.dials import DataDials
from adaptive_po import BatchPolicyOptimization
from adaptive_po.environments import MINATAR_GAMES, make_vec_env
from adaptive_po.environments import minatar as minatar_backend
from adaptive_po.bench.config import check_policy, get_env_config
from adaptive_po.bench.jobs import supports_population
from adaptive_po.bench.population_engine import execute_population
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.suites import MINATAR_ENVS, SUITES

pytest.importorskip("minatar")

#: (channels, minimal action set size) per game, from MinAtar's own definitions
SHAPES = {"Asterix": (4, 5), "Breakout": (4, 3), "Freeway": (7, 3), "Seaquest": (10, 6), "SpaceInvaders": (6, 4)}


@pytest.mark.parametrize("game", sorted(SHAPES))
def test_each_game_has_uint8_channel_first_grids_and_its_minimal_action_set(game):
    env = make_vec_env(f"MinAtar/{game}-v1", 3, 0)
    channels, n_actions = SHAPES[game]
    assert env.observation_space.shape == (channels, 10, 10) and env.observation_space.dtype == np.uint8
    assert env.action_space.n == n_actions
    obs = env.reset()
    assert obs.shape == (3, channels, 10, 10) and obs.dtype == np.uint8 and set(np.unique(obs)) <= {0, 1}
    assert all(g.sticky_action_prob == 0.1 for g in env._games)  # MinAtar's default


def _episodes(seed, steps=400, n=4):
    env = make_vec_env("MinAtar/Breakout-v1", n, seed)
    obs = [env.reset()]
    rng = np.random.default_rng(0)
    ends = []
    for _ in range(steps):
        o, r, d, infos = env.step(rng.integers(0, 3, n))
        obs.append(o)
        for i in np.flatnonzero(d):
            ends.append((i, infos[i]))
    return np.stack(obs), ends


def test_same_seed_same_games_and_same_step_auto_reset_with_monitor_statistics():
    a, ends = _episodes(7)
    b, _ = _episodes(7)
    c, _ = _episodes(8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert ends, "random Breakout play ends episodes within 400 steps"
    for i, info in ends:
        assert info["terminal_observation"].shape == (4, 10, 10)
        assert info["TimeLimit.truncated"] is False
        assert set(info["episode"]) == {"r", "l", "t"} and info["episode"]["l"] > 0


def test_the_time_limit_truncates_and_says_so():
    env = minatar_backend.MinAtarVecEnv("MinAtar/Freeway-v1", 2, 0, max_episode_steps=5)
    env.reset()
    for step in range(5):
        _, _, dones, infos = env.step(np.zeros(2, dtype=int))
    assert dones.all() and all(info["TimeLimit.truncated"] and info["episode"]["l"] == 5 for info in infos)


def test_gymnax_configuration_plays_without_sticky_actions_and_cuts_episodes_at_1000_steps():
    """``MinAtar/<Game>-gymnax-v1`` (the peer benchmark's cell): the same game, actions applied as
    given (step for step what MinAtar's own Environment with sticky_action_prob 0 does on a recorded
    action sequence), and a 1,000-step cap (Freeway's 2,500)."""
    from minatar import Environment

    env = make_vec_env("MinAtar/Breakout-gymnax-v1", 1, 3)
    assert env.max_episode_steps == 1_000 and env._games[0].sticky_action_prob == 0.0
    assert make_vec_env("MinAtar/Freeway-gymnax-v1", 1, 0).max_episode_steps == 2_500
    assert make_vec_env("MinAtar/Breakout-v1", 1, 0).max_episode_steps == 10_000
    reference = Environment("breakout", sticky_action_prob=0.0)
    reference.seed(3)
    reference.reset()
    obs = env.reset()
    actions = np.random.default_rng(1).integers(0, 3, 300)
    for a in actions:
        assert np.array_equal(obs[0], reference.state().transpose(2, 0, 1))
        obs, rewards, dones, infos = env.step(np.array([a]))
        reward, terminal = reference.act(int(env._action_set[a]))
        assert rewards[0] == reward and dones[0] == terminal
        if terminal:
            reference.reset()
            reference.last_action = 0
    cap = minatar_backend.MinAtarVecEnv("MinAtar/Freeway-gymnax-v1", 1, 0, max_episode_steps=3)
    cap.reset()
    for _ in range(3):
        _, _, dones, infos = cap.step(np.zeros(1, dtype=int))
    assert dones[0] and infos[0]["TimeLimit.truncated"]


@pytest.mark.parametrize("env_id", ["MinAtar/Breakout-v1", "MinAtar/Breakout-gymnax-v1"])
def test_breakout_played_all_at_once_is_the_packages_game_step_for_step(env_id):
    """Breakout's games stepped at once in numpy (BreakoutGames) against the package's own games,
    on the same actions: every observation, reward and done, through step and step_some, sticky
    actions (each game's random stream) and not, lost balls, scores and resets, with the terminal
    observations and episode statistics; and the choice by the number of games."""
    n = 12
    fast, package = (minatar_backend.MinAtarVecEnv(env_id, n, 5, vectorized=flag) for flag in (True, False))
    assert fast._batch is not None and package._batch is None
    assert make_vec_env(env_id, minatar_backend.VECTORIZED_MIN_GAMES, 0)._batch is not None
    assert make_vec_env(env_id, minatar_backend.VECTORIZED_MIN_GAMES - 1, 0)._batch is None
    np.testing.assert_array_equal(fast.reset(), package.reset())
    rng, episodes, points = np.random.default_rng(0), 0, 0.0
    for t in range(1500):
        actions = rng.integers(0, 3, n)
        if t % 5 == 0:
            ids = np.flatnonzero(rng.random(n) < 0.5)
            out = [venv.step_some(actions[ids], ids) for venv in (fast, package)]
        else:
            out = [venv.step(actions) for venv in (fast, package)]
        for a, b in zip(out[0][:3], out[1][:3]):
            np.testing.assert_array_equal(a, b)
        for mine, theirs in zip(out[0][3], out[1][3]):
            assert mine.keys() == theirs.keys()
            if "episode" in mine:
                episodes, points = episodes + 1, points + mine["episode"]["r"]
                assert (mine["episode"]["r"], mine["episode"]["l"]) == (theirs["episode"]["r"], theirs["episode"]["l"])
                assert mine["TimeLimit.truncated"] == theirs["TimeLimit.truncated"]
                np.testing.assert_array_equal(mine["terminal_observation"], theirs["terminal_observation"])
    assert episodes >= 500 and points >= 100


def test_bad_ids_and_a_missing_extra_are_named_before_anything_is_built(monkeypatch):
    with pytest.raises(ValueError, match="MinAtar/Pong-v1"):
        minatar_backend.MinAtarVecEnv("MinAtar/Pong-v1", 1, 0)
    with pytest.raises(ValueError, match="does not support environment 'CartPole-v1'"):
        make_vec_env("CartPole-v1", 1, 0, backend="minatar")
    monkeypatch.setattr(minatar_backend, "minatar_available", lambda: minatar_backend.MINATAR_INSTALL_HINT)
    import adaptive_po.environments.ids as ids

    monkeypatch.setattr(ids, "minatar_available", lambda: minatar_backend.MINATAR_INSTALL_HINT)
    with pytest.raises(ValueError, match=r"adaptive-po\[minatar\]"):
        make_vec_env("MinAtar/Breakout-v1", 1, 0)


def test_the_five_yaml_files_load_build_their_cnn_and_run_on_the_population_engine(tmp_path):
    assert set(MINATAR_ENVS) == set(SUITES["minatar"].envs) and len(MINATAR_ENVS) == len(MINATAR_GAMES)
    for name in MINATAR_ENVS:
        config = get_env_config(name)
        assert config.ids == {"minatar": f"MinAtar/{name.split('-')[0]}-v1"}
        assert config.hyperparams.policy == "CnnPolicy" and config.hyperparams.policy_kwargs["features_extractor_class"] == "MinAtarCNN"
        assert "gymnax-blines" in config.hyperparams.source and config.budget["minatar"] > 0
        check_policy(config)
        assert supports_population(RunSpec("minatar", name, "esspo", 0, 8192, out=str(tmp_path)))


def test_the_sb3_class_stores_uint8_grids_and_trains_the_minatar_cnn():
    env = make_vec_env("MinAtar/Breakout-v1", 2, 0)
    model = BatchPolicyOptimization(
        "CnnPolicy", env, policy_kwargs={"features_extractor_class": "MinAtarCNN", "net_arch": []}, n_steps=16, batch_size=16,
        n_epochs=1, seed=0, device="cpu",
    )
    assert type(model.policy.features_extractor).__name__ == "MinAtarCNN"
    model.learn(64)
    assert model.rollout_buffer.observations.dtype == np.uint8
    assert model.rollout_buffer.freeze(copy=True).observations.dtype == np.uint8


def test_a_minatar_population_trains_end_to_end_on_uint8_rollouts(tmp_path, monkeypatch):
    from adaptive_po import population

    seen = []
    update = population.PopulationLearner.update

    def spy(self, rollout, progress_remaining):
        seen.append((rollout.observations.dtype, rollout.timeout_observations.dtype, tuple(rollout.observations.shape)))
        return update(self, rollout, progress_remaining)

    monkeypatch.setattr(population.PopulationLearner, "update", spy)
    specs = [
        RunSpec("minatar", "Breakout-MinAtar", "esspo", seed, 2 * 64 * 128, dials=DataDials(policy_lag=lag), out=str(tmp_path), device="cpu")
        for seed, lag in ((0, 0), (1, 4))
    ]
    results = execute_population(specs)
    assert [r["status"] for r in results] == ["complete", "complete"], results
    assert seen == [(torch.uint8, torch.uint8, (2, 128, 64, 4, 10, 10))] * 2
    for spec in specs:
        summary = json.loads((spec.run_dir / "summary.json").read_text())
        assert summary["engine"] == "population" and summary["population_size"] == 2 and summary["timesteps"] == 16384
        assert summary["backend"] == "minatar"


@pytest.mark.slow
def test_the_gpu_check_runs_at_tiny_sizes_on_cpu(tmp_path):
    """``make gpu-check`` is known to work before a GPU is ever lent: its every cell, at toy sizes."""
    import subprocess
    import sys

    out = tmp_path / "check.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--tiny", "--device", "cpu", "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["env"], r["engine"], r["members"]) for r in rows] == [
        ("CartPole-v1", "population", 2), ("CartPole-v1", "population", 4),
        ("Pong-v5", "population", 1), ("Pong-v5", "population", 2), ("Pong-v5", "process", 1),
    ]
    assert all(r["env_steps_per_s"] > 0 and r["peak_gpu_gib"] is None for r in rows)
    assert "x the process engine's steps/s" in done.stdout and "| Pong-v5 | population | 2 |" in done.stdout


def test_yaml_names_for_networks_resolve_to_classes_and_bad_names_are_named():
    from adaptive_po.hyperparams import ACTIVATION_NAMES, FEATURES_EXTRACTOR_NAMES, HyperparameterError, policy_keywords
    from adaptive_po.networks import ACTIVATIONS, FEATURES_EXTRACTORS, MinAtarCNN, resolve_policy_kwargs

    assert tuple(sorted(FEATURES_EXTRACTORS)) == FEATURES_EXTRACTOR_NAMES and tuple(sorted(ACTIVATIONS)) == ACTIVATION_NAMES
    resolved = resolve_policy_kwargs({"features_extractor_class": "MinAtarCNN", "activation_fn": "ReLU", "net_arch": []})
    assert resolved["features_extractor_class"] is MinAtarCNN and resolved["activation_fn"] is torch.nn.ReLU
    with pytest.raises(HyperparameterError, match="unknown features extractor 'MinatarCNN'"):
        policy_keywords("policy_kwargs", {"features_extractor_class": "MinatarCNN"})
    with pytest.raises(HyperparameterError, match="unknown activation 'relu'"):
        policy_keywords("policy_kwargs", {"activation_fn": "relu"})
    cnn = MinAtarCNN(make_vec_env("MinAtar/Seaquest-v1", 1, 0).observation_space)
    assert [type(m).__name__ for m in cnn.modules()][1:] == ["Sequential", "Conv2d", "ReLU", "Flatten", "Sequential", "Linear", "ReLU"]
    assert cnn.conv[0].out_channels == 16 and cnn.conv[0].kernel_size == (3, 3) and cnn.linear[0].in_features == 16 * 8 * 8
    assert cnn(torch.zeros(2, 10, 10, 10)).shape == (2, 128)
