"""The published study tables and what the reports and dry runs check in them (issue 67, the
"Study tables" group: B1-B6), on copies of the committed folders: a table with a task missing from an
endpoint is interim, never a final verdict; a row's random score and reference are the environment
file's; a selection is its search's best over every variant searched; selected.json's trial and
search return are trials.csv's and the table's; an edit of a published table is caught by its
recorded digest; a dry run counts the planned runs in the table, not the rows of a folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from adaptive_po import contract
from adaptive_po.analysis import searched_report
from adaptive_po.bench.study_table import write_table

ROOT = Path(__file__).resolve().parents[1]
FROZEN = ROOT / "docs" / "results" / "frozen"
SCHEDULE = ROOT / "docs" / "results" / "frozen-schedule"


def _copy(tmp_path: Path, source: Path = FROZEN, name: str = "frozen") -> Path:
    folder = tmp_path / name
    shutil.copytree(source, folder)
    return folder


def _rewrite(folder: Path, edit) -> None:
    """The folder's table read, ``edit(rows)`` applied, written back as the study writes it."""
    rows = contract.read_frozen_table(folder / contract.FROZEN_TABLE_FILE)
    edit(rows)
    write_table(folder / contract.FROZEN_TABLE_FILE, rows)


def _a_scoring_key(rows, lag: int = 0, algo: str = "ppo", env: str = "Acrobot-v1", folder: str = contract.FROZEN_SCORE_FOLDER):
    return next(k for k in sorted(rows) if k[0] == folder and k[1] == env and k[2] == algo and k[4] == lag)


@pytest.mark.parametrize("how", ["deleted", "unregistered seed"])
def test_a_task_missing_from_an_endpoint_makes_the_frozen_answer_interim(tmp_path, capsys, how):
    folder = _copy(tmp_path)

    def edit(rows):
        key = _a_scoring_key(rows)
        row = rows.pop(key)
        if how == "unregistered seed":
            row = {**row, "seed": 999}
            rows[contract.frozen_row_key(row)] = row

    _rewrite(folder, edit)
    if how == "unregistered seed":  # a run the plan does not have is refused before anything is computed
        assert searched_report.main(["--results", str(folder)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "999" in err[0] and "(its seed)" in err[0], err
        return
    assert searched_report.main(["--results", str(folder)]) == 0, capsys.readouterr().err
    text = (folder / "verdicts.md").read_text()
    answer = text.split("## The answer", 1)[1].split("| endpoint |", 1)[0]
    assert "**Interim" in answer, answer
    assert "is contradicted" not in answer and "| contradicted |" not in answer, answer
    assert "not decided (the study is not complete)" in answer, answer
    assert "| robust to staleness without retuning | 1 3/4, 2 3/4, 3 4/4, esspo-tax 4/4 |" in answer, answer


def _unselected_search_keys(rows, env: str = "Acrobot-v1", algo: str = "ppo"):
    """The keys of one searched variant of ``env``/``algo`` on fresh data that is not the selected one."""
    import json

    chosen = json.loads((FROZEN / contract.FROZEN_SELECTION_FILE).read_text())["selected"][env][algo]["fresh"]["variant"]
    keys = [k for k in sorted(rows) if k[0] == contract.FROZEN_SEARCH_FOLDER and k[1:3] == (env, algo) and k[4] == 0 and k[3] != chosen]
    variant = keys[0][3]
    return [k for k in keys if k[3] == variant]


@pytest.mark.parametrize("how", ["deleted", "unregistered seed"])
def test_a_searched_variant_without_all_its_search_seeds_is_refused_not_skipped(tmp_path, capsys, how):
    """A trial that beat the selected one, one of its rows deleted (or moved to a seed outside the
    search's), was skipped by the selection check: the report published a choice that is not the
    search's best."""
    folder = _copy(tmp_path)

    def edit(rows):
        keys = _unselected_search_keys(rows)
        if how == "deleted":
            for key in keys:  # this trial now beats the selected one (score kept consistent) ...
                row = rows[key]
                value = 0.0
                rows[key] = {**row, "final_eval_return": value, "score": (value - row["random_score"]) / (row["reference"] - row["random_score"])}
        row = rows.pop(keys[0])  # ... and lacks one of its search seeds
        if how == "unregistered seed":  # three runs still, one of them on a seed the search does not have
            row = {**row, "seed": 999}
            rows[contract.frozen_row_key(row)] = row

    _rewrite(folder, edit)
    assert searched_report.main(["--results", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    named = "(its seed)" if how == "unregistered seed" else "Acrobot-v1 ppo fresh"  # a moved run is not the plan's: refused as such
    assert len(err) == 1 and named in err[0] and "search" in err[0], err


def _edit_selected(folder: Path, edit) -> None:
    import json

    path = folder / contract.FROZEN_SELECTION_FILE
    data = json.loads(path.read_text())
    edit(data["selected"])
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _edit_trials(folder: Path, edit) -> None:
    lines = (folder / contract.FROZEN_TRIALS_FILE).read_text().splitlines(keepends=True)
    (folder / contract.FROZEN_TRIALS_FILE).write_text("".join(edit(lines)))


FROZEN_TAMPERS = {
    "pick's trial 99": lambda f: _edit_selected(f, lambda s: s["Acrobot-v1"]["ppo"]["fresh"].update(trial=99)),
    "pick's search_return -1.0": lambda f: _edit_selected(f, lambda s: s["Acrobot-v1"]["ppo"]["fresh"].update(search_return=-1.0)),
    "pick's search_score 2.0": lambda f: _edit_selected(f, lambda s: s["Pendulum-v1"]["esspo"]["lag8"].update(search_score=2.0)),
    "trials.csv garbage": lambda f: (f / contract.FROZEN_TRIALS_FILE).write_text("garbage\n1,2\n"),
    "trials.csv a return": lambda f: _edit_trials(f, lambda lines: [lines[0], lines[1].replace(",-85.26666666666667,", ",-5.0,"), *lines[2:]]),
    "trials.csv a row dropped": lambda f: _edit_trials(f, lambda lines: [lines[0], *lines[2:]]),
    "trials.csv missing": lambda f: (f / contract.FROZEN_TRIALS_FILE).unlink(),
}


@pytest.mark.parametrize("tamper", sorted(FROZEN_TAMPERS))
def test_selected_json_is_checked_against_trials_csv_and_the_search_table(tmp_path, capsys, tamper):
    folder = _copy(tmp_path)
    FROZEN_TAMPERS[tamper](folder)
    assert searched_report.main(["--results", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("selected.json" in err[0] or "trials.csv" in err[0]), err


@pytest.mark.parametrize("tamper", ["trial", "search_return", "trials.csv"])
def test_the_schedule_reports_selections_are_checked_against_its_trials_and_table(tmp_path, capsys, tamper):
    folder = _copy(tmp_path, SCHEDULE, "frozen-schedule")
    shutil.copytree(FROZEN, tmp_path / "frozen")  # its plan's comparators
    if tamper == "trials.csv":
        _edit_trials(folder, lambda lines: [lines[0], *lines[2:]])
    else:
        _edit_selected(folder, lambda s: s["Pendulum-v1"]["main"]["ppo"]["fresh"].update({tamper: 99 if tamper == "trial" else -1.0}))
    assert searched_report.main(["--results", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("selected.json" in err[0] or "trials.csv" in err[0]), err


def _a_pendulum_row_scored_from_another_random_score(folder: Path, random_score: float = -2000.0, column: str = "random_score") -> None:
    """One schedule-score Pendulum row normalized from another random score (or reference): its
    return kept, its score consistent with the row's cells, as a hand edit would make it."""

    def edit(rows):
        key = _a_scoring_key(rows, lag=0, algo="esspo", env="Pendulum-v1", folder=contract.SCHEDULE_SCORE_FOLDER)
        row = dict(rows[key])
        row[column] = random_score
        row["score"] = (row["final_eval_return"] - row["random_score"]) / (row["reference"] - row["random_score"])
        rows[key] = row

    _rewrite(folder, edit)


@pytest.mark.parametrize("column", ["random_score", "reference"])
def test_a_rows_random_score_and_reference_are_the_environment_files(tmp_path, capsys, column):
    from adaptive_po.bench import study

    folder = _copy(tmp_path, SCHEDULE, "frozen-schedule")
    shutil.copytree(FROZEN, tmp_path / "frozen")  # its plan's tasks_from
    _a_pendulum_row_scored_from_another_random_score(folder, -2000.0 if column == "random_score" else 0.0, column)
    assert searched_report.main(["--results", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Pendulum-v1" in err[0] and column in err[0] and "Pendulum-v1.yaml" in err[0], err
    dry = ["dry-run", "--results", str(folder), "--out", str(tmp_path / "runs"), "--no-progress"]
    assert study.main(dry) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Pendulum-v1" in err[0] and column in err[0], err


def _dry_run_lines(main, argv, capsys) -> list[tuple[str, int, int]]:
    """(part and task, runs, runs in the table) of each task line of a study's dry run."""
    import re

    assert main(argv) == 0, capsys.readouterr().err
    found = re.findall(r"^  (.+?) at [\d,]+ steps: (\d+) runs, (\d+) in the table", capsys.readouterr().err, re.M)
    assert found
    return [(what, int(runs), int(done)) for what, runs, done in found]


def test_the_dry_run_counts_the_planned_runs_in_the_table_not_the_rows_of_a_folder(tmp_path, capsys):
    from adaptive_po.bench import study

    runs = ["--out", str(tmp_path / "runs"), "--no-progress"]
    # the extension: its parts share one scoring folder; each counts its own runs only, never more than it plans
    schedule = _copy(tmp_path, SCHEDULE, "frozen-schedule")
    shutil.copytree(FROZEN, tmp_path / "frozen")  # its plan's tasks_from
    lines = _dry_run_lines(study.main, ["dry-run", "--results", str(schedule), *runs], capsys)
    assert all(done <= planned for _, planned, done in lines), lines
    assert ("main: Acrobot-v1", 294, 294) in lines and ("dppo-tax: Acrobot-v1", 58, 58) in lines and ("luck: Pendulum-v1", 58, 58) in lines, lines
    # the published study: a scoring row moved to a seed outside the plan is not a planned run done
    published = tmp_path / "frozen"
    before = dict((what, done) for what, _, done in _dry_run_lines(study.main, ["dry-run", "--results", str(published), *runs], capsys))

    def edit(rows):
        row = rows.pop(_a_scoring_key(rows))
        row = {**row, "seed": 999}
        rows[contract.frozen_row_key(row)] = row
        extra = {**rows[_a_scoring_key(rows, lag=1)], "variant": "learning_rate=x7"}  # and a configuration that was not selected
        rows[contract.frozen_row_key(extra)] = extra

    _rewrite(published, edit)
    after = dict((what, done) for what, _, done in _dry_run_lines(study.main, ["dry-run", "--results", str(published), *runs], capsys))
    assert after == {**before, "main: Acrobot-v1": before["main: Acrobot-v1"] - 1}, (before, after)


def test_the_minatar_dry_run_counts_the_pilots_planned_runs(tmp_path, capsys):
    import re

    from adaptive_po.bench import minatar_learning as ml
    from adaptive_po.studies.plan import load_plan

    folder = _copy(tmp_path, ROOT / "docs" / "results" / "minatar-learning", "minatar-learning")
    pilot_folder = load_plan(folder / "plan.toml").pilot.folder  # the study's plan file names its pilot's folder

    def pilot_done() -> int:
        assert ml.main(["dry-run", "--results", str(folder)]) == 0
        return int(re.search(r"^pilot: \d+ runs of [\d,]+ steps \((\d+) in the table\)", capsys.readouterr().err, re.M).group(1))

    before = pilot_done()

    def edit(rows):
        row = rows.pop(next(k for k in sorted(rows) if k[0] == pilot_folder))
        row = {**row, "seed": 999}  # a pilot row on a seed the pilot does not have
        rows[contract.frozen_row_key(row)] = row

    _rewrite(folder, edit)
    assert pilot_done() == before - 1


def _edit_behind_the_digest(folder: Path, edit) -> None:
    """The table edited as a person would (its rows consistent: every check of the rows passes),
    its recorded digest left as the study wrote it."""
    rows = contract.read_frozen_table(folder / contract.FROZEN_TABLE_FILE)
    edit(rows)
    other = folder.parent / "edited" / contract.FROZEN_TABLE_FILE
    write_table(other, rows)
    (folder / contract.FROZEN_TABLE_FILE).write_bytes(other.read_bytes())


def _consistent_return(rows, key, value):
    row = rows[key]
    rows[key] = {**row, "final_eval_return": value, "score": (value - row["random_score"]) / (row["reference"] - row["random_score"])}


def _swap_two_results(rows):
    a, b = _a_scoring_key(rows, lag=0), _a_scoring_key(rows, lag=0, algo="esspo")
    ra, rb = rows[a], rows[b]
    for column in ("final_eval_return", "score", "wall_time_s"):
        ra, rb = {**ra, column: rb[column]}, {**rb, column: ra[column]}
    rows[a], rows[b] = ra, rb


DIGEST_TAMPERS = {
    "a row's return and score": lambda f: _edit_behind_the_digest(f, lambda rows: _consistent_return(rows, _a_scoring_key(rows), -60.0)),
    "two rows' results swapped": lambda f: _edit_behind_the_digest(f, _swap_two_results),
    "the digest deleted": lambda f: (f / (contract.FROZEN_TABLE_FILE + ".sha256")).unlink(),
}


@pytest.mark.parametrize("tamper", sorted(DIGEST_TAMPERS))
def test_an_edit_of_a_published_table_is_caught_by_its_recorded_digest(tmp_path, capsys, tamper):
    from adaptive_po.bench import study as study_runner

    folder = _copy(tmp_path)
    assert (folder / (contract.FROZEN_TABLE_FILE + ".sha256")).is_file()  # committed beside the table
    DIGEST_TAMPERS[tamper](folder)
    assert searched_report.main(["--results", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "per_run.csv" in err[0] and "sha256" in err[0], err
    if tamper != "the digest deleted":  # the dry run reads the table too (a table without a digest is one a study has not written yet)
        assert study_runner.main(["dry-run", "--results", str(folder), "--out", str(tmp_path / "runs")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "per_run.csv" in err[0] and "sha256" in err[0], err


@pytest.mark.parametrize("study", ["frozen", "frozen-schedule", "minatar-learning"])
def test_every_published_table_has_its_digest_and_the_study_records_it_when_it_writes(tmp_path, study):
    import hashlib

    table = ROOT / "docs" / "results" / study / contract.FROZEN_TABLE_FILE
    recorded = (table.parent / (table.name + ".sha256")).read_text()
    assert recorded == f"{hashlib.sha256(table.read_bytes()).hexdigest()}  {table.name}\n"  # sha256sum's format: `sha256sum -c` checks it
    written = tmp_path / contract.FROZEN_TABLE_FILE
    write_table(written, contract.read_frozen_table(table))  # the study's own write records the digest beside the table
    assert (tmp_path / (table.name + ".sha256")).read_text() == f"{hashlib.sha256(written.read_bytes()).hexdigest()}  {table.name}\n"
