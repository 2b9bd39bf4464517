"""The population engine is the SB3 classes' algorithm, stacked: the tests prove the two faces agree.

1. From identical initial parameters and an identical stored rollout, one engine update equals the
   SB3 class's update, member by member, for every registered algorithm, Discrete and Box, with
   lag and noise on.
2. The lag dial gives each member exactly its own k-old parameters; the noise dial its own noise.
3. Run folders are the runner's; resume is per run; a diverging member fails alone.
"""

import dataclasses
import json

import gymnasium as gym
import pandas as pd
import numpy as np
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

import adaptive_po.analysis as analysis
from adaptive_po.dials import DataDials
from adaptive_po import BatchPolicyOptimization
from adaptive_po import contract
from adaptive_po.bench.jobs import group_populations, population_key
from adaptive_po.bench.population_engine import execute_population
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.process_engine import execute_run
from adaptive_po.objectives import OBJECTIVES
from adaptive_po.population import Member, PopulationLearner, StackedRollout

SMALL = dict(n_steps=32, batch_size=16, n_epochs=2, learning_rate=3e-3)


def _objective_kwargs(algo):
    return {"clip_range": 0.2} if "clip_range" in OBJECTIVES[algo].tuned else None


class _Nothing(BaseCallback):
    def _on_step(self):
        return True


def _stored_rollout(env_id, algo, member, policy="MlpPolicy", policy_kwargs=None):
    """A rollout from an actor that is ``policy_lag`` updates old and noisy: behaviour != learner."""
    env = _env(env_id, member.seed)
    model = BatchPolicyOptimization(
        policy, env, objective=algo, objective_kwargs=_objective_kwargs(algo), seed=member.seed, device="cpu",
        policy_lag=member.policy_lag, action_noise=member.action_noise, policy_kwargs=policy_kwargs, **SMALL,
    )
    model.learn(64 * 3)
    callback = _Nothing()
    callback.init_callback(model)
    model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
    return model.rollout_buffer.freeze(copy=True), env


def _env(env_id, seed):
    """Classic control through SB3's helper; MinAtar and Atari through ours (their preprocessing)."""
    if "/" in env_id or env_id.endswith("-v5"):
        from adaptive_po.environments import make_vec_env as make_ours

        return make_ours(env_id, 2, seed)
    return make_vec_env(env_id, n_envs=2, seed=seed)


def _stack(rollouts, discrete):
    obs_shape = rollouts[0].observations.shape[2:]
    timeout, terminal = [], []
    for r in rollouts:
        mask = np.zeros(r.rewards.shape, bool)
        obs = np.zeros((*r.rewards.shape, *obs_shape), r.observations.dtype)
        for (step, env), o in zip(r.timeout_index, r.timeout_observations):
            mask[step, env], obs[step, env] = True, o
        timeout.append(mask)
        terminal.append(obs)

    def t(xs):
        return torch.as_tensor(np.stack(xs))

    actions = [r.actions.reshape(r.rewards.shape) if discrete else r.actions for r in rollouts]
    return StackedRollout(
        t([r.observations for r in rollouts]), t(actions), t([r.rewards for r in rollouts]),
        t([r.episode_starts for r in rollouts]), t([r.behaviour_log_prob for r in rollouts]),
        t([r.behaviour_params for r in rollouts]), t(timeout), t(terminal),
        t([r.last_observation for r in rollouts]), t([r.last_dones for r in rollouts]),
    )


@pytest.mark.parametrize("algo", sorted(OBJECTIVES))
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_one_engine_update_equals_the_sb3_class_update_for_every_member(env_id, algo):
    _engine_update_equals_sb3_updates(env_id, algo)


#: the image members: the MinAtar paper's small CNN on MinAtar's (C, 10, 10) uint8 grids, the JAX
#: PPO baselines' MLP on the same grids (named in YAML terms), and SB3's NatureCNN on ALE frames
IMAGE_CASES = {
    "minatar-cnn": ("MinAtar/Breakout-v1", "CnnPolicy", {"features_extractor_class": "MinAtarCNN", "net_arch": []}),
    "minatar-mlp": ("MinAtar/Breakout-v1", "MlpPolicy", {"net_arch": {"pi": [256, 256], "vf": [256, 256]}, "activation_fn": "ReLU"}),
    "nature-cnn": ("Pong-v5", "CnnPolicy", None),
}


@pytest.mark.parametrize(
    "case, algo",
    # the MinAtar CNN with the suite's three objectives; the wide MLP and NatureCNN (a Pong rollout
    # each: the slow part) with the ESS objective
    [("minatar-cnn", "esspo"), ("minatar-cnn", "ppo"), ("minatar-cnn", "decoupled-ppo"), ("minatar-mlp", "esspo"), ("nature-cnn", "esspo")],
)
def test_one_cnn_engine_update_equals_the_sb3_class_update_for_every_member(case, algo):
    """Convolutional members stack like MLPs: one engine update on uint8 frames equals the SB3
    CnnPolicy's update, member by member, Discrete actions, lag and noise on."""
    env_id, policy, policy_kwargs = IMAGE_CASES[case]
    # NatureCNN sums 3,136 features per unit (the wide MLP 400 and 256) and the batched kernels under
    # vmap accumulate in another order than the plain ones; where a gradient is near zero, Adam's
    # m / sqrt(v) magnifies that rounding, so a few of their parameters differ by a few percent of
    # one Adam step. For them the test compares each tensor's update as a whole (relative error of
    # the change below 1e-3); the MinAtar CNN agrees element by element to the MLPs' 2e-6.
    learner = _engine_update_equals_sb3_updates(env_id, algo, policy, policy_kwargs, relative=case != "minatar-cnn")
    first = {"nature-cnn": "policy.features_extractor.cnn.0.weight", "minatar-cnn": "policy.features_extractor.conv.0.weight"}
    if case in first:
        assert learner.params[first[case]].dim() == 5  # (members, out, in, 3, 3): stacked convolutions


def _engine_update_equals_sb3_updates(env_id, algo, policy="MlpPolicy", policy_kwargs=None, relative=False):
    members = [Member(3, policy_lag=2, action_noise=0.3), Member(4, policy_lag=1, action_noise=0.5, behaviour_log_prob="policy")]
    rollouts, classes = [], []
    for member in members:
        rollout, env = _stored_rollout(env_id, algo, member, policy, policy_kwargs)
        rollouts.append(rollout)
        model = BatchPolicyOptimization(
            policy, env, objective=algo, objective_kwargs=_objective_kwargs(algo), seed=member.seed, device="cpu",
            policy_lag=member.policy_lag, action_noise=member.action_noise, behaviour_log_prob=member.behaviour_log_prob,
            policy_kwargs=policy_kwargs, **SMALL,
        )
        model.rollout_buffer.freeze = lambda copy, r=rollout: r  # train on the stored rollout
        model._current_progress_remaining = 0.7
        model.set_logger(configure(None, []))
        np.random.seed(100 + member.seed)  # the SB3 class draws its minibatch order from NumPy's global stream
        model.train()
        classes.append(model)

    learner = PopulationLearner(
        env.observation_space, env.action_space, members, objective=algo, objective_kwargs=_objective_kwargs(algo),
        policy=policy, policy_kwargs=policy_kwargs, **SMALL,
    )
    learner.permutation_rngs = [np.random.RandomState(100 + m.seed) for m in members]
    initial = {k: v.clone() for k, v in learner.params.items()}
    stacked = _stack(rollouts, isinstance(env.action_space, gym.spaces.Discrete))
    assert stacked.observations.dtype == torch.as_tensor(np.zeros(0, env.observation_space.dtype)).dtype  # no float copy
    stats = learner.update(stacked, 0.7)

    for m, model in enumerate(classes):
        moved = 0.0
        for name, value in model.policy.state_dict().items():
            key = f"policy.{name}"
            if key in learner.params:
                if relative:
                    change, engine_change = value - initial[key][m], learner.params[key][m] - initial[key][m]
                    assert (engine_change - change).norm() <= 1e-3 * change.norm() + 1e-7, key
                else:
                    torch.testing.assert_close(learner.params[key][m], value, atol=2e-6, rtol=1e-5)
                moved = max(moved, (value - initial[key][m]).abs().max().item())
        assert moved > 1e-3  # the update really moved the parameters
        for name in contract.UPDATE_STATISTICS:
            rtol = 5e-3 if relative else 1e-4  # the statistics of the last pass inherit the parameters' error
            np.testing.assert_allclose(stats[name][m].item(), model.last_update_stats[name], rtol=rtol, atol=1e-6, err_msg=name)
        for name, value in model.objective_state.items():  # per-run objective state (KL-PPO's coefficient)
            np.testing.assert_allclose(learner.objective_state[name][m].item(), float(value), rtol=1e-6, err_msg=name)
    return learner


def _learner(members, **kwargs):
    env = gym.make("CartPole-v1")
    return PopulationLearner(env.observation_space, env.action_space, members, n_steps=4, batch_size=8, n_epochs=1, learning_rate=1e-2, **kwargs)


def _random_rollout(learner, n_steps=4, n_envs=2):
    k = learner.k
    g = torch.Generator().manual_seed(learner.updates_done)
    obs = torch.randn(k, n_steps, n_envs, 4, generator=g)
    actions, blp, params = learner.act(obs.reshape(k, n_steps * n_envs, 4))
    shape = (k, n_steps, n_envs)
    return StackedRollout(
        obs, actions.reshape(shape), torch.randn(shape, generator=g), torch.zeros(shape), blp.reshape(shape),
        params.reshape(*shape, -1), torch.zeros(shape, dtype=torch.bool), torch.zeros(*shape, 4),
        torch.randn(k, n_envs, 4, generator=g), torch.zeros(k, n_envs),
    )


def test_the_sampling_draws_made_ahead_are_the_draws_of_one_request_per_act():
    """A categorical learner draws its members' uniform floats ahead, in blocks: every act still
    gets what a torch.rand per member per act would give, through several blocks and shapes."""
    import adaptive_po.population as P

    learner = _learner([Member(3), Member(11)])
    generators = [torch.Generator().manual_seed(seed) for seed in (3, 11)]
    for shape in [(8, 2)] * (2 * P.DRAW_BLOCK + 5) + [(3, 2), (5, 2)] + [(8, 2)] * P.DRAW_BLOCK:
        expected = torch.stack([torch.rand(shape, generator=g) for g in generators])
        assert torch.equal(learner._draws(torch.Size(shape))[1], expected)


def test_the_lag_dial_gives_each_member_its_own_k_old_parameters():
    lags = [0, 1, 3]
    learner = _learner([Member(s, policy_lag=lag) for s, lag in enumerate(lags)])
    snapshots = [{k: v.clone() for k, v in learner.params.items()}]  # snapshots[u]: after u updates
    obs = torch.randn(len(lags), 5, 4)
    for update in range(1, 6):
        learner.update(_random_rollout(learner), 1.0)
        snapshots.append({k: v.clone() for k, v in learner.params.items()})
        _, _, recorded = learner.act(obs)
        for m, lag in enumerate(lags):
            expected, _ = learner.forward(snapshots[max(0, update - lag)], obs)
            torch.testing.assert_close(recorded[m], expected[m])
            if lag and update > lag:  # and not anyone else's parameters
                other, _ = learner.forward(snapshots[update], obs)
                assert not torch.allclose(recorded[m], other[m])
        assert learner.acting_updates == [max(0, update - lag) for lag in lags]


def test_the_noise_dial_gives_each_member_its_own_noise_and_recording():
    members = [Member(0), Member(1, action_noise=0.5), Member(2, action_noise=0.5), Member(3, action_noise=0.5, behaviour_log_prob="policy")]
    learner = _learner(members)
    obs = torch.randn(4, 6, 4)
    clean, _ = learner.forward(learner.params, obs)
    actions, blp, recorded = learner.act(obs)
    torch.testing.assert_close(recorded[0], clean[0])  # no noise: the clean policy
    for m in (1, 2):  # the member's own stream, as the Collector seeds it (seed + 7919)
        z = torch.randn(6, 2, generator=torch.Generator().manual_seed(members[m].seed + 7919))
        torch.testing.assert_close(recorded[m], clean[m] + 0.5 * z)
    assert not torch.allclose(recorded[1], recorded[2])
    torch.testing.assert_close(recorded[3], clean[3])  # "policy" records the clean distribution
    for m in range(4):  # the recorded log-prob is that of the recorded distribution at the taken action
        expected = torch.log_softmax(recorded[m], -1).gather(-1, actions[m][:, None]).squeeze(-1)
        torch.testing.assert_close(blp[m], expected)


def test_grouping_keeps_only_compatible_runs_together(tmp_path):
    specs = [RunSpec("s", "CartPole-v1", algo, seed, 512, dials=DataDials(policy_lag=lag), out=str(tmp_path)) for algo in ("esspo", "ppo") for seed in range(3) for lag in (0, 4)]
    groups = group_populations(specs, max_members=4)
    assert sorted(len(g) for g in groups) == [2, 2, 4, 4]
    for group in groups:
        assert len({population_key(s) for s in group}) == 1


def _spec(tmp_path, **kw):
    base = dict(suite="t", env="CartPole-v1", algo="esspo", seed=0, total_timesteps=768, out=str(tmp_path), device="cpu")
    return RunSpec(**{**base, **kw})


def _scalars(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / contract.TENSORBOARD_DIR))
    events.Reload()
    return [e.value for e in events.Scalars(tag)]


def test_the_replay_dial_trains_on_the_m_previous_rollouts_and_no_more():
    """replay = m: update u trains on its rollout and the min(u - 1, m) before it (a queue of m, not m + 1)."""
    learner = _learner([Member(0, replay=2), Member(1, replay=2)])
    sizes = []
    learner.add_epoch_listener(lambda epoch, rows, data: sizes.append(data["advantages"].shape[-1]))
    for _ in range(5):
        learner.update(_random_rollout(learner), 1.0)
    assert sizes == [8, 16, 24, 24, 24]


def test_population_run_folders_are_the_runners(tmp_path):
    pop = [_spec(tmp_path / "pop", seed=s, dials=DataDials(policy_lag=lag)) for s, lag in ((0, 0), (1, 2))]
    results = execute_population(pop)
    assert [r["status"] for r in results] == ["complete", "complete"], results
    single = _spec(tmp_path / "proc", seed=1, dials=DataDials(policy_lag=2))
    assert execute_run(single)["status"] == "complete"
    a, b = pop[1].run_dir, single.run_dir
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    assert list((a / "tb").glob("events.out.tfevents.*"))
    ca, cb = (json.loads((d / "config.json").read_text()) for d in (a, b))
    ca.pop("versions"), cb.pop("versions")
    assert ca == cb
    for name in ("progress.csv", "eval.csv"):
        ha, hb = ((d / name).read_text().splitlines() for d in (a, b))
        assert ha[0] == hb[0] and len(ha) == len(hb)  # same columns, same number of rows
    eval_steps = [line.split(",")[0] for line in (a / "eval.csv").read_text().splitlines()[1:]]
    assert eval_steps == [line.split(",")[0] for line in (b / "eval.csv").read_text().splitlines()[1:]]
    summary = json.loads((a / "summary.json").read_text())
    assert summary["engine"] == "population" and summary["updates"] == 3 and summary["timesteps"] == 768
    # each member acts with its own dial: the update whose parameters acted, as both faces log it
    acting = [_scalars(d, "train/acting_update") for d in (pop[0].run_dir, a, b)]
    assert acting == [[1.0, 2.0, 3.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    loaded = analysis.load_runs(tmp_path / "pop" / "t")
    assert len(loaded.finals) == 2 and not loaded.notes


def test_resume_is_per_run_and_nothing_complete_is_rewritten(tmp_path):
    specs = [_spec(tmp_path, seed=s) for s in range(3)]
    assert [r["status"] for r in execute_population(specs)] == ["complete"] * 3
    stamps = {s.seed: (s.run_dir / "summary.json").stat().st_mtime_ns for s in specs}
    (specs[1].run_dir / contract.COMPLETE).unlink()  # as if it had been interrupted
    results = execute_population(specs)
    assert [r["status"] for r in results] == ["skipped", "complete", "skipped"]
    assert (specs[0].run_dir / "summary.json").stat().st_mtime_ns == stamps[0]
    assert (specs[2].run_dir / "summary.json").stat().st_mtime_ns == stamps[2]
    assert contract.is_complete(specs[1].run_dir)


def test_a_diverging_member_fails_alone_with_its_reason(tmp_path, monkeypatch):
    original = PopulationLearner.update

    def update(self, rollout, progress_remaining):
        stats = original(self, rollout, progress_remaining)
        if self.updates_done == 2:
            self.params["policy.action_net.weight"][1] = float("nan")
        return stats

    monkeypatch.setattr(PopulationLearner, "update", update)
    specs = [_spec(tmp_path, seed=s) for s in range(3)]
    results = execute_population(specs)
    assert [r["status"] for r in results] == ["complete", "failed", "complete"]
    assert "non-finite parameter at update 2" in results[1]["error"]
    failed = specs[1].run_dir
    assert (failed / contract.FAILED).is_file() and not (failed / contract.COMPLETE).exists()
    assert "FloatingPointError" in (failed / contract.FAILED).read_text()
    for s in (specs[0], specs[2]):
        assert json.loads((s.run_dir / "summary.json").read_text())["updates"] == 3


def test_members_that_cannot_share_a_population_are_refused(tmp_path):
    results = execute_population([_spec(tmp_path), _spec(tmp_path, algo="ppo", seed=1)])
    assert all(r["status"] == "failed" and "cannot share a population" in r["error"] for r in results)


@pytest.mark.parametrize("engine", ["population", "process"])
def test_tensorboard_events_only_when_asked(tmp_path, engine):
    spec = _spec(tmp_path, tensorboard=False, total_timesteps=256)
    outcome = execute_population([spec])[0] if engine == "population" else execute_run(spec)
    assert outcome["status"] == "complete"
    assert not (spec.run_dir / contract.TENSORBOARD_DIR).exists()
    assert {p.name for p in spec.run_dir.iterdir()} == {"config.json", "progress.csv", "eval.csv", "summary.json", contract.COMPLETE}


def test_terminal_values_are_computed_only_where_an_episode_was_truncated(monkeypatch):
    """The update bootstraps a truncated episode from its terminal observation's value: the engine
    computes that value only at truncated positions (the union over members, in an eager pass of its
    own: a compiled pass would compile once per count; padded to 8 rows, below which the matrix
    kernels round differently), and the advantages are those of valuing every position's terminal
    observation (to the last bit on most CPUs; within float32 rounding wherever the small pass's
    kernel rounds apart)."""
    k, t, e = 3, 8, 2
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    learner = PopulationLearner(space, gym.spaces.Box(-2.0, 2.0, (1,), np.float32), [Member(s) for s in range(k)],
                                objective="esspo", n_steps=t, batch_size=8, n_epochs=1)
    g = torch.Generator().manual_seed(0)
    timeout = torch.zeros(k, t, e, dtype=torch.bool)
    timeout[0, 2, 1] = timeout[1, 5, 0] = timeout[2, 2, 1] = timeout[2, 7, 0] = True  # 3 positions in the union
    batch = StackedRollout(
        torch.randn(k, t, e, 3, generator=g), torch.randn(k, t, e, 1, generator=g), torch.randn(k, t, e, generator=g),
        torch.rand(k, t, e, generator=g) < 0.2, torch.zeros(k, t, e), torch.zeros(k, t, e, 2), timeout,
        torch.randn(k, t, e, 3, generator=g), torch.randn(k, e, 3, generator=g), torch.zeros(k, e),
    )
    rows = []
    values, forward = learner.values, learner.forward
    monkeypatch.setattr(learner, "forward", lambda params, obs, eager=False: rows.append((obs.shape[1], eager)) or forward(params, obs, eager=eager))
    got = learner._advantages(batch)
    assert rows == [(t * e + e, False), (8, True)]  # the 3 truncated positions in the union, eagerly, padded to 8

    # the reference: every position's terminal observation valued, the others masked out
    from adaptive_po.update import advantages_and_returns

    every = values(torch.cat([batch.observations.reshape(k, t * e, 3), batch.last_observation, batch.timeout_observations.reshape(k, t * e, 3)], 1))
    v, last, terminal = every[:, : t * e].reshape(k, t, e), every[:, t * e : t * e + e], every[:, t * e + e :].reshape(k, t, e)
    to_np = lambda x: x.permute(1, 0, 2).reshape(t, k * e).cpu().numpy()  # noqa: E731
    adv, ret = advantages_and_returns(
        learner.advantage_estimator, to_np(batch.rewards), to_np(v), to_np(batch.episode_starts), last.reshape(k * e).numpy(),
        batch.last_dones.reshape(k * e).numpy(), gamma=learner.gamma, gae_lambda=learner.gae_lambda,
        truncation_values=to_np(torch.where(timeout, terminal, torch.zeros_like(terminal))), log_rhos=None,
    )
    back = lambda a: torch.as_tensor(a).reshape(t, k, e).permute(1, 0, 2)  # noqa: E731
    assert torch.equal(got[0], v)
    # the terminal values come from a pass of 8 rows: on some CPUs (AVX-512 here) its matrix kernel
    # rounds a row's value in the last bit differently from the pass over every position
    torch.testing.assert_close(got[1], back(adv), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got[2], back(ret), rtol=1e-6, atol=1e-6)

    rows.clear()
    learner._advantages(dataclasses.replace(batch, timeout=torch.zeros_like(timeout)))
    assert rows == [(t * e + e, False)]  # nothing truncated: no terminal observation valued


@pytest.mark.parametrize("n_samples", [20, 23])
def test_an_epoch_gathered_at_once_is_the_minibatches_selected_one_by_one(n_samples):
    """The engine gathers each column once per epoch, in the epoch's order, laid out so that every
    minibatch is a contiguous block: the minibatches are the per-index selections, value for value
    and in order, each member in its own order, a short last minibatch included (23 = 4 x 5 + 3)."""
    from adaptive_po.population import _StackedFace
    from adaptive_po.update import MINIBATCH_KEYS

    k = 3
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    make = lambda: PopulationLearner(space, gym.spaces.Discrete(2), [Member(s) for s in range(k)],  # noqa: E731
                                     objective="esspo", n_steps=8, batch_size=5, n_epochs=1)
    g = torch.Generator().manual_seed(0)
    data = {name: torch.randn(k, n_samples, generator=g) for name in MINIBATCH_KEYS}
    data["observations"] = torch.randn(k, n_samples, 3, generator=g)
    one_by_one, at_once = _StackedFace(make(), 3e-4), _StackedFace(make(), 3e-4)
    for _ in range(2):  # two epochs: the members' generators advance alike
        want = [one_by_one.select(data, index) for index in one_by_one.minibatches(n_samples)]
        got = list(at_once.epoch(data, n_samples))
        assert [len(m["observations"][0]) for m in got] == [5] * (n_samples // 5) + ([n_samples % 5] if n_samples % 5 else [])
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.keys() == b.keys()
            assert all(torch.equal(a[name], b[name]) and a[name].is_contiguous() for name in a)


def test_tensorboard_events_hold_each_updates_statistics(tmp_path):
    """The population logs an update's statistics as one event per member and update: TensorBoard
    reads every tag back, one point per update, equal to the run's progress.csv."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    spec = _spec(tmp_path, total_timesteps=768)
    assert execute_population([spec])[0]["status"] == "complete"
    progress = pd.read_csv(spec.run_dir / contract.PROGRESS_FILE)
    events = EventAccumulator(str(spec.run_dir / contract.TENSORBOARD_DIR))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {f"train/{name}" for name in (*contract.UPDATE_STATISTICS, "loss")} <= tags
    for name in contract.UPDATE_STATISTICS:
        logged = events.Scalars(f"train/{name}")
        assert [e.step for e in logged] == progress["timesteps"].tolist()
        np.testing.assert_allclose([e.value for e in logged], progress[name].to_numpy(dtype=np.float32), rtol=1e-6, equal_nan=True)
    assert [e.step for e in events.Scalars("eval/mean_reward")] == pd.read_csv(spec.run_dir / contract.EVAL_FILE)["timesteps"].tolist()


def test_the_population_engine_takes_the_sb3_classs_defaults():
    """The engines share their defaults without importing each other: the population engine's
    keyword defaults equal the SB3 class's signature defaults, name for name."""
    import inspect

    from adaptive_po.algorithms import BatchPolicyOptimization
    from adaptive_po.population import SHARED_DEFAULTS, shared_hyperparameters

    signature = inspect.signature(BatchPolicyOptimization.__init__).parameters
    assert SHARED_DEFAULTS == {name: signature[name].default for name in SHARED_DEFAULTS}
    assert shared_hyperparameters({"n_epochs": 3})["n_epochs"] == 3
    with pytest.raises(TypeError, match="clip_range"):
        shared_hyperparameters({"clip_range": 0.1})


#: a child that frees and reallocates two blocks of 3.3 MB (a 50-member CartPole step's activation
#: size) 20 times, before or after a population learner is built, and prints its page faults
_FAULTS_CHILD = """
import resource, sys
import gymnasium as gym, numpy as np, torch
from adaptive_po import population as P

def faults():
    # 40 MB blocks, above glibc's largest dynamic mmap threshold (32 MB): by default each one is
    # mapped for itself and unmapped when freed, so its pages fault in afresh every time
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        a, b = torch.empty(10_000_000), torch.empty(10_000_000)
        a.fill_(1.0), b.fill_(2.0)
        del a, b
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

from adaptive_po.bench import process_settings as S

# a library user's process builds a learner; the bench's training process also sets the allocator
kept = S.keep_freed_memory() if sys.argv[1] == "bench" else None
P.PopulationLearner(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2), [P.Member(0)], n_steps=8, batch_size=8)
faults()  # the heap grows once
print(kept, faults())
"""


def test_the_benchs_training_process_keeps_the_memory_its_steps_free_and_the_library_leaves_the_allocator_alone():
    """The bench's training process has the allocator keep freed blocks
    (``bench.process_settings.keep_freed_memory``, called when a population job starts): the same
    buffers allocated again touch no new pages, where by default glibc maps and unmaps many of them,
    faulting their pages in afresh (a stacked CartPole step's 1,500 page faults, 2.6-3.4 ms of a
    16-20 ms step). Building a learner in a library user's process changes nothing process-wide."""
    import subprocess
    import sys

    def run(mode):
        out = subprocess.run([sys.executable, "-c", _FAULTS_CHILD, mode], capture_output=True, text=True, check=True).stdout.split()
        return out[0], int(out[1])

    kept, faults_kept = run("bench")
    if kept != "True":
        pytest.skip("this C library takes no mallopt settings (not glibc): nothing to keep")
    _, faults_library = run("built")
    # a learner built outside the bench leaves the allocator as it was: blocks mapped and unmapped, their pages faulted
    # again (10 x 40 MB: about 98,000 pages)
    assert faults_library > 50_000, faults_library
    assert faults_kept < 100, faults_kept


def test_a_population_job_of_the_bench_sets_the_allocator_before_it_builds_its_learner(tmp_path, monkeypatch):
    """The population engine, the bench's training process, calls the process setting when a job
    starts, before the learner is built; the learner itself never does."""
    from adaptive_po.bench import population_engine
    from test_bench import tiny_spec

    order = []
    monkeypatch.setattr(population_engine, "keep_freed_memory", lambda: order.append("allocator") or True)
    built = PopulationLearner.__init__
    monkeypatch.setattr(PopulationLearner, "__init__", lambda self, *a, **k: order.append("learner") or built(self, *a, **k))
    specs = [tiny_spec(tmp_path, total_timesteps=256, seed=seed) for seed in (0, 1)]
    assert [r["status"] for r in population_engine.execute_population(specs)] == ["complete"] * 2
    assert order == ["allocator", "learner"], order
    order.clear()
    PopulationLearner(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2), [Member(0)], n_steps=8, batch_size=8)
    assert order == ["learner"]


def test_an_update_takes_pi_prox_from_its_values_pass(monkeypatch):
    """The update's log-probs before its first step (pi_prox) come from the pass that valued its
    observations (same parameters, same rows): two whole-batch passes per update, not three, and
    the end-of-update pass, after the steps moved the parameters, is computed afresh."""
    k, t, e = 2, 8, 2
    learner = PopulationLearner(gym.spaces.Box(-1.0, 1.0, (3,), np.float32), gym.spaces.Discrete(3), [Member(s) for s in range(k)],
                                objective="ppo", objective_kwargs={"clip_range": 0.2}, n_steps=t, batch_size=8, n_epochs=2)
    g = torch.Generator().manual_seed(0)
    obs = torch.randn(k, t, e, 3, generator=g)
    actions, blp, params = learner.act(obs.reshape(k, t * e, 3))
    batch = StackedRollout(obs, actions.reshape(k, t, e), torch.randn(k, t, e, generator=g), torch.zeros(k, t, e), blp.reshape(k, t, e),
                           params.reshape(k, t, e, -1), torch.zeros(k, t, e, dtype=torch.bool), torch.zeros(k, t, e, 3),
                           torch.randn(k, e, 3, generator=g), torch.zeros(k, e))
    before = {name: value.clone() for name, value in learner.params.items()}
    passes, forward = [], learner.forward
    monkeypatch.setattr(learner, "forward", lambda p, o, eager=False: passes.append((o.shape[1], p["policy.action_net.weight"])) or forward(p, o, eager=eager))
    learner.update(batch, 1.0)
    assert [rows for rows, _ in passes] == [t * e + e, t * e]  # the values' pass, then the one after the steps
    assert torch.equal(passes[0][1], before["policy.action_net.weight"]) and not torch.equal(passes[1][1], passes[0][1])
