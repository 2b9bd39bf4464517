"""Results nobody can silently lose or alter, second pass (issue 32, cases 2, 3, 6b and 8).
Real processes, real signals, real files and real symbolic links; tiny CartPole budgets.

* Case 2: a symbolic link planted where the bench keeps a file of its own (the sweep lock, a
  worker's log, a run folder or a folder above one) is named and refused (exit 2, the path in
  the message), never followed: the link's target is left byte for byte as it was.
* Case 3: analysis reads markers and tables only as regular files inside the results root: a
  ``FAILED``, ``COMPLETE`` or ``summary.json`` link, or a run folder that is a link, leaves that
  run out with the reason, and nothing of the target reaches ``report.md`` or ``runs.csv``.
* Case 6b: ``bench --executor ray --ray-address 127.0.0.1:1`` (nothing listening) fails at once:
  the address is checked with a short TCP connect before Ray starts, one line names it, exit 2.
* Case 8: a stop (SIGTERM) that reaches a worker just after its run's ``COMPLETE`` was written
  leaves the run complete and intact (no ``FAILED`` beside it): the rerun skips it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adaptive_po import contract
from adaptive_po.bench import locks
from adaptive_po.bench.run_folder import RUN_SAME, RunSpec, run_folder_state
from adaptive_po.contract import COMPLETE, FAILED, verify_complete_run
from cli_here import cli_here  # a command line in this process

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "500"}


def tiny_spec(out: Path, **kw) -> RunSpec:
    base = dict(suite="quick", env="CartPole-v1", algo="esspo", seed=0, total_timesteps=1024, out=str(out), device="cpu", tensorboard=False)
    return RunSpec(**{**base, **kw})


# -- case 8: a stop just after COMPLETE leaves a complete run ---------------------------------------
STOP_AT_COMPLETION = textwrap.dedent(
    """
    import json, os, signal, sys
    from adaptive_po import contract
    from adaptive_po.cli import _interrupt
    from adaptive_po.bench.process_engine import execute_run
    from adaptive_po.bench.population_engine import execute_population

    signal.signal(signal.SIGTERM, _interrupt)  # as a sweep's worker has it (cli.main)
    real = contract.write_completion

    def complete_then_stopped(*args, **kwargs):
        written = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # the driver's stop arrives the moment COMPLETE is there
        return written

    contract.write_completion = complete_then_stopped
    engine, spec = sys.argv[1], json.loads(sys.argv[2])
    try:
        execute_population([spec]) if engine == "population" else execute_run(spec)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(0)
    """
)


@pytest.mark.parametrize("engine", ["process", "population"])
def test_a_stop_just_after_complete_leaves_the_run_complete(tmp_path, engine):
    spec = tiny_spec(tmp_path / "runs", total_timesteps=512)
    script = tmp_path / "stop_at_completion.py"
    script.write_text(STOP_AT_COMPLETION)
    worker = subprocess.run([sys.executable, str(script), engine, json.dumps(spec.to_dict())], env=ENV,
                            capture_output=True, text=True, timeout=300)
    assert worker.returncode == 130, worker.stderr  # the signal was acted on, after COMPLETE
    assert (spec.run_dir / COMPLETE).is_file()
    assert not (spec.run_dir / FAILED).exists(), (spec.run_dir / FAILED).read_text()
    assert verify_complete_run(spec.run_dir) is None
    assert run_folder_state(spec).kind == RUN_SAME  # the rerun skips it


# -- case 2: the bench never writes through a link it did not make ---------------------------------
def bench(out: Path, *extra: str, engine: str = "process") -> list[str]:
    return [
        sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--envs", "CartPole-v1", "--algos", "esspo",
        "--seeds", "1", "--lags", "0", "--timesteps", "512", "--workers", "1", "--out", str(out), "--device", "cpu",
        "--no-report", "--no-progress", "--engine", engine, *extra,
    ]


CELL = Path("quick/CartPole-v1/esspo/lag0_noise0_replay0/seed-0")
LOG_STEM = "quick__CartPole-v1__esspo__lag0_noise0_replay0__seed-0"


def precious(tmp_path: Path) -> tuple[Path, bytes]:
    """A file outside the results that a link will point at, and its bytes."""
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    content = b"root:x:0:0:root:/root:/bin/bash SECRET-TOKEN-4711\nsecond line\n"
    target.write_bytes(content)
    return target, content


@pytest.mark.parametrize("planted", [
    ".sweep.lock",
    f".logs/{LOG_STEM}.log",
    f".logs/{LOG_STEM}.result.json",
    ".logs",
    "CartPole-v1",
    "CartPole-v1/esspo/lag0_noise0_replay0/seed-0",
])
def test_a_planted_link_is_named_and_refused_and_its_target_untouched(tmp_path, planted):
    out = tmp_path / "runs"
    target, content = precious(tmp_path)
    link = out / "quick" / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    # a file link for a file of the sweep, a folder link for a folder
    pointed = target if planted.endswith((".lock", ".log", ".json")) else target.parent
    link.symlink_to(pointed)
    before = {p: p.read_bytes() for p in target.parent.rglob("*") if p.is_file()}
    result = cli_here(bench(out), env=ENV)
    assert result.returncode == 2, result.stderr
    assert str(link) in result.stderr and "symbolic link" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert target.read_bytes() == content
    assert {p: p.read_bytes() for p in target.parent.rglob("*") if p.is_file()} == before  # nothing written there
    assert link.is_symlink() and not list(out.rglob(COMPLETE))


def test_links_in_place_of_markers_are_never_followed_by_the_bench(tmp_path):
    """COMPLETE, FAILED and summary.json links in a run folder: the run is redone with the reason
    named (the link is replaced, not followed), and every target is left as it was."""
    from adaptive_po.bench.run_folder import RUN_DAMAGED
    from adaptive_po.bench.process_engine import execute_run

    spec = tiny_spec(tmp_path / "runs", total_timesteps=512)
    target, content = precious(tmp_path)
    for name in (COMPLETE, contract.SUMMARY_FILE, FAILED):
        assert execute_run(spec)["status"] in ("complete", "skipped")
        (spec.run_dir / name).unlink(missing_ok=True)  # FAILED: a link planted beside COMPLETE
        (spec.run_dir / name).symlink_to(target)
        state = run_folder_state(spec)
        assert state.kind == RUN_DAMAGED and f"{name} is a symbolic link" in state.reasons[0], state
        assert f"{name} is a symbolic link" in verify_complete_run(spec.run_dir)
        assert execute_run(spec)["status"] == "complete"
        assert not (spec.run_dir / name).is_symlink() and verify_complete_run(spec.run_dir) is None
        assert target.read_bytes() == content


# -- case 3: analysis reads markers and tables only as regular files inside the results root --------
def test_analysis_names_links_and_reads_nothing_through_them(tmp_path):
    from test_integrity import write_run

    root = tmp_path / "runs" / "quick"
    target, content = precious(tmp_path)
    for seed in range(4):
        write_run(root, "esspo", seed)
        write_run(root, "ppo", seed, final=200.0)
    cell = root / "CartPole-v1" / "esspo" / dials_condition()
    # a failed run whose FAILED is a link to a secret: scored before, its first line in the report
    failed = cell / "seed-0"
    for name in (COMPLETE, contract.SUMMARY_FILE):
        (failed / name).unlink()
    (failed / FAILED).symlink_to(target)
    (cell / "seed-1" / COMPLETE).unlink()
    (cell / "seed-1" / COMPLETE).symlink_to(target)
    (cell / "seed-2" / contract.SUMMARY_FILE).rename(tmp_path / "elsewhere" / "summary.json")
    (cell / "seed-2" / contract.SUMMARY_FILE).symlink_to(tmp_path / "elsewhere" / "summary.json")
    # a whole run folder that is a link to a folder outside the results
    outside = write_run(tmp_path / "elsewhere" / "quick", "esspo", 7, final=499.0)
    (cell / "seed-7").symlink_to(outside)
    before = {p: p.read_bytes() for p in (tmp_path / "elsewhere").rglob("*") if p.is_file()}

    result = cli_here([sys.executable, "-m", "adaptive_po.analysis", str(root), "--resamples", "200"], env=ENV)
    assert result.returncode == 0, result.stderr
    report = (root / "report" / "report.md").read_text()
    runs_csv = (root / "report" / "runs.csv").read_text()
    for text in (report, runs_csv, result.stdout):
        assert "SECRET-TOKEN" not in text and "root:x:0" not in text
        assert "499" not in text  # the linked run folder's result
    for seed, name in ((0, FAILED), (1, COMPLETE), (2, contract.SUMMARY_FILE), (7, "seed-7")):
        line = next(ln for ln in report.splitlines() if f"esspo/{dials_condition()}/seed-{seed}`" in ln)
        assert f"{name} is a symbolic link, not read" in line, line
    for seed in (0, 1, 2, 7):  # left out, not scored or read
        assert f"esspo/{dials_condition()}/seed-{seed}," not in runs_csv
    assert {p: p.read_bytes() for p in (tmp_path / "elsewhere").rglob("*") if p.is_file()} == before


def dials_condition() -> str:
    from adaptive_po import dials

    return dials.condition_name(0, 0.0, 0)


# -- case 6b: a Ray cluster that cannot be reached fails fast ---------------------------------------
def _stop_group(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.mark.xdist_group("ray")  # never beside test_ray's local cluster
def test_an_unreachable_ray_address_is_one_line_and_exit_2_at_once(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "runs"
    started = time.time()
    process = subprocess.Popen(bench(out, "--executor", "ray", "--ray-address", "127.0.0.1:1"), env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = process.communicate(timeout=90)  # before: Ray's warnings for minutes, no error
    finally:
        _stop_group(process)
    assert process.returncode == 2, stderr
    assert time.time() - started < 60
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "127.0.0.1:1" in errors[0] and "timeout 5 s" in errors[0], stderr
    assert "Traceback" not in stderr and "Failed to get cluster ID" not in stderr
    assert not (out / "quick" / locks.LOCK_FILE).exists()


@pytest.mark.xdist_group("ray")
def test_sigterm_while_ray_init_connects_ends_the_bench_within_seconds(tmp_path):
    """An address that accepts TCP but never answers passes the connect checks (the command line's
    and the executor's), and ``ray.init`` then waits on it inside C code. The listener sees the two
    checks' connections, then ``ray.init``'s own: SIGTERM at that moment must end the driver within
    a few seconds (before: about 35-41 s, Ray's own SIGTERM handler waiting for the C call), and the
    sweep's lock is free again."""
    import socket

    pytest.importorskip("ray")
    out = tmp_path / "runs"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(120)
    port = listener.getsockname()[1]
    process = subprocess.Popen(bench(out, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"), env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    held = []
    try:
        for _ in range(3):  # the two connect checks, then ray.init's connection
            connection, _ = listener.accept()
            held.append(connection)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        _stop_group(process)
        for connection in held:
            connection.close()
        listener.close()
    assert process.returncode != 0
    assert took < 10, f"SIGTERM took {took:.1f} s to end the driver while ray.init connected"
    with locks.sweep_lock([out / "quick"]):  # not held by anything left behind
        pass


# -- a report folder that is itself a link: refused, named, its target untouched ----------------------
REPORT_COMMANDS = {
    "r2vpo": ["adaptive_po.analysis.reports.r2vpo", "--table", "docs/results/r2vpo/per_run.csv", "--out", "{out}"],
    "minatar": ["adaptive_po.analysis.reports.minatar", "--table", "docs/results/minatar/per_run.csv", "--out", "{out}"],
    "tuned": ["adaptive_po.analysis.reports.equal_tuning", "--tables", "docs/results/tuned", "--out", "{out}"],
    "fresh-data": ["adaptive_po.analysis.reports.fresh_data", "results", "--table", "docs/results/fresh-data/per_run.csv", "--out", "{out}"],
    "classic": ["adaptive_po.analysis.reports.staleness_and_paper_verdicts", "--table", "docs/results/paper/runs.csv", "--out", "{out}"],
    "quick": ["adaptive_po.analysis.reports.reissue", "{out}"],
    "frozen": ["adaptive_po.analysis.study_report", "--results", "{out}"],
    "frozen-study": ["adaptive_po.bench.study", "dry-run", "--results", "{out}"],
}


@pytest.mark.parametrize("name", sorted(REPORT_COMMANDS))
def test_a_report_folder_that_is_a_link_is_refused_and_its_target_untouched(tmp_path, name):
    repo = Path(__file__).resolve().parents[1]
    target, content = precious(tmp_path)
    link = tmp_path / "report"
    link.symlink_to(target.parent, target_is_directory=True)
    before = sorted(p.name for p in target.parent.iterdir())
    command = [sys.executable, "-m", *(a.format(out=link) for a in REPORT_COMMANDS[name])]
    result = cli_here(command, cwd=repo, env=ENV)
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert f"{link} -> {target.parent} is a symbolic link" in said, said[-2000:]
    assert sorted(p.name for p in target.parent.iterdir()) == before and target.read_bytes() == content
