"""``step_some``: stepping only some of a vector env's environments (the population's evaluation
steps only the environments that still owe episodes). An environment's course must not depend on
which others step beside it: stepped alone or with all of them, on the same actions, it gives the
same observations, rewards, dones, terminal observations and episode statistics, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

from adaptive_po.environments import make_vec_env

N_ENVS = 5

CASES = [
    ("envpool", "CartPole-v1", True, 400),
    ("gymnasium", "CartPole-v1", True, 400),
    ("envpool", "Pendulum-v1", True, 450),  # every episode ends by truncation (200 steps)
    ("envpool", "Breakout-v5", True, 300),  # episodic life: a lost life is done, the game goes on
    ("minatar", "MinAtar/Breakout-v1", True, 300),
]


def _per_env_course(venv, actions: np.ndarray, schedule: list[np.ndarray] | None) -> list[list[tuple]]:
    """Each env's sequence of (obs, reward, done, terminal obs, truncated, episode) over its own
    steps; env ``i`` takes ``actions[i][s]`` at its ``s``-th step. ``schedule``: the env ids stepped
    at each call (``step_some``); ``None``: every env at every call (``step``)."""
    first = np.array(venv.reset())
    course: list[list[tuple]] = [[("reset", first[i].tobytes())] for i in range(venv.num_envs)]
    taken = np.zeros(venv.num_envs, dtype=int)
    for ids in schedule if schedule is not None else [np.arange(venv.num_envs)] * actions.shape[1]:
        chosen = np.stack([actions[i, taken[i]] for i in ids])
        if schedule is None:
            obs, rewards, dones, infos = venv.step(chosen)
        else:
            obs, rewards, dones, infos = venv.step_some(chosen, ids)
        assert len(obs) == len(rewards) == len(dones) == len(infos) == len(ids)
        for row, i in enumerate(ids):
            info = infos[row]
            terminal = info.get("terminal_observation")
            episode = info.get("episode")
            course[i].append((
                np.asarray(obs[row]).tobytes(), float(rewards[row]), bool(dones[row]),
                None if terminal is None else np.asarray(terminal).tobytes(), info.get("TimeLimit.truncated"),
                None if episode is None else (episode["r"], episode["l"]),
            ))
            taken[i] += 1
    return course


@pytest.mark.parametrize("backend,env_id,training,steps", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_an_env_stepped_alone_follows_the_course_it_follows_among_all(backend, env_id, training, steps):
    if backend == "minatar":
        pytest.importorskip("minatar")
    rng = np.random.default_rng(0)
    full = make_vec_env(env_id, N_ENVS, 123, backend, training=training)
    some = make_vec_env(env_id, N_ENVS, 123, backend, training=training)
    space = full.action_space
    space.seed(0)  # before sampling: the actions, and so the episode ends the course crosses, are the same every run
    actions = np.stack([np.stack([space.sample() for _ in range(steps)]) for _ in range(N_ENVS)])
    # a schedule that steps a random, changing subset (in a shuffled order) until every env has
    # taken `steps` steps: some envs run ahead, some wait
    schedule, taken = [], np.zeros(N_ENVS, dtype=int)
    while (taken < steps).any():
        behind = np.flatnonzero(taken < steps)
        ids = rng.permutation(behind)[: rng.integers(1, len(behind) + 1)]
        schedule.append(ids)
        taken[ids] += 1
    try:
        expected = _per_env_course(full, actions, None)
        got = _per_env_course(some, actions, schedule)
    finally:
        full.close()
        some.close()
    ended = 0
    for i in range(N_ENVS):
        assert len(got[i]) == len(expected[i]) == steps + 1
        for s, (a, b) in enumerate(zip(got[i], expected[i])):
            assert a == b, f"{backend} {env_id}: env {i} differs at its step {s}"
        ended += sum(step[-1] is not None for step in expected[i][1:])
    assert ended >= N_ENVS, "the course must cross episode ends (auto-reset, episode statistics)"


@pytest.mark.parametrize("backend", ["envpool", "gymnasium"])
@pytest.mark.parametrize("ids", [[0, 0], [5], [-1]])
def test_step_some_refuses_env_ids_it_does_not_have(backend, ids):
    venv = make_vec_env("CartPole-v1", N_ENVS, 0, backend)
    try:
        venv.reset()
        with pytest.raises(ValueError, match=r"env_ids must be distinct envs of 0\.\.4"):
            venv.step_some(np.zeros(len(ids), dtype=np.int64), np.array(ids))
    finally:
        venv.close()
