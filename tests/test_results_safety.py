"""Results nobody loses without a word (issue 22, cases 1, 3 and 6). Real command lines, real
processes, real files (and a real full filesystem), tiny CartPole budgets.

* Case 1: a complete run made with another configuration (another budget, an edited YAML file)
  is named by the dry run with its differing keys (old -> new), and the bench refuses to replace it
  (exit 2, before any compute) unless ``--redo-changed``; ``train`` obeys the same rule.
* Case 3: ``train`` takes the sweep folder's lock as ``bench`` does: a ``train`` into a folder a
  ``bench`` (or another ``train``) is writing is refused, naming the holder; a complete run with the
  same configuration is kept by ``train`` and said to be so.
* Case 6: a full disk is a one-line message with exit code 2, never a traceback: before the sweep
  (``--out``'s check writes 64 KiB for real) and during it (the sweep stops, no run is left marked
  complete with missing files, no lock is left, a rerun once there is room finishes the sweep).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from adaptive_po.bench import locks
from adaptive_po.bench.config import DEFAULT_ENVS_DIR
from adaptive_po.contract import COMPLETE, FAILED, verify_complete_run
from adaptive_po.bench.run_folder import config_differences
from cli_here import cli_here
from test_robustness import children  # the live child processes of a pid

#: wide lines: messages are checked line by line
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "500"}
CELL = "quick/CartPole-v1/esspo/lag0_noise0_replay0/seed-0"
#: where the subject is the run folders, not the worker processes: the sweep runs its jobs here
INLINE = ("--executor", "inline")


def bench(out: Path, *extra: str, timesteps: int = 2048, seeds: str = "2", algos: str = "esspo,ppo",
          engine: str = "population") -> list[str]:
    """The issue's ``B``: ``bench --envs CartPole-v1 --algos esspo,ppo --seeds 2 --lags 0 --timesteps 2048
    --workers 1 --no-report --out OUT``."""
    return [
        sys.executable, "-m", "adaptive_po", "bench", "--envs", "CartPole-v1", "--algos", algos, "--seeds", seeds,
        "--lags", "0", "--timesteps", str(timesteps), "--workers", "1", "--no-report", "--no-progress",
        "--device", "cpu", "--engine", engine, "--out", str(out), *extra,
    ]


def train(out: Path, *extra: str, timesteps: int = 2048, seed: int = 0, suite_name: str = "quick") -> list[str]:
    return [
        sys.executable, "-m", "adaptive_po", "train", "--env", "CartPole-v1", "--algo", "esspo", "--seed", str(seed),
        "--timesteps", str(timesteps), "--device", "cpu", "--suite-name", suite_name, "--out", str(out), *extra,
    ]


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    """``cmd`` to its end, in this process (:mod:`cli_here`): what it prints and leaves on disk is the
    subject; the tests about the process itself start theirs with ``subprocess.Popen``."""
    return cli_here(cmd, env=ENV)


def complete_runs(out: Path) -> set[Path]:
    return {p.parent for p in out.rglob(COMPLETE)}


def fingerprint(run_dir: Path) -> tuple:
    """What must not change when a run is kept: its files' bytes and its marker's mtime."""
    files = {p.name: p.read_bytes() for p in sorted(run_dir.iterdir()) if p.is_file()}
    return (run_dir / COMPLETE).stat().st_mtime_ns, files


def wait_for_lock(folder: Path, pid: int, process: subprocess.Popen, timeout: float = 180) -> None:
    lock = folder / locks.LOCK_FILE
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if json.loads(lock.read_text()).get("pid") == pid:
                return
        except (OSError, ValueError):
            pass
        assert process.poll() is None, f"{process.args} ended before it took the lock: {process.communicate()}"
        time.sleep(0.05)
    raise AssertionError(f"{process.args} did not take the lock of {folder}")


def no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr


# -- case 1: a complete run is never removed without saying so -------------------------------------
def test_config_differences_name_keys_old_and_new():
    recorded = {"total_timesteps": 2048, "hyperparams": {"learning_rate": "lin_1e-3", "n_epochs": 20, "gone": 1},
                "versions": {"torch": "x"}, "device": "cpu"}
    requested = {"total_timesteps": 2304, "hyperparams": {"learning_rate": "lin_3e-4", "n_epochs": 20}, "device": "cuda",
                 "new_key": 1}
    assert config_differences(recorded, requested) == [
        "total_timesteps 2048 -> 2304",
        'hyperparams.learning_rate "lin_1e-3" -> "lin_3e-4"',
        "hyperparams.gone 1 -> (absent)",
        'device "cpu" -> "cuda"',
        "new_key (absent) -> 1",
    ]
    assert config_differences(recorded, {"total_timesteps": 2048, "device": "cpu"}) == []  # versions are not compared


@pytest.mark.slow
def test_changed_configuration_is_named_and_redone_only_on_request(tmp_path):
    out = tmp_path / "runs"
    envs = tmp_path / "envs"
    envs.mkdir()
    shutil.copy(DEFAULT_ENVS_DIR / "CartPole-v1.yaml", envs / "CartPole-v1.yaml")
    first = run(bench(out, "--envs-dir", str(envs), *INLINE, timesteps=512))
    assert first.returncode == 0, first.stderr
    runs = complete_runs(out)
    assert len(runs) == 4
    before = {d: fingerprint(d) for d in runs}

    # the dry run names the four runs and the changed key; it runs nothing
    dry = run(bench(out, "--envs-dir", str(envs), "--dry-run", timesteps=768))
    assert dry.returncode == 0, dry.stderr
    assert "already complete: 0; to run: 0" in dry.stderr
    assert "complete with another configuration: 4" in dry.stderr and "--redo-changed" in dry.stderr
    assert dry.stderr.count("total_timesteps 512 -> 768") == 4, dry.stderr

    # the bench refuses before any compute, naming the runs and the change; nothing is touched
    refused = run(bench(out, "--envs-dir", str(envs), *INLINE, timesteps=768))
    assert refused.returncode == 2, refused.stderr
    no_traceback(refused.stderr)
    error = [line for line in refused.stderr.splitlines() if line.startswith("adaptive-po bench: error:")]
    assert len(error) == 1 and "4 complete run(s)" in error[0] and "--redo-changed" in error[0], refused.stderr
    assert f"{CELL} (total_timesteps 512 -> 768)" in error[0]
    assert {d: fingerprint(d) for d in complete_runs(out)} == before
    assert not (out / "quick" / locks.LOCK_FILE).exists()

    # an edited YAML file is a changed configuration too
    data = yaml.safe_load((envs / "CartPole-v1.yaml").read_text())
    data["hyperparams"]["n_epochs"] = 5
    (envs / "CartPole-v1.yaml").write_text(yaml.safe_dump(data))
    edited = run(bench(out, "--envs-dir", str(envs), *INLINE, timesteps=512))
    assert edited.returncode == 2 and "hyperparams.n_epochs 20 -> 5" in edited.stderr, edited.stderr
    # train obeys the same rule
    trained = run(train(out, "--envs-dir", str(envs), timesteps=512))
    assert trained.returncode == 2 and "hyperparams.n_epochs 20 -> 5" in trained.stderr, trained.stderr
    assert "--redo-changed" in trained.stderr
    no_traceback(edited.stderr + trained.stderr)
    assert {d: fingerprint(d) for d in complete_runs(out)} == before
    data["hyperparams"]["n_epochs"] = 20
    (envs / "CartPole-v1.yaml").write_text(yaml.safe_dump(data))

    # on request: each redo is said, with its reason
    redo = run(bench(out, "--envs-dir", str(envs), "--redo-changed", *INLINE, timesteps=768))
    assert redo.returncode == 0, redo.stderr
    redo_lines = [line for line in redo.stderr.splitlines() if line.startswith("redo")]
    assert len(redo_lines) == 4 and all("configuration changed: total_timesteps 512 -> 768" in line for line in redo_lines), redo.stderr
    assert "4 complete, 0 skipped" in redo.stderr
    for run_dir in complete_runs(out):
        assert json.loads((run_dir / "config.json").read_text())["total_timesteps"] == 768
        assert verify_complete_run(run_dir) is None
    again = run(bench(out, "--envs-dir", str(envs), "--dry-run", timesteps=768))
    assert "already complete: 4; to run: 0" in again.stderr and "another configuration" not in again.stderr


# -- case 3: one writer per run folder, whichever command writes ----------------------------------
def _stop(process: subprocess.Popen) -> None:
    """End a driver the way Ctrl-C does (its workers and locks go with it)."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@pytest.mark.slow
def test_train_takes_the_sweep_lock_and_keeps_complete_runs(tmp_path):
    out = tmp_path / "runs"
    # a bench is writing: a train into the same cell is refused, naming the bench (the bench is
    # stopped once that is shown: its runs need not finish for this)
    driver = subprocess.Popen(bench(out, seeds="1", timesteps=16384, engine="process"), env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_lock(out / "quick", driver.pid, driver)
        during = run(train(out, timesteps=16384))
        assert driver.poll() is None, "the bench ended before the train was refused; give it more work"
        assert during.returncode == 2, during.stderr
        assert "another sweep is writing into" in during.stderr and f"pid {driver.pid}" in during.stderr
        no_traceback(during.stderr)
    finally:
        _stop(driver)

    # two trains of one run a few seconds apart: the second is refused while the first runs (a budget
    # the first cannot finish while the second starts and is refused, on any machine: it is stopped after)
    first = subprocess.Popen(train(out, timesteps=1_000_000, seed=5, suite_name="train"), env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_lock(out / "train", first.pid, first)
        second = run(train(out, timesteps=1_000_000, seed=5, suite_name="train"))
        assert first.poll() is None, "the first train ended before the second was refused"
        assert second.returncode == 2 and f"pid {first.pid}" in second.stderr, second.stderr
    finally:
        _stop(first)

    # a complete run with the same configuration is kept, and train says so
    mine = out / "train/CartPole-v1/esspo/lag0_noise0_replay0/seed-5"
    done = run(train(out, timesteps=512, seed=5, suite_name="train"))
    assert done.returncode == 0 and verify_complete_run(mine) is None, done.stderr
    kept = fingerprint(mine)
    again = run(train(out, timesteps=512, seed=5, suite_name="train"))
    assert again.returncode == 0 and "already complete with the same configuration" in again.stdout, again.stderr
    assert "training" not in again.stderr
    assert fingerprint(mine) == kept

    # replaced only on request: another budget is refused, then redone with --redo-changed
    changed = run(train(out, timesteps=1024, seed=5, suite_name="train"))
    assert changed.returncode == 2 and "total_timesteps 512 -> 1024" in changed.stderr, changed.stderr
    assert fingerprint(mine) == kept
    redone = run(train(out, "--redo-changed", timesteps=1024, seed=5, suite_name="train"))
    assert redone.returncode == 0, redone.stderr
    assert "redo" in redone.stderr and "configuration changed: total_timesteps 512 -> 1024" in redone.stderr
    assert json.loads((mine / "config.json").read_text())["total_timesteps"] == 1024 and verify_complete_run(mine) is None
    assert not list(out.rglob(locks.LOCK_FILE)) and not list(out.rglob(locks.OWNER_FILE))


# -- case 6: disk errors are messages -------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (a real filesystem that fills up); skipped where mounting is not permitted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small filesystem to fill up")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill ``disk`` with a file until only about ``leave`` bytes are free (0: completely)."""
    filler = disk / f"filler-{time.time_ns()}"
    stat = os.statvfs(disk)
    todo = stat.f_bavail * stat.f_frsize - leave
    with open(filler, "wb", buffering=0) as fh:
        try:
            while leave == 0 or todo > 0:
                todo -= fh.write(bytes(min(1 << 16, todo) if leave else 1 << 16))
        except OSError as err:
            assert err.errno == errno.ENOSPC
    return filler


def free_bytes(disk: Path) -> int:
    stat = os.statvfs(disk)
    return stat.f_bavail * stat.f_frsize


def test_a_full_disk_is_refused_before_anything_runs(small_disk, monkeypatch):
    out = small_disk / "runs"
    fill(small_disk, leave=16 * 1024)  # an empty file fits, 64 KiB do not
    assert 0 < free_bytes(small_disk) < locks.PROBE_BYTES
    with pytest.raises(ValueError, match="No space left on device"):
        locks.check_destination(out)
    for cmd in (bench(out), train(out)):
        done = run(cmd)
        assert done.returncode == 2, done.stderr
        no_traceback(done.stderr)
        assert f"cannot write results into {out / 'quick'}" in done.stderr and "No space left on device" in done.stderr, done.stderr
        assert [line.startswith("adaptive-po ") for line in done.stderr.splitlines()].count(True) == 1, done.stderr
    assert not list(out.rglob(locks.LOCK_FILE)) and not list(out.rglob(".write-test-*"))
    # a lock file that cannot be written is not left behind either (the disk filled after the check)
    fill(small_disk)
    monkeypatch.setattr(locks, "check_destination", lambda folder, flag="--out": Path(folder))
    with pytest.raises(locks.DestinationError, match="lock file"):
        with locks.sweep_lock([out / "quick"]):
            pass
    assert not (out / "quick" / locks.LOCK_FILE).exists()


@pytest.mark.slow
def test_a_disk_that_fills_during_the_sweep_ends_it_with_a_message(small_disk):
    out = small_disk / "runs"
    cmd = bench(out, seeds="1", timesteps=8192, engine="process")  # esspo then ppo, one worker
    driver = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    filler = None
    try:
        deadline = time.time() + 300
        while time.time() < deadline and driver.poll() is None:
            training = [p for p in out.rglob(".status.json")] if (out / "quick").exists() else []
            if children(driver.pid) and training:
                filler = fill(small_disk)  # completely: the worker's next write fails
                break
            time.sleep(0.02)
        assert filler is not None, "the sweep was not caught with a worker training"
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 2, stderr
    no_traceback(stderr)
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"adaptive-po bench: error: cannot write results into {out / 'quick'}"), stderr
    assert "No space left on device" in last or "could not write its files" in last, last
    assert not (out / "quick" / locks.LOCK_FILE).exists()
    for run_dir in complete_runs(out):  # a complete run is whole; the others are simply incomplete
        assert verify_complete_run(run_dir) is None
    incomplete = [d for d in (out / "quick" / "CartPole-v1").glob("*/*/seed-0") if not (d / COMPLETE).exists()]
    assert incomplete, "the sweep finished before the disk filled up"

    # room again: the same command finishes the sweep
    filler.unlink()
    rerun = run(cmd)
    assert rerun.returncode == 0, rerun.stderr
    runs = complete_runs(out)
    assert len(runs) == 2 and all(verify_complete_run(d) is None for d in runs)
    assert not list(out.rglob(FAILED)) and not (out / "quick" / locks.LOCK_FILE).exists()
