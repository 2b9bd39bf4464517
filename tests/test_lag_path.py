"""The policy-lag path differs from the lag-0 path in the actor's age only (issue 11, item 7).

On LunarLander PPO at lag 4 scored far above PPO at lag 0. These tests rule out the plumbing:

* lag 0 routed through the machinery of the lag path (the SB3 class: a deep-copied actor
  refreshed from a snapshot queue after every update; the population engine: a member of lag 0
  in a population whose snapshot history is active because another member has lag > 0) gives
  the same run as lag 0 through the learner itself;
* at lag k the acting parameters are exactly the learner's parameters from k updates before
  (the initial ones while fewer than k updates have happened), in both engines.

docs/results/lunarlander-lag.md reports what the lag does to PPO on LunarLander instead.
"""

from __future__ import annotations

import copy
import csv

import gymnasium as gym
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from adaptive_po.dials import DataDials
from adaptive_po import ESSPO, PPO
from adaptive_po.collector import Collector
from adaptive_po import contract
from adaptive_po.bench.population_engine import execute_population
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.population import Member, PopulationLearner, StackedRollout


# -- the SB3 class ---------------------------------------------------------------------------------
class SnapshotActorAtLagZero(Collector):
    """A lag-0 collector that acts through the lag path's machinery: a deep copy of the learner,
    loaded from the snapshot queue (of length 1, so the newest snapshot) after every update."""

    def attach(self, policy):  # type: ignore[no-untyped-def]
        super().attach(policy)
        assert self.dials.policy_lag == 0 and self._actor is None
        self._actor = copy.deepcopy(policy)
        self._actor.set_training_mode(False)
        for p in self._actor.parameters():
            p.requires_grad_(False)
        self._stale.snapshots.append(self._snapshot(policy))


class Recorder(BaseCallback):
    """At each rollout's start: the learner's and the acting policy's parameters; at its end:
    the behaviour distribution and the actions recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.learner: list[dict[str, torch.Tensor]] = []
        self.actor: list[dict[str, torch.Tensor]] = []
        self.acted_through_learner: list[bool] = []
        self.rollouts: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _on_rollout_start(self) -> None:
        model = self.model
        acting = model.collector.acting_policy
        self.learner.append({k: v.clone() for k, v in model.policy.state_dict().items()})
        self.actor.append({k: v.clone() for k, v in acting.state_dict().items()})
        self.acted_through_learner.append(acting is model.policy)

    def _on_rollout_end(self) -> None:
        buf = self.model.rollout_buffer
        self.rollouts.append((torch.as_tensor(buf.behaviour_params.copy()), torch.as_tensor(buf.actions.copy())))

    def _on_step(self) -> bool:
        return True


def _sb3_run(algo_class, collector_class=None, policy_lag=0, n_updates=5):  # type: ignore[no-untyped-def]
    env = make_vec_env("CartPole-v1", n_envs=4, seed=3)
    model = algo_class(
        "MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=2, learning_rate=3e-3, ent_coef=0.01,
        seed=3, device="cpu", policy_lag=policy_lag,
    )
    if collector_class is not None:
        model.collector = collector_class(model.dials, seed=model.seed)
        model.collector.attach(model.policy)
    recorder = Recorder()
    model.learn(32 * 4 * n_updates, callback=recorder)
    return model, recorder


def _assert_same_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("algo_class", [PPO, ESSPO])
def test_sb3_lag_zero_through_the_snapshot_actor_is_the_same_run(algo_class):
    plain, plain_rec = _sb3_run(algo_class)
    routed, routed_rec = _sb3_run(algo_class, SnapshotActorAtLagZero)
    assert all(plain_rec.acted_through_learner) and not any(routed_rec.acted_through_learner)
    assert len(plain_rec.rollouts) == len(routed_rec.rollouts) == 5
    for (params_a, actions_a), (params_b, actions_b) in zip(plain_rec.rollouts, routed_rec.rollouts):
        assert torch.equal(actions_a, actions_b)
        assert torch.equal(params_a, params_b)  # the same behaviour distribution, bit for bit
    for actor, learner in zip(routed_rec.actor, routed_rec.learner):  # the copy acted with the learner's parameters
        _assert_same_state(actor, learner)
    _assert_same_state(plain.policy.state_dict(), routed.policy.state_dict())
    moved = max((v - plain_rec.learner[0][k]).abs().max().item() for k, v in plain.policy.state_dict().items())
    assert moved > 1e-3  # the runs really trained


@pytest.mark.parametrize("lag", [1, 2, 4])
def test_sb3_actor_is_the_learner_of_exactly_k_updates_before(lag):
    n_updates = 7
    _, rec = _sb3_run(PPO, policy_lag=lag, n_updates=n_updates)
    # rec.learner[i]: the learner after i updates; rec.actor[i]: who acted in rollout i
    for i in range(n_updates):
        _assert_same_state(rec.actor[i], rec.learner[max(0, i - lag)])
        if i - lag >= 0:  # and not the learner of one update earlier or later
            for other in (i - lag - 1, i - lag + 1):
                if 0 <= other < n_updates and other != max(0, i - lag):
                    assert any(not torch.equal(rec.actor[i][k], rec.learner[other][k]) for k in rec.actor[i])


# -- the population engine -------------------------------------------------------------------------
def _learner(members):  # type: ignore[no-untyped-def]
    env = gym.make("CartPole-v1")
    return PopulationLearner(
        env.observation_space, env.action_space, members, objective="ppo", objective_kwargs={"clip_range": 0.2},
        n_steps=8, batch_size=16, n_epochs=2, learning_rate=1e-2, ent_coef=0.01,
    )


def _rollout(learner, update, n_steps=8, n_envs=4):  # type: ignore[no-untyped-def]
    """A rollout whose actions come from ``learner.act`` (so the acting parameters matter); the
    observations and rewards are the same for every member and every population at one update."""
    k = learner.k
    g = torch.Generator().manual_seed(1000 + update)
    obs = torch.randn(n_steps, n_envs, 4, generator=g).expand(k, -1, -1, -1).contiguous()
    rewards = torch.randn(n_steps, n_envs, generator=g).expand(k, -1, -1).contiguous()
    last_obs = torch.randn(n_envs, 4, generator=g).expand(k, -1, -1).contiguous()
    actions, blp, params = learner.act(obs.reshape(k, n_steps * n_envs, 4))
    shape = (k, n_steps, n_envs)
    return StackedRollout(
        obs, actions.reshape(shape), rewards, torch.zeros(shape), blp.reshape(shape), params.reshape(*shape, -1),
        torch.zeros(shape, dtype=torch.bool), torch.zeros(*shape, 4), last_obs, torch.zeros(k, n_envs),
    )


def test_population_lag_zero_member_is_unchanged_by_an_active_history():
    only_fresh = _learner([Member(0), Member(1)])
    mixed = _learner([Member(0), Member(1, policy_lag=3)])
    assert len(only_fresh._stale.snapshots) == 1 and mixed._stale.snapshots.maxlen == 4
    for update in range(6):
        ra, rb = _rollout(only_fresh, update), _rollout(mixed, update)
        assert torch.equal(ra.actions[0], rb.actions[0])
        torch.testing.assert_close(ra.behaviour_params[0], rb.behaviour_params[0], rtol=0, atol=1e-6)
        only_fresh.update(ra, 1.0)
        mixed.update(rb, 1.0)
    assert len(mixed._stale.snapshots) == 4  # the history was in use
    for name, value in only_fresh.params.items():
        torch.testing.assert_close(mixed.params[name][0], value[0], rtol=0, atol=1e-6)
        assert not torch.allclose(mixed.params[name][1], value[1])  # the lagged member did differ
    moved = max((v[0] - only_fresh._initial[k][0]).abs().max().item() for k, v in only_fresh.params.items())
    assert moved > 1e-3


def test_population_actor_is_the_learner_of_exactly_k_updates_before():
    lags = [0, 1, 2, 4]
    learner = _learner([Member(s, policy_lag=lag) for s, lag in enumerate(lags)])
    after = [{k: v.clone() for k, v in learner.params.items()}]  # after[u]: parameters after u updates
    for update in range(1, 8):
        learner.update(_rollout(learner, update), 1.0)
        after.append({k: v.clone() for k, v in learner.params.items()})
        for m, lag in enumerate(lags):
            source = max(0, update - lag)
            for name in learner.params:
                assert torch.equal(learner._acting[name][m], after[source][name][m]), (update, lag, name)
            if lag and update >= lag:  # exactly that update, not a neighbour
                for other in (source - 1, source + 1):
                    if 0 <= other <= update and other != source:
                        assert any(not torch.equal(learner._acting[n][m], after[other][n][m]) for n in learner.params)


def _member_rows(tmp_path, lags):  # type: ignore[no-untyped-def]
    specs = [
        RunSpec("lagpath", "CartPole-v1", "ppo", seed, 4 * 256, dials=DataDials(policy_lag=lag), out=str(tmp_path), tensorboard=False)
        for seed, lag in enumerate(lags)
    ]
    results = execute_population(specs)
    assert [r["status"] for r in results] == ["complete"] * len(specs), results
    folder = specs[0].run_dir
    with open(folder / contract.PROGRESS_FILE) as f:
        progress = list(csv.DictReader(f))
    with open(folder / contract.EVAL_FILE) as f:
        evaluations = list(csv.DictReader(f))
    return progress, evaluations


def test_population_harness_lag_zero_run_is_the_same_next_to_a_lagged_member(tmp_path):
    """The whole population loop (environments, evaluation, files): member 0 (seed 0, lag 0)
    writes the same statistics whether its neighbour has lag 0 or lag 2."""
    progress_a, eval_a = _member_rows(tmp_path / "fresh", [0, 0])
    progress_b, eval_b = _member_rows(tmp_path / "mixed", [0, 2])
    assert len(progress_a) == len(progress_b) == 4
    skip = {"time_elapsed"}
    for row_a, row_b in zip(progress_a, progress_b):
        for name in row_a:
            if name in skip:
                continue
            a, b = row_a[name], row_b[name]
            try:
                assert float(a) == pytest.approx(float(b), rel=1e-5, abs=1e-7), name
            except ValueError:
                assert a == b, name
    assert [r["eval_return_mean"] for r in eval_a] == [r["eval_return_mean"] for r in eval_b]


def test_the_stale_queue_is_the_one_both_engines_keep():
    """One queue for both faces (adaptive_po/staleness.py): each actor's acting update and its
    snapshot, and replay depth m, the same for the SB3 class's collector and the population."""
    from adaptive_po.staleness import StaleQueue

    queue = StaleQueue([0, 1, 3], replay=2)
    queue.start("u0")
    assert queue.batches("r1") == ["r1"] and queue.acting_updates == [0, 0, 0]
    for u in range(1, 6):
        queue.after_update(f"r{u}", f"u{u}")
        assert queue.acting_updates == [u, max(0, u - 1), max(0, u - 3)]
        assert [queue.snapshots[s] for s in queue.acting_slots()] == [f"u{a}" for a in queue.acting_updates]
    assert queue.batches("r6") == ["r6", "r5", "r4"]  # the two before, newest first; never a third
    assert len(queue.snapshots) == 4
    assert Collector(policy_lag=2, replay=1)._stale.lags == (2,) and _learner([Member(0, policy_lag=3), Member(1)])._stale.lags == (3, 0)
    with pytest.raises(ValueError, match="must be >= 0"):
        StaleQueue([-1], replay=0)
