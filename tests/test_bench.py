"""The suite files, the run folders and the sweep: validation, atomic results, failure, resume."""

import json
import re
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from adaptive_po.dials import DIAL_NAMES, DataDials, dial_product
from adaptive_po.dials import DataDials
from adaptive_po.bench.grid import Grid, expand_grid, seeds_from
from adaptive_po.bench.sweep import run_sweep
from adaptive_po.bench.config import (
    DEFAULT_ENVS_DIR,
    ConfigError,
    available_envs,
    get_env_config,
    load_env_config,
    read_yaml,
    write_env_config_copy,
)
from adaptive_po import contract
from adaptive_po.contract import COMPLETE, FAILED
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.process_engine import execute_run
from cli_here import cli_here  # a command line in this process

ROOT = Path(__file__).resolve().parents[1]


# -- the suite files ------------------------------------------------------------------------------
def test_a_modified_copy_of_an_env_file(tmp_path):
    path = write_env_config_copy("CartPole-v1", tmp_path / "envs", hyperparams__n_steps=8, evaluation={"episodes": 1, "every": 64},
                                 random_score=None)
    assert path == tmp_path / "envs" / "CartPole-v1.yaml"
    data = read_yaml(path)
    assert data["hyperparams"]["n_steps"] == 8 and data["evaluation"] == {"episodes": 1, "every": 64} and "random_score" not in data
    assert data["hyperparams"]["batch_size"] == read_yaml(DEFAULT_ENVS_DIR / "CartPole-v1.yaml")["hyperparams"]["batch_size"]
    renamed = write_env_config_copy("CartPole-v1", tmp_path / "envs", name="Other-v1", hyperparams__n_epochs=2)
    assert renamed.name == "Other-v1.yaml"
    cfg = get_env_config("Other-v1", envs_dir=tmp_path / "envs")
    assert cfg.name == "Other-v1" and cfg.hyperparams.n_epochs == 2
    with pytest.raises(ConfigError, match="did you mean 'CartPole-v1'"):
        write_env_config_copy("CartPole-v2", tmp_path / "x")


def test_every_shipped_env_file_is_valid():
    envs = available_envs()
    assert {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3", "Pendulum-v1", "Pong-v5", "Breakout-v5"} <= set(envs)
    for name in envs:
        cfg = get_env_config(name)
        # tuned PPO from a cited public source: the RL Zoo, or gymnax-blines for MinAtar
        expected = "gymnax-blines" if name.endswith("-MinAtar") else "RL Baselines3 Zoo"
        assert cfg.hyperparams.source.startswith(expected), (name, cfg.hyperparams.source)
    cartpole = get_env_config("CartPole-v1").hyperparams
    assert cartpole.n_steps == 32 and cartpole.batch_size == 256 and cartpole.n_epochs == 20
    assert repr(cartpole.learning_rate) == "lin_0.001" and cartpole.learning_rate(0.5) == pytest.approx(5e-4)
    # a key the file leaves out takes SB3 PPO's default, typed in one place
    assert cartpole.vf_coef == 0.5 and cartpole.normalize_advantage is True


@pytest.mark.parametrize(
    "changes,key",
    [
        ({"hyperparams__n_steps": None}, "n_steps"),
        ({"hyperparams__n_steps": "many"}, "hyperparams.n_steps"),
        ({"hyperparams__gamma": 1.5}, "hyperparams.gamma"),
        ({"hyperparams__learning_rate": "fast"}, "hyperparams.learning_rate"),
        ({"hyperparams__clip_rnage": 0.2}, "hyperparams.clip_rnage"),
        ({"random_score": None}, "random_score"),
        ({"evaluation__episodes": 0}, "evaluation.episodes"),
        ({"budget__quick": -5}, "budget.quick"),
        ({"hyperparams__batch_size": 100000}, "hyperparams.batch_size"),
        ({"ids": {"envpol": "CartPole-v1"}}, "envpol"),
    ],
)
def test_malformed_env_file_names_file_and_key(tmp_path, changes, key, write_env):
    path = write_env(tmp_path, "Broken-v0", **changes)
    with pytest.raises(ConfigError) as err:
        load_env_config(path)
    assert str(path) in str(err.value) and key in str(err.value)


def test_invalid_yaml_and_unknown_env_are_clear(tmp_path):
    bad = tmp_path / "Bad-v0.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_env_config(bad)
    with pytest.raises(ConfigError, match="'NoSuchEnv-v9'.*CartPole-v1"):
        get_env_config("NoSuchEnv-v9")


# -- the grid -------------------------------------------------------------------------------------
def grid(**kw):
    """A small grid; dial levels given by name (``policy_lag=[0, 4]``) become its conditions."""
    levels = {name: kw.pop(name) for name in DIAL_NAMES if name in kw}
    base = dict(suite="quick", envs=["CartPole-v1"], algos=["esspo"], seeds=[0], conditions=dial_product(**levels), device="cpu")
    base.update(kw)
    return Grid(**base)


def test_grid_expansion_and_folders(tmp_path):
    specs = expand_grid(grid(algos=["esspo", "ppo"], seeds=[0, 1], conditions=dial_product(policy_lag=[0, 4], action_noise=[0.0, 0.5]), out=str(tmp_path)))
    assert len(specs) == 2 * 2 * 2 * 2
    assert len({s.run_dir for s in specs}) == len(specs)
    spec = [s for s in specs if s.algo == "ppo" and s.dials.policy_lag == 4 and s.dials.action_noise == 0.5 and s.seed == 1][0]
    assert spec.run_dir == tmp_path / "quick/CartPole-v1/ppo/lag4_noise0.5_replay0/seed-1"
    assert spec.total_timesteps == get_env_config("CartPole-v1").budget["quick"]


@pytest.mark.parametrize(
    "kw,needle",
    [
        (dict(policy_lag=[-1]), "policy_lag"),
        (dict(action_noise=[-0.1]), "action_noise"),
        (dict(replay=[-3]), "replay"),
        (dict(policy_lag=[]), "no levels selected for policy_lag"),
        (dict(algos=["ppo2"]), "'ppo2'"),
        (dict(envs=["Nope-v0"]), "'Nope-v0'"),
        (dict(suite="huge"), "'huge'"),
        (dict(seeds=[-1]), "seed"),
        (dict(timesteps=0), "timesteps"),
        (dict(timesteps=100), "smaller than one rollout"),
        (dict(backend="ray"), "'ray'"),
        (dict(behaviour_log_prob=["clean"]), "behaviour_log_prob"),
    ],
)
def test_bad_grid_is_rejected_before_compute(kw, needle):
    with pytest.raises(ValueError) as err:
        expand_grid(grid(**kw))
    assert needle in str(err.value)


def test_missing_budget_for_suite_is_named(tmp_path, write_env):
    write_env(tmp_path, "NoBudget-v1", budget={"classic": 1000})
    with pytest.raises(ConfigError, match="budget.quick"):
        expand_grid(grid(envs=["NoBudget-v1"], envs_dir=str(tmp_path)))


def test_seeds_parsing():
    assert seeds_from(None, 3) == [0, 1, 2]
    assert seeds_from("2", 3) == [0, 1]
    assert seeds_from("0,5,7", 3) == [0, 5, 7]
    assert seeds_from("1,", 3) == [1]  # one seed, not a count
    with pytest.raises(ValueError, match="--seeds"):
        seeds_from("many", 3)


# -- one run --------------------------------------------------------------------------------------
def tiny_spec(tmp_path, **kw):
    base = dict(suite="t", env="CartPole-v1", algo="esspo", seed=0, total_timesteps=1024, out=str(tmp_path), device="cpu", dials=DataDials(policy_lag=2))
    base.update(kw)
    return RunSpec(**base)


def test_run_writes_the_contract_and_resumes(tmp_path):
    spec = tiny_spec(tmp_path)
    outcome = execute_run(spec)
    assert outcome["status"] == "complete", outcome.get("traceback")
    run_dir = spec.run_dir
    for name in ("config.json", "progress.csv", "eval.csv", "summary.json", COMPLETE):
        assert (run_dir / name).is_file(), name
    assert not (run_dir / FAILED).exists()
    assert list((run_dir / "tb").glob("events.out.tfevents.*"))
    assert not [p for p in run_dir.rglob("*.tmp")]

    config = json.loads((run_dir / "config.json").read_text())
    assert (config["env"], config["algo"], config["policy_lag"], config["total_timesteps"]) == ("CartPole-v1", "esspo", 2, 1024)
    assert config["hyperparams"]["learning_rate"] == "lin_0.001" and config["run_format"] == contract.RUN_FORMAT
    assert config["objective_kwargs"] == {}  # esspo takes no tuned knob: CartPole's clip range is not passed
    progress = pd.read_csv(run_dir / "progress.csv")
    assert tuple(progress.columns) == contract.column_names(contract.PROGRESS_COLUMNS)
    assert list(progress["update"]) == [1, 2, 3, 4] and list(progress["timesteps"]) == [256, 512, 768, 1024]
    assert progress["ess"].between(0, 1).all()
    evals = pd.read_csv(run_dir / "eval.csv")
    assert tuple(evals.columns) == contract.column_names(contract.EVAL_COLUMNS) and evals["timesteps"].iloc[-1] == 1024
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["final_eval_return_mean"] == evals["eval_return_mean"].iloc[-1]

    # a rerun skips it; a different configuration in the same folder reruns it
    assert execute_run(spec)["status"] == "skipped"
    assert execute_run(tiny_spec(tmp_path, total_timesteps=768))["status"] == "complete"
    assert pd.read_csv(run_dir / "progress.csv")["timesteps"].iloc[-1] == 768


def test_the_resume_plan_skips_complete_runs_and_redoes_damaged_ones(tmp_path):
    from adaptive_po.bench.resume import ChangedRuns, ResumePlan
    from adaptive_po.bench.run_folder import RUN_CHANGED, RUN_DAMAGED, RUN_NEW, RUN_SAME, RunFolderState

    kinds = [RUN_SAME, RUN_NEW, RUN_DAMAGED, RUN_CHANGED, RUN_SAME]
    specs = [tiny_spec(tmp_path, seed=seed) for seed in range(len(kinds))]
    reasons = {RUN_DAMAGED: ("eval.csv is missing",), RUN_CHANGED: ("total_timesteps 1024 -> 768",)}
    plan = ResumePlan([(spec, RunFolderState(kind, reasons=reasons.get(kind, ()))) for spec, kind in zip(specs, kinds)])
    assert plan.todo() == [specs[1], specs[2]]  # new and damaged, in order; complete and changed ones kept
    assert plan.todo(redo_changed=True) == [specs[1], specs[2], specs[3]]
    assert plan.redo_lines() == [f"{specs[2].relative_dir}: eval.csv is missing"]
    with pytest.raises(ChangedRuns, match="1 complete run"):
        plan.check_changed(redo_changed=False)
    plan.check_changed(redo_changed=True)  # asked for: nothing refused


def test_same_seed_same_curve(tmp_path):
    a = execute_run(tiny_spec(tmp_path / "a"))
    b = execute_run(tiny_spec(tmp_path / "b"))
    assert a["status"] == b["status"] == "complete"
    pa = pd.read_csv(Path(a["run_dir"]) / "progress.csv").drop(columns="time_elapsed")
    pb = pd.read_csv(Path(b["run_dir"]) / "progress.csv").drop(columns="time_elapsed")
    pd.testing.assert_frame_equal(pa, pb)
    pd.testing.assert_frame_equal(pd.read_csv(Path(a["run_dir"]) / "eval.csv"), pd.read_csv(Path(b["run_dir"]) / "eval.csv"))


def test_diverging_run_is_recorded_as_failed(tmp_path, write_env):
    envs_dir = tmp_path / "envs"
    write_env(envs_dir, "Diverge-v1", hyperparams__learning_rate=1e30, hyperparams__max_grad_norm=1e30)
    spec = tiny_spec(tmp_path, env="Diverge-v1", envs_dir=str(envs_dir), total_timesteps=2048)
    outcome = execute_run(spec)
    assert outcome["status"] == "failed"
    text = (spec.run_dir / FAILED).read_text()
    assert "Traceback" in text and not (spec.run_dir / COMPLETE).exists()


# -- the sweep ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_sweep_survives_a_failing_run_and_resumes(tmp_path, write_env):
    envs_dir = tmp_path / "envs"
    shutil.copy(DEFAULT_ENVS_DIR / "CartPole-v1.yaml", envs_dir / "CartPole-v1.yaml") if envs_dir.exists() else None
    write_env(envs_dir, "CartPole-v1")
    write_env(envs_dir, "Diverge-v1", hyperparams__learning_rate=1e30, hyperparams__max_grad_norm=1e30)
    specs = expand_grid(grid(envs=["CartPole-v1", "Diverge-v1"], seeds=[0], timesteps=1024, out=str(tmp_path / "runs"), envs_dir=str(envs_dir)))
    # in this process (a diverging run is the engine's to catch; a worker that dies is
    # test_sweep_population's and test_robustness's)
    first = run_sweep(specs, workers=1, show_progress=False, executor="inline")
    assert len(first.complete) == 1 and len(first.failed) == 1 and not first.ok
    assert (specs[0].run_dir / COMPLETE).exists() and (specs[1].run_dir / FAILED).exists()
    second = run_sweep(specs, workers=1, show_progress=False, executor="inline")
    assert len(second.skipped) == 1 and len(second.failed) == 1


@pytest.mark.slow
@pytest.mark.parametrize("stop_signal,engine", [(signal.SIGINT, "population"), (signal.SIGTERM, "process")])
def test_bench_cli_killed_halfway_resumes(tmp_path, stop_signal, engine):
    out = tmp_path / "runs"
    cmd = [
        sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--envs", "CartPole-v1", "--algos", "esspo,ppo",
        "--seeds", "2", "--lags", "0", "--timesteps", "1024", "--workers", "1", "--out", str(out), "--device", "cpu",
        "--no-report", "--no-progress", "--engine", engine,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list(out.rglob(COMPLETE)):
        time.sleep(0.2)
    os.kill(process.pid, stop_signal)  # the driver only: it must stop its own workers
    assert process.wait(timeout=60) == 130
    time.sleep(1)
    assert not [p for p in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines() if str(out) in p]
    done_before = {p.parent for p in out.rglob(COMPLETE)}
    assert 1 <= len(done_before) < 4
    rerun = cli_here(cmd, env=env)
    assert rerun.returncode == 0, rerun.stderr
    done_after = {p.parent for p in out.rglob(COMPLETE)}
    assert len(done_after) == 4 and done_before <= done_after
    assert f"{len(done_before)} skipped" in rerun.stderr
    assert not list(out.rglob(FAILED))


@pytest.mark.slow
def test_cli_reports_bad_input_before_compute(tmp_path):
    result = cli_here(
        [sys.executable, "-m", "adaptive_po", "bench", "--lags", "0,-2", "--out", str(tmp_path)]
    )
    assert result.returncode == 2 and "policy_lag" in result.stderr and "-2" in result.stderr
    assert not any(tmp_path.iterdir())
    dry = cli_here(
        [sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--dry-run", "--list-runs", "--out", str(tmp_path), "--device", "cpu"],
    )
    assert dry.returncode == 0 and "40 runs" in dry.stderr and "cost estimate" in dry.stderr
    assert len(dry.stdout.strip().splitlines()) == 40
    # the quick suite takes minutes, and the estimate says so (not "~0.0 h")
    estimate = next(line for line in dry.stderr.splitlines() if "cost estimate" in line)
    assert re.search(r"~ \d+ CPU-core-minutes, ~\d+ min on this machine's", estimate), estimate
    assert " h on this machine" not in estimate and "0.0" not in estimate


def test_durations_are_minutes_under_an_hour_and_hours_from_there():
    from adaptive_po.bench.estimate import format_duration
    assert format_duration(0.05) == "3 min" and format_duration(0.05, "CPU-core-") == "3 CPU-core-minutes"
    assert format_duration(0.001) == "<1 min" and format_duration(0.5) == "30 min"
    assert format_duration(0.995) == "1.0 h"  # 59.7 minutes round to an hour
    assert format_duration(9.44) == "9.4 h" and format_duration(36.0, "CPU-core-") == "36.0 CPU-core-hours"
    with pytest.raises(ValueError):
        format_duration(-1.0)


def test_suite_help_names_every_registered_suite(monkeypatch):
    from adaptive_po.bench import suites
    from adaptive_po.cli import build_parser

    def suite_help(parser, command):
        sub = next(a for a in parser._actions if a.dest == "command").choices[command]
        return next(a for a in sub._actions if a.dest == "suite").help

    for command in ("bench", "train"):
        text = suite_help(build_parser(), command)
        assert all(name in text for name in suites.SUITES), (command, text)
    # taken from the registry, not a copy of it: a suite added there shows up in the help
    monkeypatch.setitem(suites.SUITES, "my-new-suite", suites.SUITES["quick"])
    assert "my-new-suite" in suite_help(build_parser(), "bench")


@pytest.mark.slow
def test_atari_smoke_run_on_cpu(tmp_path, write_env):
    envs_dir = tmp_path / "envs"
    # one epoch per update instead of four: the CnnPolicy pipeline end to end, in half the time
    write_env(envs_dir, "Pong-v5", base="Pong-v5", evaluation={"episodes": 1, "every": 100000}, budget={"atari": 2048}, hyperparams__n_epochs=1)
    spec = RunSpec(suite="atari", env="Pong-v5", algo="esspo", seed=0, total_timesteps=2048, out=str(tmp_path / "runs"), device="cpu", envs_dir=str(envs_dir), dials=DataDials(policy_lag=1))
    outcome = execute_run(spec)
    assert outcome["status"] == "complete", outcome.get("traceback")
    config = json.loads((spec.run_dir / "config.json").read_text())
    assert config["policy"] == "CnnPolicy"
    progress = pd.read_csv(spec.run_dir / "progress.csv")
    assert list(progress["timesteps"]) == [1024, 2048]
    final = json.loads((spec.run_dir / "summary.json").read_text())["final_eval_return_mean"]
    assert -21 <= final <= 21  # a full, unclipped Pong game


@pytest.mark.slow
def test_train_cli_one_run(tmp_path):
    cmd = [sys.executable, "-m", "adaptive_po", "train", "--env", "CartPole-v1", "--algo", "esspo-cap-only", "--lag", "1",
           "--noise", "0.3", "--timesteps", "512", "--out", str(tmp_path), "--device", "cpu"]
    result = cli_here(cmd)
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "train/CartPole-v1/esspo-cap-only/lag1_noise0.3_replay0/seed-0"
    assert (run_dir / COMPLETE).is_file() and "final evaluation return" in result.stdout
    config = json.loads((run_dir / "config.json").read_text())
    assert config["objective_kwargs"] == {"regularizer": False} and config["action_noise"] == 0.3
    again = cli_here(cmd)
    assert again.returncode == 0 and "already complete" in again.stdout


def test_a_run_reads_its_environment_file_once(tmp_path, monkeypatch):
    """One run, on either engine, reads its environment file once (a population once for all its
    members): the configuration it records and the learner it trains come from the same read."""
    from adaptive_po.bench import config as config_module
    from adaptive_po.bench.population_engine import execute_population

    reads = []
    load = config_module.load_env_config
    monkeypatch.setattr(config_module, "load_env_config", lambda path: reads.append(path) or load(path))
    assert execute_run(tiny_spec(tmp_path / "process", total_timesteps=256))["status"] == "complete"
    assert len(reads) == 1
    reads.clear()
    specs = [tiny_spec(tmp_path / "population", total_timesteps=256, seed=seed) for seed in (0, 1, 2)]
    assert [r["status"] for r in execute_population(specs)] == ["complete"] * 3
    assert len(reads) == 1


def test_a_sweep_tells_each_finished_run_as_its_outcome_arrives(tmp_path):
    """``run_sweep(..., on_run_done=f)`` calls ``f(spec)`` for each run that finished, in the driver,
    as its outcome arrives (a study records it in its table there)."""
    from adaptive_po.bench.sweep import run_sweep

    specs = [tiny_spec(tmp_path, total_timesteps=256, seed=seed) for seed in (0, 1)]
    told = []
    result = run_sweep(specs, workers=1, executor="inline", show_progress=False, engine="process",
                       on_run_done=lambda spec: told.append((spec.seed, (spec.run_dir / "COMPLETE").is_file())))
    assert len(result.complete) == 2 and sorted(told) == [(0, True), (1, True)]


def test_the_atari_dry_run_prices_a_cpu_run_at_the_measured_cnn_learner_speed(tmp_path):
    """The ALE-bound estimate assumes a GPU learner; a CPU-only run is priced at the measured speed of
    the CNN learner on one core, so ALE's learning curves are not sized at minutes for hours of work."""
    from adaptive_po.bench.estimate import ALE_CPU_LEARNER_SECONDS_PER_MILLION, MEASURED_SPEEDS, describe_grid, format_duration

    specs = [RunSpec(suite="ale-curves", env="Breakout-v5", algo=algo, seed=seed, total_timesteps=1_000_000, out=str(tmp_path), device="cpu")
             for algo in ("esspo", "ppo") for seed in (0, 1)]
    text = describe_grid(specs, engine="process")
    hours = 4 * 1_000_000 / 1e6 * ALE_CPU_LEARNER_SECONDS_PER_MILLION / 3600
    assert hours > 9 and f"on CPU (--device cpu, one run per core, the CNN learner included): ~{format_duration(hours, 'CPU-core-')}" in text
    assert MEASURED_SPEEDS["ale_cpu_learner"]["measured"] in text
