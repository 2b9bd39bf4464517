"""The sweep: expand a grid into runs, validate it up front, run it resumably with progress.

The runs to do are split into *jobs* (:func:`adaptive_po.bench.jobs.plan_jobs`), and each job
is one worker process with one torch thread on CPU (:func:`run_local`, here) or one Ray task
(:func:`adaptive_po.bench.ray_executor.run_ray`): both executors take the same planned jobs (and so
does :func:`run_inline`, which runs them one after another in the sweep's own process).
With the population engine (the default) a job is a population: the runs of one environment,
algorithm and budget that differ only in seed and data dials, trained together in one process
(``python -m adaptive_po _run_population SPECS``, :mod:`adaptive_po.bench.population_engine`). Runs
the engine does not support (gSDE, Dict observations), and every run with the process engine, are
jobs of one run (``python -m adaptive_po _run SPEC``).

A crash, a hang killed by the user or a NaN costs that job's runs only: they record themselves as
failed (a worker that dies without a result has ``FAILED`` written for each of its unfinished
runs) and the sweep goes on. A rerun skips complete runs and restarts the others; a complete run
is never removed without a word: a damaged one is redone with its reason printed, and one made
with another configuration (another budget, an edited YAML file) only with ``--redo-changed``
(:class:`ResumePlan`; the dry run lists both). A full disk or a read-only filesystem ends the sweep
with one message (:class:`~adaptive_po.bench.locks.DestinationError`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from adaptive_po.contract import SUMMARY_FILE
from adaptive_po.contract import SUMMARY_DIVERGED
from adaptive_po.bench.jobs import EXECUTORS, check_engine, plan_jobs
from adaptive_po.bench.locks import destination_error, disk_error_text, is_disk_error
from adaptive_po.bench.run_folder import RUN_SAME, RunSpec
from adaptive_po.bench.resume import plan_resume
from adaptive_po.bench.local_executor import live_timesteps, run_inline, run_local


# -- what a rerun does with the runs already there ------------------------------------------------


# -- local execution ------------------------------------------------------------------------------


# -- the sweep with progress ----------------------------------------------------------------------
@dataclass
class SweepResult:
    complete: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    wall_time_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def diverged(self) -> list[dict[str, Any]]:
        """Complete (or skipped) runs whose summary flags a divergence without a NaN."""
        return [r for r in self.complete + self.skipped if r.get("diverged")]


def _diverged(spec: RunSpec) -> str | None:
    try:
        return json.loads((spec.run_dir / SUMMARY_FILE).read_text()).get(SUMMARY_DIVERGED)
    except (OSError, ValueError, AttributeError):
        return None


def run_sweep(
    specs: Sequence[RunSpec],
    workers: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    show_progress: bool = True,
    engine: str = "population",
    redo_changed: bool = False,
    command: str = "bench",
    max_members: int | None = None,
    on_run_done: Callable[[RunSpec], None] | None = None,
    start_by: float | None = None,
) -> SweepResult:
    """Run every spec not yet complete; report progress; return what happened. ``on_run_done(spec)``
    is told each run that finished (complete or failed) as its outcome arrives, before the rest of
    its sweep (a study records it in its table there: a sweep killed later keeps it). ``start_by``
    (a ``time.monotonic()`` instant, local and inline executors): no job (population) starts after
    it, and the runs of the jobs left unstarted are in neither list of the result.

    ``workers``: jobs at once (a population is one job; see
    :func:`~adaptive_po.bench.jobs.plan_jobs` for ``engine`` and ``max_members``, the largest
    population, default :data:`~adaptive_po.bench.jobs.DEFAULT_MAX_MEMBERS`).
    The sweep holds the lock of its folders (``<out>/<suite>``) throughout: a second sweep on
    them is refused (:class:`~adaptive_po.bench.locks.SweepLocked`), and so is a folder that
    cannot be written. A complete run whose files fail
    :func:`~adaptive_po.contract.verify_complete_run` is redone, with the reason printed.
    A complete run made with another configuration (config.json differs from the requested one)
    is redone only with ``redo_changed`` (its differing keys printed); without it the sweep raises
    :class:`ChangedRuns` naming them, before any compute.

    A full disk, an exhausted quota or a read-only filesystem (``ENOSPC``, ``EDQUOT``, ``EROFS``),
    in the driver or reported by a worker, ends the sweep: its workers are stopped and
    :class:`~adaptive_po.bench.locks.DestinationError` (a ``ValueError``: exit code 2) names the
    folder. No run is complete unless its ``COMPLETE`` marker was written, last and atomically, so
    a rerun once there is space again redoes exactly the unfinished runs.
    """
    from adaptive_po.bench.locks import sweep_folders, sweep_lock

    with sweep_lock(sweep_folders(specs)):
        try:
            return _run_sweep(specs, workers, executor, ray_address, show_progress, engine, redo_changed, command, max_members, on_run_done,
                              start_by)
        except OSError as err:
            if is_disk_error(err):  # the workers are stopped already; the lock is released below
                raise destination_error(err, sweep_folders(specs)) from None
            raise


def _run_sweep(
    specs: Sequence[RunSpec],
    workers: int | None,
    executor: str,
    ray_address: str | None,
    show_progress: bool,
    engine: str,
    redo_changed: bool,
    command: str = "bench",
    max_members: int | None = None,
    on_run_done: Callable[[RunSpec], None] | None = None,
    start_by: float | None = None,
) -> SweepResult:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; use {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    if executor == "inline" and workers not in (None, 1):
        raise ValueError(f"the inline executor runs one job at a time in this process, got workers={workers!r}")
    check_engine(engine)
    if start_by is not None and executor not in ("local", "inline"):
        raise ValueError(f"a start deadline needs the local or inline executor, got {executor!r}")
    if executor == "local":
        workers = workers or os.cpu_count() or 1
    # with Ray, no --workers means: as many jobs at once as the cluster's resources allow
    result = SweepResult()
    started = time.time()
    plan = plan_resume(specs)
    plan.check_changed(redo_changed, command=command)  # before any compute: complete runs are never replaced unasked
    todo = plan.todo(redo_changed)
    redo = plan.redo_lines(redo_changed)
    for spec, state in plan.of(RUN_SAME):
        summary = state.summary or {}
        result.skipped.append(
            {
                "relative_dir": str(spec.relative_dir),
                "status": "skipped",
                "final_return": summary.get("final_eval_return_mean"),
                "diverged": summary.get(SUMMARY_DIVERGED),
            }
        )
    console = Console(stderr=True)
    for line in redo:
        console.print(f"[yellow]redo[/yellow]  {escape(line)}; its folder is cleared and the run done again")
    total_steps = sum(s.total_timesteps for s in todo) or 1
    finished_steps = 0
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=not show_progress, refresh_per_second=2) as progress:
        def detail() -> str:
            done = len(result.complete) + len(result.skipped)
            return f"{done}/{len(specs)} runs done, {len(result.failed)} failed, {len(result.skipped)} skipped"

        sweep_task = progress.add_task("sweep", total=total_steps, detail=detail())
        run_tasks: dict[str, Any] = {}
        fallbacks_said: set[str] = set()

        def on_result(spec: RunSpec, outcome: dict[str, Any]) -> None:
            nonlocal finished_steps
            status = outcome.get("status", "failed")
            {"complete": result.complete, "skipped": result.skipped}.get(status, result.failed).append(outcome)
            finished_steps += spec.total_timesteps
            key = str(spec.relative_dir)
            if key in run_tasks:
                progress.remove_task(run_tasks.pop(key))
            fallback = outcome.get("compile_fallback")
            if fallback and executor != "inline" and fallback not in fallbacks_said:
                # a worker's compile fall-back (its own line went to its log): once per sweep and cause
                fallbacks_said.add(fallback)
                where = f"; its worker's log: {outcome['log']}" if outcome.get("log") else ""
                progress.console.print(
                    f"[yellow]compile fell back[/yellow] {escape(key)} (and the runs of its job) ran eagerly: compilation "
                    f"failed ({escape(str(fallback))}){escape(where)}"
                )
            if status == "failed":
                progress.console.print(f"[red]FAILED[/red] {escape(key)}: {escape(str(outcome.get('error', '?')))}")
                if outcome.get("disk_error") or disk_error_text(str(outcome.get("error", ""))):  # all later runs would too
                    raise destination_error(str(outcome["error"]), [Path(spec.out) / spec.suite], run=key)
            elif status == "complete":
                if "diverged" not in outcome:  # the population and Ray engines: from the summary
                    outcome["diverged"] = _diverged(spec)
                flag = f" [yellow]diverged[/yellow]: {escape(outcome['diverged'])}" if outcome["diverged"] else ""
                progress.console.print(
                    f"done  {escape(key)}: return {outcome.get('final_return', float('nan')):.1f} in {outcome.get('wall_time_s', 0):.0f}s{flag}"
                )
            progress.update(sweep_task, completed=finished_steps, detail=detail())
            if on_run_done is not None and status in ("complete", "failed"):
                on_run_done(spec)

        def on_tick(active: list[RunSpec]) -> None:
            live = 0
            for spec in active:
                key = str(spec.relative_dir)
                steps = live_timesteps(spec)
                live += steps
                if key not in run_tasks:
                    run_tasks[key] = progress.add_task(f"  {key}", total=spec.total_timesteps, detail="")
                progress.update(run_tasks[key], completed=steps)
            progress.update(sweep_task, completed=finished_steps + live, detail=detail())

        jobs = plan_jobs(todo, engine, max_members)
        if executor == "local":
            run_local(jobs, workers, on_result, on_tick, start_by=start_by)
        elif executor == "inline":
            run_inline(jobs, on_result, start_by=start_by)
        else:
            from adaptive_po.bench.ray_executor import run_ray

            run_ray(jobs, ray_address=ray_address, on_result=on_result, on_tick=on_tick, max_concurrent=workers)
    for record in result.diverged:
        console.print(
            f"[yellow]diverged[/yellow] {escape(str(record.get('relative_dir')))}: complete, but its numbers "
            f"broke down: {escape(str(record['diverged']))}"
        )
    result.wall_time_s = time.time() - started
    return result


def iter_failed(result: SweepResult) -> Iterable[str]:
    for item in result.failed:
        yield f"{item.get('relative_dir')}: {item.get('error')}"
