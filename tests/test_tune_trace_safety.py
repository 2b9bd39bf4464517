"""Issue 32, second pass, on the commands added since the first (`tune`, `trace`, the Zoo entry
point) and on reports: one writer per tuning study, traces that record and compare their settings
under the sweep lock and the run-size limits, trace workers that die with their driver, and clear
errors without leftovers. Real processes and real files, no mocks."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_here import cli_here  # noqa: E402 - tests/cli_here.py: a command line in this process

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return cli_here([sys.executable, "-m", "adaptive_po", *args], env=env, cwd=cwd)


def _wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}: {err[-3000:]}")
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


# -- 1. one writer for a whole tuning study ------------------------------------------------------
TUNE = ["tune", "--envs", "CartPole-v1", "--algos", "esspo", "--round-size", "1", "--timesteps", "512",
        "--search-seeds", "100", "--stale-lag", "2", "--no-progress", "--executor", "inline"]


@pytest.mark.slow
def test_a_second_tune_on_the_same_output_is_refused_before_it_writes_and_the_record_is_the_first_ones(tmp_path):
    out = tmp_path / "runs"
    search = out / "tuning-search"
    first = subprocess.Popen([sys.executable, "-m", "adaptive_po", *TUNE, "--trials", "3", "--score-seeds", "0,1,2", "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the first tune is scoring (its record written): the moment the old code let a second one in
        _wait_for(lambda: (search / "selected.json").exists(), 600, "the first tune's selection", first)
        record = (search / "selected.json").read_bytes(), (search / "trials.csv").read_bytes()
        second = _cli(*TUNE, "--trials", "2", "--score-seeds", "1", "--out", str(out))
        first_running = first.poll() is None
        out_text, err_text = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first_running, "the first tune ended before the second one tried; the test proves nothing"
    assert second.returncode == 2, second.stderr[-2000:]
    assert "another sweep is writing into" in second.stderr and str(first.pid) in second.stderr
    assert "Traceback" not in second.stderr
    assert first.returncode == 0, err_text[-3000:]
    # the record is the first tune's: 3 trials, and the selection it scored
    assert (search / "selected.json").read_bytes() == record[0]
    assert (search / "trials.csv").read_bytes() == record[1]
    rows = list(csv.DictReader((search / "trials.csv").open()))
    assert len(rows) == 3
    assert json.loads((search / "selected.json").read_text())["plan"]["trials"] == 3
    assert not list(out.rglob("*.tmp")) and not list(out.rglob(".sweep.lock"))


def test_with_round_size_1_the_second_trial_is_not_the_default_again(tmp_path):
    from adaptive_po.bench.tuning import TuningPlan, run_tuning

    plan = TuningPlan(envs=("CartPole-v1",), algos=("esspo",), trials=4, round_size=1, timesteps=512,
                      search_seeds=(100,), score_seeds=(0,), out=str(tmp_path))
    run_tuning(plan, lambda specs: None, log=lambda line: None)  # nothing trains: every run scores the random score
    rows = list(csv.DictReader((tmp_path / "tuning-search" / "trials.csv").open()))
    variants = [r["variant"] for r in rows]
    assert variants[0] == "" and len(set(variants)) == 4, variants  # the default first, then no repeats
    assert [r["trial"] for r in rows] == ["0", "1", "2", "3"]


@pytest.mark.slow
def test_tune_hints_name_only_flags_tune_accepts(tmp_path):
    out = tmp_path / "runs"
    first = _cli(*TUNE, "--trials", "1", "--score-seeds", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr[-3000:]
    changed = _cli(*TUNE, "--trials", "1", "--score-seeds", "1", "--out", str(out), "--timesteps", "640")
    assert changed.returncode == 2, changed.stderr[-2000:]
    message = changed.stderr.strip().splitlines()[-1]
    assert "--redo-changed" in message and "--suite-name" not in message
    accepted = _cli("tune", "--help").stdout
    for flag in {w.strip("`,.;()") for w in message.split() if w.startswith(("--", "`--"))}:
        assert flag in accepted, flag
    redone = _cli(*TUNE, "--trials", "1", "--score-seeds", "1", "--out", str(out), "--timesteps", "640", "--redo-changed")
    assert redone.returncode == 0, redone.stderr[-3000:]


# -- 4, 5, 6a. trace under the rules of bench and train ----------------------------------------------
TRACE = ["trace", "--envs", "CartPole-v1", "--algos", "esspo", "--lags", "0", "--seeds", "0", "--workers", "1"]


def test_trace_records_its_settings_and_refuses_or_redoes_a_changed_trace(tmp_path):
    out = tmp_path / "trace"
    first = _cli(*TRACE, "--timesteps", "512", "--out", str(out))
    assert first.returncode == 0, first.stderr[-3000:]
    path = Path(first.stdout.split()[-1])
    settings = path.with_name("seed-0.settings.json")
    before = path.read_bytes(), settings.read_bytes()
    assert json.loads(before[1])["total_timesteps"] == 512 and json.loads(before[1])["every"] == 1
    same = _cli(*TRACE, "--timesteps", "512", "--out", str(out))  # the same settings: kept, not retrained
    assert same.returncode == 0 and (path.read_bytes(), settings.read_bytes()) == before
    for changed in (["--timesteps", "1024"], ["--timesteps", "512", "--every", "2"]):
        refused = _cli(*TRACE, *changed, "--out", str(out))
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert str(path) in refused.stderr and "--redo-changed" in refused.stderr and "Traceback" not in refused.stderr
        assert (path.read_bytes(), settings.read_bytes()) == before  # never silently kept, never half-replaced
    redone = _cli(*TRACE, "--timesteps", "1024", "--out", str(out), "--redo-changed")
    assert redone.returncode == 0, redone.stderr[-3000:]
    assert json.loads(settings.read_text())["total_timesteps"] == 1024
    assert path.read_bytes() != before[0] and len(path.read_text().splitlines()) > len(before[0].splitlines())
    assert not list(out.rglob("*.tmp")) and not (out / ".sweep.lock").exists()


def test_two_traces_on_one_output_cannot_both_write(tmp_path):
    out = tmp_path / "trace"
    first = subprocess.Popen([sys.executable, "-m", "adaptive_po", *TRACE, "--timesteps", "8192", "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (out / ".sweep.lock").exists(), 120, "the first trace's lock", first)
        second = _cli(*TRACE, "--timesteps", "512", "--out", str(out))
        first_running = first.poll() is None
        _, err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first_running
    assert second.returncode == 2 and "another sweep is writing into" in second.stderr, second.stderr[-2000:]
    assert first.returncode == 0, err[-3000:]
    settings = json.loads(next(out.rglob("seed-0.settings.json")).read_text())
    assert settings["total_timesteps"] == 8192  # the first trace's, not overwritten by the second


def test_trace_applies_the_run_size_limits_before_training(tmp_path):
    out = tmp_path / "trace"
    limited = _cli(*TRACE, "--timesteps", "512", "--out", str(out), env={**os.environ, "ADAPTIVE_PO_MAX_TIMESTEPS": "100"})
    assert limited.returncode == 2 and "ADAPTIVE_PO_MAX_TIMESTEPS" in limited.stderr, limited.stderr[-2000:]
    absurd = _cli(*TRACE, "--timesteps", "5000000000", "--out", str(out))
    assert absurd.returncode == 2 and "5,000,000,000" in absurd.stderr, absurd.stderr[-2000:]
    assert not out.exists()


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and b"spawn_main" in (stat.parent / "cmdline").read_bytes():
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_trace_workers_die_with_their_driver_on_kill_9(tmp_path):
    out = tmp_path / "trace"
    driver = subprocess.Popen(
        [sys.executable, "-m", "adaptive_po", "trace", "--envs", "CartPole-v1", "--algos", "esspo", "--lags", "0",
         "--seeds", "0,1", "--workers", "2", "--timesteps", "400000", "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    try:
        def two_workers() -> bool:
            workers[:] = _children(driver.pid)
            return len(workers) == 2

        _wait_for(two_workers, 120, "two trace workers", driver)
        time.sleep(1.0)  # they are past their start, training
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        deadline = time.time() + 15
        while any(_alive(w) for w in workers) and time.time() < deadline:
            time.sleep(0.2)
        left = [w for w in workers if _alive(w)]
        assert not left, f"trace workers {left} outlived their killed driver"
    finally:
        if driver.poll() is None:
            driver.kill()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


# -- 7. clear errors and no leftovers -----------------------------------------------------------------
def _zoo_train(cwd: Path, *params: str) -> subprocess.CompletedProcess:
    return cli_here([sys.executable, "-m", "adaptive_po.zoo", "train", "--algo", "esspo", "--env", "CartPole-v1",
                     "-n", "256", "--seed", "1", "-params", *params], cwd=cwd)


def test_zoo_bad_dial_params_are_one_line_and_failed_tries_leave_no_run_folder(tmp_path):
    for bad, named in (("policy_lag:-1", "policy_lag must be an integer >= 0, got -1"),
                       ("sampler_precision:'fp7'", "fp7"), ("replay:abc", "replay must be a number")):
        done = _zoo_train(tmp_path, bad)
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.strip().count("\n") == 0 and named in done.stderr, done.stderr[-2000:]
        assert not (tmp_path / "logs").exists()  # refused before the Zoo built or wrote anything
    # a failure inside the Zoo (a knob ESSPO does not have) still fails, and leaves no <env>_<n> folder
    failed = _zoo_train(tmp_path, "not_a_knob:1")
    assert failed.returncode != 0 and "not_a_knob" in failed.stderr
    assert not list((tmp_path / "logs" / "esspo").iterdir())


def test_an_empty_adaptive_po_envs_is_the_packaged_suite_not_the_current_directory(tmp_path):
    env = {**os.environ, "ADAPTIVE_PO_ENVS": ""}
    listed = _cli("list", env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "CartPole-v1" in listed.stdout and f"({tmp_path}" not in listed.stdout
    dry = _cli("bench", "--suite", "quick", "--envs", "CartPole-v1", "--dry-run", "--out", str(tmp_path / "runs"), env=env, cwd=tmp_path)
    assert dry.returncode == 0 and "unknown environment" not in dry.stderr, dry.stderr[-2000:]


def _folder(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_a_sigterm_while_a_report_is_written_leaves_the_old_report_or_the_new_one_and_no_temporary_files(tmp_path):
    out = tmp_path / "runs"
    bench = _cli("bench", "--suite", "quick", "--envs", "CartPole-v1", "--algos", "esspo,ppo", "--seeds", "1", "--lags", "0",
                 "--timesteps", "512", "--no-progress", "--no-report", "--executor", "inline", "--out", str(out))
    assert bench.returncode == 0, bench.stderr[-3000:]
    root, report = out / "quick", out / "quick" / "report"
    analysis = [sys.executable, "-m", "adaptive_po.analysis", str(root)]
    assert cli_here(analysis).returncode == 0
    old = _folder(report)
    new_reference = tmp_path / "reference"
    assert cli_here([*analysis, "--out", str(new_reference), "--confidence", "0.9"]).returncode == 0
    new = _folder(new_reference)
    assert new != old  # another confidence level: another report.md

    def writing() -> bool:  # the report has started writing files (old code: into report/, new: into a sibling)
        if any(p.name.endswith(".tmp") for p in report.iterdir()):
            return True
        return any(p.name.startswith(".report.") and p.is_dir() and any(p.iterdir()) for p in root.iterdir())

    proc = subprocess.Popen([*analysis, "--confidence", "0.9"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not writing() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.002)
        stopped_midway = proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert stopped_midway, "the report finished before it could be stopped; the test proves nothing"
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert not [p for p in root.iterdir() if p.name.startswith(".report")]  # no staging folder left
    assert _folder(report) in (old, new)
    assert _folder(report) == old or proc.returncode == 0
