"""Adding an objective is one function plus one registry entry: nothing else is edited.

The toy objective below declares what it needs (the analytic KL with gradient, the proximal
log-probs, the environment's tuned clip range); the training loop must hand it exactly that, both
through the SB3 class and through the bench's runner.
"""

import json

import pytest
import torch
from stable_baselines3.common.env_util import make_vec_env

from adaptive_po import BatchPolicyOptimization
from adaptive_po.contract import is_complete
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.process_engine import execute_run
from adaptive_po.objectives import OBJECTIVES, ObjectiveOutput, ObjectiveSpec, PolicyBatch

SEEN: list[dict] = []
LOSSES: list[float] = []  # the toy's loss on each minibatch, in order


def clipped_pg_with_kl(batch: PolicyBatch, *, clip_range: float, kl_coef: float = 0.1) -> ObjectiveOutput:
    """A toy: PPO's clip against the proximal policy plus a fixed KL pull to the behaviour policy."""
    SEEN.append(
        {
            "kl_grad": batch.kl_behaviour is not None and batch.kl_behaviour.requires_grad,
            "proximal": batch.proximal_log_prob is not None,
            "clip_range": clip_range,
        }
    )
    ratio = torch.exp(batch.log_prob - batch.proximal_log_prob)
    surrogate = torch.min(ratio * batch.advantages, ratio.clamp(1 - clip_range, 1 + clip_range) * batch.advantages)
    loss = -surrogate.mean() + kl_coef * batch.kl_behaviour.mean()
    LOSSES.append(loss.item())
    return ObjectiveOutput(loss)


@pytest.fixture
def toy_registered(monkeypatch):
    SEEN.clear()
    LOSSES.clear()
    spec = ObjectiveSpec(
        clipped_pg_with_kl, "toy: proximal clip + fixed KL", {"kl_coef": 0.05},
        needs_kl=True, needs_proximal=True, tuned=("clip_range",),
    )
    monkeypatch.setitem(OBJECTIVES, "toy-objective", spec)  # the registry entry, removed afterwards
    return spec


def test_a_registered_objective_trains_through_the_sb3_class(toy_registered):
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = BatchPolicyOptimization(
        "MlpPolicy", env, objective="toy-objective", objective_kwargs={"clip_range": 0.3},
        n_steps=32, batch_size=32, n_epochs=2, seed=0, device="cpu", policy_lag=1,
    )
    model.learn(64 * 3)
    assert len(SEEN) == 1 + 3 * 2 * 2  # the arguments' check at construction, then updates x epochs x minibatches
    assert all(s == {"kl_grad": True, "proximal": True, "clip_range": 0.3} for s in SEEN)
    assert model.objective_kwargs == {"kl_coef": 0.05, "clip_range": 0.3}
    # the loop's own statistics come for free: the defaults for what the toy leaves out (nothing
    # capped, no KL weight, its loss as the policy loss: the mean over the last update's 4 minibatches)
    stats = model.last_update_stats
    assert 0 < stats["ess"] < 1 and stats["kl_behaviour"] > 0  # lag 1: the actor is an update old
    assert stats["cap_fraction"] == 0.0 and stats["kl_weight"] == 0.0
    assert len(LOSSES) == len(SEEN) and stats["policy_loss"] == pytest.approx(sum(LOSSES[-4:]) / 4, rel=1e-6)
    assert stats["policy_loss"] != pytest.approx(sum(LOSSES[-8:-4]) / 4, rel=1e-6)  # not an earlier update's


def test_a_registered_objective_runs_in_the_bench_with_the_tuned_clip_range(toy_registered, tmp_path):
    spec = RunSpec(suite="t", env="CartPole-v1", algo="toy-objective", seed=0, total_timesteps=512, out=str(tmp_path), device="cpu")
    outcome = execute_run(spec)
    assert outcome["status"] == "complete", outcome.get("traceback")
    assert is_complete(spec.run_dir)
    config = json.loads((spec.run_dir / "config.json").read_text())
    # CartPole's Zoo clip range is lin_0.2: evaluated per update from the remaining progress
    assert config["objective_kwargs"] == {"kl_coef": 0.05, "clip_range": "lin_0.2"}
    clips = sorted({s["clip_range"] for s in SEEN})
    assert len(clips) > 1 and 0 <= clips[0] < clips[-1] <= 0.2
    assert all(s["kl_grad"] and s["proximal"] for s in SEEN)


def test_the_loop_gives_only_what_an_entry_declares(monkeypatch):
    seen = []

    def plain_pg(batch: PolicyBatch) -> ObjectiveOutput:
        seen.append((batch.proximal_log_prob is None, batch.kl_behaviour.requires_grad))
        return ObjectiveOutput(-(batch.log_prob * batch.advantages).mean())

    monkeypatch.setitem(OBJECTIVES, "plain-pg", ObjectiveSpec(plain_pg, "plain score function"))
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    BatchPolicyOptimization("MlpPolicy", env, objective="plain-pg", n_steps=16, batch_size=32, n_epochs=1, device="cpu").learn(32)
    assert seen == [(True, False)] * 2  # the arguments' check at construction, then the one minibatch


def test_an_unknown_tuned_knob_is_refused_before_training(monkeypatch, tmp_path):
    monkeypatch.setitem(OBJECTIVES, "bad-knob", ObjectiveSpec(clipped_pg_with_kl, "bad", tuned=("clip_rnage",)))
    outcome = execute_run(RunSpec(suite="t", env="CartPole-v1", algo="bad-knob", seed=0, total_timesteps=64, out=str(tmp_path)))
    assert outcome["status"] == "failed" and "clip_rnage" in outcome["error"]
