"""Read the run folders the bench writes into tidy pandas frames.

Every schema fact (file names, columns, config keys, markers, condition naming) comes from
:mod:`adaptive_po.contract`, the one run-folder contract (documented in ``runs/README.md``);
nothing else of the training package is imported (the contract imports the standard library only),
so results copied from another machine can be analysed as they are. Keys come from
``config.json``, never from folder names.

**A run's key** is :data:`RUN_KEYS`: env, algorithm, variant, the data dials, the budget
(``total_timesteps``) and the seed. Two runs of one cell at different budgets are two runs, never
duplicates; the loader names every cell that holds several budgets, and the per-cell tables keep
them apart.

**Failures are scored, never dropped.** A ``FAILED`` run folder with a readable ``config.json``
is a row of ``finals`` with ``failed`` True, scored at its environment's random score: its final
return and its AUC are the ``random_score`` of its ``config.json`` (normalized score 0). Leaving
it out would make a method that fails more often look better. Its curves (``eval.csv``,
``progress.csv``) are not loaded. A FAILED folder whose ``config.json`` cannot be read, or gives
no ``random_score``, cannot be scored: it is left out and named. A folder with neither
``COMPLETE`` nor ``FAILED`` (still running, or killed) is left out and named.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from adaptive_po import contract
from adaptive_po.dials import DIAL_DEFAULTS, condition_name

from .labels import pretty_condition
from .stats import auc as _auc
from .stats import common_grid, interpolate_to_grid

__all__ = [
    "RUN_KEYS",
    "CONDITION_KEYS",
    "LoadWarning",
    "LoadedRuns",
    "load_runs",
    "mixed_budget_cells",
    "pretty_condition",  # :func:`adaptive_po.analysis.labels.pretty_condition`, re-exported
]

#: Columns that identify a run (one row per run in ``finals``); the contract's RUN_KEYS as a list,
#: the budget (``total_timesteps``) included.
RUN_KEYS = list(contract.RUN_KEYS)
#: Columns that identify an experimental condition (everything but env, algo and seed).
CONDITION_KEYS = list(contract.CONDITION_KEYS)

_SEED_DIR = re.compile(r"^seed-\d+$")
_MARKERS = (contract.CONFIG_FILE, contract.COMPLETE, contract.FAILED)


@dataclass(frozen=True)
class _CsvSchema:
    """What the loader checks in one CSV file of the contract, derived from its ``Column`` list."""

    required: tuple[str, ...]  # the file is malformed without these columns
    known: tuple[str, ...]  # columns read; others (from a newer bench) are ignored
    always: tuple[str, ...]  # every row has a value (others may be empty, e.g. no episode yet)

    @classmethod
    def of(cls, columns) -> "_CsvSchema":
        return cls(
            required=tuple(c.name for c in columns if c.required),
            known=contract.column_names(columns),
            always=tuple(c.name for c in columns if c.always),
        )


_EVAL = _CsvSchema.of(contract.EVAL_COLUMNS)
_PROGRESS = _CsvSchema.of(contract.PROGRESS_COLUMNS)


class LoadWarning(UserWarning):
    """Runs left out (incomplete, damaged, failed without a score) or scored as failed, cells that
    hold several budgets, and other anomalies found while loading."""


@dataclass
class LoadedRuns:
    """Everything read from one suite root.

    * ``evals``: one row per evaluation: run keys, ``condition``, ``run_dir``, ``timesteps``,
      ``return`` (eval_return_mean), ``return_std``, ``eval_episodes``.
    * ``progress``: one row per update: run keys, ``condition``, ``run_dir`` and the numeric
      columns of ``progress.csv`` (``ess``, ``ratio_max``, ...).
    * ``finals``: one row per complete or failed run: run keys (``algo`` is the label
      ``contract.algo_label(algo, variant)``, so a knob variant is an algorithm of its own;
      ``base_algo`` is config.json's ``algo`` and ``variant`` its variant, ``""`` for the default
      knobs), ``condition``, ``run_dir``, config values
      (``total_timesteps``, ``random_score``, ``solved_threshold``, ...), summary values
      (``final_eval_return_mean`` and ``final_eval_return_std`` are the last row of ``eval.csv``,
      the final evaluation, which the integrity check holds equal to ``summary.json``'s; ...),
      ``auc`` (mean eval return over training: trapezoid on the
      common step grid of the env and budget divided by the step span), ``ess`` (mean over
      updates), ``failed`` (bool) and ``failure`` (the first line of ``FAILED``, ``""`` for a
      complete run). A failed run is scored at its environment's random score:
      ``final_eval_return_mean`` and ``auc`` are its config's ``random_score``; the summary values
      and ``ess`` are NaN; it has no rows in ``evals`` and ``progress``.
    * ``incomplete``: run folders left out (neither ``COMPLETE`` nor ``FAILED``).
    * ``failed``: every ``FAILED`` run folder (without ``COMPLETE``); those with a readable
      ``config.json`` and a ``random_score`` are rows of ``finals``, the others are in
      ``unscored`` with the reason and left out.
    * ``damaged``: complete run folders left out because they fail the integrity check
      (``contract.verify_complete_run``: both markers, a file changed since completion, no
      integrity record (a run folder of a format before ``contract.INTEGRITY_FORMAT``), a
      non-finite number, a final return that is not the last evaluation's, fewer progress rows
      than updates), each with the reason.
    * ``diverged``: complete runs kept but flagged by their ``summary.json`` as diverged without a
      NaN (a negative KL, or the entropy collapsed while the value loss exploded), with the reason.
    * ``notes``: other anomalies (also emitted as :class:`LoadWarning`).
    """

    root: Path
    evals: pd.DataFrame
    progress: pd.DataFrame
    finals: pd.DataFrame
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    incomplete: list[Path] = field(default_factory=list)
    failed: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    damaged: dict[Path, str] = field(default_factory=dict)
    diverged: dict[Path, str] = field(default_factory=dict)
    unscored: dict[Path, str] = field(default_factory=dict)

    @property
    def excluded(self) -> list[Path]:
        """Run folders left out of ``finals``: incomplete, damaged, or failed without a score."""
        return sorted(self.incomplete + list(self.unscored) + list(self.damaged))

    @property
    def scored_failed(self) -> list[Path]:
        """The failed runs that are rows of ``finals`` (scored at the random score)."""
        return [Path(d) for d in self.finals.loc[self.finals["failed"], "run_dir"]]

    @property
    def envs(self) -> list[str]:
        return sorted(self.finals["env"].unique())

    @property
    def algos(self) -> list[str]:
        return sorted(self.finals["algo"].unique())


# --------------------------------------------------------------------------------------------
# discovery


def _find_run_dirs(root: Path) -> list[Path]:
    """Folders that look like run folders: named ``seed-<n>`` or holding a contract file.

    ``<root>/report`` and hidden folders are skipped; a run folder's own subfolders (``tb/``) are
    not searched. A folder that is a symbolic link is never entered (``os.walk`` does not follow links): it is
    returned too, so that :func:`load_runs` names it and leaves it out.
    """
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if _SEED_DIR.match(here.name) or any(m in filenames for m in _MARKERS):
            found.append(here)
            dirnames[:] = []
            continue
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and not (here == root and d == "report")
        )
        found += [here / d for d in dirnames if os.path.islink(here / d)]
    return sorted(found)


def _link_problem(d: Path) -> str | None:
    """Why the run folder ``d`` is not read because of a symbolic link (the folder itself, or its
    markers, config or tables): analysis reads them only as regular files inside the results root,
    never through a link that could point at any file of the machine."""
    if os.path.islink(d):
        return contract.link_problem(d)
    for name in (contract.COMPLETE, contract.FAILED, contract.CONFIG_FILE, contract.SUMMARY_FILE,
                 contract.PROGRESS_FILE, contract.EVAL_FILE):
        problem = contract.link_problem(d / name)
        if problem:
            return problem
    return None


def _rel(path: Path, root: Path) -> str:
    try:
        rel = path.relative_to(root)
        return str(rel) if str(rel) != "." else str(path)
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------------------------
# file readers (each raises ValueError naming the file)


def _read_json(path: Path) -> dict:
    if not path.is_file() or path.is_symlink():
        raise ValueError(f"{path}: missing (a complete run must have it)" if not path.is_symlink()
                         else f"{path}: a symbolic link, not read")
    try:
        data = json.loads(contract.read_regular_text(path))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _parse_config(path: Path) -> dict:
    cfg = _read_json(path)
    missing = [k for k in contract.CONFIG_REQUIRED if k not in cfg]
    if missing:
        raise ValueError(f"{path}: missing required key(s) {missing}")
    out = dict(cfg)
    for key, typ in contract.CONFIG_REQUIRED.items():
        val = cfg[key]
        if typ is str:
            if not isinstance(val, str) or not val:
                raise ValueError(f"{path}: '{key}' must be a non-empty string, got {val!r}")
        elif typ is int:
            if not _is_number(val) or not math.isfinite(val) or float(val) != int(val):
                raise ValueError(f"{path}: '{key}' must be an integer, got {val!r}")
            out[key] = int(val)
        else:
            if not _is_number(val) or not math.isfinite(val):
                raise ValueError(f"{path}: '{key}' must be a number, got {val!r}")
            out[key] = float(val)
    blp = cfg.get("behaviour_log_prob", DIAL_DEFAULTS["behaviour_log_prob"])
    if not isinstance(blp, str) or not blp:
        raise ValueError(f"{path}: 'behaviour_log_prob' must be a string, got {blp!r}")
    out["behaviour_log_prob"] = blp
    # keys that older run folders lack (before the sampler dials and the knob variants)
    for key, default in contract.RUN_KEY_DEFAULTS.items():
        val = cfg.get(key)
        val = default if val is None else val
        if isinstance(default, str):
            if not isinstance(val, str) or (default and not val):
                raise ValueError(f"{path}: '{key}' must be a {'non-empty ' if default else ''}string, got {val!r}")
        elif not _is_number(val) or not math.isfinite(val):
            raise ValueError(f"{path}: '{key}' must be a number, got {val!r}")
        else:
            val = type(default)(val)
        out[key] = val
    for key in contract.CONFIG_NUMBERS:
        val = cfg.get(key)
        if val is None:
            out[key] = float("nan")
        elif not _is_number(val):
            raise ValueError(f"{path}: '{key}' must be a number or null, got {val!r}")
        else:
            out[key] = float(val)
    return out


def _read_csv(path: Path, schema: _CsvSchema) -> pd.DataFrame:
    required, known = schema.required, schema.known
    if not path.is_file() or path.is_symlink():
        raise ValueError(f"{path}: missing (a complete run must have it)" if not path.is_symlink()
                         else f"{path}: a symbolic link, not read")
    try:
        raw = pd.read_csv(io.BytesIO(contract.read_regular_bytes(path)))
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path}: empty file, expected a CSV header with columns {list(required)}") from exc
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot parse CSV ({exc})") from exc
    raw.columns = [str(c).strip() for c in raw.columns]
    missing = [c for c in required if c not in raw.columns]
    if missing:
        raise ValueError(
            f"{path}: missing required column(s) {missing}; found {list(raw.columns)}"
        )
    if len(raw) == 0:
        raise ValueError(f"{path}: no data rows")
    out = pd.DataFrame(index=raw.index)
    for col in raw.columns:
        if col not in known and col not in required:
            continue  # columns added by a newer bench are ignored, not guessed at
        values = pd.to_numeric(raw[col], errors="coerce")
        bad = values.isna() & raw[col].notna()
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(
                f"{path}: non-numeric value {raw[col].iloc[i]!r} in column '{col}' "
                f"(data row {i + 1})"
            )
        out[col] = values.astype(float)
    for col in schema.always:
        if out[col].isna().any():
            i = int(np.flatnonzero(out[col].isna().to_numpy())[0])
            raise ValueError(f"{path}: empty value in required column '{col}' (data row {i + 1})")
    return out


# summary.json keys that would clash with a config.json value of the same name in ``finals``
_SUMMARY_RENAME = {"timesteps": "final_timesteps", "eval_episodes": "final_eval_episodes"}


def _parse_summary(path: Path) -> dict:
    s = _read_json(path)
    val = s.get("final_eval_return_mean")
    if not _is_number(val) or not math.isfinite(val):
        raise ValueError(f"{path}: 'final_eval_return_mean' must be a finite number, got {val!r}")
    out = {"final_eval_return_mean": float(val)}
    for key in contract.SUMMARY_REQUIRED:
        if key in out or key == "status":
            continue
        v = s.get(key)
        out[_SUMMARY_RENAME.get(key, key)] = float(v) if _is_number(v) else float("nan")
    out["status"] = s.get("status")
    return out


# --------------------------------------------------------------------------------------------
# main entry point


def _warn(msg: str, notes: list[str]) -> None:
    notes.append(msg)
    warnings.warn(msg, LoadWarning, stacklevel=3)


def _list_paths(paths: list[Path], root: Path, limit: int = 20) -> str:
    names = [_rel(p, root) for p in paths]
    text = ", ".join(names[:limit])
    if len(names) > limit:
        text += f", ... and {len(names) - limit} more"
    return text


def _list_reasons(reasons: dict[Path, str], root: Path, limit: int = 20) -> tuple[str, str]:
    """(``"a/seed-0 (why); b/seed-1 (why)"`` for the first ``limit`` folders, ``"; ... and N more"`` or ``""``)."""
    listed = "; ".join(f"{_rel(d, root)} ({why})" for d, why in list(reasons.items())[:limit])
    return listed, (f"; ... and {len(reasons) - limit} more" if len(reasons) > limit else "")


def _failure_line(path: Path) -> str:
    """The first non-empty line of a ``FAILED`` file (the error), at most 300 characters."""
    try:
        text = contract.read_regular_text(path, errors="replace")
    except (OSError, ValueError) as exc:  # a link (never followed) or a folder in its place
        return f"FAILED cannot be read ({exc})"
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:300]


def _keys(cfg: dict, d: Path) -> dict:
    """The run keys of ``finals`` (and of ``evals`` / ``progress``) from a parsed config."""
    keys = {k: cfg[k] for k in RUN_KEYS}
    # a knob variant acts as an algorithm of its own in every table and figure
    keys["algo"] = contract.algo_label(cfg["algo"], cfg["variant"])
    keys["base_algo"] = cfg["algo"]
    keys["condition"] = condition_name(**{k: cfg[k] for k in CONDITION_KEYS})
    keys["run_dir"] = str(d)
    return keys


def _failed_row(d: Path) -> tuple[dict | None, dict | None, str | None]:
    """(row of ``finals``, parsed config, None) for a FAILED run scored at its environment's random
    score, or (None, None, why it cannot be scored)."""
    if not (d / contract.CONFIG_FILE).is_file():
        return None, None, f"no {contract.CONFIG_FILE}"
    try:
        cfg = _parse_config(d / contract.CONFIG_FILE)
    except ValueError as exc:
        return None, None, str(exc)
    random_score = cfg["random_score"]
    if not math.isfinite(random_score):
        return None, None, "its config.json has no random_score to score it at"
    row = _keys(cfg, d)
    row.update({k: cfg[k] for k in ("total_timesteps",) + tuple(contract.CONFIG_NUMBERS)})
    row["suite"] = cfg.get("suite")
    nan = float("nan")
    row.update(
        final_eval_return_mean=random_score, final_eval_return_std=nan, final_eval_episodes=nan,
        final_timesteps=nan, updates=nan, wall_time_s=nan, last_eval_timesteps=nan, ess=nan,
        auc=random_score, failed=True, failure=_failure_line(d / contract.FAILED),
    )
    return row, cfg, None


def mixed_budget_cells(finals: pd.DataFrame) -> list[str]:
    """One line per cell (env, algorithm, condition) of ``finals`` that holds runs at several
    budgets (``total_timesteps``), naming the budgets and their run counts."""
    lines = []
    cols = ["env", "algo", "condition"]
    for key, g in finals.groupby(cols, sort=True):
        counts = g.groupby("total_timesteps").size()
        if len(counts) > 1:
            lines.append(f"{' '.join(map(str, key))}: " + ", ".join(
                f"{int(t):,} steps ({n} run{'s' if n != 1 else ''})" for t, n in counts.items()))
    return lines


def load_runs(root: str | os.PathLike) -> LoadedRuns:
    """Load every run folder under a suite root (e.g. ``runs/quick``).

    Complete runs (``COMPLETE``, passing the integrity check) are read whole. Failed runs
    (``FAILED``) are scored, never dropped: each is a row of ``finals`` with ``failed`` True and
    its config's ``random_score`` as its final return and AUC (normalized 0), announced with a
    :class:`LoadWarning` naming its folder; one whose ``config.json`` cannot be read or has no
    ``random_score`` is left out and named. Incomplete runs (neither marker) and damaged ones are
    left out, listed in the result and named in a :class:`LoadWarning`. A cell (env, algorithm,
    condition) holding runs at several budgets is named in a :class:`LoadWarning` too: the budget
    is part of a run's key (:data:`RUN_KEYS`), so those runs are not duplicates, and the tables
    keep the budgets apart. A malformed file in a complete run raises ``ValueError`` naming the
    file and the problem; so does a root with no run folder or no complete run, and two runs
    (complete or failed) with the same key (env, algo, variant, condition, budget, seed).
    """
    root = Path(root)
    if not root.exists():
        raise ValueError(f"{root}: no such directory")
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    run_dirs = _find_run_dirs(root)
    if not run_dirs:
        raise ValueError(
            f"{root}: no run folders found (expected <env>/<algo>/<condition>/seed-<n>/ with {contract.CONFIG_FILE})"
        )

    notes: list[str] = []
    incomplete: list[Path] = []
    failed: list[Path] = []
    complete: list[Path] = []
    damaged: dict[Path, str] = {}
    for d in run_dirs:
        link = _link_problem(d)
        if link is not None:  # never read: left out with the reason, like a damaged run
            damaged[d] = link
            continue
        has_complete = contract.is_complete(d)
        has_failed = os.path.lexists(d / contract.FAILED)
        if has_complete:
            # never trusted unchecked: both markers, a file changed since completion, no
            # integrity record, a non-finite number, a final return other than eval.csv's last
            # row, or fewer progress rows than summary.json's updates leave the run out, named
            problem = contract.verify_complete_run(d, check_schema=False)
            if problem is None:
                complete.append(d)
            else:
                damaged[d] = problem
        elif has_failed:
            failed.append(d)
        else:
            incomplete.append(d)

    if incomplete:
        _warn(f"left out {len(incomplete)} incomplete run(s) (no COMPLETE or FAILED marker) under {root}: "
              f"{_list_paths(incomplete, root)}", notes)
    if damaged:
        listed, more = _list_reasons(damaged, root)
        _warn(f"left out {len(damaged)} run(s) that fail the integrity check or hold a symbolic link "
              f"(never followed; rerun the bench to redo them) under {root}: {listed}{more}", notes)
    if not complete:
        raise ValueError(
            f"{root}: no complete runs ({len(incomplete)} incomplete, {len(failed)} failed, "
            f"{len(damaged)} failing the integrity check, of {len(run_dirs)} run folders)"
        )

    run_rows: list[dict] = []
    eval_frames: list[pd.DataFrame] = []
    progress_frames: list[pd.DataFrame] = []
    configs: dict[str, dict] = {}
    diverged: dict[Path, str] = {}
    for d in complete:
        cfg = _parse_config(d / contract.CONFIG_FILE)
        summary = _parse_summary(d / contract.SUMMARY_FILE)
        reason = _read_json(d / contract.SUMMARY_FILE).get(contract.SUMMARY_DIVERGED)
        if reason:
            diverged[d] = str(reason)
        ev = _read_csv(d / contract.EVAL_FILE, _EVAL)
        pr = _read_csv(d / contract.PROGRESS_FILE, _PROGRESS)
        # the final return is eval.csv's last row (the contract's final evaluation), the data
        # itself; the integrity check has held summary.json's copy equal to it
        summary["final_eval_return_mean"] = float(ev["eval_return_mean"].iloc[-1])
        if "eval_return_std" in ev.columns and not math.isnan(ev["eval_return_std"].iloc[-1]):
            summary["final_eval_return_std"] = float(ev["eval_return_std"].iloc[-1])
        if summary["status"] not in (None, "complete"):
            _warn(f"{d / contract.SUMMARY_FILE}: status is {summary['status']!r} although COMPLETE exists", notes)

        keys = _keys(cfg, d)
        configs[str(d)] = cfg

        ev = ev.sort_values("timesteps", kind="stable").drop_duplicates("timesteps", keep="last")
        ev = ev.rename(columns={"eval_return_mean": "return", "eval_return_std": "return_std"})
        eval_frames.append(ev.assign(**keys).reset_index(drop=True))
        pr = pr.sort_values(["timesteps", "update"], kind="stable")
        progress_frames.append(pr.assign(**keys).reset_index(drop=True))

        row = dict(keys)
        row.update({k: cfg[k] for k in ("total_timesteps",) + tuple(contract.CONFIG_NUMBERS)})
        row["suite"] = cfg.get("suite")
        row.update({k: v for k, v in summary.items() if k != "status"})
        row["last_eval_timesteps"] = float(ev["timesteps"].iloc[-1])
        row["ess"] = float(pr["ess"].mean())
        row["failed"] = False
        row["failure"] = ""
        run_rows.append(row)

    # failed runs: scored at their environment's random score, counted, never dropped
    scored_failed: list[Path] = []
    unscored: dict[Path, str] = {}
    failed_rows: list[dict] = []
    for d in failed:
        row, cfg, why = _failed_row(d)
        if row is None:
            unscored[d] = why
            continue
        configs[str(d)] = cfg
        failed_rows.append(row)
        scored_failed.append(d)
    if scored_failed:
        _warn(f"scored {len(scored_failed)} failed run(s) (FAILED marker) at their environment's random score "
              f"(random_score of config.json; normalized 0), counted in every table, under {root}: "
              f"{_list_paths(scored_failed, root)}", notes)
    if unscored:
        listed, more = _list_reasons(unscored, root)
        _warn(f"left out {len(unscored)} failed run(s) (FAILED marker) that cannot be scored under {root}: "
              f"{listed}{more}", notes)

    finals = pd.DataFrame(run_rows)
    if failed_rows:
        finals = pd.concat([finals, pd.DataFrame(failed_rows)], ignore_index=True)
    finals["failed"] = finals["failed"].astype(bool)
    if diverged:
        listed, more = _list_reasons(diverged, root)
        _warn(f"flagged {len(diverged)} complete run(s) as diverged without a NaN (kept in the tables; "
              f"summary.json 'diverged'): {listed}{more}", notes)
    dup = finals[finals.duplicated(RUN_KEYS, keep=False)]
    if not dup.empty:
        groups = dup.groupby(RUN_KEYS, sort=True)["run_dir"].apply(list)
        first_key, dirs = next(iter(groups.items()))
        raise ValueError(
            f"{len(groups)} run key(s) appear in more than one run folder, e.g. "
            f"{dict(zip(RUN_KEYS, first_key))} in {dirs}; remove the duplicates before analysing"
        )
    mixed = mixed_budget_cells(finals)
    if mixed:
        _warn(f"{len(mixed)} cell(s) hold runs at several budgets (total_timesteps is part of a run's key: "
              f"they are different runs, kept apart in the per-cell tables) under {root}: "
              + "; ".join(mixed[:20]) + (f"; ... and {len(mixed) - 20} more" if len(mixed) > 20 else ""), notes)
    suites = sorted({s for s in finals["suite"].dropna().unique()})
    if len(suites) > 1:
        _warn(f"{root}: runs from several suites are mixed: {suites}", notes)

    key_cols = RUN_KEYS + ["base_algo", "condition", "run_dir"]
    evals = pd.concat(eval_frames, ignore_index=True)
    progress = pd.concat(progress_frames, ignore_index=True)
    evals = evals[key_cols + [c for c in evals.columns if c not in key_cols]]
    progress = progress[key_cols + [c for c in progress.columns if c not in key_cols]]

    # AUC on a common step grid per env and budget, so runs that log at different steps stay
    # comparable; a failed run's AUC is its random score (set above)
    aucs: dict[str, float] = {}
    for _key, ev_env in evals.groupby(["env", "total_timesteps"], sort=True):
        by_run = list(ev_env.groupby("run_dir", sort=False))
        grid = common_grid([g["timesteps"].to_numpy() for _, g in by_run])
        for run_dir, g in by_run:
            curve = interpolate_to_grid(g["timesteps"].to_numpy(), g["return"].to_numpy(), grid)
            aucs[run_dir] = _auc(grid, curve)
    finals["auc"] = np.where(finals["failed"], finals["random_score"], finals["run_dir"].map(aucs)).astype(float)

    sort_cols = RUN_KEYS
    finals = finals.sort_values(sort_cols, kind="stable").reset_index(drop=True)
    evals = evals.sort_values(sort_cols + ["timesteps"], kind="stable").reset_index(drop=True)
    progress = progress.sort_values(sort_cols + ["timesteps"], kind="stable").reset_index(drop=True)
    return LoadedRuns(
        root=root, evals=evals, progress=progress, finals=finals, configs=configs,
        incomplete=incomplete, failed=failed, notes=notes, damaged=damaged, diverged=diverged, unscored=unscored,
    )


def run_reporting(make: Callable[[], Any]) -> Any | None:
    """Call ``make()`` (a report builder) for a command line: print the warnings it raised, and
    its ``ValueError`` as an error line; returns its result, or None after an error."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, error = make(), None
        except ValueError as exc:
            result, error = None, exc
    for w in caught:
        kind = "" if issubclass(w.category, LoadWarning) else f" ({w.category.__name__})"
        print(f"warning{kind}: {w.message}", file=sys.stderr)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
    return result

