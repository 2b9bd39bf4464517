"""Issue 42, item 6: inputs an adversarial user hands the commands are refused in one line (exit 2)
naming the file, the cell and the value, before any compute, never with a traceback.

* the frozen studies' committed files (``per_run.csv``, ``selection.json``, the schedule study's
  ``cuts.json``): a bad cell, an empty or a binary file, a planted link, a task that is a path, a
  budget that is no whole number of steps or is above :data:`~adaptive_po.bench.config.MAX_TIMESTEPS`;
  a UTF-8 byte-order mark at the start of a file is accepted (an editor's, it carries no data);
* a grid's size: more runs than :data:`~adaptive_po.bench.config.MAX_GRID_RUNS` (seeds, dial
  levels, their product) is refused before the grid or its conditions are built, and a seed, an
  environment or an algorithm listed twice is refused in the dry run already;
* an environment file's rollout: ``n_envs``, ``n_steps`` and their product above
  :data:`~adaptive_po.hyperparams.MAX_N_ENVS`, :data:`~adaptive_po.hyperparams.MAX_N_STEPS` and
  :data:`~adaptive_po.hyperparams.MAX_ROLLOUT_STEPS`.

The command-line cases run the real commands on copies of the published results, through the same
``main(argv)`` the module runs, in this process (:mod:`cli_here`); the grid's in a subprocess, under
a memory limit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_here import cli_here
from test_config_limits import ENV, _limit_memory, bench

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "docs" / "results" / "frozen"
SCHEDULE = ROOT / "docs" / "results" / "frozen-schedule"
BINARY = bytes(range(256)) * 4  # not UTF-8 from its 129th byte on
BOM = b"\xef\xbb\xbf"


def study(kind: str, tmp_path: Path) -> tuple[list[str], Path, Path]:
    """(the dry-run command, the folder whose ``per_run.csv`` it reads, the folder whose
    ``selection.json`` it reads) of the frozen study (``frozen``) or its extension (``schedule``),
    on copies of the published folders under ``tmp_path``."""
    published = tmp_path / "frozen"
    shutil.copytree(PUBLISHED, published)
    if kind == "frozen":
        return [sys.executable, "-m", "adaptive_po.bench.study", "dry-run", "--results", str(published), "--out", str(tmp_path / "runs"),
                "--no-progress"], published, published
    results = tmp_path / "frozen-schedule"  # beside the published study, as its plan file's tasks_from reads it
    shutil.copytree(SCHEDULE, results)
    command = [sys.executable, "-m", "adaptive_po.bench.study", "dry-run", "--results", str(results), "--out", str(tmp_path / "runs"), "--no-progress"]
    return command, results, published


def snapshot(*folders: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for folder in folders for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}


def run(command: list[str]) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS...`` in this process (:func:`cli_here`), from the repository's root."""
    return cli_here(command, cwd=ROOT, env=ENV)


def refused(command: list[str], *needles: str) -> str:
    """Run ``command`` (:func:`run`); assert exit 2 and one line on stderr holding every
    needle; return it."""
    done = run(command)
    code, stderr = done.returncode, done.stderr
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1, f"exit {code}:\n{stderr}"
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- the studies' committed files ---------------------------------------------------------------------
def _table_with_a_bad_cell(path: Path) -> str:
    lines = path.read_text().splitlines(keepends=True)
    cells = lines[3].split(",")
    cells[8] = "lots"  # final_eval_return
    lines[3] = ",".join(cells)
    path.write_text("".join(lines))
    return "line 4: final_eval_return 'lots' is not a number"


def _planted(path: Path) -> str:
    target = path.parent.parent / "elsewhere.csv"
    target.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(target)
    return "is a symbolic link"


def _written(data: bytes, needle: str):
    def write(path: Path) -> str:
        path.write_bytes(data)
        return needle

    return write


TABLE_DAMAGE = {
    "bad-cell": _table_with_a_bad_cell,
    "empty": _written(b"", "columns"),
    "binary": _written(BINARY, "not UTF-8 text (byte 128"),
    "planted-link": _planted,
}


@pytest.mark.parametrize("damage", list(TABLE_DAMAGE))
@pytest.mark.parametrize("kind", ["frozen", "schedule"])
def test_a_damaged_table_is_one_line_naming_it(tmp_path, kind, damage):
    command, results, published = study(kind, tmp_path)
    table = results / "per_run.csv"
    needle = TABLE_DAMAGE[damage](table)
    before = snapshot(results, published)
    refused(command, f"{table}", needle)
    assert snapshot(results, published) == before and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("kind", ["frozen", "schedule"])
def test_a_byte_order_mark_at_the_start_of_the_table_is_accepted(tmp_path, kind):
    """Spreadsheet programs and editors save UTF-8 with a byte-order mark; it carries no data, so the
    table reads as without it."""
    command, results, _ = study(kind, tmp_path)
    table = results / "per_run.csv"
    plain = run(command)
    table.write_bytes(BOM + table.read_bytes())
    marked = run(command)
    assert plain.returncode == 0 and marked.returncode == 0, marked.stderr
    assert marked.stderr == plain.stderr  # the same runs in the table, the same plan


def _first_task(**changes):
    """A writer that changes the first task of a ``selection.json``."""

    def write(path: Path) -> None:
        record = json.loads(path.read_text())
        record["tasks"][0].update(changes)
        path.write_text(json.dumps(record))

    return write


SELECTION_DAMAGE = {
    "empty": (_written(b"", ""), "is empty"),
    "binary": (_written(BINARY, ""), "not UTF-8 text (byte 128"),
    "not-json": (_written(b"{tasks: 1}\n", ""), "not valid JSON"),
    "no-tasks": (_written(b"{}\n", ""), "'tasks' must be a list"),
    "task-is-a-path": (_first_task(env="../../etc"), "task 1: environment name '../../etc' is a path"),
    "budget-1e30": (_first_task(budget=1e30), "task 1 (Acrobot-v1): budget is 1e+30, above the limit of 1,000,000,000 environment steps per run"),
    "budget-fraction": (_first_task(budget=50000.5), "task 1 (Acrobot-v1): budget 50000.5 is not a whole number of steps"),
    "budget-text": (_first_task(budget="50000"), "task 1 (Acrobot-v1): budget '50000' is not a whole number of steps"),
    "budget-negative": (_first_task(budget=-5), "task 1 (Acrobot-v1): budget -5 must be at least 1 step"),
    "budget-zero": (_first_task(budget=0), "task 1 (Acrobot-v1): budget 0 must be at least 1 step"),
}


@pytest.mark.parametrize("damage", list(SELECTION_DAMAGE))
@pytest.mark.parametrize("kind", ["frozen", "schedule"])
def test_a_damaged_selection_is_one_line_naming_the_file_task_and_value(tmp_path, kind, damage):
    """The pilot's ``selection.json`` (the schedule study reads the published one's): a task is a
    name and a whole number of steps, at most the run limit; the dry run refuses anything else
    before it estimates (a budget of 1e30 was ~3.7e24 h)."""
    command, results, published = study(kind, tmp_path)
    write, needle = SELECTION_DAMAGE[damage]
    path = published / "selection.json"
    write(path)
    before = snapshot(results, published)
    refused(command, f"{path}", needle)
    assert snapshot(results, published) == before and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "text, needle",
    [
        ("", "is empty"),
        ("[1]\n", "expected a JSON object, got list"),
        ('{"tasks": "LunarLander-v3"}\n', "'tasks' must be a list"),
        ('{"tasks": ["../../etc"]}\n', "tasks ['../../etc'] cannot be cut"),
        ('{"lags": [3]}\n', "lags [3] cannot be cut"),
        ('{"lags": [64]}\n', "expected the keys ['lags', 'parts', 'tasks']"),
        ('{"arms": ["vtrace"]}\n', "unknown key(s) ['arms']"),
    ],
    ids=["empty", "list", "not-a-list", "task-is-a-path", "unknown-lag", "missing-key", "unknown-key"],
)
def test_a_damaged_schedule_cut_is_one_line_naming_it(tmp_path, text, needle):
    command, results, published = study("schedule", tmp_path)
    (results / "cuts.json").write_text(text)
    before = snapshot(results, published)
    refused(command, f"{results / 'cuts.json'}", needle)
    assert snapshot(results, published) == before


def test_a_study_plan_checks_its_budgets_against_the_run_limit():
    from adaptive_po.bench.frozen import StudyPlan

    with pytest.raises(ValueError, match=r"Acrobot-v1: budget is 10,000,000,000, above the limit of 1,000,000,000"):
        StudyPlan(tasks=(("Acrobot-v1", 10**10),)).check()
    with pytest.raises(ValueError, match=r"budget 0 must be at least 1 step"):
        StudyPlan(tasks=(("Acrobot-v1", 0),)).check()


# -- a grid's size --------------------------------------------------------------------------------------
def quick_refusal(tmp_path: Path, *flags: str) -> str:
    """``bench --dry-run`` with ``flags``: refused in one line within seconds and under a memory limit
    (a grid built before its size is checked takes minutes and gigabytes)."""
    started = time.monotonic()
    done = bench(tmp_path, "--dry-run", *flags, timeout=90, preexec_fn=_limit_memory)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert time.monotonic() - started < 60
    assert not (tmp_path / "out").exists()
    return lines[0]


@pytest.mark.parametrize(
    "flags, needles",
    [
        (("--seeds", "1000000"), ("--seeds 1000000: 1,000,000 seeds", "the limit of 100,000 runs per grid")),
        (("--seeds", "100000000000"), ("--seeds 100000000000: 100,000,000,000 seeds", "the limit of 100,000 runs per grid")),
        (("--envs", "CartPole-v1,Pendulum-v1", "--seeds", "20000", "--lags", "0,1,2"),
         ("120,000 runs (2 environments x 1 algorithm configurations x 3 data conditions x 20,000 seeds)",
          "the limit of 100,000 runs per grid")),
        (("--lags", ",".join(map(str, range(1000))), "--noise", ",".join(str(i / 1000) for i in range(1000))),
         ("1,000,000 data conditions", "the limit of 100,000 runs per grid")),
    ],
    ids=["a-million-seeds", "1e11-seeds", "product", "dial-product"],
)
def test_a_grid_above_the_run_limit_is_refused_before_it_is_built(tmp_path, flags, needles):
    line = quick_refusal(tmp_path, *flags)
    for needle in needles:
        assert needle in line, line


@pytest.mark.parametrize(
    "flags, needle",
    [
        (("--seeds", "0,3,0"), "seed 0 is listed twice"),
        (("--envs", "CartPole-v1,CartPole-v1"), "environment 'CartPole-v1' is listed twice"),
        (("--algos", "esspo,ppo,esspo"), "algorithm 'esspo' is listed twice"),
    ],
    ids=["seed", "environment", "algorithm"],
)
def test_a_duplicate_in_the_grid_is_refused_in_the_dry_run_naming_it_and_the_folder(tmp_path, flags, needle):
    line = quick_refusal(tmp_path, *flags)
    assert needle in line and f"{tmp_path / 'out' / 'quick'}" in line, line


def test_seed_counts_are_bounded_before_the_list_is_made():
    from adaptive_po.bench.config import MAX_GRID_RUNS
    from adaptive_po.bench.grid import seeds_from

    assert seeds_from(str(MAX_GRID_RUNS), 3) == list(range(MAX_GRID_RUNS))
    with pytest.raises(ValueError, match=r"--score-seeds 10+: 1,000,000,000,000,000,000 seeds"):
        seeds_from(str(10**18), 3, "--score-seeds")


# -- an environment file's rollout ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes, needles",
    [
        (dict(hyperparams__n_envs=100_000), ("key hyperparams.n_envs is 100,000", "the limit of 4,096")),
        (dict(hyperparams__n_steps=10**7), ("key hyperparams.n_steps is 10,000,000", "the limit of 65,536")),
        (dict(hyperparams__n_envs=4096, hyperparams__n_steps=4096), ("hyperparams.n_envs x n_steps is 4,096 x 4,096 = 16,777,216",
                                                                     "the limit of 1,048,576")),
    ],
    ids=["n_envs", "n_steps", "rollout"],
)
def test_a_rollout_above_the_limits_is_refused_naming_the_file_key_and_value(tmp_path, write_env, changes, needles):
    envs = tmp_path / "envs"
    path = write_env(envs, "Wide-v1", **changes)
    line = quick_refusal(tmp_path, "--envs-dir", str(envs), "--envs", "Wide-v1", "--timesteps", "100000000")
    for needle in (str(path), *needles):
        assert needle in line, line


def test_the_rollout_limits_hold_for_every_shipped_file_and_variant():
    from adaptive_po.bench.config import available_envs, load_env_config
    from adaptive_po.bench.tuning import ScheduleSpace
    from adaptive_po.bench.variants import apply_variant
    from adaptive_po.hyperparams import MAX_ROLLOUT_STEPS

    widest = max(ScheduleSpace().rollout_factors)
    for name, path in available_envs().items():
        hp = load_env_config(path).hyperparams
        assert hp.n_envs * hp.n_steps * widest <= MAX_ROLLOUT_STEPS, name
        apply_variant("esspo", f"n_steps=x{widest:g}", hp, {})  # the schedule study's longest rollout is valid
