"""Tests for adaptive_po.environments: both backends on real envpool / gymnasium environments.

envpool and gymnasium draw initial states from different RNGs, so cross-backend checks
compare *semantics*: shapes and dtypes, dynamics consistency of every transition (the
terminal observation is the true last state, the step after a reset is a real step from
the reset state), exact time-limit truncation, and Monitor-style episode statistics.
"""

from __future__ import annotations

import math
import sys

import envpool
import numpy as np
import pytest
import torch
from stable_baselines3.common.monitor import Monitor

from adaptive_po.environments import (
    ATARI_FRAME_STACK,
    EnvpoolVecEnv,
    atari_ids,
    available_backends,
    is_atari,
    make_vec_env,
)

BACKENDS = ["envpool", "gymnasium"]


# ----------------------------------------------------------------------------------------
# Reference dynamics (gymnasium's equations) for dynamics-consistency checks
# ----------------------------------------------------------------------------------------


def cartpole_step(s: np.ndarray, a: int) -> np.ndarray:
    x, x_dot, th, th_dot = (float(v) for v in s)
    force = 10.0 if a == 1 else -10.0
    cos, sin = math.cos(th), math.sin(th)
    temp = (force + 0.05 * th_dot**2 * sin) / 1.1
    th_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
    x_acc = temp - 0.05 * th_acc * cos / 1.1
    return np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, th + 0.02 * th_dot, th_dot + 0.02 * th_acc])


def cartpole_fell(s: np.ndarray) -> bool:
    return abs(s[0]) > 2.4 or abs(s[2]) > 12 * 2 * math.pi / 360


def mountaincar_step(s: np.ndarray, a: int) -> np.ndarray:
    pos, vel = float(s[0]), float(s[1])
    vel = min(max(vel + (a - 1) * 0.001 + math.cos(3 * pos) * (-0.0025), -0.07), 0.07)
    pos = min(max(pos + vel, -1.2), 0.6)
    if pos == -1.2 and vel < 0:
        vel = 0.0
    return np.array([pos, vel])


def pendulum_reward(obs: np.ndarray, u: float) -> float:
    th = math.atan2(float(obs[1]), float(obs[0]))
    u = min(max(u, -2.0), 2.0)
    return -(th**2 + 0.1 * float(obs[2]) ** 2 + 0.001 * u**2)


def rollout(venv, actions: np.ndarray):
    """Step through ``actions`` (T, n, ...); returns per-step (obs_before, action, obs_after, rew, done, infos)."""
    obs = venv.reset()
    out = []
    for a in actions:
        new_obs, rew, done, infos = venv.step(a)
        out.append((obs, a, new_obs, rew, done, infos))
        obs = new_obs
    return out


# ----------------------------------------------------------------------------------------
# envpool facts the adapter relies on (regression tests against envpool upgrades)
# ----------------------------------------------------------------------------------------


def _run_until_done(pool, env: int, action: int):
    while True:
        obs, rew, term, trunc, info = pool.step(np.full(pool.num_envs, action, dtype=np.int32))
        if term[env] or trunc[env]:
            return obs, info


def test_envpool_fact_next_step_autoreset_and_subset_reset():
    pool = envpool.make_gymnasium("CartPole-v1", num_envs=2, seed=0, num_threads=1)
    pool.reset()
    _run_until_done(pool, 0, 1)
    # Native behaviour: the next step ignores the action and returns the reset obs, reward 0.
    obs, rew, term, trunc, info = pool.step(np.ones(2, dtype=np.int32))
    assert rew[0] == 0.0 and info["elapsed_step"][0] == 0 and np.all(np.abs(obs[0]) <= 0.05)

    # After an explicit subset reset of a done env the next step is a real transition.
    _run_until_done(pool, 1, 1)
    r_obs, r_info = pool.reset(np.array([1]))
    assert r_obs.shape == (1, 4) and list(r_info["env_id"]) == [1]
    obs, rew, term, trunc, info = pool.step(np.ones(2, dtype=np.int32))
    assert rew[1] == 1.0 and info["elapsed_step"][1] == 1
    np.testing.assert_allclose(obs[1], cartpole_step(r_obs[0], 1), atol=1e-5)

    # Stepping only the done env (what EnvpoolVecEnv does) runs the same auto-reset at once.
    _run_until_done(pool, 0, 0)
    s_obs, s_rew, s_term, s_trunc, s_info = pool.step(np.zeros(1, dtype=np.int32), env_id=np.array([0]))
    assert s_rew[0] == 0.0 and s_info["elapsed_step"][0] == 0 and not (s_term[0] or s_trunc[0])
    obs, rew, term, trunc, info = pool.step(np.zeros(2, dtype=np.int32))
    assert rew[0] == 1.0 and info["elapsed_step"][0] == 1
    np.testing.assert_allclose(obs[0], cartpole_step(s_obs[0], 0), atol=1e-5)


def test_envpool_fact_episodic_life_continues_game_but_explicit_reset_restarts_it():
    pool = envpool.make_gymnasium("Breakout-v5", num_envs=1, seed=0, episodic_life=True, reward_clip=True)
    pool.reset()
    rng = np.random.default_rng(0)
    for _ in range(2000):
        obs, rew, term, trunc, info = pool.step(rng.integers(0, 4, size=1).astype(np.int32))
        if term[0]:
            break
    assert term[0] and info["terminated"][0] == 0 and info["lives"][0] == 4  # a life loss, not game over
    # Next step: envpool's continuation, the game goes on (same lives, frame stack continues).
    obs2, rew2, *_, info2 = pool.step(np.ones(1, dtype=np.int32))
    assert rew2[0] == 0 and info2["lives"][0] == 4
    np.testing.assert_array_equal(obs2[0, :3], obs[0, 1:])
    # An explicit reset restarts the whole game (so the adapter must not use it after a life loss).
    _, info3 = pool.reset()
    assert info3["lives"][0] == 5


# ----------------------------------------------------------------------------------------
# Id handling and errors
# ----------------------------------------------------------------------------------------


def test_available_backends_and_is_atari():
    assert available_backends("CartPole-v1") == ["envpool", "gymnasium"]
    assert available_backends("Pong-v5") == available_backends("ALE/Pong-v5") == ["envpool", "gymnasium"]
    assert available_backends("FrozenLake-v1") == ["gymnasium"]
    assert available_backends("NoSuchEnv-v0") == []
    assert is_atari("Pong-v5") and is_atari("ALE/Breakout-v5") and not is_atari("CartPole-v1")
    assert "Pong-v5" in atari_ids() and "SpaceInvaders-v5" in atari_ids()


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("CartPol-v1", 2, 0), {}, r"Unknown environment id 'CartPol-v1'.*Did you mean 'CartPole-v1'"),
        (("NoSuchEnv-v0", 2, 0), {}, r"Unknown environment id 'NoSuchEnv-v0'.*Classic control.*Atari"),
        (("CartPole-v1", 2, 0, "pytorch"), {}, r"Unknown backend 'pytorch'"),
        (("FrozenLake-v1", 2, 0, "envpool"), {}, r"Backend 'envpool' does not support .*'FrozenLake-v1'.*'gymnasium'"),
        (("CartPole-v1", 0, 0), {}, r"n_envs must be an integer >= 1, got n_envs=0"),
        (("CartPole-v1", -3, 0), {}, r"n_envs=-3"),
        (("CartPole-v1", 2, -1), {}, r"seed=-1 is out of range"),
        (("PongNoFrameskip-v4", 2, 0), {}, r"legacy ALE id.*'Pong-v5'"),
        (("CartPole-v1", 2, 0), {"envpool_threads": -1}, r"envpool_threads=-1"),
    ],
)
def test_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_vec_env(*args, **kwargs)


def test_backend_without_its_dependency_is_named(monkeypatch):
    """Without Box2D gymnasium cannot build LunarLander: the error names the missing dependency
    and the backend that can. Box2D is hidden here, so the test runs whether it is installed or not."""
    from adaptive_po.environments import ids

    for name in [m for m in sys.modules if m.split(".")[0] == "Box2D" or m.startswith("gymnasium.envs.box2d")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "Box2D", None)  # `import Box2D` raises ImportError
    ids._gym_import_error.cache_clear()  # the answer is cached per id
    try:
        assert available_backends("LunarLander-v3") == ["envpool"]
        with pytest.raises(ValueError, match=r"Backend 'gymnasium' does not support .*LunarLander-v3.*Box2D.*'envpool'"):
            make_vec_env("LunarLander-v3", 2, 0, backend="gymnasium")
    finally:
        ids._gym_import_error.cache_clear()


# ----------------------------------------------------------------------------------------
# Classic control on both backends
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_cartpole_same_step_reset_convention(backend):
    """Terminal obs is the true last state, the returned obs a fresh initial state, and the
    step after a reset is a real transition from it (a junk step would give reward 0)."""
    n = 4
    venv = make_vec_env("CartPole-v1", n, seed=1, backend=backend)
    assert venv.observation_space.shape == (4,) and venv.observation_space.dtype == np.float32
    actions = np.random.default_rng(0).integers(0, 2, size=(300, n))
    actions[:, 0] = 1  # env 0 always pushes right: short episodes
    steps = rollout(venv, actions)
    ep_len = np.zeros(n, dtype=int)
    n_done = 0
    for obs, a, new_obs, rew, done, infos in steps:
        assert new_obs.shape == (n, 4) and new_obs.dtype == np.float32
        assert rew.dtype == np.float32 and done.dtype == bool and len(infos) == n
        assert len({id(d) for d in infos}) == n
        np.testing.assert_array_equal(rew, 1.0)  # never a reward-0 junk step
        ep_len += 1
        for i in range(n):
            expected = cartpole_step(obs[i], a[i])
            if done[i]:
                n_done += 1
                info = infos[i]
                np.testing.assert_allclose(info["terminal_observation"], expected, atol=1e-5)
                assert cartpole_fell(info["terminal_observation"])
                assert info["TimeLimit.truncated"] is False
                assert info["episode"]["l"] == ep_len[i] and info["episode"]["r"] == float(ep_len[i])
                assert info["episode"]["t"] >= 0
                assert np.all(np.abs(new_obs[i]) <= 0.05)  # a fresh initial state
                ep_len[i] = 0
            else:  # includes the first step after a reset: a real step from the reset state
                assert "terminal_observation" not in infos[i] and "episode" not in infos[i]
                np.testing.assert_allclose(new_obs[i], expected, atol=1e-5)
    assert n_done >= 20
    venv.close()


def _balancing_or_random(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Half the envs balance the pole (long episodes, truncated at 500 steps), half act at random."""
    n = len(obs)
    smart = (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int32)
    return np.where(np.arange(n) < n // 2, smart, rng.integers(0, 2, n)).astype(np.int32)


def test_the_in_process_cartpole_pool_is_envpools_bit_for_bit():
    """CartPolePool against envpool's own pool, on the same actions: every step's observations,
    rewards, terminated and truncated flags, env ids and elapsed steps equal, through partial sends
    and the resets of finished envs (a send to a finished env resets it), episodes that end by
    falling and episodes truncated at 500 steps."""
    from adaptive_po.environments.cartpole import CartPolePool

    n, seed = 16, 7
    kwargs = dict(num_envs=n, batch_size=n, seed=seed, num_threads=1)
    pools = envpool.make_gymnasium("CartPole-v1", **kwargs), CartPolePool("CartPole-v1", **kwargs)
    first = [pool.reset() for pool in pools]
    np.testing.assert_array_equal(first[0][0], first[1][0])
    assert first[1][0].flags.c_contiguous
    obs, rng, truncations, falls = first[0][0].copy(), np.random.default_rng(0), 0, 0

    def both(actions, ids=None):  # the arrays of each pool in env order
        out = []
        for pool in pools:
            pool.send(actions) if ids is None else pool.send(actions, ids)
            o, r, term, trunc, info = pool.recv()
            assert o.flags.c_contiguous  # as envpool lays them out (a compiled pass guards on strides)
            order = np.argsort(info["env_id"])
            out.append([o[order], r[order], term[order], trunc[order], info["env_id"][order], info["elapsed_step"][order]])
        for a, b in zip(*out):
            np.testing.assert_array_equal(a, b)
        return out[0]

    for t in range(1200):
        actions = _balancing_or_random(obs, rng)
        ids = np.sort(rng.choice(n, n // 2, replace=False)).astype(np.int32) if t % 3 == 0 else None
        o, _, term, trunc, env, _ = both(actions if ids is None else actions[ids], ids)
        obs[env] = o
        truncations, falls = truncations + trunc.sum(), falls + term.sum()
        if (term | trunc).any():
            finished = env[term | trunc]
            obs[finished] = both(np.zeros(len(finished), np.int32), finished)[0]
    assert truncations >= 8 and falls >= 100


@pytest.mark.parametrize("env_id", ["CartPole-v0", "CartPole-v1"])
def test_the_in_process_cartpole_pools_spec_is_envpools(env_id):
    """CartPolePool's config and spaces, built without envpool, are envpool's spec's: its defaults,
    each id's episode limit and reward threshold, the caller's keys; an unknown key is refused."""
    from adaptive_po.environments.cartpole import CartPolePool, spec_config

    for config in ({}, {"num_envs": 4}, {"num_envs": 4, "batch_size": 2}, {"num_envs": 4, "seed": 7, "max_episode_steps": 100, "num_threads": 1}):
        assert spec_config(env_id, **config) == envpool.make_spec(env_id, **config).config._asdict(), config
    spec, pool = envpool.make_spec(env_id, num_envs=3, seed=1), CartPolePool(env_id, num_envs=3, seed=1)
    theirs = spec.gymnasium_observation_space
    assert pool.observation_space.dtype == theirs.dtype and pool.observation_space.shape == theirs.shape
    np.testing.assert_array_equal(pool.observation_space.low, theirs.low)
    np.testing.assert_array_equal(pool.observation_space.high, theirs.high)
    assert pool.action_space == spec.gymnasium_action_space
    with pytest.raises(TypeError, match="frame_skip"):
        spec_config(env_id, frame_skip=4)
    with pytest.raises(ValueError, match="Acrobot-v1"):
        spec_config("Acrobot-v1")


def test_a_cartpole_process_does_not_import_envpool():
    """Choosing the envpool backend for CartPole and stepping it in process needs no envpool import
    (envpool imports every family it has: half a second of a process's start)."""
    import subprocess

    code = (
        "import sys\n"
        "from adaptive_po.environments import make_vec_env, resolve_backend\n"
        "backend, env_id = resolve_backend({'envpool': 'CartPole-v1', 'gymnasium': 'CartPole-v1'}, 'auto')\n"
        "venv = make_vec_env(env_id, 4, 0, backend)\n"
        "venv.reset(); venv.step(__import__('numpy').zeros(4, int))\n"
        "print(backend, type(venv._pool).__name__, 'envpool' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["envpool", "CartPolePool", "False"]


def test_cartpole_steps_in_process_with_the_envpool_backends_numbers():
    """make_vec_env's CartPole steps the in-process pool, and the VecEnv it gives returns what the
    same adapter over envpool's pool returns: every step (step_wait and step_some), with the
    terminal observations, truncation flags and episode statistics."""
    from adaptive_po.environments.cartpole import CartPolePool

    n = 8
    venvs = [EnvpoolVecEnv("CartPole-v1", n, 3, in_process=flag) for flag in (True, False)]
    assert isinstance(make_vec_env("CartPole-v1", 2, 0, backend="envpool")._pool, CartPolePool)
    assert isinstance(venvs[0]._pool, CartPolePool) and not isinstance(venvs[1]._pool, CartPolePool)
    obs = [venv.reset() for venv in venvs]
    np.testing.assert_array_equal(*obs)
    rng, episodes = np.random.default_rng(1), 0
    for t in range(700):
        actions = _balancing_or_random(obs[0], rng)
        if t % 4 == 0:
            ids = np.flatnonzero(rng.random(n) < 0.5)
            out = [venv.step_some(actions[ids], ids) for venv in venvs]
        else:
            ids, out = np.arange(n), [venv.step(actions) for venv in venvs]
        for a, b in zip(out[0][:3], out[1][:3]):
            np.testing.assert_array_equal(a, b)
        for mine, theirs in zip(out[0][3], out[1][3]):
            assert mine.keys() == theirs.keys()
            if "episode" in mine:
                episodes += 1
                assert mine["episode"]["r"] == theirs["episode"]["r"] and mine["episode"]["l"] == theirs["episode"]["l"]
                np.testing.assert_array_equal(mine["terminal_observation"], theirs["terminal_observation"])
                assert mine["TimeLimit.truncated"] == theirs["TimeLimit.truncated"]
        obs[0][ids] = out[0][0]
    assert episodes >= 50
    for venv in venvs:
        venv.close()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("env_id", "action", "limit"),
    [("MountainCar-v0", 1, 200), ("Acrobot-v1", 1, 500), ("Pendulum-v1", [0.5], 200)],
)
def test_time_limit_truncation(backend, env_id, action, limit):
    """A constant action that never reaches the goal truncates at exactly the time limit."""
    n = 2
    venv = make_vec_env(env_id, n, seed=3, backend=backend)
    a = np.array([action] * n, dtype=np.float32 if env_id == "Pendulum-v1" else np.int64)
    steps = rollout(venv, np.repeat(a[None], 2 * limit + 2, axis=0))  # two episodes, all envs at once
    for t, (obs, act, new_obs, rew, done, infos) in enumerate(steps, start=1):
        assert new_obs.shape == (n, *venv.observation_space.shape) and new_obs.dtype == np.float32
        if env_id == "Pendulum-v1":
            expected = [pendulum_reward(obs[i], 0.5) for i in range(n)]
            np.testing.assert_allclose(rew, expected, rtol=1e-4, atol=1e-4)
        else:
            np.testing.assert_array_equal(rew, -1.0)
        if env_id == "MountainCar-v0":
            for i in range(n):
                final = infos[i]["terminal_observation"] if done[i] else new_obs[i]
                np.testing.assert_allclose(final, mountaincar_step(obs[i], 1), atol=1e-6)
        if t % limit == 0:
            assert done.all()
            for info in infos:
                assert info["TimeLimit.truncated"] is True
                assert info["episode"]["l"] == limit
                assert info["terminal_observation"].shape == venv.observation_space.shape
            if env_id != "Pendulum-v1":
                assert all(info["episode"]["r"] == -float(limit) for info in infos)
            if env_id == "MountainCar-v0":  # a fresh start: position in [-0.6, -0.4], velocity 0
                assert np.all((new_obs[:, 0] >= -0.6) & (new_obs[:, 0] <= -0.4)) and np.all(new_obs[:, 1] == 0)
        else:
            assert not done.any()
    venv.close()


def test_pendulum_continuous_action_shapes():
    for backend in BACKENDS:
        venv = make_vec_env("Pendulum-v1", 3, seed=0, backend=backend)
        assert venv.action_space.shape == (1,)
        venv.reset()
        obs, rew, done, infos = venv.step(np.zeros((3, 1), dtype=np.float32))
        assert obs.shape == (3, 3) and rew.shape == (3,)
        if backend == "envpool":
            obs, *_ = venv.step(np.zeros(3))  # (n,) is reshaped to (n, 1)
            with pytest.raises(ValueError, match="do not fit 3 envs"):
                venv.step(np.zeros((3, 2)))
        venv.close()


def test_lunar_lander_on_envpool():
    venv = make_vec_env("LunarLander-v3", 2, seed=0)
    assert isinstance(venv, EnvpoolVecEnv)
    assert venv.observation_space.shape == (8,) and np.all(venv.observation_space.low == -np.inf)
    venv.reset()
    finished = 0
    for _ in range(300):
        obs, rew, done, infos = venv.step(np.random.default_rng(0).integers(0, 4, size=2))
        finished += sum("episode" in infos[i] for i in np.flatnonzero(done))
    assert finished >= 1
    venv.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_seeding_is_deterministic(backend):
    actions = np.random.default_rng(5).integers(0, 2, size=(120, 3))

    def trajectory(venv):
        return [(o.copy(), r, d) for o, _, _, r, d, _ in rollout(venv, actions)]

    a = trajectory(make_vec_env("CartPole-v1", 3, seed=11, backend=backend))
    b = trajectory(make_vec_env("CartPole-v1", 3, seed=11, backend=backend))
    for (oa, ra, da), (ob, rb, db) in zip(a, b, strict=True):
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(da, db)
    if backend == "envpool":  # slot i starts with the env envpool seeds seed + i
        raw = envpool.make_gymnasium("CartPole-v1", num_envs=3, seed=11, num_threads=1)
        np.testing.assert_array_equal(a[0][0], raw.reset()[0])
    c = make_vec_env("CartPole-v1", 3, seed=12, backend=backend).reset()
    assert not np.array_equal(c, make_vec_env("CartPole-v1", 3, seed=11, backend=backend).reset())
    # VecEnv.seed(s) applies from the next reset: env i restarts with seed s + i.
    venv = make_vec_env("CartPole-v1", 3, seed=0, backend=backend)
    venv.reset()
    venv.step(np.ones(3, dtype=np.int64))
    assert list(venv.seed(11)) == [11, 12, 13]
    np.testing.assert_array_equal(venv.reset(), make_vec_env("CartPole-v1", 3, seed=11, backend=backend).reset())


def test_vecenv_methods():
    for backend in BACKENDS:
        venv = make_vec_env("CartPole-v1", 2, seed=0, backend=backend)
        assert venv.num_envs == 2 and venv.get_attr("render_mode") == [None, None]
        assert venv.env_is_wrapped(Monitor) == [True, True]
        venv.reset()
        with pytest.warns(UserWarning, match="render_mode"):
            assert venv.render() is None
        venv.close()
    venv = make_vec_env("CartPole-v1", 2, seed=0, backend="envpool")
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(2, dtype=np.int64))
    assert venv.get_attr("max_episode_steps") == [500, 500] and venv.get_attr("num_envs") == [2, 2]
    assert venv.has_attr("num_threads") and not venv.has_attr("no_such_attribute")
    assert venv.get_attr("num_threads", indices=[1]) == [1]
    assert make_vec_env("CartPole-v1", 2, seed=0, envpool_threads=2).get_attr("num_threads") == [2, 2]
    with pytest.raises(NotImplementedError, match="set"):
        venv.set_attr("max_episode_steps", 10)
    with pytest.raises(NotImplementedError, match="env_method"):
        venv.env_method("render")
    venv.close()
    venv.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        venv.reset()


def test_ppo_runs_on_envpool_vecenv():
    from stable_baselines3 import PPO

    venv = make_vec_env("CartPole-v1", 4, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=128, n_epochs=1, seed=0, device="cpu")
    model.learn(512)
    assert len(model.ep_info_buffer) > 0 and all({"r", "l", "t"} <= set(e) for e in model.ep_info_buffer)


def test_one_cnn_policy_fits_both_atari_backends():
    from stable_baselines3 import PPO

    envpool_venv = make_vec_env("Pong-v5", 2, seed=0, backend="envpool")
    gymnasium_venv = make_vec_env("ALE/Pong-v5", 2, seed=0, backend="gymnasium")
    assert envpool_venv.observation_space == gymnasium_venv.observation_space
    assert envpool_venv.action_space == gymnasium_venv.action_space
    model = PPO("CnnPolicy", envpool_venv, n_steps=8, batch_size=16, n_epochs=1, seed=0, device="cpu")
    model.learn(16)
    trained_on_envpool = [p.detach().clone() for p in model.policy.parameters()]
    model.set_env(gymnasium_venv)  # SB3 refuses an environment whose spaces differ
    assert model.get_env() is gymnasium_venv
    model.learn(16, reset_num_timesteps=False)  # one more update, on the gymnasium backend's frames
    assert model.num_timesteps == 32
    assert any(not torch.equal(p, q) for p, q in zip(trained_on_envpool, model.policy.parameters()))
    for venv in (envpool_venv, gymnasium_venv):  # and the one policy acts on both
        actions, _ = model.predict(venv.reset())
        assert actions.shape == (2,) and all(model.action_space.contains(a) for a in actions)
        venv.close()


# ----------------------------------------------------------------------------------------
# Atari on both backends
# ----------------------------------------------------------------------------------------


def _all_frames_equal(stack: np.ndarray) -> bool:
    return all(np.array_equal(stack[k], stack[0]) for k in range(1, len(stack)))


@pytest.mark.parametrize("env_id", ["Pong-v5", "ALE/Pong-v5"])
def test_pong_shapes_and_frame_stack(env_id):
    spaces = []
    for backend in BACKENDS:
        n = 2
        venv = make_vec_env(env_id, n, seed=0, backend=backend)
        spaces.append((venv.observation_space, venv.action_space))
        obs = venv.reset()
        assert obs.shape == (n, ATARI_FRAME_STACK, 84, 84) and obs.dtype == np.uint8
        assert all(_all_frames_equal(o) for o in obs)  # a reset fills the stack with one frame
        rng = np.random.default_rng(0)
        for _ in range(300):
            new_obs, rew, done, infos = venv.step(rng.integers(0, venv.action_space.n, size=n))
            assert new_obs.shape == (n, 4, 84, 84) and new_obs.dtype == np.uint8
            assert set(np.unique(rew)) <= {-1.0, 0.0, 1.0}
            for i in range(n):
                if not done[i]:  # oldest frame first: the stack shifts by one frame per step
                    np.testing.assert_array_equal(new_obs[i, :3], obs[i, 1:])
            obs = new_obs
        venv.close()
    assert spaces[0] == spaces[1]  # one CnnPolicy fits both backends


def test_pong_reset_frames_are_identical_across_backends():
    """Pong's reset screen does not depend on the no-op count: with the same ALE grayscale
    palette, max-pool, INTER_AREA resize and stacking, both backends give the same bytes."""
    a = make_vec_env("Pong-v5", 2, seed=0, backend="envpool").reset()
    b = make_vec_env("ALE/Pong-v5", 2, seed=0, backend="gymnasium").reset()
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_atari_training_vs_eval_reward_clipping_and_raw_episode_return(backend):
    """SpaceInvaders pays 5..30 per alien: clipped in training, raw in eval and in ``episode``."""
    for training in (True, False):
        venv = make_vec_env("SpaceInvaders-v5", 2, seed=0, backend=backend, training=training)
        venv.reset()
        rng = np.random.default_rng(0)
        rewards = []
        game_sum = np.zeros(2)
        game_over_info = None
        for _ in range(3000):
            _, rew, done, infos = venv.step(rng.integers(0, venv.action_space.n, size=2))
            rewards.append(rew)
            game_sum += rew
            for i in np.flatnonzero(done):
                if "episode" in infos[i]:
                    game_over_info = (infos[i], game_sum[i])
                    break
                assert training  # in eval mode every done is a game end
            if game_over_info is not None:
                break
        assert game_over_info is not None
        values = set(np.unique(rewards))
        info, summed = game_over_info
        if training:
            assert values == {0.0, 1.0}
            assert info["episode"]["r"] >= 5 * summed > 0  # raw points, not the clipped sum
        else:
            assert max(values) > 1.0
            assert info["episode"]["r"] == summed
        assert info["episode"]["r"] % 5 == 0 and info["lives"] == 0
        venv.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_breakout_life_loss_is_done_but_the_game_continues(backend):
    n = 2
    venv = make_vec_env("Breakout-v5", n, seed=3, backend=backend, training=True)
    obs = venv.reset()
    lives = np.array([d["lives"] for d in venv.reset_infos])
    assert (lives == 5).all()
    rng = np.random.default_rng(1)
    steps = np.zeros(n, dtype=int)
    clipped = np.zeros(n)
    losses = np.zeros(n, dtype=int)
    games = np.zeros(n, dtype=int)
    for _ in range(5000):
        new_obs, rew, done, infos = venv.step(rng.integers(0, 4, size=n))
        steps += 1
        clipped += rew
        for i in range(n):
            info = infos[i]
            if not done[i]:
                assert info["lives"] == lives[i]
                continue
            term = info["terminal_observation"]
            assert term.shape == (4, 84, 84) and info["TimeLimit.truncated"] is False
            if "episode" not in info:  # life loss: done for the learner, the game goes on
                assert info["lives"] == lives[i] - 1 >= 1
                assert venv.reset_infos[i]["lives"] == info["lives"]  # no full reset to 5 lives
                np.testing.assert_array_equal(new_obs[i, :3], term[1:])  # the frame stack continues
                losses[i] += 1
                lives[i] = info["lives"]
            else:  # game over: whole-game statistics, then a full reset
                assert info["lives"] == 0 and losses[i] == 4
                assert info["episode"]["l"] == steps[i]
                assert info["episode"]["r"] >= clipped[i]
                assert venv.reset_infos[i]["lives"] == 5 and _all_frames_equal(new_obs[i])
                games[i] += 1
                lives[i], steps[i], clipped[i], losses[i] = 5, 0, 0.0, 0
        if (games >= 1).all():
            break
        obs = new_obs
    assert (games >= 1).all()
    venv.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_atari_time_limit_truncates_the_whole_game(backend, monkeypatch):
    """With a 60-step limit (instead of 27,000) a random Breakout game is cut mid-game:
    truncated (not terminated), whole-game statistics, then a full reset."""
    import adaptive_po.environments.atari as atari_settings  # both backends read it at build time

    monkeypatch.setattr(atari_settings, "ATARI_MAX_EPISODE_STEPS", 60)
    venv = make_vec_env("Breakout-v5", 1, seed=0, backend=backend, training=True)
    venv.reset()
    rng = np.random.default_rng(0)
    steps = 0
    for _ in range(200):
        _, _, done, infos = venv.step(rng.integers(0, 4, size=1))
        steps += 1
        if done[0] and "episode" in infos[0]:
            break
    info = infos[0]
    assert info["TimeLimit.truncated"] is True and info["lives"] >= 1  # cut mid-game, not game over
    assert info["episode"]["l"] == steps <= 60
    if backend == "envpool":  # envpool counts agent steps; ALE counts frames, no-ops at reset included
        assert steps == 60
    assert venv.reset_infos[0]["lives"] == 5
    venv.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_breakout_eval_mode_has_no_life_loss_done(backend):
    venv = make_vec_env("ALE/Breakout-v5", 1, seed=0, backend=backend, training=False)
    venv.reset()
    rng = np.random.default_rng(0)
    seen_lives = set()
    for _ in range(5000):
        _, rew, done, infos = venv.step(rng.integers(0, 4, size=1))
        seen_lives.add(infos[0]["lives"])
        if done[0]:
            assert "episode" in infos[0] and infos[0]["lives"] == 0
            break
    assert done[0] and {1, 2, 3, 4} <= seen_lives
    venv.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_atari_seeding_is_deterministic(backend):
    actions = np.random.default_rng(4).integers(0, 4, size=(150, 2))
    runs = []
    for _ in range(2):
        venv = make_vec_env("Breakout-v5", 2, seed=5, backend=backend)
        runs.append([(o.copy(), r, d) for _, _, o, r, d, _ in rollout(venv, actions)])
        venv.close()
    for (oa, ra, da), (ob, rb, db) in zip(*runs, strict=True):
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(da, db)
