"""What a new user meets first: the help, the `train` output, the dry run, the error messages.

Each test drives the real command line (``adaptive-po`` in a subprocess, or ``main(argv)`` in this
process) on CartPole-v1 with budgets of a few thousand steps; the whole file takes well under a
minute on 2 cores.
"""

from __future__ import annotations

import csv
import json
import os
import re
import sys

import pytest

from adaptive_po.bench import process_engine, run_folder
from adaptive_po.bench.config import did_you_mean, evaluation_timesteps, get_env_config, trained_timesteps
from adaptive_po.bench.run_folder import RUN_SAME, RunSpec, config_for, run_folder_state
from adaptive_po.bench.process_engine import execute_run
from adaptive_po.cli import WORKER_COMMANDS, build_parser, build_worker_parser
from test_robustness import run_cli as cli  # adaptive-po in this process, its signal handlers put back
from cli_here import cli_here  # a command line in this process

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
CARTPOLE = "CartPole-v1"




def train_args(out, *extra: str) -> list[str]:
    return ["train", "--env", CARTPOLE, "--device", "cpu", "--out", str(out), *extra]


def subcommands() -> dict[str, object]:
    action = next(a for a in build_parser()._actions if a.dest == "command")
    return {name: parser for name, parser in action.choices.items() if name != "zoo"}  # zoo: the RL Zoo's own parser


# -- 1 and 2: the help ----------------------------------------------------------------------------
def test_help_lists_public_commands_only_and_the_workers_still_parse():
    shown = cli_here([sys.executable, "-m", "adaptive_po", "--help"], env=ENV)
    assert shown.returncode == 0, shown.stderr
    for command in ("train", "bench", "list", "tune", "trace", "readme", "zoo"):
        assert command in shown.stdout
    assert "_run" not in shown.stdout and "SUPPRESS" not in shown.stdout, shown.stdout
    # a mistyped command lists the public commands only
    typo = cli_here([sys.executable, "-m", "adaptive_po", "trian"], env=ENV)
    assert typo.returncode == 2 and "'train'" in typo.stderr and "_run" not in typo.stderr, typo.stderr
    # the sweep's workers keep their commands (the bench test below runs one for real)
    assert set(WORKER_COMMANDS) == {"_run", "_run_population"}
    args = build_worker_parser().parse_args(["_run_population", "specs.json", "--result", "out.json"])
    assert (args.command, args.specs, args.result) == ("_run_population", "specs.json", "out.json")
    assert build_worker_parser().parse_args(["_run", "spec.json", "--result", "r.json"]).spec == "spec.json"


def test_every_option_has_help_with_its_default_and_no_internal_names():
    for name, parser in subcommands().items():
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            where = f"{name} {action.option_strings[0]}"
            assert action.help and action.help.strip(), f"{where} has no help"
            text = formatter._get_help_string(action) % {"default": action.default}
            flag = action.nargs == 0  # on/off: nothing to show
            if not (flag or action.required):
                assert "default" in text, f"{where}: its default is not shown: {text!r}"
        page = parser.format_help()
        assert not re.search(r"issue[- ]?\d+", page, re.IGNORECASE), (name, page)
        assert not re.search(r"adaptive_po\.|\w+\.py\b", page), (name, page)
    train = subcommands()["train"].format_help()
    assert re.search(r"--seed SEED\s+random seed.*\(default: 0\)", " ".join(train.split())), train
    assert "(default: esspo)" in train and "(default: quick)" in train


# -- 3, 4 and 5: train says what it does ----------------------------------------------------------
def test_train_warns_rounds_and_shows_progress(tmp_path, capsys):
    code, out, err = cli(train_args(tmp_path, "--timesteps", "3000"), capsys)
    assert code == 0, err
    lines = err.splitlines()
    rounded = [line for line in lines if "3,000" in line and "3,072" in line]
    assert len(rounded) == 1 and "whole rollouts of 256 steps" in rounded[0], err
    warning = [i for i, line in enumerate(lines) if line.startswith("warning:") and "only 2 evaluation points" in line]
    start = next(i for i, line in enumerate(lines) if line.startswith("training "))
    assert warning and warning[0] < start, err  # before training
    assert "every 5,000 steps" in lines[warning[0]] and "--timesteps 5,001 or more" in lines[warning[0]]
    assert "for 3,072 steps" in lines[start]
    # the bar's final state, printed once (stderr is not a terminal here)
    bars = [line for line in lines if "steps" in line and "updates" in line]
    assert len(bars) == 1 and "3,072/3,072 steps" in bars[0] and "12 updates" in bars[0], err
    run_dir = next(tmp_path.rglob("eval.csv")).parent
    with open(run_dir / "eval.csv") as fh:
        evaluations = [int(row["timesteps"]) for row in csv.DictReader(fh)]
    final = json.loads((run_dir / "summary.json").read_text())["final_eval_return_mean"]
    assert f"last eval return {final:.1f}" in bars[0]
    # the schedule the warning is computed from is the one the run followed
    cartpole = get_env_config(CARTPOLE)
    assert evaluations == evaluation_timesteps(cartpole, 3000) == [0, 3072]
    assert "final evaluation return" in out

    # a budget of whole rollouts with three evaluations: neither note; --no-progress: no bar
    code, out, err = cli(train_args(tmp_path, "--timesteps", "5376", "--seed", "1", "--no-progress"), capsys)
    assert code == 0, err
    assert "rounded" not in err and "warning" not in err and "updates" not in err, err
    run_dir = next(tmp_path.rglob("seed-1"))
    with open(run_dir / "eval.csv") as fh:
        assert [int(row["timesteps"]) for row in csv.DictReader(fh)] == evaluation_timesteps(cartpole, 5376) == [0, 5000, 5376]
    assert trained_timesteps(cartpole, 5376) == 5376 and trained_timesteps(cartpole, 5377) == 5632


def test_train_progress_on_the_population_engine(tmp_path, capsys):
    code, out, err = cli(train_args(tmp_path, "--timesteps", "2048", "--engine", "population"), capsys)
    assert code == 0, err
    assert "population engine" in err and "rounded" not in err
    bars = [line for line in err.splitlines() if "steps" in line and "updates" in line]
    assert len(bars) == 1 and "2,048/2,048 steps" in bars[0] and "8 updates" in bars[0], err
    assert not process_engine.PROGRESS_LISTENERS  # the bar's listener is gone


# -- 6: no clip range recorded for objectives without one ------------------------------------------
def test_config_records_a_clip_range_only_for_objectives_that_use_it():
    def spec(algo: str) -> RunSpec:
        return RunSpec(suite="quick", env=CARTPOLE, algo=algo, seed=0, total_timesteps=2048, out="unused")

    assert "clip_range" not in config_for(spec("esspo"))["hyperparams"]
    assert "clip_range" not in config_for(spec("tis-pg"))["hyperparams"]
    for algo in ("ppo", "decoupled-ppo"):  # they declare it: recorded as before
        assert config_for(spec(algo))["hyperparams"]["clip_range"] == "lin_0.2"
    assert run_folder.unused_tuned_knobs("esspo") == {"clip_range"} and not run_folder.unused_tuned_knobs("ppo")


def test_a_run_recorded_with_the_old_clip_range_field_is_still_the_same_run(tmp_path, monkeypatch, capsys):
    spec = RunSpec(suite="train", env=CARTPOLE, algo="esspo", seed=0, total_timesteps=2048, out=str(tmp_path), device="cpu", tensorboard=False)
    current = run_folder.config_for

    def old_config_for(s: RunSpec, settings=None) -> dict:  # config.json as runs made before this change have it
        config = current(s, settings)
        return {**config, "hyperparams": {**config["hyperparams"], "clip_range": "lin_0.2"},
                "algo_description": "an older wording of the objective's description"}

    monkeypatch.setattr(process_engine, "config_for", old_config_for)
    assert execute_run(spec)["status"] == "complete"
    monkeypatch.undo()
    recorded = json.loads((spec.run_dir / "config.json").read_text())
    assert recorded["hyperparams"]["clip_range"] == "lin_0.2"
    state = run_folder_state(spec)
    assert state.kind == RUN_SAME, state.reasons
    # train recognizes it as complete and keeps it (no redo, no refusal)
    code, out, err = cli(train_args(tmp_path, "--timesteps", "2048", "--suite-name", "train"), capsys)
    assert code == 0 and "already complete with the same configuration" in out, out + err
    assert json.loads((spec.run_dir / "config.json").read_text()) == recorded
    # a key the run does use still counts
    changed = {**recorded, "hyperparams": {**recorded["hyperparams"], "n_epochs": 1}}
    (spec.run_dir / "config.json").write_text(json.dumps(changed))
    assert run_folder_state(spec).kind != RUN_SAME


# -- 7: the dry run summarizes; run folders on request ----------------------------------------------
def test_dry_run_summarizes_and_lists_runs_only_on_request(tmp_path, capsys):
    base = ["bench", "--suite", "quick", "--dry-run", "--out", str(tmp_path), "--device", "cpu"]
    code, out, err = cli(base, capsys)
    assert code == 0, err
    assert out == ""  # no run paths
    assert len(err.splitlines()) <= 15, err
    assert "40 runs, 6,000,000 environment steps in all" in err
    assert "runs per algorithm: esspo 20, ppo 20" in err
    assert "runs per condition: lag0_noise0_replay0 20, lag16_noise0_replay0 20" in err
    assert "Pendulum-v1: 20 runs = 2 algos" in err and "cost estimate (population engine)" in err
    assert "a budget of 100,000 steps trains 102,400" in err  # Pendulum's 4,096-step rollouts
    assert "--list-runs" in err
    code, out, err = cli([*base, "--list-runs"], capsys)
    assert code == 0 and len(out.splitlines()) == 40 and "quick/Pendulum-v1/esspo/lag0_noise0_replay0/seed-0" in out
    assert not any(tmp_path.iterdir())
    # a budget that rounds and evaluates twice is said in the plan too
    code, out, err = cli(["bench", "--envs", CARTPOLE, "--timesteps", "3000", "--dry-run", "--out", str(tmp_path), "--device", "cpu"], capsys)
    assert code == 0 and "a budget of 3,000 steps trains 3,072" in err and "only 2 evaluation points" in err, err


# -- 8: did you mean -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "bad", "suggestion", "listed"),
    [
        (["train", "--env", "cartpole-v1"], "unknown environment 'cartpole-v1'", "did you mean 'CartPole-v1'?", "Acrobot-v1"),
        (["train", "--env", CARTPOLE, "--algo", "esppo"], "unknown algorithm 'esppo'", "did you mean 'esspo'?", "decoupled-ppo"),
        (["bench", "--suite", "quik", "--dry-run"], "unknown suite 'quik'", "did you mean 'quick'?", "staleness"),
        (["bench", "--algos", "esspo,pp0", "--dry-run"], "unknown algorithm 'pp0'", "did you mean 'ppo'?", "esspo"),
    ],
)
def test_mistyped_names_get_a_suggestion(tmp_path, capsys, argv, bad, suggestion, listed):
    code, out, err = cli([*argv, "--out", str(tmp_path)], capsys)
    assert code == 2 and bad in err and suggestion in err and "available:" in err and listed in err, err
    assert "Traceback" not in err and not any(tmp_path.iterdir())


def test_no_suggestion_for_a_name_close_to_nothing():
    from adaptive_po.bench.suites import get_suite
    from adaptive_po.objectives import get_objective

    assert did_you_mean("zzzzzz", ["CartPole-v1", "Acrobot-v1"]) == ""
    assert did_you_mean("acrobot-v1", ["CartPole-v1", "Acrobot-v1"]) == " did you mean 'Acrobot-v1'?"
    with pytest.raises(ValueError, match=r"unknown suite 'zzzzzz'; available: \["):
        get_suite("zzzzzz")
    with pytest.raises(ValueError, match=r"unknown algorithm 'qqqqqq'; available: \["):
        get_objective("qqqqqq")


# -- the worker commands, for real: a bench of one run ---------------------------------------------
def test_a_tiny_bench_runs_through_its_worker_command(tmp_path, capsys):
    argv = ["bench", "--envs", CARTPOLE, "--algos", "esspo", "--seeds", "1", "--lags", "0", "--timesteps", "2048",
            "--workers", "1", "--no-report", "--no-progress", "--out", str(tmp_path), "--device", "cpu"]
    code, out, err = cli(argv, capsys)
    assert code == 0, err
    assert "1 complete, 0 skipped" in err and "failed: " not in err, err
    assert (tmp_path / "quick" / CARTPOLE / "esspo" / "lag0_noise0_replay0" / "seed-0" / "COMPLETE").is_file()
