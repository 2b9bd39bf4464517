"""The RL Zoo runs our algorithms (``python -m adaptive_po.zoo``; needs the ``zoo`` extra).

Fast checks of the registration, the generated hyper-parameter files and the tuning samplers;
then, through the entry point's ``main`` in the test's process (:mod:`cli_here`; marked ``slow``),
a tiny Zoo ``train`` of ``esspo`` with a policy lag followed by ``enjoy``,
``record_video`` and the Zoo's plotting scripts on the run it wrote, and a two-trial ``-optimize``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rl_zoo3", reason="the RL Zoo is not installed: pip install -e '.[zoo]'")

import optuna  # noqa: E402
from stable_baselines3 import PPO as SB3PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

from adaptive_po import ESSPO  # noqa: E402
from adaptive_po.algorithms import PPO  # noqa: E402
from adaptive_po.objectives import OBJECTIVES  # noqa: E402
from adaptive_po.zoo import ALGORITHMS, register  # noqa: E402
from adaptive_po.zoo.hyperparams import zoo_hyperparams  # noqa: E402
from adaptive_po.zoo.registry import OBJECTIVE_OF  # noqa: E402
from cli_here import cli_here  # noqa: E402 - the entry point's main in this process
from adaptive_po.zoo.search_space import sampler_for  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DIALS = ("policy_lag", "action_noise", "replay", "behaviour_log_prob", "sampler_temperature", "sampler_precision")


def test_every_registry_entry_is_a_zoo_algorithm_and_the_zoos_ppo_stays_sb3s() -> None:
    import rl_zoo3.hyperparams_opt as zoo_opt
    from rl_zoo3.utils import ALGOS

    register()
    register()  # idempotent
    assert set(OBJECTIVE_OF.values()) == set(OBJECTIVES)
    for name, cls in ALGORITHMS.items():
        assert ALGOS[name] is cls and name in zoo_opt.HYPERPARAMS_SAMPLER and name in zoo_opt.HYPERPARAMS_CONVERTER
    assert ALGOS["esspo"] is ESSPO and ALGOS["apo-ppo"] is PPO
    assert ALGOS["ppo"] is SB3PPO


def test_generated_hyperparams_carry_the_dials_and_only_the_objectives_own_knobs() -> None:
    esspo = zoo_hyperparams("esspo")["CartPole-v1"]
    assert {k: esspo[k] for k in DIALS} == dict(zip(DIALS, (0, 0.0, 0, "actual", 1.0, "fp32")))
    assert "clip_range" not in esspo
    assert esspo["learning_rate"] == "lin_0.001" and esspo["n_envs"] == 8 and esspo["n_steps"] == 32
    assert zoo_hyperparams("ppo")["CartPole-v1"]["clip_range"] == "lin_0.2"
    atari = zoo_hyperparams("esspo")["ALE/Breakout-v5"]
    assert atari["frame_stack"] == 4 and atari["policy"] == "CnnPolicy"


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_each_sampler_searches_its_own_knobs_and_builds_a_valid_model(algo: str) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    env = make_vec_env("CartPole-v1", n_envs=1)
    for _ in range(3):
        trial = study.ask()
        params = sampler_for(OBJECTIVE_OF[algo])(trial, 1, 1, {})
        study.tell(trial, 0.0)
        assert params["batch_size"] <= params["n_steps"]
        assert ("clip_range" in params) == (OBJECTIVE_OF[algo] in ("ppo", "decoupled-ppo", "dapo"))
        ALGORITHMS[algo]("MlpPolicy", env, device="cpu", **params)  # what the Zoo's objective builds
    if algo == "esspo":
        assert set(trial.params) == {
            "batch_size_pow", "n_steps_pow", "one_minus_gamma", "one_minus_gae_lambda", "learning_rate", "ent_coef",
            "n_epochs", "max_grad_norm", "net_arch", "activation_fn",
        }


def test_a_registry_class_saves_and_loads_with_its_knob(tmp_path: Path) -> None:
    cispo = ALGORITHMS["cispo"]
    model = cispo("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, n_epochs=1, eps_high=2.0, policy_lag=1, device="cpu")
    model.learn(32)
    model.save(tmp_path / "cispo")
    loaded = cispo.load(tmp_path / "cispo", device="cpu")
    assert loaded.objective_name == "cispo" and loaded.objective_kwargs["eps_high"] == 2.0
    assert loaded.dials.policy_lag == 1


def _zoo(tmp_path: Path, *args: str, timeout: int = 600) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(OMP_NUM_THREADS="1", MPLBACKEND="Agg", SDL_VIDEODRIVER="dummy", PYTHONPATH=str(REPO))
    done = cli_here([sys.executable, "-m", "adaptive_po.zoo", *args], cwd=tmp_path, env=env)  # the entry point's main, here
    assert done.returncode == 0, f"zoo {' '.join(args)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.mark.slow
def test_zoo_train_enjoy_video_and_plots_through_the_entry_point(tmp_path: Path) -> None:
    out = _zoo(tmp_path, "train", "--algo", "esspo", "--env", "CartPole-v1", "-n", "4000", "--seed", "1", "-f", "logs",
               "--eval-freq", "2000", "--eval-episodes", "2", "-params", "policy_lag:2")
    run = tmp_path / "logs" / "esspo" / "CartPole-v1_1"
    assert "generated from the environment files" in out and (run / "CartPole-v1.zip").is_file()
    config = yaml.load((run / "CartPole-v1" / "config.yml").read_text(), Loader=yaml.UnsafeLoader)
    assert dict(config)["policy_lag"] == 2
    assert ESSPO.load(run / "CartPole-v1.zip", device="cpu").dials.policy_lag == 2

    out = _zoo(tmp_path, "enjoy", "--algo", "esspo", "--env", "CartPole-v1", "-f", "logs", "--no-render", "-n", "300")
    assert "Mean reward" in out or "Episode Reward" in out
    _zoo(tmp_path, "record_video", "--algo", "esspo", "--env", "CartPole-v1", "-f", "logs", "-n", "50", "-o", "videos")
    assert list((tmp_path / "videos").glob("*esspo-CartPole-v1*.mp4"))
    _zoo(tmp_path, "plot_train", "--algo", "esspo", "--env", "CartPole-v1", "-f", "logs")
    out = _zoo(tmp_path, "all_plots", "-a", "esspo", "-e", "CartPole-v1", "-f", "logs", "--no-display", "-o", "results")
    assert "CartPole-v1" in out and (tmp_path / "results.pkl").is_file()


@pytest.mark.slow
def test_zoo_optimize_two_trials_through_the_entry_point(tmp_path: Path) -> None:
    # two small trials queued in the study, so that the test's time does not depend on the draw
    storage = tmp_path / "study.log"
    study = optuna.create_study(
        storage=optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(storage))),
        study_name="esspo-cartpole", direction="maximize",
    )
    small = {"batch_size_pow": 5, "n_steps_pow": 5, "one_minus_gamma": 0.02, "one_minus_gae_lambda": 0.05,
             "ent_coef": 1e-4, "n_epochs": 5, "max_grad_norm": 0.5, "net_arch": "tiny", "activation_fn": "tanh"}
    study.enqueue_trial({**small, "learning_rate": 1e-3})
    study.enqueue_trial({**small, "learning_rate": 1e-4})
    out = _zoo(tmp_path, "train", "--algo", "esspo", "--env", "CartPole-v1", "-optimize", "--n-trials", "2", "-n", "3000",
               "--seed", "2", "--sampler", "tpe", "--pruner", "none", "--eval-episodes", "2", "-f", "logs",
               "--storage", str(storage), "--study-name", "esspo-cartpole", "--no-optim-plots", "-params", "n_envs:2")
    assert "Number of finished trials:  2" in out and "clip_range" not in out.split("Best trial:")[1]
    reports = list((tmp_path / "logs" / "esspo").glob("report_CartPole-v1_2-trials-3000-tpe-none_*.csv"))
    assert len(reports) == 1
    # the Zoo loads the best trial back through our converter
    out = _zoo(tmp_path, "train", "--algo", "esspo", "--env", "CartPole-v1", "-n", "256", "-f", "logs", "--seed", "4",
               "--storage", str(storage), "--study-name", "esspo-cartpole", "--trial-id", "1", "-params", "n_envs:2")
    (config_file,) = (tmp_path / "logs" / "esspo").glob("CartPole-v1_*/CartPole-v1/config.yml")
    config = yaml.load(config_file.read_text(), Loader=yaml.UnsafeLoader)
    assert dict(config)["learning_rate"] == 1e-4 and dict(config)["batch_size"] == 32
