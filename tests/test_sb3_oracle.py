"""Oracles for the training step, fast enough for every run of the test suite.

A wrong training step (the entropy bonus with the wrong sign, the value loss with the wrong
coefficient, GAE with gamma and lambda swapped, the wrong log-prob of a Gaussian, ...) must fail a
fast test. Two oracles pin it down:

* **SB3's PPO.** On fresh data (lag 0, no noise) ``adaptive_po.PPO`` trains on the same rollouts
  as ``stable_baselines3.PPO`` and must end with the same parameters, to float rounding, after
  several updates of several epochs of several minibatches; here with settings far from the
  defaults, so that every knob of the step acts: an entropy bonus, a clip range other than 0.2,
  value clipping, advantages normalized or not, ``vf_coef`` other than 0.5, a ``max_grad_norm``
  that binds at every step (Adam is nearly blind to the scale of a gradient; the global norm clip
  is not: it mixes the policy's and the critic's gradients), non-default ``gamma`` and
  ``gae_lambda``, and a ``target_kl`` that stops the epochs early. On a Discrete (CartPole) and a
  Box (Pendulum) action space. The statistics both log per update (SB3's ``train/entropy_loss``,
  ``train/clip_fraction``, ``train/value_loss``, ``train/approx_kl`` ...) must agree too.
* **An independent re-implementation of one ESSPO update.** The ESS objective has no SB3
  counterpart, so each update of an ``ESSPO`` on stale, noisy data is recomputed here from
  ``../shared/reference/ALGORITHM.md``'s formulas written directly in torch, on SB3's own
  distributions (``policy.evaluate_actions`` and ``torch.distributions``' KL, not
  :mod:`adaptive_po.distributions`), from the same start (parameters, Adam state, NumPy's stream
  of minibatch orders), and must give the same parameters and minibatch statistics.

``benchmarks/mutations.py`` measures that these tests catch single-line bugs of the step.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO as SB3PPO
from torch.distributions import Categorical, Normal, kl_divergence
from torch.nn import functional as F

from adaptive_po import ESSPO, PPO
from adaptive_po.environments import make_vec_env

ENVS = ["CartPole-v1", "Pendulum-v1"]
N_ENVS = 2
N_UPDATES = 3
#: steps per environment of a rollout: Pendulum's episodes are cut by its 200-step time limit in
#: the third rollout (3 x 72 > 200), so that the bootstrap of a truncation is in the oracle too
N_STEPS = {"CartPole-v1": 32, "Pendulum-v1": 72}
# our Adam as SB3's (unfused; eps 1e-5), so that the updates match to float rounding
SB3_ADAM = dict(optimizer_kwargs={"eps": 1e-5})

#: settings far from SB3's defaults, each of which changes the parameters after a few updates
SETTINGS: dict[str, dict[str, Any]] = {
    # a strong entropy bonus, a tight clip, clipped values, raw advantages, a heavy critic
    "ent0.05-clip0.1-vfclip-raw-advantages": dict(
        ent_coef=0.05, clip_range=0.1, clip_range_vf=0.2, normalize_advantage=False, vf_coef=0.8,
        max_grad_norm=0.05, gamma=0.9, gae_lambda=0.7, n_epochs=4, batch_size=16, learning_rate=3e-3,
    ),
    # a small entropy bonus, a wide clip, normalized advantages, a light critic, early stopping
    "ent0.01-clip0.3-target-kl": dict(
        ent_coef=0.01, clip_range=0.3, normalize_advantage=True, vf_coef=0.25, max_grad_norm=0.2,
        gamma=0.95, gae_lambda=0.85, n_epochs=5, batch_size=16, learning_rate=3e-3, target_kl=0.008,
    ),
}

#: our logged name -> (SB3's logged name, the sign that maps one onto the other)
SAME_STATISTICS: dict[str, tuple[str, float]] = {
    "train/entropy": ("train/entropy_loss", -1.0),  # ours logs the entropy, SB3 its negative
    "train/cap_fraction": ("train/clip_fraction", 1.0),
    "train/policy_loss": ("train/policy_gradient_loss", 1.0),
    "train/value_loss": ("train/value_loss", 1.0),
    "train/loss": ("train/loss", 1.0),
    "train/explained_variance": ("train/explained_variance", 1.0),
    "train/n_updates": ("train/n_updates", 1.0),
    "train/clip_range": ("train/clip_range", 1.0),
    "train/learning_rate": ("train/learning_rate", 1.0),
}


def _record_train_logs(model: Any) -> list[dict[str, float]]:
    """After every update, a copy of what ``train`` logged (SB3 dumps the logger before it)."""
    logs: list[dict[str, float]] = []
    train = model.train

    def recorded() -> None:
        train()
        logs.append(dict(model.logger.name_to_value))

    model.train = recorded
    return logs


def _record_minibatch_rows(model: Any) -> list[list[list[dict[str, torch.Tensor]]]]:
    """Our minibatch statistics, ``[update][epoch][minibatch]``."""
    updates: list[list[list[dict[str, torch.Tensor]]]] = []

    def listener(epoch: int, rows: list[dict[str, torch.Tensor]], data: dict[str, Any]) -> None:
        if epoch == 0:
            updates.append([])
        updates[-1].append([{k: v.clone() for k, v in row.items()} for row in rows])

    model.add_epoch_listener(listener)
    return updates


def _train_both(env_id: str, settings: dict[str, Any], seed: int):  # type: ignore[no-untyped-def]
    kwargs = dict(n_steps=N_STEPS[env_id], seed=seed, device="cpu", **settings)
    # construct then learn one at a time: both seed the global RNGs at construction
    ours = PPO("MlpPolicy", make_vec_env(env_id, N_ENVS, seed), policy_kwargs=SB3_ADAM, **kwargs)
    ours_logs, ours_rows = _record_train_logs(ours), _record_minibatch_rows(ours)
    ours.learn(N_STEPS[env_id] * N_ENVS * N_UPDATES)
    theirs = SB3PPO("MlpPolicy", make_vec_env(env_id, N_ENVS, seed), **kwargs)
    theirs_logs = _record_train_logs(theirs)
    theirs.learn(N_STEPS[env_id] * N_ENVS * N_UPDATES)
    return ours, theirs, ours_logs, ours_rows, theirs_logs


def _assert_same_parameters(ours: torch.nn.Module, theirs: torch.nn.Module, atol: float = 1e-4) -> None:
    named_ours, named_theirs = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert named_ours.keys() == named_theirs.keys()
    for name, p in named_ours.items():
        np.testing.assert_allclose(p.detach().numpy(), named_theirs[name].detach().numpy(), atol=atol, rtol=0, err_msg=name)


@pytest.mark.parametrize("case", sorted(SETTINGS))
@pytest.mark.parametrize("env_id", ENVS)
def test_non_default_settings_reproduce_sb3_ppo_updates_and_statistics(env_id: str, case: str) -> None:
    """Every knob of the step away from its default: the same parameters as SB3's PPO after three
    updates, and the same logged statistics after each update."""
    settings = SETTINGS[case]
    ours, theirs, ours_logs, ours_rows, theirs_logs = _train_both(env_id, settings, seed=7)
    assert len(ours_logs) == len(theirs_logs) == len(ours_rows) == N_UPDATES

    _assert_same_parameters(ours.policy, theirs.policy)
    n_epochs, minibatches = settings["n_epochs"], N_STEPS[env_id] * N_ENVS // settings["batch_size"]
    if env_id == "Pendulum-v1":  # the last rollout holds a time-limit truncation in every environment
        assert len(ours.rollout_buffer.timeouts) == N_ENVS
    if "target_kl" in settings:  # early stopping acted, at the same epochs as SB3's
        assert ours._n_updates == theirs._n_updates < N_UPDATES * n_epochs
        assert any(len(epochs[-1]) < minibatches for epochs in ours_rows)  # stopped mid-epoch
    else:
        assert ours._n_updates == theirs._n_updates == N_UPDATES * n_epochs
        assert all(len(epochs) == n_epochs and all(len(rows) == minibatches for rows in epochs) for epochs in ours_rows)

    for update, (mine, sb3, epochs) in enumerate(zip(ours_logs, theirs_logs, ours_rows)):
        for name, (sb3_name, sign) in SAME_STATISTICS.items():
            assert mine[name] == pytest.approx(sign * sb3[sb3_name], rel=1e-4, abs=1e-5), (update, name)
        # SB3 logs the mean approx_kl of the last epoch's minibatches (the stopping one included)
        last_epoch_kl = float(np.mean([float(row["approx_kl"]) for row in epochs[-1]]))
        assert last_epoch_kl == pytest.approx(float(sb3["train/approx_kl"]), rel=1e-3, abs=1e-7), update
        if "clip_range_vf" in settings:
            assert mine["train/clip_range_vf"] == sb3["train/clip_range_vf"] == settings["clip_range_vf"]
        else:
            assert "train/clip_range_vf" not in mine and "train/clip_range_vf" not in sb3
        if env_id == "Pendulum-v1":
            assert mine["train/std"] == pytest.approx(sb3["train/std"], rel=1e-5)
    assert max(log["train/cap_fraction"] for log in ours_logs) > 0  # the clip acted


def test_the_entropy_bonus_and_value_clipping_change_the_update() -> None:
    """The oracle above is not vacuous: without the entropy bonus, or without value clipping, the
    parameters end elsewhere (so a step that dropped either would fail it)."""
    settings = SETTINGS["ent0.05-clip0.1-vfclip-raw-advantages"]
    reference, *_ = _train_both("CartPole-v1", settings, seed=7)
    for change in ({"ent_coef": 0.0}, {"clip_range_vf": None}):
        other = PPO(
            "MlpPolicy", make_vec_env("CartPole-v1", N_ENVS, 7), policy_kwargs=SB3_ADAM, n_steps=N_STEPS["CartPole-v1"], seed=7,
            device="cpu", **{**settings, **change},
        )
        other.learn(N_STEPS["CartPole-v1"] * N_ENVS * N_UPDATES)
        with pytest.raises(AssertionError):
            _assert_same_parameters(other.policy, reference.policy)


# -- ESSPO: one update, recomputed independently -------------------------------------------------------
ESSPO_SETTINGS = dict(
    n_steps=32, batch_size=16, n_epochs=3, learning_rate=3e-3, gamma=0.95, gae_lambda=0.9, ent_coef=0.02,
    vf_coef=0.7, max_grad_norm=0.3, policy_lag=1, action_noise=0.3, policy_kwargs=SB3_ADAM, device="cpu",
)


def _behaviour_distribution(params: torch.Tensor, discrete: bool) -> torch.distributions.Distribution:
    """The stored flat behaviour parameters as a ``torch.distributions`` object (logits, or
    ``[mean, log_std]``), built here rather than by :mod:`adaptive_po.distributions`."""
    if discrete:
        return Categorical(logits=params)
    d = params.shape[-1] // 2
    return Normal(params[:, :d], params[:, d:].exp())


def _independent_update(policy: Any, data: dict[str, torch.Tensor], rng: np.random.RandomState, discrete: bool, settings: dict[str, Any]):  # type: ignore[no-untyped-def]
    """One ESSPO update as ALGORITHM.md writes it, on SB3's own distributions; returns the
    minibatch statistics ``[epoch][minibatch]``."""
    n = len(data["advantages"])
    statistics: list[list[dict[str, float]]] = []
    for _ in range(settings["n_epochs"]):
        permutation = rng.permutation(n)
        statistics.append([])
        for start in range(0, n, settings["batch_size"]):
            idx = torch.as_tensor(permutation[start : start + settings["batch_size"]])
            obs, actions = data["observations"][idx], data["actions"][idx]
            values, log_prob, entropy = policy.evaluate_actions(obs, actions.long() if discrete else actions)
            behaviour = _behaviour_distribution(data["behaviour_params"][idx], discrete)
            kl = kl_divergence(policy.get_distribution(obs).distribution, behaviour)  # KL(pi_theta || pi_b)
            kl = kl if discrete else kl.sum(-1)
            log_ratio = log_prob - data["behaviour_log_prob"][idx]
            # the reference code's estimator at the taken action, with gradient
            sampled = log_ratio + torch.exp(torch.clamp(-log_ratio, -10.0, 10.0)) - 1.0
            # rho in float64, e_B = (sum rho)^2 / (|B| sum rho^2), w = min(rho, e_B): no gradient
            rho = torch.exp(log_ratio.detach().double())
            e = rho.sum() ** 2 / (len(rho) * (rho**2).sum())
            weight = torch.minimum(rho, e).float()
            advantages = data["advantages"][idx]
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            pull = kl if settings["kl"] == "analytic" else sampled
            policy_loss = -(weight * log_prob * advantages).mean() + (1.0 - e).float() * pull.mean()
            value_loss = F.mse_loss(data["returns"][idx], values.flatten())
            loss = policy_loss - settings["ent_coef"] * entropy.mean() + settings["vf_coef"] * value_loss
            statistics[-1].append({
                name: float(value.detach())
                for name, value in (
                    ("ess", e), ("cap_fraction", (rho > e).double().mean()), ("kl_weight", 1.0 - e),
                    ("kl_behaviour", kl.mean()), ("policy_loss", -(weight * log_prob * advantages).mean()),
                    ("value_loss", value_loss), ("entropy", entropy.mean()), ("loss", loss),
                )
            })
            policy.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), settings["max_grad_norm"])
            policy.optimizer.step()
    return statistics


@pytest.mark.parametrize("kl", ["analytic", "sampled"])
@pytest.mark.parametrize("env_id", ENVS)
def test_each_esspo_update_equals_the_formulas_of_algorithm_md(env_id: str, kl: str) -> None:
    """Stale (lag 1) and noisy data, so that e_B < 1, the cap binds and the KL pull acts: every
    update of ESSPO equals the formulas recomputed independently from the same start, with the
    analytic KL (the paper's) and with the reference code's sampled estimator."""
    discrete = env_id == "CartPole-v1"
    model = ESSPO("MlpPolicy", make_vec_env(env_id, N_ENVS, 11), seed=11, kl=kl, **ESSPO_SETTINGS)
    checked: list[dict[str, float]] = []
    captured: dict[str, Any] = {}

    def listener(epoch: int, rows: list[dict[str, torch.Tensor]], data: dict[str, Any]) -> None:
        if epoch == 0:
            captured["data"] = {k: v.clone() for k, v in data.items()}
            captured["rows"] = []
        captured["rows"].append([{k: float(v) for k, v in row.items()} for row in rows])

    model.add_epoch_listener(listener)
    train = model.train

    def checked_train() -> None:
        start = copy.deepcopy(model.policy)  # parameters and Adam state, the optimizer bound to the copy
        assert start.optimizer.param_groups[0]["params"][0] is next(start.parameters())
        rng = np.random.RandomState()
        rng.set_state(np.random.get_state())  # the minibatch orders the driver is about to draw
        train()
        data = captured["data"]
        # the stored behaviour log-prob is the stored behaviour distribution's at the taken action
        behaviour = _behaviour_distribution(data["behaviour_params"], discrete)
        recorded = behaviour.log_prob(data["actions"].long() if discrete else data["actions"])
        torch.testing.assert_close(data["behaviour_log_prob"], recorded if discrete else recorded.sum(-1), atol=1e-5, rtol=0)
        expected = _independent_update(start, data, rng, discrete, {**ESSPO_SETTINGS, "kl": kl})
        _assert_same_parameters(model.policy, start, atol=1e-5)
        assert [len(rows) for rows in captured["rows"]] == [len(rows) for rows in expected]
        for got_epoch, want_epoch in zip(captured["rows"], expected):
            for got, want in zip(got_epoch, want_epoch):
                for name, value in want.items():
                    assert got[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
        checked.extend(row for rows in expected for row in rows)

    model.train = checked_train
    model.learn(ESSPO_SETTINGS["n_steps"] * N_ENVS * N_UPDATES)
    assert len(checked) == N_UPDATES * ESSPO_SETTINGS["n_epochs"] * ESSPO_SETTINGS["n_steps"] * N_ENVS // ESSPO_SETTINGS["batch_size"]
    # the regime under test: the cap binds and the KL pull acts on some minibatches
    assert min(row["ess"] for row in checked) < 0.95
    assert max(row["cap_fraction"] for row in checked) > 0
    assert max(row["kl_behaviour"] for row in checked) > 1e-3
