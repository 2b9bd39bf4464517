"""The local executors: each job in its own worker process, one torch thread each
(:func:`run_local`); or every job in this process, one after another (:func:`run_inline`).

A worker runs ``python -m adaptive_po _run SPEC`` (one run, the process engine) or
``_run_population SPECS`` (a population) with its output in ``<suite>/.logs``. A worker that dies
without a result has ``FAILED`` written for each of its unfinished runs, so a crash costs that job
only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from adaptive_po.contract import FAILED, STATUS_FILE, SUMMARY_FILE
from adaptive_po.contract import atomic_write_text, check_no_links, is_complete, open_regular, planted_link, read_regular_text
from adaptive_po.bench.jobs import Job, ResultCallback, TickCallback, check_jobs
from adaptive_po.bench.locks import DRIVER_PID_ENV, WORKER_DISK_EXITS, disk_error_text
from adaptive_po.bench.run_folder import RunSpec


@dataclass
class _Active:
    job: Job
    process: subprocess.Popen
    result_path: Path
    log_path: Path
    started: float


def _log_dir(spec: RunSpec) -> Path:
    return Path(spec.out) / spec.suite / ".logs"


def _job_files(job: Job) -> tuple[Path, Path, Path, Path]:
    """``(logs folder, spec file, result file, log file)`` of ``job``: in ``<out>/<suite>/.logs/``,
    named after the (first) run's folder."""
    first = job.specs[0]
    logs = _log_dir(first)
    stem = str(first.relative_dir).replace(os.sep, "__") + (f".population-{len(job.specs)}" if job.population else "")
    return logs, logs / f"{stem}.spec.json", logs / f"{stem}.result.json", logs / f"{stem}.log"


def check_job_files(jobs: Sequence[Job]) -> None:
    """:class:`~adaptive_po.contract.PlantedLink` naming the first of the jobs' ``.logs`` folders and
    files that is a symbolic link, before any worker starts: the log is opened for writing (and
    truncated), so a planted ``<job>.log -> some file`` would destroy its target.
    The spec and result files are replaced atomically (a link in their place is replaced, not
    followed) and read only as regular files; they are refused too, to say it at once."""
    for job in jobs:
        first = job.specs[0]
        logs, *files = _job_files(job)
        check_no_links(Path(first.out) / first.suite, logs)
        for path in files:
            if os.path.islink(path):
                raise planted_link(path, "a worker's file of the sweep")


def _start_local(job: Job) -> _Active:
    """Start ``job``'s worker: ``_run SPEC`` for one run, ``_run_population SPECS`` for a population.

    Its files lie in ``<out>/<suite>/.logs/``, named after the (first) run's folder.
    """
    first = job.specs[0]
    logs, spec_path, result_path, log_path = _job_files(job)
    logs.mkdir(parents=True, exist_ok=True)
    if job.population:
        command, payload = "_run_population", [spec.to_dict() for spec in job.specs]
    else:
        command, payload = "_run", first.to_dict()
    atomic_write_text(spec_path, json.dumps(payload))
    if result_path.exists():
        result_path.unlink()
    # the worker SIGKILLs itself when this driver dies (locks.die_with_driver): no orphans
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", DRIVER_PID_ENV: str(os.getpid())}
    # never through a link: a planted <job>.log -> some file would truncate it
    with os.fdopen(open_regular(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666), "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "adaptive_po", command, str(spec_path), "--result", str(result_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return _Active(job, process, result_path, log_path, time.time())


def _read_results(active: _Active) -> list[dict[str, Any]] | None:
    """The worker's records, one per run of its job, or None if it left none (or a wrong one)."""
    try:
        data = json.loads(read_regular_text(active.result_path))
    except (OSError, ValueError):
        return None
    records = data if active.job.population else [data]
    if not isinstance(records, list) or len(records) != len(active.job.specs) or not all(isinstance(r, dict) for r in records):
        return None
    return records


def _finish_local(active: _Active) -> list[dict[str, Any]]:
    """One record per run of the finished job. A worker that died without its result leaves its
    complete runs as they are and writes ``FAILED`` (with its log's last lines) into the others."""
    records = _read_results(active)
    if records is not None:
        for record in records:  # where its worker said why (the sweep names it with the fall-back)
            if record.get("compile_fallback"):
                record["log"] = str(active.log_path)
        return records
    code = active.process.returncode
    tail = ""
    try:
        tail = "\n".join(read_regular_text(active.log_path, errors="replace").splitlines()[-20:])
    except (OSError, ValueError):
        pass
    error = f"worker process exited with status {code} without a result"
    # stopped by Ctrl-C or SIGTERM (its own handler: 130; or the signal itself): a stop, not the
    # runs' failure, so their folders are left incomplete (never FAILED, which the analysis scores)
    interrupted = code in (130, -signal.SIGINT, -signal.SIGTERM)
    if interrupted:
        error = f"worker process was stopped (exit status {code}) without a result: its runs are left incomplete, a rerun trains them"
    disk = [line.strip() for line in tail.splitlines() if disk_error_text(line)]
    # it could not write its files: say so (the sweep ends on it, see run_sweep)
    disk_error = bool(disk) or code in WORKER_DISK_EXITS
    if disk:
        error += f": {disk[-1]}"
    elif disk_error:
        error += ": it could not write its files (a full disk, a quota or a read-only filesystem)"
    out = []
    for spec in active.job.specs:
        run_dir = spec.run_dir
        record = {"run_dir": str(run_dir), "relative_dir": str(spec.relative_dir)}
        if is_complete(run_dir):  # a population member that finished before its worker died
            try:
                summary = json.loads(read_regular_text(run_dir / SUMMARY_FILE))
                out.append({**record, "status": "complete", "final_return": summary["final_eval_return_mean"], "wall_time_s": summary.get("wall_time_s", 0.0)})
                continue
            except (OSError, ValueError, KeyError):
                pass
        elif not interrupted:
            try:
                run_dir.mkdir(parents=True, exist_ok=True)
                atomic_write_text(run_dir / FAILED, f"{error}\n--- last lines of {active.log_path} ---\n{tail}\n")
            except OSError:
                if not disk_error:
                    raise
                # no room for FAILED either: the run stays incomplete (a rerun redoes it)
        out.append({**record, "status": "failed", "error": error, "disk_error": disk_error})
    return out


def live_timesteps(spec: RunSpec) -> int:
    try:
        return int(json.loads(read_regular_text(spec.run_dir / STATUS_FILE))["timesteps"])
    except (OSError, ValueError, KeyError):
        return 0


def run_local(
    jobs: Sequence[Job],
    workers: int,
    on_result: ResultCallback | None = None,
    on_tick: TickCallback | None = None,
    start_by: float | None = None,
) -> None:
    """Run ``jobs`` (planned by :func:`~adaptive_po.bench.jobs.plan_jobs`) in at most
    ``workers`` concurrent processes.

    ``on_result(spec, record)`` is called once per run when its job ends; ``on_tick`` about every
    quarter second with the runs of the jobs in flight. ``start_by`` (a ``time.monotonic()``
    instant): no job starts after it; the jobs in flight finish, the others are left unstarted
    (a study's slice: its time is checked per population, not per batch of them).
    """
    check_jobs(jobs)
    check_job_files(jobs)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    on_result = on_result or (lambda spec, record: None)
    on_tick = on_tick or (lambda active: None)
    pending = list(jobs)
    active: list[_Active] = []
    try:
        while (pending and not past(start_by)) or active:
            while pending and len(active) < workers and not past(start_by):
                active.append(_start_local(pending.pop(0)))
            time.sleep(0.25)
            still = []
            for item in active:
                if item.process.poll() is None:
                    still.append(item)
                else:
                    for spec, record in zip(item.job.specs, _finish_local(item)):
                        on_result(spec, record)
            active = still
            on_tick([spec for a in active for spec in a.job.specs])
    except BaseException:
        for item in active:
            item.process.terminate()
        for item in active:
            try:
                item.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                item.process.kill()
        raise


def past(start_by: float | None) -> bool:
    """Whether the instant ``start_by`` (``time.monotonic()``; None: never) has passed."""
    return start_by is not None and time.monotonic() >= start_by


def run_inline(jobs: Sequence[Job], on_result: ResultCallback | None = None, start_by: float | None = None) -> None:
    """Run ``jobs`` one after another in this process, with the engines the workers run
    (:func:`~adaptive_po.bench.population_engine.execute_population`,
    :func:`~adaptive_po.bench.process_engine.execute_run`): the same run folders, without a
    worker's start (1.5-4 s of imports each here: torch, torch._dynamo for ``torch.func``, envpool).

    For tiny sweeps, a debugger or a profiler; nothing runs in parallel and nothing isolates a
    crash: a run that kills its process takes the sweep with it (its folder stays unfinished, so a
    rerun redoes it). The engines never raise: a failed run is a ``failed`` record, as from a worker.
    No job starts after ``start_by``, as in :func:`run_local`.
    """
    check_jobs(jobs)
    on_result = on_result or (lambda spec, record: None)
    from adaptive_po.bench.population_engine import execute_population
    from adaptive_po.bench.process_engine import execute_run

    for job in jobs:
        if past(start_by):
            return
        records = execute_population(list(job.specs)) if job.population else [execute_run(job.specs[0])]
        for spec, record in zip(job.specs, records):
            on_result(spec, record)
