"""A sweep that survives misuse (issue 13): locks, orphaned workers, corrupt results, diverged
runs, bad destinations and devices. Real processes and real signals, tiny CartPole budgets.

One test per row of the issue's table (and the guards behind them):

* ``kill -9`` of the driver, then an immediate rerun; and a second ``bench`` on the same ``--out``
  (:func:`test_kill_9_of_the_driver_then_an_immediate_rerun`, the process engine, whose fixed
  seeds make an interrupted sweep's results equal to an uninterrupted one's);
  population workers die with their driver too; a live lock refuses, a stale one is taken over;
  no process deletes or marks a folder that a live process owns.
* ``progress.csv`` cut mid-row or to half its header, both markers in one folder: the bench
  redoes the run, analysis names it and leaves it out.
* ``--out`` read-only or a file, ``--device cuda:N`` without such a device, ``--workers 0
  --dry-run``: exit code 2 before anything runs.
* learning rates 1e30 (NaN) and 1e6 (no NaN, numbers break down) on both engines.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

from adaptive_po.dials import DataDials
from adaptive_po import contract
from adaptive_po.bench import locks
from adaptive_po.contract import COMPLETE, FAILED, verify_complete_run
from adaptive_po.bench.divergence import compact_traceback, divergence_reason, error_line
from adaptive_po.bench.run_folder import RunSpec, config_for, fail_run_folder, start_run_folder
from adaptive_po.bench.process_engine import execute_run
from adaptive_po.bench.grid import Grid, expand_grid  #: wide lines: the sweep's messages are checked line by line
from adaptive_po.bench.sweep import run_sweep  #: wide lines: the sweep's messages are checked line by line
from cli_here import cli_here  # a command line in this process
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "500"}


def bench_cmd(out: Path, *extra: str, seeds: str = "2", algos: str = "esspo,ppo", timesteps: int = 2048,
              engine: str = "process", workers: int = 2) -> list[str]:
    return [
        sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--envs", "CartPole-v1", "--algos", algos,
        "--seeds", seeds, "--lags", "0", "--timesteps", str(timesteps), "--workers", str(workers), "--out", str(out),
        "--device", "cpu", "--no-report", "--no-progress", "--engine", engine, *extra,
    ]


def children(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(stat[1]) == pid and stat[0] != "Z":
            out.append(int(entry.name))
    return out


def wait_dead(pids: list[int], timeout: float = 10.0) -> list[int]:
    """The pids still alive after ``timeout`` seconds."""
    deadline = time.time() + timeout
    alive = list(pids)
    while alive and time.time() < deadline:
        alive = [p for p in alive if locks.pid_alive(p)]
        time.sleep(0.05)
    return alive


def complete_runs(out: Path) -> set[Path]:
    return {p.parent for p in out.rglob(COMPLETE)}


def tiny_spec(out: Path, **kw) -> RunSpec:
    base = dict(suite="quick", env="CartPole-v1", algo="esspo", seed=0, total_timesteps=1024, out=str(out), device="cpu", tensorboard=False)
    return RunSpec(**{**base, **kw})


# -- kill -9 of the driver, a second sweep on the same folder -------------------------------------
@pytest.mark.slow
def test_kill_9_of_the_driver_then_an_immediate_rerun(tmp_path):
    out = tmp_path / "runs"
    # esspo then ppo, two seeds each, one worker at a time: four runs in a row, so the moment to
    # kill (some runs complete, a worker running) lasts three runs, whatever the machine's load
    cmd = bench_cmd(out, seeds="2", workers=1, timesteps=1024)
    total = 4
    driver = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        lock = out / "quick" / locks.LOCK_FILE
        deadline = time.time() + 180
        while time.time() < deadline and not (lock.is_file() and str(driver.pid) in lock.read_text()):
            time.sleep(0.05)
        # a second bench on the same --out is refused at once, naming the holder
        second = cli_here(cmd, env=ENV)
        assert second.returncode == 2, second.stderr
        assert f"pid {driver.pid}" in second.stderr and "another sweep" in second.stderr
        assert driver.poll() is None, "the first sweep ended before the second was refused; give it more work"

        # kill -9 the driver once a run is complete and another is in progress in a worker
        victims: list[int] = []
        while time.time() < deadline and driver.poll() is None:
            workers = children(driver.pid)
            if workers and 1 <= len(complete_runs(out)) < total:
                victims = workers
                os.kill(driver.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
        assert victims, "the sweep was not caught with a run complete and a worker running"
        driver.wait(timeout=30)
        rerun = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # at once
        assert wait_dead(victims) == [], "the worker outlived its driver"
        done_before = complete_runs(out)
        _, rerun_err = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, rerun_err
    finally:
        if driver.poll() is None:
            driver.kill()

    assert f"taking over the lock of {out / 'quick'} left by pid {driver.pid}" in rerun_err
    done = len(done_before)
    assert 1 <= done < total and f"{total - done} complete, {done} skipped" in rerun_err, rerun_err
    runs = complete_runs(out)
    assert len(runs) == total and done_before < runs
    assert not list(out.rglob(FAILED)) and not list(out.rglob(locks.OWNER_FILE))
    assert not (out / "quick" / locks.LOCK_FILE).exists()  # released when the rerun exited
    # the results of an uninterrupted sweep: the same runs, here in this process (fixed seeds)
    reference = tmp_path / "reference"
    specs = expand_grid(Grid(suite="quick", envs=["CartPole-v1"], algos=["esspo", "ppo"], seeds=[0, 1], conditions=[DataDials()],
                             timesteps=1024, device="cpu", out=str(reference), tensorboard=False))
    assert [execute_run(spec)["status"] for spec in specs] == ["complete"] * total
    for run_dir in runs:
        assert verify_complete_run(run_dir) is None
        twin = reference / run_dir.relative_to(out)
        pd.testing.assert_frame_equal(pd.read_csv(run_dir / "eval.csv"), pd.read_csv(twin / "eval.csv"))
        progress, expected = (pd.read_csv(d / "progress.csv").drop(columns="time_elapsed") for d in (run_dir, twin))
        pd.testing.assert_frame_equal(progress, expected)


@pytest.mark.slow
def test_population_workers_die_with_their_driver(tmp_path):
    out = tmp_path / "runs"
    driver = subprocess.Popen(bench_cmd(out, engine="population", timesteps=65536, workers=1, algos="esspo"), env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        workers: list[int] = []
        while time.time() < deadline and not (workers and list(out.rglob(contract.PROGRESS_FILE))):
            workers = children(driver.pid)
            time.sleep(0.05)
        assert workers, "no population worker started"
        os.kill(driver.pid, signal.SIGKILL)
        assert wait_dead(workers) == [], "the population worker outlived its driver"
    finally:
        if driver.poll() is None:
            driver.kill()
    # killed outright, it wrote nothing: its runs are incomplete (a rerun redoes them), not FAILED
    assert not list(out.rglob(FAILED)) and not list(out.rglob(COMPLETE))


def test_a_live_lock_refuses_and_a_stale_one_is_taken_over(tmp_path, capfd):
    folder = tmp_path / "runs" / "quick"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom adaptive_po.bench.locks import sweep_lock\n"
         f"with sweep_lock([{str(folder)!r}]):\n    print('locked', flush=True)\n    time.sleep(120)\n"],
        env=ENV, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        specs = expand_grid(Grid(suite="quick", envs=["CartPole-v1"], algos=["esspo"], seeds=[0], conditions=[DataDials()],
                                 timesteps=1024, device="cpu", out=str(tmp_path / "runs")))
        with pytest.raises(locks.SweepLocked, match=f"pid {holder.pid}"):
            run_sweep(specs, workers=1, show_progress=False, engine="process")
        assert not (folder / "CartPole-v1").exists()  # refused before anything ran
    finally:
        holder.kill()
        holder.wait()
    stale = json.loads((folder / locks.LOCK_FILE).read_text())
    assert stale["pid"] == holder.pid and not locks.holder_alive(stale)
    capfd.readouterr()
    with locks.sweep_lock([folder]):
        assert json.loads((folder / locks.LOCK_FILE).read_text())["pid"] == os.getpid()
        with locks.sweep_lock([folder]):  # re-entrant within one process
            pass
        assert (folder / locks.LOCK_FILE).exists()
    assert f"taking over the lock of {folder} left by pid {holder.pid}" in capfd.readouterr().err
    assert not (folder / locks.LOCK_FILE).exists()


def test_no_process_deletes_or_marks_a_folder_a_live_process_owns(tmp_path, monkeypatch):
    spec = tiny_spec(tmp_path)
    config = config_for(spec)
    start_run_folder(spec, config)
    owner = json.loads((spec.run_dir / locks.OWNER_FILE).read_text())
    assert owner["pid"] == os.getpid() and not locks.owned_by_another(spec.run_dir)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        time.sleep(0.2)
        identity = {"pid": sleeper.pid, "host": owner["host"], "proc_start": locks._proc_start(sleeper.pid)}
        contract.atomic_write_json(spec.run_dir / locks.OWNER_FILE, identity)
        (spec.run_dir / "progress.csv").write_text("update\n1\n")
        monkeypatch.setattr(locks, "OWNER_WAIT_S", 0.5)
        with pytest.raises(locks.RunFolderBusy, match=f"pid {sleeper.pid}"):
            start_run_folder(spec, config)
        fail_run_folder(spec, "RuntimeError: not mine to mark\n")
        assert (spec.run_dir / "progress.csv").read_text() == "update\n1\n" and not (spec.run_dir / FAILED).exists()
        # the same pid with another start time is another process: the owner is gone
        assert not locks.holder_alive({**identity, "proc_start": identity["proc_start"] + 1})
    finally:
        sleeper.kill()
        sleeper.wait()
    start_run_folder(spec, config)  # the owner died: the folder is started afresh
    assert not (spec.run_dir / "progress.csv").exists()
    assert json.loads((spec.run_dir / locks.OWNER_FILE).read_text())["pid"] == os.getpid()


# -- corrupt results ------------------------------------------------------------------------------
@pytest.mark.slow
def test_corrupt_results_are_redone_by_the_bench_and_named_by_analysis(tmp_path, capsys, monkeypatch):
    from adaptive_po.analysis import LoadWarning, load_runs

    monkeypatch.setenv("COLUMNS", "500")

    out = tmp_path / "runs"
    specs = expand_grid(Grid(suite="quick", envs=["CartPole-v1"], algos=["esspo"], seeds=[0, 1, 2, 3], conditions=[DataDials()],
                             timesteps=1024, device="cpu", out=str(out), tensorboard=False))
    for spec in specs:
        assert execute_run(spec)["status"] == "complete"
    originals = {spec.seed: (spec.run_dir / "eval.csv").read_text() for spec in specs}
    for spec in specs:
        summary = json.loads((spec.run_dir / "summary.json").read_text())
        assert summary["files"]["progress.csv"]["bytes"] == (spec.run_dir / "progress.csv").stat().st_size
        assert summary["diverged"] is None and verify_complete_run(spec.run_dir) is None
    cut_row, cut_header, both, intact = (spec.run_dir for spec in specs)
    progress = (cut_row / "progress.csv").read_bytes()
    (cut_row / "progress.csv").write_bytes(progress[:-25])  # mid-row
    header = (cut_header / "progress.csv").read_text().split("\n", 1)[0]
    (cut_header / "progress.csv").write_text(header[: len(header) // 2])
    contract.atomic_write_text(both / FAILED, "RuntimeError: an orphan's last word\n")
    assert "sha256" in verify_complete_run(cut_row) or "bytes" in verify_complete_run(cut_row)
    assert "both COMPLETE and FAILED" in verify_complete_run(both)

    # a run without its integrity record is not trusted (older run formats: tests/test_integrity.py)
    legacy = tmp_path / "legacy"
    shutil.copytree(intact, legacy)
    summary = json.loads((legacy / "summary.json").read_text())
    del summary["files"]
    contract.atomic_write_json(legacy / "summary.json", summary)
    contract.atomic_write_json(legacy / COMPLETE, contract.complete_marker(legacy, "now"))
    assert "no integrity record" in verify_complete_run(legacy)

    with pytest.warns(LoadWarning) as caught:
        loaded = load_runs(out / "quick")
    message = " ".join(str(w.message) for w in caught)
    assert set(loaded.damaged) == {cut_row, cut_header, both} and loaded.finals["seed"].tolist() == [3]
    for name in ("seed-0", "seed-1", "seed-2", "integrity"):
        assert name in message

    capsys.readouterr()
    result = run_sweep(specs, executor="inline", show_progress=False, engine="process")
    err = capsys.readouterr().err
    assert result.ok and len(result.skipped) == 1 and len(result.complete) == 3, err
    for name in ("seed-0", "seed-1", "seed-2"):
        assert f"esspo/lag0_noise0_replay0/{name}:" in err and "redo" in err
    for spec in specs:
        assert verify_complete_run(spec.run_dir) is None and not (spec.run_dir / FAILED).exists()
        assert (spec.run_dir / "eval.csv").read_text() == originals[spec.seed]  # the same run, redone
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoadWarning)
        assert len(load_runs(out / "quick").finals) == 4


# -- divergence -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_divergence_is_caught_and_named_on_both_engines(tmp_path, write_env):
    from adaptive_po.analysis import LoadWarning, load_runs

    envs = tmp_path / "envs"
    write_env(envs, "Nan-v1", hyperparams__learning_rate=1e30, hyperparams__max_grad_norm=1e30)  # NaN: FAILED with the cause
    write_env(envs, "Blowup-v1", hyperparams__learning_rate=1e6, hyperparams__max_grad_norm=1e30)  # no NaN: flagged
    cmds = {
        engine: [sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--envs", "Nan-v1,Blowup-v1", "--algos", "ppo",
                 "--seeds", "1", "--lags", "0", "--timesteps", "1024", "--executor", "inline", "--out", str(tmp_path / engine),
                 "--envs-dir", str(envs), "--device", "cpu", "--no-report", "--no-progress", "--engine", engine]
        for engine in ("process", "population")
    }
    running = {engine: subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for engine, cmd in cmds.items()}
    for engine, process in running.items():
        _, err = process.communicate(timeout=600)
        assert process.returncode == 1, err  # one run failed
        failed = [line for line in err.splitlines() if line.startswith("FAILED")]
        assert len(failed) == 1 and "Nan-v1" in failed[0], err
        assert "FloatingPointError: non-finite" in failed[0] and len(failed[0]) < 400, failed[0]
        assert "nan, nan" not in err and "grad_fn" not in err  # the cause, not the tail of a tensor dump
        nan_dir = next((tmp_path / engine).rglob("Nan-v1/ppo/*/seed-0"))
        assert (nan_dir / FAILED).is_file() and not (nan_dir / COMPLETE).exists()
        assert len((nan_dir / FAILED).read_text().splitlines()) < 200  # tensor dumps folded

        blowup = next((tmp_path / engine).rglob("Blowup-v1/ppo/*/seed-0"))
        reason = json.loads((blowup / "summary.json").read_text())["diverged"]
        assert reason and ("cannot be negative" in reason or "collapsed" in reason), reason
        assert "diverged" in err and "Blowup-v1" in [l for l in err.splitlines() if l.startswith("diverged")][0], err
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LoadWarning)
            loaded = load_runs(tmp_path / engine / "quick")
        messages = [str(w.message) for w in caught]
        assert any("diverged" in m and "Blowup-v1" in m for m in messages), messages  # named, kept
        assert any("failed" in m and "Nan-v1" in m for m in messages), messages  # named, scored, not dropped
        assert list(loaded.diverged) == [blowup] and loaded.failed == [nan_dir]
        finals = loaded.finals.set_index("env")
        assert finals["failed"].to_dict() == {"Blowup-v1": False, "Nan-v1": True}
        assert finals.loc["Nan-v1", "final_eval_return_mean"] == finals.loc["Nan-v1", "random_score"]
        assert loaded.evals["env"].unique().tolist() == ["Blowup-v1"]  # a failed run has no curve


def test_cause_lines_and_divergence_rules():
    dump = "\n".join(["        [nan, nan],"] * 300)
    text = (
        "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    g()\n"
        "ValueError: Expected parameter logits (Tensor of shape (256, 2)) found invalid values:\n"
        f"tensor([[nan, nan],\n{dump}\n        [nan, nan]], grad_fn=<SubBackward0>)\n"
    )
    assert error_line(text) == "ValueError: Expected parameter logits (Tensor of shape (256, 2)) found invalid values:"
    assert len(compact_traceback(text).splitlines()) < 12
    assert error_line(FloatingPointError("non-finite loss\nmore")) == "FloatingPointError: non-finite loss"
    healthy = [{"update": 1, "kl_behaviour": 0.0, "kl_behaviour_sampled": -1.5e-9, "approx_kl": 0.01, "entropy": 0.5, "value_loss": 50.0},
               {"update": 2, "kl_behaviour": "", "entropy": 1e-12, "value_loss": 300.0}]  # a deterministic policy is not a divergence
    assert divergence_reason(healthy) is None
    assert "kl_behaviour -2.5e+07 < 0 at update 3" in divergence_reason([*healthy, {"update": 3, "kl_behaviour": -2.5e7}])
    assert "collapsed" in divergence_reason([*healthy, {"update": 3, "entropy": 0.0, "value_loss": 1e14}])


# -- bad destinations and devices -----------------------------------------------------------------
def run_cli(argv: list[str], capsys=None) -> tuple[int, str, str]:
    """``adaptive-po ARGV`` in this process (:mod:`cli_here`): (exit status, stdout, stderr)."""
    done = cli_here([sys.executable, "-m", "adaptive_po", *argv])
    return done.returncode, done.stdout, done.stderr


def test_bad_destinations_devices_and_workers_are_refused_before_compute(tmp_path, capsys):
    import torch

    a_file = tmp_path / "results.txt"
    a_file.write_text("not a folder")
    if os.geteuid() == 0:  # root writes through permissions: use a filesystem that refuses writes
        read_only = Path("/sys/adaptive-po-test")
        try:
            read_only.mkdir()
        except OSError:
            pass
        else:
            read_only.rmdir()
            pytest.skip("no read-only location for root")
    else:
        read_only = tmp_path / "read-only"
        read_only.mkdir()
        read_only.chmod(0o555)
    empty = tmp_path / "empty"
    empty.mkdir()
    missing_gpu = f"cuda:{torch.cuda.device_count()}"
    cases = {
        "a file": (bench_cmd(a_file), "is not a folder"),
        "a file's child": (bench_cmd(a_file / "sub"), "is not a folder"),
        "read-only": (bench_cmd(read_only), "cannot write results"),
        "no such device": (bench_cmd(empty, "--device", missing_gpu), f"'{missing_gpu}'"),
        "workers 0": (bench_cmd(empty, "--workers", "0", "--dry-run"), "--workers must be >= 1"),
        "train into a file": ([sys.executable, "-m", "adaptive_po", "train", "--env", "CartPole-v1", "--timesteps", "1024",
                               "--out", str(a_file), "--device", "cpu"], "is not a folder"),
    }
    # one real command line; the others in this process (the same main(), without the start-up cost)
    real = subprocess.run(cases["a file"][0], env=ENV, capture_output=True, text=True, timeout=300)
    assert real.returncode == 2 and cases["a file"][1] in real.stderr and not real.stdout, real.stderr
    for name, (cmd, needle) in cases.items():
        code, stdout, stderr = run_cli(cmd[3:], capsys)  # without "python -m adaptive_po"
        assert code == 2, (name, stderr)
        assert needle in stderr and "Traceback" not in stderr, (name, stderr)
        assert not stdout, name
    assert a_file.read_text() == "not a folder" and not any(empty.iterdir())
