"""The run-folder contract: what the bench writes and analysis reads, in one place.

One folder per run, ``<out>/<suite>/<env>/<algo>/<condition>/seed-<n>/``, holding:

=================  ====================================================================
``config.json``    the resolved configuration, written first (:data:`CONFIG_REQUIRED`)
``progress.csv``   one row per update (:data:`PROGRESS_COLUMNS`), rewritten during training
``eval.csv``       one row per deterministic evaluation (:data:`EVAL_COLUMNS`)
``tb/``            TensorBoard events (``train/<statistic>`` with the progress names below)
``summary.json``   final evaluation and timing (:data:`SUMMARY_REQUIRED`), written at the end, with
                   the size and sha256 of config.json, progress.csv and eval.csv
``COMPLETE``       written last, only on success: the run is complete iff this file exists; it
                   records the size and sha256 of summary.json (:func:`verify_complete_run`)
``FAILED``         the error and its traceback, only on failure
=================  ====================================================================

Every file is written atomically (:func:`atomic_write`): a temporary file in the same folder,
then ``os.replace``, so a reader never sees half a file. Analysis reads values from
``config.json``, never from folder names.

This module imports the standard library only (no torch, no pandas): the training code and
analysis/ both import it, and analysis imports nothing else of the training code.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from adaptive_po.dials import DIAL_DEFAULTS, DIAL_NAMES, sampler_dials

#: bumped when a file's meaning changes; the bench redoes complete runs of another format
#: (3: the integrity records of summary.json and COMPLETE, :data:`INTEGRITY_FORMAT`)
RUN_FORMAT = 3

CONFIG_FILE = "config.json"
PROGRESS_FILE = "progress.csv"
EVAL_FILE = "eval.csv"
SUMMARY_FILE = "summary.json"
TENSORBOARD_DIR = "tb"
COMPLETE = "COMPLETE"
FAILED = "FAILED"
#: live progress for the sweep's display; not part of the contract
STATUS_FILE = ".status.json"


@dataclass(frozen=True)
class Column:
    """One column of a CSV file of the contract.

    :param required: the file is malformed without this column.
    :param always: every row has a value (otherwise a cell may be empty, e.g. no episode yet).
    """

    name: str
    meaning: str
    required: bool = False
    always: bool = False


#: progress.csv: one row per update (one rollout and one ``train()`` call). The statistics keep
#: one name everywhere: the same key in TensorBoard (``train/<name>``) and in analysis.
PROGRESS_COLUMNS: tuple[Column, ...] = (
    Column("update", "1, 2, ...", required=True, always=True),
    Column("timesteps", "environment steps so far (all envs)", required=True, always=True),
    Column("episodes", "training episodes finished so far"),
    Column("time_elapsed", "seconds since the run started"),
    Column("rollout_return_mean", "mean return of the last 100 finished training episodes (the acting policy, with its lag and noise); empty before the first episode ends"),
    Column("rollout_length_mean", "mean length of the same episodes"),
    Column("ess", "normalized effective sample size of pi_theta/pi_b, mean over the update's minibatches (every algorithm)", required=True),
    Column("ess_min", "the same, minimum over the minibatches"),
    Column("cap_fraction", "fraction of samples whose weight the objective capped or clipped (ESS: weight at e_B; PPO: ratio clipped; 0 for objectives without a cap)"),
    Column("kl_behaviour", "analytic KL(pi_theta || pi_b) over the whole action distribution, from the stored behaviour distribution, mean over minibatches (every algorithm)"),
    Column("kl_behaviour_sampled", "the sampled estimate (log r + 1/r - 1 at the taken action, r = pi_theta/pi_b) of the same KL, mean over minibatches; biased off-policy"),
    Column("kl_weight", "weight of the objective's KL term (ESS: 1 - e_B; 0 for objectives without one)"),
    Column("approx_kl", "KL between the learner at the start of the update and after it, estimated as mean((r - 1) - log r), r = pi_after/pi_start over the update's samples"),
    Column("ratio_max", "max of pi_theta/pi_b over the update"),
    Column("ratio_mean", "mean of pi_theta/pi_b"),
    Column("ratio_above_2", "fraction of pi_theta/pi_b above 2"),
    Column("policy_loss", "the objective's policy term (its KL term excluded), mean over minibatches"),
    Column("value_loss", "mean squared error of the critic against the GAE returns"),
    Column("entropy", "mean entropy of pi_theta (nats)"),
    Column("explained_variance", "explained variance of the fresh batch's returns by the critic's values"),
    Column("learning_rate", "the learning rate used in this update"),
    Column("epsilon", "PQN: epsilon-greedy's epsilon at the update; empty for the policy objectives"),
    Column("behaviour_divergence", "PQN: share of the fresh batch's states whose greedy action the update changed (the after-ABS dial's input); empty for the policy objectives"),
    Column("rollout_steps", "PQN: steps per environment of the update's rollout (moved by the after-ABS dial); empty for the policy objectives"),
)

#: per-update statistics only some algorithms report (PQN's); the others leave their cells empty
OPTIONAL_STATISTICS: tuple[str, ...] = ("epsilon", "behaviour_divergence", "rollout_steps")
#: the per-update statistics of :data:`PROGRESS_COLUMNS`: the keys every algorithm reports
UPDATE_STATISTICS: tuple[str, ...] = tuple(c.name for c in PROGRESS_COLUMNS[6:] if c.name not in OPTIONAL_STATISTICS)

#: eval.csv: deterministic evaluation of the clean current policy on separate environments
EVAL_COLUMNS: tuple[Column, ...] = (
    Column("timesteps", "environment steps at evaluation; the last row is the final evaluation", required=True, always=True),
    Column("eval_return_mean", "mean return over the episodes (raw, unclipped, full games for Atari)", required=True, always=True),
    Column("eval_return_std", "standard deviation of the same returns"),
    Column("eval_episodes", "number of episodes"),
)

#: config.json keys analysis relies on, with their types
CONFIG_REQUIRED: dict[str, type] = {
    "env": str,
    "algo": str,
    "seed": int,
    "policy_lag": int,
    "action_noise": float,
    "replay": int,
    "total_timesteps": int,
}
#: numbers config.json also holds (null allowed)
CONFIG_NUMBERS: tuple[str, ...] = ("random_score", "solved_threshold", "eval_episodes", "eval_freq", "n_envs")

#: summary.json: the keys every complete run's summary has
SUMMARY_REQUIRED: tuple[str, ...] = (
    "final_eval_return_mean",
    "final_eval_return_std",
    "eval_episodes",
    "timesteps",
    "updates",
    "wall_time_s",
    "status",
)

#: the keys that identify a run, and those that identify its data condition. The budget
#: (``total_timesteps``) is part of a run's key: the same cell and seed at 50k and at 100k steps are
#: two different runs, never duplicates, and a missing run is never filled from another budget.
CONDITION_KEYS: tuple[str, ...] = DIAL_NAMES
RUN_KEYS: tuple[str, ...] = ("env", "algo", "variant", *DIAL_NAMES, "total_timesteps", "seed")
#: values of the keys that older run folders (before the sampler dials and variants) lack
RUN_KEY_DEFAULTS: dict[str, Any] = {"variant": "", **{k: DIAL_DEFAULTS[k] for k in ("sampler_temperature", "sampler_precision")}}


def column_names(columns: Iterable[Column]) -> tuple[str, ...]:
    return tuple(c.name for c in columns)


def algo_label(algo: str, variant: str = "") -> str:
    """The algorithm's folder name and label: ``ppo``, or ``ppo@clip_range=0.3`` for a variant
    (knob values other than the defaults, see :mod:`adaptive_po.bench.variants`)."""
    return f"{algo}@{variant}" if variant else algo


#: the characters of a name that becomes one folder of a run's path (suite, environment)
NAME_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+=,@-")
#: the longest such name
NAME_MAX_CHARS = 100


def check_name(kind: str, value: Any) -> str:
    """``value`` if it can be one folder of a run's path, else a ``ValueError`` naming it.

    A name is 1 to :data:`NAME_MAX_CHARS` ASCII letters, digits and ``. _ + = , @ -``, starting
    with a letter or a digit: never a path (no separator, not absolute), never ``.`` or ``..``,
    never a hidden folder (``.logs`` is the sweep's) or something that reads as a flag. ``kind``
    says what the name is for (``"suite name"``, ``"environment name"``)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{kind} must be a non-empty string, got {value!r}")
    if len(value) > NAME_MAX_CHARS:
        raise ValueError(f"{kind} {value[:NAME_MAX_CHARS]!r}... is {len(value)} characters long; the limit is {NAME_MAX_CHARS}")
    if not set(value) <= NAME_CHARACTERS or not value[0].isalnum():
        why = "a path, not a name" if ("/" in value or "\\" in value or value in (".", "..")) else "not a valid name"
        raise ValueError(
            f"{kind} {value!r} is {why}: it becomes one folder under --out, so use letters, digits and . _ + = , @ - "
            "only, starting with a letter or a digit"
        )
    return value


def run_relative_dir(suite: str, env: str, algo: str, condition: str, seed: int) -> Path:
    """``algo`` is the :func:`algo_label` (variant included)."""
    return Path(suite) / env / algo / condition / f"seed-{seed}"


def is_complete(run_dir: str | os.PathLike) -> bool:
    """Whether ``run_dir`` holds a ``COMPLETE`` marker: a file, or a symbolic link in its place
    (never followed: :func:`verify_complete_run` names it, so the run is damaged, not new)."""
    marker = Path(run_dir) / COMPLETE
    return os.path.islink(marker) or marker.is_file()


# -- files opened only as regular files, never through a link -------------------------------------
# Result folders are copied between machines, so a symbolic link can arrive in one (or be planted):
# ``.sweep.lock -> ~/.bashrc``, ``FAILED -> /etc/passwd``. Every file of the project's is opened
# without following a link (O_NOFOLLOW) and must be a regular file, or replaced atomically (the
# link itself is replaced, its target untouched); a link found is named and refused.
class PlantedLink(ValueError):
    """A symbolic link where the project keeps a file or folder of its own (a ``ValueError``: the
    command line's exit code 2, with this message naming the path)."""


def planted_link(path: str | os.PathLike, what: str = "") -> PlantedLink:
    """:class:`PlantedLink` naming ``path`` and where it points."""
    try:
        target = f" -> {os.readlink(path)}"
    except OSError:
        target = ""
    return PlantedLink(
        f"{path}{target} is a symbolic link{f' ({what})' if what else ''}; adaptive-po did not make it and never "
        f"opens its files through a link (results copied from elsewhere may carry one): remove it and rerun"
    )


def report_folder(path: str | os.PathLike, what: str = "the report folder") -> Path:
    """``path``, made with its parents, for a report's files; :class:`PlantedLink` if it is a
    symbolic link (a report writes into folders of its own, never through a link into another
    place)."""
    path = Path(path)
    if os.path.islink(path):
        raise planted_link(path, what)
    path.mkdir(parents=True, exist_ok=True)
    return path


def existing_folder(path: str | os.PathLike, what: str = "the results folder") -> Path:
    """``path``, an existing folder that is not a symbolic link, for a command that only reads a
    study's folder or writes its report into it (a dry run, a selection from the table, a report):
    such a command never makes a folder, so a mistyped path is refused in one ``ValueError`` naming
    it (:class:`PlantedLink` for a link) instead of leaving an empty folder behind."""
    path = Path(path)
    if os.path.islink(path):
        raise planted_link(path, what)
    if not path.exists():
        raise ValueError(f"{path}: {what} does not exist (a dry run or a report makes no folder: check the path)")
    if not path.is_dir():
        raise ValueError(f"{path}: {what} is not a folder")
    return path


def link_problem(path: str | os.PathLike) -> str | None:
    """``"<name> is a symbolic link, not read ..."`` if ``path`` is a link, else None (where it
    points is not said: analysis puts this reason into reports)."""
    if not os.path.islink(path):
        return None
    return f"{Path(path).name} is a symbolic link, not read (adaptive-po never follows one)"


def open_regular(path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """``os.open`` that never follows a link (``O_NOFOLLOW``: :class:`PlantedLink` naming the path)
    and returns a descriptor of a regular file only (a folder or a device: ``ValueError``)."""
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as err:
        if os.path.islink(path):
            raise planted_link(path) from None
        raise err
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file; adaptive-po reads and writes only its own files")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of the regular file ``path``, never read through a link (:func:`open_regular`)."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return fh.read()


def read_regular_text(path: str | os.PathLike, errors: str = "strict") -> str:
    """The UTF-8 text of the regular file ``path``, never read through a link."""
    return read_regular_bytes(path).decode("utf-8", errors=errors)


def check_no_links(root: str | os.PathLike, path: str | os.PathLike) -> None:
    """:class:`PlantedLink` if ``path`` or a folder between ``root`` (excluded) and it is a symbolic
    link: a run's folders are made by the bench, so a link among them came from elsewhere and
    would send its files outside the results."""
    root, path = Path(root), Path(path)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return
    here = root
    for part in parts:
        here = here / part
        if os.path.islink(here):
            raise planted_link(here, "a folder of the results")


# -- atomic files ---------------------------------------------------------------------------------
# -- processes: the owners that lock, staging and attempt names record ---------------------------------
def process_stat(pid: int | str) -> tuple[str, int, int] | None:
    """``(state, parent pid, start time in clock ticks since boot)`` of a process, from
    ``/proc/<pid>/stat`` (the start time, with the pid, names one process even after the pid is
    reused); None where the process or /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def pid_alive(pid: int, proc_start: int | None = None) -> bool:
    """Whether process ``pid`` runs: another user's process does, a zombie does not; with
    ``proc_start`` (:func:`process_stat`'s start time) it must also be that same process, not a
    later one that reuses the pid. The one liveness check of the bench's locks and attempt
    folders, the report's staging folders and the Ray reaper."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    stat = process_stat(pid)
    if stat is None:
        return proc_start is None or not os.path.isdir("/proc")  # gone meanwhile, or no /proc to ask
    return stat[0] != "Z" and (proc_start is None or stat[2] == proc_start)


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: read once at import: setting the umask to read it is not thread-safe
_UMASK = _read_umask()


def atomic_write(path: str | os.PathLike, writer: Callable[[str], None]) -> Path:
    """Call ``writer(tmp_path)``, flush it to disk, then move it onto ``path`` with ``os.replace``.

    The temporary file lives in the target folder (same filesystem), so the replace is atomic; on
    any error it is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes it private; results are meant to be shared
        writer(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return atomic_write(path, write)


def atomic_write_json(path: str | os.PathLike, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def atomic_write_rows(path: str | os.PathLike, columns: Iterable[Column], rows: Iterable[Mapping[str, Any]]) -> Path:
    """A CSV with exactly ``columns`` (a missing key or a NaN is an empty cell)."""
    return atomic_write_text(path, csv_text(columns, rows))


def csv_text(columns: Iterable[Column], rows: Iterable[Mapping[str, Any]], *, header: bool = True) -> str:
    """The text :func:`atomic_write_rows` writes; without ``header``, the rows' lines only (so that
    a writer that appends rows formats each row once: the whole text is the header's plus these)."""
    names = column_names(columns)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n", extrasaction="ignore")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in names})
    return buffer.getvalue()


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def markdown_table(columns: Iterable[Column]) -> str:
    """The columns as the Markdown table that ``runs/README.md`` shows (a test keeps them equal)."""
    lines = ["| column | meaning |", "|---|---|"]
    lines += [f"| `{c.name}` | {c.meaning.replace('|', chr(92) + '|')} |" for c in columns]
    return "\n".join(lines)


# -- integrity of complete runs -------------------------------------------------------------------
# Every file a result depends on is covered by one chain of records, written at completion:
#   COMPLETE (written last)  records the size and sha256 of summary.json (COMPLETE_FILES);
#   summary.json             records those of config.json, progress.csv and eval.csv (SUMMARY_FILES).
# COMPLETE itself holds no result (its finish time and that record): editing it can only break
# the chain. tb/ is not covered: analysis does not read it. The checksums catch any edit, cut or
# swap of a file; they are not a signature (whoever recomputes every record can forge a run).

#: the files whose size and sha256 ``summary.json`` records at completion, under :data:`SUMMARY_FILES`
CHECKED_FILES: tuple[str, ...] = (CONFIG_FILE, PROGRESS_FILE, EVAL_FILE)
#: summary.json key: ``{file name: {"bytes": int, "sha256": hex}}`` for :data:`CHECKED_FILES`
SUMMARY_FILES = "files"
#: COMPLETE key: ``{"summary.json": {"bytes": int, "sha256": hex}}``
COMPLETE_FILES = "files"
#: summary.json key: why a run whose numbers stayed finite diverged anyway (null: it did not)
SUMMARY_DIVERGED = "diverged"
#: summary.json numbers that must be finite where present (``final_eval_return_mean`` always is)
SUMMARY_NUMBERS: tuple[str, ...] = (
    "final_eval_return_mean", "final_eval_return_std", "eval_episodes", "timesteps", "updates", "wall_time_s",
)
#: the first :data:`RUN_FORMAT` with the integrity records above; a complete run of an older
#: format has none, so it is damaged: the bench redoes it, analysis names it and leaves it out
INTEGRITY_FORMAT = 3


def file_record(path: str | os.PathLike) -> dict[str, Any]:
    """``{"bytes": size, "sha256": hex digest}`` of a file."""
    import hashlib

    digest = hashlib.sha256()
    size = 0
    with os.fdopen(open_regular(path), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return {"bytes": size, "sha256": digest.hexdigest()}


def file_records(run_dir: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """:func:`file_record` of each of :data:`CHECKED_FILES` in ``run_dir`` (to record at completion)."""
    return {name: file_record(Path(run_dir) / name) for name in CHECKED_FILES}


def sealed_summary(run_dir: str | os.PathLike, summary: Mapping[str, Any]) -> dict[str, Any]:
    """``summary`` with the records of the run's :data:`CHECKED_FILES` (:data:`SUMMARY_FILES`),
    to be written as its ``summary.json`` once those files are final."""
    return {**summary, SUMMARY_FILES: file_records(run_dir)}


def complete_marker(run_dir: str | os.PathLike, finished_at: str) -> dict[str, Any]:
    """The content of ``COMPLETE`` for a run whose ``summary.json`` is written: the finish time
    (ISO 8601) and the summary's record (:data:`COMPLETE_FILES`)."""
    return {"finished_at": finished_at, COMPLETE_FILES: {SUMMARY_FILE: file_record(Path(run_dir) / SUMMARY_FILE)}}


def write_completion(run_dir: str | os.PathLike, summary: Mapping[str, Any], finished_at: str) -> dict[str, Any]:
    """Complete a run whose ``config.json``, ``progress.csv`` and ``eval.csv`` are final: write
    ``summary.json`` (:func:`sealed_summary`), then ``COMPLETE`` (:func:`complete_marker`), each
    atomically. Returns the summary as written."""
    run_dir = Path(run_dir)
    sealed = sealed_summary(run_dir, summary)
    atomic_write_json(run_dir / SUMMARY_FILE, sealed)
    atomic_write_json(run_dir / COMPLETE, complete_marker(run_dir, finished_at))
    return sealed


def _read_rows(path: Path, columns: Iterable[Column], check_schema: bool) -> tuple[list[str], list[list[str]], str | None]:
    """(header, data rows, problem or None): the file ends with a newline and every row has as many
    cells as the header; the required-and-always cells present are finite numbers (with
    ``check_schema``, the header must also have the required columns, and a cell that is no
    number is a problem too)."""
    try:
        text = read_regular_text(path)
    except FileNotFoundError:
        return [], [], f"{path.name} is missing"
    except PlantedLink:
        return [], [], link_problem(path) or f"{path.name} is a symbolic link, not read"
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return [], [], f"{path.name} cannot be read ({err})"
    if not text.endswith("\n"):
        return [], [], f"{path.name} is cut short (no final newline)"
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return [], [], f"{path.name} is empty"
    header = [name.strip() for name in rows[0]]
    missing = [c.name for c in columns if c.required and c.name not in header] if check_schema else []
    if missing:
        return [], [], f"{path.name} lacks the column(s) {missing} (a cut or damaged header)"
    numeric = [header.index(c.name) for c in columns if c.required and c.always and c.name in header]
    for number, row in enumerate(rows[1:], start=1):
        if len(row) != len(header):
            return [], [], f"{path.name} row {number} has {len(row)} cells, the header {len(header)} (a cut or damaged row)"
        for i in numeric:
            try:
                value = float(row[i])
            except ValueError:
                if check_schema:
                    return [], [], f"{path.name} row {number}: {header[i]} = {row[i]!r} is not a number"
                continue  # analysis reads the columns itself and names a malformed cell
            if not math.isfinite(value):
                return [], [], f"{path.name} row {number}: {header[i]} = {row[i]!r} is not a finite number"
    return header, rows[1:], None


def _check_record(run_dir: Path, name: str, expected: Any, recorded_in: str) -> str | None:
    """Why ``name`` in ``run_dir`` differs from its record in ``recorded_in``, or None."""
    if not isinstance(expected, dict):
        return f"{recorded_in} records no size and checksum for {name}"
    try:
        actual = file_record(run_dir / name)
    except FileNotFoundError:
        return f"{name} is missing"
    except PlantedLink:
        return link_problem(run_dir / name) or f"{name} is a symbolic link, not read"
    except (OSError, ValueError) as err:
        return f"{name} cannot be read ({err})"
    if actual["bytes"] != expected.get("bytes"):
        return f"{name} has {actual['bytes']} bytes, {expected.get('bytes')} at completion"
    if actual["sha256"] != expected.get("sha256"):
        return f"{name} differs from the file recorded at completion (sha256)"
    return None


def _read_object(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the JSON object in ``path``, None) or (None, why it cannot be read)."""
    try:
        data = json.loads(read_regular_text(path))
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except PlantedLink:
        return None, link_problem(path) or f"{path.name} is a symbolic link, not read"
    except (OSError, ValueError) as err:
        return None, f"{path.name} cannot be read ({err})"
    if not isinstance(data, dict):
        return None, f"{path.name} is not a JSON object"
    return data, None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _no_record(run_dir: Path, what: str) -> str:
    """The problem of a complete run without an integrity record, naming an older run format."""
    config, _ = _read_object(run_dir / CONFIG_FILE)
    written = config.get("run_format") if config else None
    if _is_number(written) and written < INTEGRITY_FORMAT:
        return (f"no integrity record ({what}): written by run format {written:g}, before format "
                f"{INTEGRITY_FORMAT} added it (a rerun of the bench redoes it)")
    return f"no integrity record ({what})"


def verify_complete_run(run_dir: str | os.PathLike, check_schema: bool = True) -> str | None:
    """Why the complete run in ``run_dir`` cannot be trusted, or None if it can.

    A run is trusted when it has ``COMPLETE`` and no ``FAILED``; the chain of records holds
    (``COMPLETE`` records ``summary.json``'s size and sha256, ``summary.json`` those of
    ``config.json``, ``progress.csv`` and ``eval.csv``, and every file still matches: a run without
    the records, e.g. one of a run format before :data:`INTEGRITY_FORMAT`, is not trusted);
    ``summary.json``'s numbers (:data:`SUMMARY_NUMBERS`) and ``config.json``'s top-level numbers are
    finite; both CSV files parse (:func:`_read_rows`); ``progress.csv`` has one row per update of
    ``summary.json``'s ``updates``; and ``eval.csv``'s last row, the final evaluation, has the
    ``final_eval_return_mean`` of ``summary.json``.
    The bench redoes a run that fails this; analysis leaves it out and names it. Analysis passes
    ``check_schema=False`` (integrity only): it reads the columns itself and names a malformed
    file in an error of its own.
    """
    run_dir = Path(run_dir)
    if os.path.islink(run_dir):
        return link_problem(run_dir)
    for name in (COMPLETE, FAILED):
        problem = link_problem(run_dir / name)
        if problem:
            return problem
    if not (run_dir / COMPLETE).is_file():
        return "no COMPLETE marker"
    if os.path.lexists(run_dir / FAILED):
        return "both COMPLETE and FAILED markers (two attempts wrote into one folder)"
    marker, problem = _read_object(run_dir / COMPLETE)
    if problem:
        return problem
    records = marker.get(COMPLETE_FILES)
    if not isinstance(records, dict) or SUMMARY_FILE not in records:
        return _no_record(run_dir, f"{COMPLETE} records no checksum of {SUMMARY_FILE}")
    problem = _check_record(run_dir, SUMMARY_FILE, records[SUMMARY_FILE], COMPLETE)
    if problem:
        return problem
    summary, problem = _read_object(run_dir / SUMMARY_FILE)
    if problem:
        return problem
    recorded = summary.get(SUMMARY_FILES)
    if not isinstance(recorded, dict):
        return _no_record(run_dir, f"{SUMMARY_FILE} has no {SUMMARY_FILES!r}")
    for name in CHECKED_FILES:
        problem = _check_record(run_dir, name, recorded.get(name), SUMMARY_FILE)
        if problem:
            return problem
    final = summary.get("final_eval_return_mean")
    if not _is_number(final):
        return f"{SUMMARY_FILE}: final_eval_return_mean = {final!r} is not a number"
    for key in SUMMARY_NUMBERS:
        value = summary.get(key)
        if _is_number(value) and not math.isfinite(value):
            return f"{SUMMARY_FILE}: {key} = {value!r} is not a finite number"
    config, problem = _read_object(run_dir / CONFIG_FILE)
    if problem:
        return problem
    for key, value in config.items():
        if isinstance(value, float) and not math.isfinite(value):
            return f"{CONFIG_FILE}: {key} = {value!r} is not a finite number"
    _, progress_rows, problem = _read_rows(run_dir / PROGRESS_FILE, PROGRESS_COLUMNS, check_schema)
    if problem:
        return problem
    eval_header, eval_rows, problem = _read_rows(run_dir / EVAL_FILE, EVAL_COLUMNS, check_schema)
    if problem:
        return problem
    if not eval_rows:
        return f"{EVAL_FILE} has no evaluation"
    updates = summary.get("updates")
    if not _is_number(updates):
        return f"{SUMMARY_FILE} has no number of updates"
    if len(progress_rows) != updates:
        return f"{PROGRESS_FILE} has {len(progress_rows)} rows, {SUMMARY_FILE} says {updates:g} updates"
    if "eval_return_mean" in eval_header:
        cell = eval_rows[-1][eval_header.index("eval_return_mean")]
        try:
            last = float(cell)
        except ValueError:
            last = None
        if last is not None and not math.isclose(last, final, rel_tol=1e-12, abs_tol=1e-12):
            return (f"{SUMMARY_FILE}: final_eval_return_mean = {final!r}, but the final evaluation "
                    f"(the last row of {EVAL_FILE}) has {cell}")
    return None


# -- the frozen-tuning study's committed files (written by bench.frozen, read by its report) ----------

FROZEN_SEARCH_FOLDER = "frozen-search"
FROZEN_SCORE_FOLDER = "frozen-score"
FROZEN_TABLE_FILE = "per_run.csv"
FROZEN_TRIALS_FILE = "trials.csv"
FROZEN_SELECTION_FILE = "selected.json"
FROZEN_PILOT_SELECTION_FILE = "selection.json"
#: the frozen study's extension under the ESS objective's own update (``docs/results/frozen-schedule/``, its parts,
#: folders and files in its plan file): written by the generic runner, read by the generic report of a searched design
SCHEDULE_SCORE_FOLDER = "schedule-score"
SCHEDULE_RESULTS = "docs/results/frozen-schedule"
FROZEN_RESULTS = "docs/results/frozen"
#: the most environment steps one run may train by default: 400 times the largest budget the suites
#: give (Atari's 2.5M steps, 10M frames); the bench lets ``ADAPTIVE_PO_MAX_TIMESTEPS`` raise it, and a
#: study's report refuses a budget above it
MAX_TIMESTEPS = 1_000_000_000
#: the frozen study's pre-registered plan (docs/results/frozen/preregistration.md): the study runs
#: it, and its report refuses a recorded plan that differs (but for the registered cuts)
FROZEN_REGISTERED: dict[str, Any] = {
    "arms": ("esspo", "ppo", "decoupled-ppo", "vtrace"), "tax_arms": ("esspo", "ppo"), "lags": (0, 1, 2, 4, 8, 16, 64),
    "tax_lag": 8, "search_seeds": (100, 101, 102), "score_seeds": tuple(range(10)), "trials": 16, "round_size": 4, "sampler_seed": 0,
}
#: what the registered cut order may remove, in its order (then the dearest tasks)
FROZEN_CUT_ORDER: dict[str, tuple[Any, ...]] = {"lags": (64,), "arms": ("vtrace",)}
FROZEN_TABLE_COLUMNS: tuple[str, ...] = (
    "folder", "env", "algo", "variant", "policy_lag", "seed", "total_timesteps", "status", "final_eval_return",
    "random_score", "reference", "score", "step", "wall_time_s",
)

#: the column that records each run's configuration: the first 16 hex digits of the SHA-256 of what
#: decides the run (the resolved configuration the bench compares on resume, and the step mode);
#: optional on read, empty in rows written before it existed
FROZEN_CONFIG_COLUMN = "config_sha256"
FROZEN_CONFIG_DIGITS = 16

#: the optional column of a study whose runs differ in their sampler: the sampler's part of the
#: run's condition (:func:`~adaptive_po.dials.sampler_name`: ``T1.2``, ``fp8-e4m3``), "" for the
#: clean sampler. A table whose runs all sample cleanly is written without it.
FROZEN_SAMPLER_COLUMN = "sampler"

#: a study table's run: folder, env, algo, variant, policy_lag, seed, total_timesteps, sampler
FrozenKey = tuple[str, str, str, str, int, int, int, str]

#: the optional column of a study that records each run's learning curve: ``step:return`` pairs
#: (the deterministic evaluations of ``eval.csv``, in step order) separated by spaces; empty for a
#: failed run. A table without the column (the frozen studies') is written without it.
FROZEN_CURVE_COLUMN = "eval_curve"


def parse_curve(text: str) -> list[tuple[int, float]]:
    """The ``(step, return)`` pairs of an :data:`FROZEN_CURVE_COLUMN` cell; a ``ValueError`` naming
    the pair that is not a whole step and a finite return, or steps that do not increase."""
    points: list[tuple[int, float]] = []
    for pair in text.split():
        step, sep, value = pair.partition(":")
        try:
            point = (int(step), float(value))
        except ValueError:
            point = None
        if not sep or point is None or not math.isfinite(point[1]) or point[0] < 0:
            raise ValueError(f"{FROZEN_CURVE_COLUMN} pair {pair!r} is not step:return")
        if points and point[0] <= points[-1][0]:
            raise ValueError(f"{FROZEN_CURVE_COLUMN} steps do not increase at {pair!r}")
        points.append(point)
    return points


def scaled_learning_rate(variant: str, factor: float) -> str:
    """A canonical variant's name (``name=value`` pairs, sorted by name) with its learning-rate
    factor (``learning_rate=x<f>``, x1 where it names none) multiplied by ``factor``, to six
    significant digits: the variant a learning-rate part runs a tuned configuration at."""
    pairs = dict(pair.partition("=")[::2] for pair in variant.split(",") if pair)
    value = float(pairs.get("learning_rate", "x1")[1:])
    pairs["learning_rate"] = "x" + format(float(f"{value * factor:.6g}"), "g")
    return ",".join(f"{name}={text}" for name, text in sorted(pairs.items()))


def frozen_row_key(row: Mapping[str, Any]) -> FrozenKey:
    return (
        str(row["folder"]), str(row["env"]), str(row["algo"]), str(row["variant"] or ""), int(row["policy_lag"]),
        int(row["seed"]), int(row["total_timesteps"]), str(row.get(FROZEN_SAMPLER_COLUMN) or ""),
    )


#: the UTF-8 byte-order mark: spreadsheet programs and some editors put it at the start of a file they save
UTF8_BOM = b"\xef\xbb\xbf"


def read_committed_text(path: str | os.PathLike) -> str:
    """The UTF-8 text of a study's committed file (a table or a selection a person may open in an
    editor), never read through a link (:func:`read_regular_bytes`). A byte-order mark at its start
    is dropped: an editor adds it on saving and it carries no data (the study's next write leaves
    it out). Bytes that are not UTF-8 (a binary file in its place) are a ``ValueError`` naming the
    file and the first bad byte."""
    data = read_regular_bytes(path)
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start:,} is {data[err.start]:#04x}): a binary file or another encoding") from None


def read_committed_json(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON object in a study's committed file (:func:`read_committed_text`); a ``ValueError``
    naming the file when it is empty, not JSON, or not an object."""
    text = read_committed_text(path)
    if not text.strip():
        raise ValueError(f"{path}: the file is empty")
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def one_line_errors(prog: str, run: Callable[[], int]) -> int:
    """``run()``, with a bad input (``ValueError``, ``OSError``: a damaged table, a missing file) told
    in one line naming ``prog`` and exit status 2 instead of a traceback."""
    import sys

    try:
        return run()
    except (ValueError, OSError) as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2


#: a row's score must equal the normalization of its return within this (the table's floats are written in full)
FROZEN_SCORE_TOLERANCE = 1e-9


def read_frozen_table(path: str | os.PathLike) -> dict[FrozenKey, dict[str, Any]]:
    """The committed per-run table, keyed by run (empty where there is none yet), validated on
    every read: a ``ValueError`` naming the file for one that is not UTF-8 or is a link (a dangling
    one too; :func:`read_committed_text`), and the file, the line and the cell for a last line cut
    short (no final newline), a cell that does not parse, a number that is not finite (``wall_time_s``
    may be empty or nan), a status other than ``complete`` or ``failed``, a duplicate run, a ``score`` that
    is not the normalization (return - random) / (reference - random) of its return, or a failed
    run not scored 0 at the task's random return, or a configuration checksum
    (:data:`FROZEN_CONFIG_COLUMN`, optional) that is not one, or a learning curve
    (:data:`FROZEN_CURVE_COLUMN`, optional) that does not parse (:func:`parse_curve`), or a sampler
    (:data:`FROZEN_SAMPLER_COLUMN`, optional) that names no sampler condition. Nothing is trained or rewritten from a
    table that fails, since every study reads it first."""
    path = Path(path)
    if not os.path.lexists(path):
        return {}
    text = read_committed_text(path)
    if text and not text.endswith("\n"):
        raise ValueError(f"{path}, line {text.count(chr(10)) + 1}: the last line is cut short (no newline at its end)")
    reader = csv.DictReader(io.StringIO(text))
    missing = sorted(set(FROZEN_TABLE_COLUMNS) - set(reader.fieldnames or ()))
    if missing:
        raise ValueError(f"{path}: columns {missing} are missing")
    rows: dict[FrozenKey, dict[str, Any]] = {}
    first_line: dict[FrozenKey, int] = {}
    for line, raw in enumerate(reader, start=2):
        try:
            if None in raw or any(value is None for value in raw.values()):
                raise ValueError("the row has a different number of cells from the header")
            row: dict[str, Any] = dict(raw)
            row["variant"] = raw["variant"] or ""
            for name in ("policy_lag", "seed", "total_timesteps"):
                try:
                    row[name] = int(raw[name])
                except ValueError:
                    raise ValueError(f"{name} {raw[name]!r} is not a whole number") from None
            for name in ("final_eval_return", "random_score", "reference", "score", "wall_time_s"):
                if name == "wall_time_s" and raw[name] in ("", "nan"):  # a failed run has no time
                    row[name] = math.nan
                    continue
                try:
                    row[name] = float(raw[name])
                except ValueError:
                    raise ValueError(f"{name} {raw[name]!r} is not a number") from None
                if not math.isfinite(row[name]):
                    raise ValueError(f"{name} {raw[name]!r} is not finite")
            checksum = raw.get(FROZEN_CONFIG_COLUMN)
            row[FROZEN_CONFIG_COLUMN] = checksum = checksum or ""
            if checksum and not (len(checksum) == FROZEN_CONFIG_DIGITS and all(c in "0123456789abcdef" for c in checksum)):
                raise ValueError(f"{FROZEN_CONFIG_COLUMN} {checksum!r} is not {FROZEN_CONFIG_DIGITS} lower-case hex digits")
            if FROZEN_CURVE_COLUMN in raw:
                parse_curve(raw[FROZEN_CURVE_COLUMN])
            row[FROZEN_SAMPLER_COLUMN] = raw.get(FROZEN_SAMPLER_COLUMN) or ""
            sampler_dials(row[FROZEN_SAMPLER_COLUMN])
            if row["status"] not in ("complete", "failed"):
                raise ValueError(f"status {row['status']!r}")
            if row["reference"] == row["random_score"]:
                raise ValueError(f"reference {raw['reference']!r} equals random_score")
            expected = (row["final_eval_return"] - row["random_score"]) / (row["reference"] - row["random_score"])
            if row["status"] == "failed" and (row["score"] != 0.0 or row["final_eval_return"] != row["random_score"]):
                raise ValueError(f"score {raw['score']!r}: a failed run scores 0 at the random return {raw['random_score']}")
            if abs(row["score"] - expected) > FROZEN_SCORE_TOLERANCE * max(1.0, abs(expected)):
                raise ValueError(f"score {raw['score']!r} is not the normalized return {expected!r}")
            key = frozen_row_key(row)
            if key in rows:
                raise ValueError(f"the run {key} is already on line {first_line[key]}")
        except (KeyError, ValueError, TypeError) as err:
            raise ValueError(f"{path}, line {line}: {err}") from None
        rows[key] = row
        first_line[key] = line
    check_table_digest(path, text)  # after the rows: a damaged row is named as such first
    return rows


# ----------------------------------------------------------------------------------------------
# a study table's recorded digest: what the study wrote is what is read


def table_digest_path(path: str | os.PathLike) -> Path:
    """Where a study table's digest is recorded: ``<table>.sha256`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def table_digest(text: str) -> str:
    """The sha256 of a table's text (its UTF-8 bytes, a byte-order mark left out as the readers do)."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_table_digest(path: str | os.PathLike, text: str) -> None:
    """Record the digest of ``text``, just written to the table ``path``, in
    :func:`table_digest_path` (``sha256sum``'s format, so ``sha256sum -c`` checks it too)."""
    path = Path(path)
    atomic_write_text(table_digest_path(path), f"{table_digest(text)}  {path.name}\n")


def check_table_digest(path: str | os.PathLike, text: str | None = None, required: bool = False) -> None:
    """The table ``path`` (its ``text`` where read already) is the one its study wrote: its sha256
    is the one recorded beside it (:func:`record_table_digest`, done by the study at each write).
    A ``ValueError`` naming the table otherwise: a row's result edited consistently (its score
    the normalization of its return), moved or swapped passes every check of the rows, and
    not this one. A table without a recorded digest passes unless ``required`` (the reports of the
    published tables require it; a table a study has not written yet has none)."""
    import re

    path = Path(path)
    where = table_digest_path(path)
    if not os.path.lexists(where):
        if required:
            raise ValueError(f"{path}: no recorded sha256 ({where.name}): a published table's digest is committed beside it, "
                             "written by the study with the table")
        return
    recorded = re.fullmatch(r"([0-9a-f]{64})  (\S+)\n?", read_committed_text(where))
    if recorded is None or recorded.group(2) != path.name:
        raise ValueError(f"{where}: not one sha256 line for {path.name} (\"<64 hex digits>  {path.name}\")")
    now = table_digest(read_committed_text(path) if text is None else text)
    if now != recorded.group(1):
        raise ValueError(
            f"{path}: its sha256 {now[:16]}... is not the {recorded.group(1)[:16]}... recorded in {where.name}: the table was changed "
            "after its study wrote it; restore it (git checkout), or for a correction the study did not make, say why in the commit "
            f"and record it (sha256sum {path.name} > {where.name})"
        )


# ----------------------------------------------------------------------------------------------
# a study table's normalization: the environment files' configuration, not the rows' data

#: the environment files shipped with the package (the bench's default; ``$ADAPTIVE_PO_ENVS`` replaces it)
PACKAGED_ENVS_DIR = Path(__file__).resolve().parent / "env_configs"
#: an environment file is at most this many bytes (the bench's own bound)
ENV_FILE_MAX_BYTES = 256 * 1024


def env_file_scores(env: str, envs_dir: str | os.PathLike | None = None) -> tuple[float, float, Path]:
    """``(random_score, solved_threshold, path)`` of ``<envs_dir>/<env>.yaml`` (default: the
    bench's, ``$ADAPTIVE_PO_ENVS`` or the packaged files), for the readers of a study's table that
    may not import the bench (the reports): YAML's safe loader on a bounded file without aliases,
    the two numbers finite; a ``ValueError`` naming the file otherwise. The bench validates the
    whole file (:func:`adaptive_po.bench.config.get_env_config`); this reads the two numbers a
    table's score is normalized by."""
    import yaml

    name = check_name("environment name", env)
    folder = Path(envs_dir) if envs_dir is not None else Path(os.environ.get("ADAPTIVE_PO_ENVS", "").strip() or PACKAGED_ENVS_DIR)
    path = folder / f"{name}.yaml"
    if not os.path.lexists(path):
        raise ValueError(f"{path}: no environment file for {name!r}, whose random score and reference the table's scores are normalized by")
    raw = read_regular_bytes(path)
    if len(raw) > ENV_FILE_MAX_BYTES:
        raise ValueError(f"{path}: {len(raw):,} bytes; an environment file is at most {ENV_FILE_MAX_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise ValueError("aliases are not read here (an environment file has none)")
        data = yaml.safe_load(text)
    except (UnicodeDecodeError, yaml.YAMLError, ValueError) as err:
        raise ValueError(f"{path}: not an environment file that can be read ({str(err).splitlines()[0] if str(err) else type(err).__name__})") from None
    numbers = []
    for key in ("random_score", "solved_threshold"):
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{path}: {key} must be a finite number, got {value!r}")
        numbers.append(float(value))
    return numbers[0], numbers[1], path


def check_table_normalization(path: str | os.PathLike, table: Mapping[FrozenKey, Mapping[str, Any]],
                              scores: Callable[[str], tuple[float, float, Any]] | None = None) -> None:
    """Each row's ``random_score`` and ``reference`` are its environment file's ``random_score`` and
    ``solved_threshold`` (``scores(env)``, default :func:`env_file_scores`): they are configuration,
    not data, so a row normalized by other numbers (its score consistent with its own cells) is a
    ``ValueError`` naming the table, the row, the cell and the file, not a result."""
    scores = scores or env_file_scores
    known: dict[str, tuple[float, float, Any]] = {}
    for key in sorted(table):
        row = table[key]
        env = key[1]
        if env not in known:
            known[env] = scores(env)
        random_score, reference, where = known[env]
        for column, registered in (("random_score", random_score), ("reference", reference)):
            if float(row[column]) != registered:
                folder, _, algo, variant, lag, seed, budget, sampler = key
                raise ValueError(
                    f"{path}: the row {folder} {env} {algo} {variant or '(defaults)'} lag {lag}{f' sampler {sampler}' if sampler else ''} "
                    f"seed {seed} at {budget:,} steps has "
                    f"{column} {row[column]!r}, not {registered!r} of {where} ({'random_score' if column == 'random_score' else 'solved_threshold'}): "
                    "a task's random score and reference are its environment file's, not a row's"
                )
