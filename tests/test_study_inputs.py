"""The study commands' inputs (issue 67, B16-B18): a bad --workers or --hours is refused in one
line naming it with exit status 2 before anything is read or run; a dry run and a report never make
a results folder that is missing (one line naming it, exit 2); the schedule report on an empty
folder is one line, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptive_po.analysis import searched_report
from adaptive_po.analysis.reports import minatar_learning as minatar_report
from adaptive_po.bench import frozen, minatar_learning, study

ROOT = Path(__file__).resolve().parents[1]


def _exit(main, argv) -> int:
    try:
        return main(argv)
    except SystemExit as err:  # a refusal must be an exit status, not a message given to SystemExit (status 1)
        return err.code if isinstance(err.code, int) else 1


COMMANDS = [
    (frozen.main, ["pilot", "--dry-run"]),
    (study.main, ["study"]),
    (minatar_learning.main, ["pilot"]),
    (minatar_learning.main, ["study"]),
]


BAD_VALUES = [("--workers", "0"), ("--workers", "-3"), ("--hours", "-1"), ("--hours", "nan"), ("--hours", "inf"), ("--hours", "0")]
#: every command with every bad value it takes (the frozen pilot has no --hours)
CASES = [(main, argv, option, value) for main, argv in COMMANDS for option, value in BAD_VALUES
         if not (option == "--hours" and argv == ["pilot", "--dry-run"])]


@pytest.mark.parametrize("main, argv, option, value", CASES)
def test_a_bad_workers_or_hours_is_one_line_naming_it_with_exit_2_before_anything(tmp_path, capsys, main, argv, option, value):
    missing = tmp_path / "never-made"
    rc = _exit(main, [*argv, "--results", str(missing), option, value])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and option in err and value in err, err
    assert not missing.exists()  # refused before the results folder is touched


DRY_AND_REPORTS = [
    (frozen.main, ["pilot", "--dry-run"]),
    (frozen.main, ["select"]),
    (study.main, ["dry-run"]),
    (study.main, ["study"]),
    (minatar_learning.main, ["dry-run"]),
    (minatar_learning.main, ["select"]),
    (minatar_learning.main, ["study"]),
    (minatar_report.main, []),
    (searched_report.main, []),
]


@pytest.mark.parametrize("main, argv", DRY_AND_REPORTS)
def test_a_dry_run_or_a_report_refuses_a_missing_results_folder_and_does_not_make_it(tmp_path, capsys, main, argv):
    missing = tmp_path / "typo" / "frozen"
    rc = _exit(main, [*argv, "--results", str(missing)])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and str(missing) in err and "does not exist" in err, err
    assert not missing.exists() and not missing.parent.exists()


def test_the_schedule_report_on_an_empty_folder_is_one_line_with_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    rc = _exit(searched_report.main, ["--results", str(empty)])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and str(empty) in err and "Traceback" not in err, err
    assert sorted(p.name for p in empty.iterdir()) == []  # nothing written
