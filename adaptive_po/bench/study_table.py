"""The run table a pre-registered study keeps, and the runner that fills it: every study's part.

A study (the frozen-tuning study, :mod:`adaptive_po.bench.frozen`; the plan files trained by
:mod:`adaptive_po.bench.study` and :mod:`adaptive_po.bench.searched`) plans runs, trains what its table lacks and
decides from the table alone. What does not depend on the study lives here, once:

* **the table** (``per_run.csv``, its columns in the contract: :data:`~adaptive_po.contract.FROZEN_TABLE_COLUMNS`):
  one row per finished run, keyed by (folder, task, arm, variant, lag, seed, budget, sampler), written
  atomically in key order with floats in full precision (:func:`write_table`), its sha256 recorded
  beside it (``per_run.csv.sha256``, committed with it): every reader checks it, and the reports
  require it, so a result edited, moved or swapped by hand is refused, not published;
* **what a row is**: a complete run's final return, or a divergence scored at the random score
  (:func:`finished_row`, :func:`scored_failure`), with the checksum of the configuration that
  decided it (:func:`config_checksum`), checked against what the study would train now before
  anything runs (:func:`check_configs`, :func:`checked_runner`);
* **the runner** (:class:`TableRunner`): trains only what the table lacks, records every run that
  finished (also when a batch is interrupted), and stops starting batches when a slice's time is
  over (:class:`SliceOver`); one writer per results folder (:func:`results_lock`).

The runs themselves are grids like every bench grid (:func:`specs_for`): one task and arm, its
variants x lags x seeds at one budget, in one folder.
"""

from __future__ import annotations

import csv
import inspect
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from adaptive_po.bench.local_executor import past

from adaptive_po import contract
from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.grid import Grid, expand_grid
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.dials import DataDials, sampler_dials, sampler_name
from adaptive_po.contract import (
    FROZEN_CONFIG_COLUMN as CONFIG_COLUMN, FROZEN_CURVE_COLUMN as CURVE_COLUMN, FROZEN_SAMPLER_COLUMN as SAMPLER_COLUMN,
    FROZEN_TABLE_COLUMNS as TABLE_COLUMNS, FrozenKey as Key, frozen_row_key, read_frozen_table as read_table,
)

row_key = frozen_row_key

#: the suite whose grid checks the runs (every run's budget is given, so no YAML budget is read)
GRID_SUITE = "tuning"


def condition(lag: int, sampler: str = "") -> DataDials:
    """The data condition of a study's run: the policy lag and the sampler (a table's ``sampler``
    cell, :func:`~adaptive_po.dials.sampler_dials`; "" for the clean one)."""
    return DataDials.from_condition({**({"policy_lag": lag} if lag else {}), **sampler_dials(sampler)})


def specs_for(
    env: str, algo: str, variants: Sequence[str], lags: Sequence[int], seeds: Sequence[int], budget: int, folder: str,
    out: str = "runs", envs_dir: str | None = None, device: str = "cpu", sampler: str = "",
) -> list[RunSpec]:
    """The runs of ``variants`` x ``lags`` x ``seeds`` of one task and arm (with ``sampler``'s
    dials), checked like every grid."""
    grid = Grid(
        suite=GRID_SUITE, envs=[env], algos=[algo], seeds=list(seeds), conditions=[condition(lag, sampler) for lag in lags],
        variants={algo: list(dict.fromkeys(variants))}, timesteps=budget, device=device, out=out, suite_name=folder,
        envs_dir=envs_dir, tensorboard=False,
    )
    return expand_grid(grid)


def spec_key(spec: RunSpec) -> Key:
    d = spec.dials
    return (spec.suite, spec.env, spec.algo, spec.variant, int(d.policy_lag), int(spec.seed), int(spec.total_timesteps),
            sampler_name(d.sampler_temperature, d.sampler_precision))


def normalized(value: float, random_score: float, reference: float) -> float:
    return (value - random_score) / (reference - random_score)


# ----------------------------------------------------------------------------------------------
# the table


def write_table(path: str | Path, rows: Mapping[Key, Mapping[str, Any]]) -> None:
    """All rows, in key order, written atomically (floats in full precision: the search is told
    exactly these numbers, on this machine and on the next); with the sampler column where a row's
    sampler is not the clean one, and the learning-curve column where a row has one
    (:data:`~adaptive_po.contract.FROZEN_SAMPLER_COLUMN`, :data:`~adaptive_po.contract.FROZEN_CURVE_COLUMN`)."""
    buf = io.StringIO()
    curves = any(CURVE_COLUMN in row for row in rows.values())
    samplers = any(row.get(SAMPLER_COLUMN) for row in rows.values())
    columns = (*TABLE_COLUMNS, CONFIG_COLUMN, *((SAMPLER_COLUMN,) if samplers else ()), *((CURVE_COLUMN,) if curves else ()))
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for key in sorted(rows):
        row = rows[key]
        writer.writerow({c: (repr(float(row[c])) if isinstance(row.get(c), float) else row.get(c, "")) for c in columns})
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    contract.atomic_write_text(path, buf.getvalue())
    contract.record_table_digest(path, buf.getvalue())  # what the study wrote: the readers check it


def config_checksum(spec: RunSpec, config: Mapping[str, Any] | None = None) -> str:
    """What decides the run ``spec``, as :data:`~adaptive_po.contract.FROZEN_CONFIG_DIGITS` hex
    digits: the resolved configuration the bench writes to ``config.json`` and compares on resume
    (the environment's file after the variant, the dials, the budget, the device and backend; not
    the format version, the folder or the objective's prose), and the step it trains with
    (:func:`step_mode`: a compiled step gives another run than an eager one of the same seed)."""
    import hashlib

    from adaptive_po.bench.run_folder import comparable_config, config_for

    config = comparable_config(config if config is not None else config_for(spec), spec.algo)
    decides = {k: v for k, v in config.items() if k not in ("run_format", "suite")}
    decides["step_mode"] = step_mode(spec)
    text = json.dumps(decides, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[: contract.FROZEN_CONFIG_DIGITS]


def step_mode(spec: RunSpec) -> str:
    """The compile setting as the run ``spec`` feels it, for :func:`config_checksum`: ``"auto"``
    where ``$ADAPTIVE_PO_COMPILE`` (normalized: :func:`~adaptive_po.compile_setup.compile_setting`)
    gives the run the step the default ``auto`` gives it (every published row was trained and
    hashed under ``auto``), else ``"1"`` (compiled where ``auto`` runs it eagerly) or ``"0"``
    (eager where ``auto`` compiles). So ``ADAPTIVE_PO_COMPILE=0`` changes the checksum of the rows
    whose step it changes only, and ``on`` is ``1``."""
    from adaptive_po.compile_setup import compile_setting

    setting = compile_setting()
    if setting == "auto":
        return setting
    from adaptive_po.bench.population_engine import planned_steps
    from adaptive_po.bench.run_folder import read_settings
    from adaptive_po.compiled import wanted_under

    hp = read_settings(spec).hp
    steps = planned_steps(spec.total_timesteps, hp.n_steps * hp.n_envs, hp.batch_size, hp.n_epochs)
    same = wanted_under(setting, steps, hp.policy) == wanted_under("auto", steps, hp.policy)
    return "auto" if same else setting


def row_spec(row: Mapping[str, Any], out: str = "runs", envs_dir: str | None = None) -> RunSpec:
    """The run a table row records, as the study would train it now."""
    return specs_for(
        str(row["env"]), str(row["algo"]), [str(row["variant"] or "")], [int(row["policy_lag"])], [int(row["seed"])],
        int(row["total_timesteps"]), str(row["folder"]), out, envs_dir, sampler=str(row.get(SAMPLER_COLUMN) or ""),
    )[0]


@dataclass
class ConfigCheck:
    """The table's rows against the configuration the study would train now (:func:`check_configs`)."""

    #: rows whose checksum differs from today's: ``key -> "recorded -> now"``
    changed: dict[Key, str] = field(default_factory=dict)
    #: rows written before checksums whose run folder shows today's configuration: ``key -> checksum``
    stamped: dict[Key, str] = field(default_factory=dict)
    #: rows written before checksums with no run folder to check them by (taken as committed)
    unchecked: int = 0

    def lines(self) -> list[str]:
        out = []
        if self.stamped:
            out.append(f"  {len(self.stamped)} rows written before checksums match their run folders' config.json: stamped")
        if self.unchecked:
            out.append(f"  {self.unchecked} rows written before checksums have no run folder here: taken as committed")
        if self.changed:
            out.append(f"  {len(self.changed)} rows were trained with another configuration: trained again (--redo-changed)")
        return out


def check_normalization(table_path: str | Path, rows: Mapping[Key, Mapping[str, Any]], envs_dir: str | None = None) -> None:
    """Each row's random score and reference are its environment file's (the bench's reading of
    it, :func:`~adaptive_po.bench.config.get_env_config`; a ``ValueError`` naming the row and the file
    otherwise: :func:`~adaptive_po.contract.check_table_normalization`). Checked before anything is
    decided or trained from the table, the dry run included."""

    def scores(env: str) -> tuple[float, float, Path]:
        config = get_env_config(env, envs_dir)
        return float(config.random_score), float(config.solved_threshold), config.path

    contract.check_table_normalization(table_path, rows, scores)


def read_checked_table(table_path: str | Path, envs_dir: str | None = None) -> dict[Key, dict[str, Any]]:
    """The table (:func:`~adaptive_po.contract.read_frozen_table`) with its normalization checked
    against the environment files (:func:`check_normalization`)."""
    rows = read_table(table_path)
    check_normalization(table_path, rows, envs_dir)
    return rows


def check_configs(rows: Mapping[Key, Mapping[str, Any]], out: str = "runs", envs_dir: str | None = None) -> ConfigCheck:
    """Each row against the run the study would train now: a row with a checksum is compared with
    :func:`config_checksum` of its run; a row written before checksums (empty cell) is compared,
    where its run folder is here, with the folder's ``config.json`` (the bench's own resume check),
    and stamped when they agree, else left as committed."""
    from adaptive_po.bench.run_folder import RUN_CHANGED, RUN_NEW, config_for, run_folder_state

    check = ConfigCheck()
    for key, row in rows.items():
        spec = row_spec(row, out, envs_dir)
        config = config_for(spec)
        now = config_checksum(spec, config)
        recorded = str(row.get(CONFIG_COLUMN) or "")
        if recorded:
            if recorded != now:
                check.changed[key] = f"{recorded} -> {now}"
            continue
        state = run_folder_state(spec, config)
        if state.kind == RUN_CHANGED:
            check.changed[key] = "; ".join(state.reasons[:3])
        elif state.kind == RUN_NEW or row.get("status") != "complete":
            check.unchecked += 1
        else:  # the same configuration (or a damaged folder of a complete run: its row stands as committed)
            check.stamped[key] = now
    return check


def apply_config_check(check: ConfigCheck, runner: TableRunner, redo_changed: bool) -> None:
    """Refuse a table with changed rows in one line naming the first (a ``ValueError``), or with
    ``redo_changed`` drop them so that they are trained again; stamp the rows checked by their
    folders. Called before anything trains."""
    if check.changed and not redo_changed:
        key, why = next(iter(sorted(check.changed.items())))
        folder, env, algo, variant, lag, seed, budget, sampler = key
        raise ValueError(
            f"{runner.table_path}: {len(check.changed)} runs were trained with another configuration than the study's now "
            f"(first: {folder} {env} {algo} {variant or '(defaults)'} lag {lag}{f' sampler {sampler}' if sampler else ''} seed {seed} "
            f"at {budget:,} steps: {why}); "
            "restore the configuration, or rerun with --redo-changed to train them again"
        )
    for key in check.changed:
        runner.rows.pop(key, None)
    for key, checksum in check.stamped.items():
        if key in runner.rows:
            runner.rows[key] = {**runner.rows[key], CONFIG_COLUMN: checksum}


#: the causes of a run's failure that are the algorithm's own doing (it diverged): the engines'
#: check of the parameters and the loss after each update (``FloatingPointError``), and a policy
#: distribution built from non-finite parameters (torch's constraint check, a ``ValueError``)
DIVERGED_CAUSES: tuple[str, ...] = ("FloatingPointError", "to satisfy the constraint")


def scored_failure(text: str) -> bool:
    """Whether a ``FAILED`` file's ``text`` is a failure of the run itself (a divergence, scored at
    the random score as registered) rather than of what ran it (a killed or crashed worker, an
    invalid setting, a full disk): those are not results, and the run is trained again."""
    from adaptive_po.bench.divergence import error_line

    cause = error_line(text) if text.strip() else ""
    return any(marker in cause for marker in DIVERGED_CAUSES)


def curve_text(run_dir: Path) -> str:
    """A run's learning curve as the table records it: ``step:return`` of each row of ``eval.csv``."""
    text = contract.read_regular_text(run_dir / contract.EVAL_FILE)
    return " ".join(f"{int(r['timesteps'])}:{float(r['eval_return_mean'])!r}" for r in csv.DictReader(io.StringIO(text)))


def finished_row(spec: RunSpec, curve: bool = False) -> dict[str, Any] | None:
    """The table row of a finished run (complete, or failed by diverging); None for a run that did
    not finish, or whose failure was not its own (:func:`scored_failure`): it is run again.
    ``curve``: with the run's learning curve (:func:`curve_text`; empty for a failed run)."""
    env_cfg = get_env_config(spec.env, spec.envs_dir)
    random_score, reference = float(env_cfg.random_score), float(env_cfg.solved_threshold)
    run_dir = spec.run_dir
    base = {
        "folder": spec.suite, "env": spec.env, "algo": spec.algo, "variant": spec.variant,
        "policy_lag": int(spec.dials.policy_lag), "seed": int(spec.seed), "total_timesteps": int(spec.total_timesteps),
        "random_score": random_score, "reference": reference, CONFIG_COLUMN: config_checksum(spec), SAMPLER_COLUMN: spec_key(spec)[-1],
    }
    if contract.is_complete(run_dir):
        try:
            summary = json.loads(contract.read_regular_text(run_dir / contract.SUMMARY_FILE))
            value = float(summary["final_eval_return_mean"])
        except (OSError, ValueError, KeyError, TypeError):
            summary, value = {}, math.nan
        if math.isfinite(value):
            row = {
                **base, "status": "complete", "final_eval_return": value, "score": normalized(value, random_score, reference),
                "step": str(summary.get("step", "")), "wall_time_s": float(summary.get("wall_time_s", math.nan)),
            }
            if curve:
                try:
                    row[CURVE_COLUMN] = curve_text(run_dir)
                except (OSError, ValueError, KeyError, TypeError):
                    return None  # a complete run whose evaluations cannot be read is not taken: it is run again
            return row
    elif not (run_dir / contract.FAILED).is_file():
        return None
    else:
        try:
            text = contract.read_regular_text(run_dir / contract.FAILED, errors="replace")
        except (OSError, ValueError):
            return None
        if not scored_failure(text):
            return None
    # failed (or complete without a finite return): the task's random score, as registered
    failed = {**base, "status": "failed", "final_eval_return": random_score, "score": 0.0, "step": "", "wall_time_s": math.nan}
    return {**failed, CURVE_COLUMN: ""} if curve else failed


class SliceOver(Exception):
    """The slice's time is over: the table holds every finished run; rerun to continue."""


@dataclass
class TableRunner:
    """Runs what the table lacks, then records it. ``train(specs, max_members)`` trains runs (the
    sweep; it skips complete run folders and must not raise for failed runs); one that takes
    ``on_done`` is told each run as it finishes, and the table records that run there and then (a
    slice killed mid-batch keeps every run that finished before, not only the batches before).
    One that takes ``start_by`` is given the slice's ``deadline`` and starts no population after
    it, so a slice ends within one population of its ``--hours`` (:class:`SliceOver` when runs
    were left unstarted), not one batch of populations."""

    table_path: Path
    train: Callable[..., Any]
    deadline: float | None = None
    log: Callable[[str], None] = print
    rows: dict[Key, dict[str, Any]] = field(default_factory=dict)
    #: runs this runner trained (not taken from the table)
    trained: int = 0
    #: record each run's learning curve (:data:`~adaptive_po.contract.FROZEN_CURVE_COLUMN`)
    curves: bool = False

    def __post_init__(self) -> None:
        self.table_path = Path(self.table_path)
        self.rows = read_table(self.table_path)

    def run(self, specs: Sequence[RunSpec], max_members: int | None = None) -> list[dict[str, Any]]:
        """The rows of ``specs`` (in order); runs the ones the table lacks first."""
        unique = list({spec_key(s): s for s in specs}.values())
        todo = [s for s in unique if spec_key(s) not in self.rows]
        if todo and past(self.deadline):
            # the slice is over: runs a stopped slice finished (their folders complete) still count
            todo = self.harvest(todo)
            if todo:
                raise SliceOver()
        if todo:
            takes = inspect.signature(self.train).parameters
            options: dict[str, Any] = {}
            if "on_done" in takes:  # each run recorded as it finishes
                options["on_done"] = lambda spec: self.harvest([spec])
            if "start_by" in takes:  # the slice's time checked before each population, not only each batch
                options["start_by"] = self.deadline
            try:
                self.train(todo, max_members, **options)
            finally:  # interrupted or not, every run that finished is recorded (once)
                todo = self.harvest([s for s in todo if spec_key(s) not in self.rows])
            if todo and past(self.deadline):
                raise SliceOver()  # populations left unstarted at the slice's end
            if todo:
                raise RuntimeError(
                    f"{len(todo)} runs did not finish (first: {todo[0].run_dir}); the table keeps the others: rerun to continue"
                )
        return [self.rows[spec_key(s)] for s in specs]

    def harvest(self, specs: Sequence[RunSpec]) -> list[RunSpec]:
        """Record the runs of ``specs`` whose folders hold their finished run, with the configuration
        the study trains now (the table written once, if any); return the others."""
        from adaptive_po.bench.run_folder import RUN_CHANGED, RUN_DAMAGED, run_folder_state

        left = []
        for spec in specs:
            # a folder trained with another configuration, or damaged, is not this run's (the sweep redoes it)
            row = None if run_folder_state(spec).kind in (RUN_CHANGED, RUN_DAMAGED) else finished_row(spec, curve=self.curves)
            if row is None:
                left.append(spec)
            else:
                self.rows[spec_key(spec)] = row
                self.trained += 1
        if len(left) < len(specs):
            write_table(self.table_path, self.rows)
        return left


def add_run_arguments(parser: Any, hours: bool = True) -> None:
    """The options of a study command that trains: where the run folders go, how many workers,
    progress, redoing changed folders, and (``hours``) the slice's length."""
    parser.add_argument("--out", default="runs", help="results root of the run folders")
    parser.add_argument("--workers", type=int, default=None, help="concurrent jobs (default: one per core)")
    parser.add_argument("--executor", default="local", choices=("local", "inline"), help="local worker processes, or this process one job at a time (inline)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--redo-changed", action="store_true", help="redo complete run folders made with another configuration")
    if hours:
        parser.add_argument("--hours", type=float, default=None, help="this slice's wall-clock hours: no batch starts after them")


def check_run_arguments(args: Any, max_hours: float | None = None) -> None:
    """``--workers`` a whole number of at least 1 and ``--hours`` a finite number above 0 (at most
    ``max_hours`` where given), else a ``ValueError`` naming the option and its value (one line,
    exit 2): checked first, before the results folder or any run is touched (nan and inf included,
    which compare false or pass a plain ``> 0``)."""
    workers = getattr(args, "workers", None)
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    hours = getattr(args, "hours", None)
    if hours is not None and not (math.isfinite(hours) and hours > 0 and (max_hours is None or hours <= max_hours)):
        allowed = f"in (0, {max_hours:g}]" if max_hours is not None else "a finite number > 0"
        raise ValueError(f"--hours must be {allowed}, got {hours}")


def train_with_sweep(workers: int | None, show_progress: bool, redo_changed: bool, command: str = "frozen",
                     executor: str = "local") -> tuple[Callable[..., Any], list[str]]:
    """A study's ``train(specs, max_members)``: the bench's sweep (populations on ``workers``
    cores, or ``executor="inline"`` in this process; complete run folders skipped), and the list
    the failed runs' lines are added to."""
    from adaptive_po.bench.sweep import iter_failed, run_sweep

    failed: list[str] = []

    def train(specs: Sequence[RunSpec], max_members: int | None = None, on_done: Callable[[RunSpec], None] | None = None,
              start_by: float | None = None) -> None:
        result = run_sweep(list(specs), workers=workers, show_progress=show_progress, redo_changed=redo_changed,
                           command=command, max_members=max_members, executor=executor, on_run_done=on_done, start_by=start_by)
        failed.extend(iter_failed(result))

    return train, failed


#: the configuration checks of this process, by the table's rows and what the check depends on
_CHECKED: dict[tuple[str, ...], ConfigCheck] = {}


def checked_runner(
    table_path: Path, train: Callable[..., Any], args: Any, log: Callable[[str], None], deadline: float | None = None, dry: bool = False,
    curves: bool = False,
) -> TableRunner:
    """The table's runner, its rows checked against the configuration the study would train now
    (:func:`check_configs`; ``args``: ``out``, ``envs_dir``, ``redo_changed``): a changed row is
    refused in one line, or dropped to be trained again with ``--redo-changed``. ``dry``: say what
    the check found (the dry run, before the lock). ``curves``: the runner records learning curves."""
    runner = TableRunner(table_path, train, deadline=deadline, log=log, curves=curves)
    check_normalization(table_path, runner.rows, args.envs_dir)
    # the dry check before the lock and the check under it see the same table unless another
    # writer changed it meanwhile: the second check is then the first's (checking costs seconds per
    # thousand rows), else it is done again
    from adaptive_po.compile_setup import compile_setting

    seen = (repr(sorted(runner.rows.items())), str(args.out), str(args.envs_dir), compile_setting())
    check = _CHECKED.get(seen)
    if check is None:
        check = _CHECKED[seen] = check_configs(runner.rows, args.out, args.envs_dir)
    apply_config_check(check, runner, args.redo_changed)
    if dry:
        for line in check.lines():
            log(line)
    elif check.stamped or check.changed:  # under the lock: the stamps and the drops are kept at once
        write_table(table_path, runner.rows)
    return runner


def results_lock(results: Path) -> Any:
    """One writer per study results folder: the bench's sweep lock on it, held while the table,
    the trials and the selection are written; a second study on the same folder is refused
    (:class:`~adaptive_po.bench.locks.SweepLocked`, one line, exit 2) before it trains anything."""
    from adaptive_po.bench.locks import sweep_lock

    return sweep_lock([results])


def preflight() -> None:
    """Settings that would make every run fail, refused before any run (``--dry-run`` included):
    ``$ADAPTIVE_PO_COMPILE`` must be 1, 0 or auto, and the compile path's other variables hold
    what they may (:func:`adaptive_po.compile_setup.check_settings`)."""
    from adaptive_po.compile_setup import check_settings

    check_settings()


