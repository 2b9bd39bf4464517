"""The frozen studies' committed per-run table is validated on every read: a damaged row refuses in
one line naming the file, the line and the cell (exit 2 at the command line), before anything is
trained or rewritten. The published tables validate."""

import shutil
from pathlib import Path

import pytest

from adaptive_po.bench import frozen, study
from adaptive_po.contract import read_frozen_table

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "docs" / "results" / "frozen"
HEADER = "folder,env,algo,variant,policy_lag,seed,total_timesteps,status,final_eval_return,random_score,reference,score,step,wall_time_s\n"
GOOD = "frozen-score,Pendulum-v1,esspo,,0,0,100000,complete,-200.0,-1200.0,-200.0,1.0,compiled,10.0\n"
FAILED = "frozen-score,Pendulum-v1,ppo,,0,0,100000,failed,-1200.0,-1200.0,-200.0,0.0,,\n"


def _table(tmp_path, *rows: str) -> Path:
    path = tmp_path / "per_run.csv"
    path.write_text(HEADER + "".join(rows))
    return path


def test_the_published_tables_validate():
    assert len(read_frozen_table(PUBLISHED / "per_run.csv")) == 2422
    read_frozen_table(ROOT / "docs" / "results" / "frozen-schedule" / "per_run.csv")


def test_good_and_failed_rows_read(tmp_path):
    import math

    rows = read_frozen_table(_table(tmp_path, GOOD, FAILED, FAILED.replace(",ppo,", ",vtrace,").replace(",,\n", ",,nan\n")))
    assert len(rows) == 3 and any(math.isnan(r["wall_time_s"]) for r in rows.values())


@pytest.mark.parametrize(
    "rows, match",
    [
        ((GOOD.replace("-200.0,-1200", "nan,-1200"),), r"line 2: final_eval_return 'nan' is not finite"),
        ((GOOD.replace("-200.0,-1200", "inf,-1200"),), r"line 2: final_eval_return 'inf' is not finite"),
        ((GOOD.replace(",1.0,compiled", ",1e308,compiled"),), r"line 2: score '1e308' is not the normalized return"),
        ((GOOD.replace(",1.0,compiled", ",5.0,compiled"),), r"line 2: score '5.0' is not the normalized return 1.0"),
        ((FAILED.replace(",0.0,,", ",3.0,,"),), r"line 2: score '3.0': a failed run scores 0"),
        ((GOOD, GOOD.replace("-200.0,-1200", "-300.0,-1200").replace(",1.0,compiled", ",0.9,compiled")), r"line 3: the run .* is already on line 2"),
        ((GOOD.replace("complete", "done"),), r"line 2: status 'done'"),
        ((GOOD.replace(",0,100000,", ",x,100000,"),), r"line 2: seed 'x' is not a whole number"),
        ((GOOD, "frozen-score,Pendulum-v1,esspo,,1,0,100000,complete,-9"), r"line 3: the last line is cut short"),
        ((GOOD.replace(",10.0\n", "\n"),), r"line 2: the row has a different number of cells"),
    ],
    ids=["nan", "inf", "1e308", "score-contradicts-return", "failed-with-score", "duplicate", "status", "bad-int", "cut-line", "short-row"],
)
def test_a_damaged_row_is_refused_naming_the_file_line_and_cell(tmp_path, rows, match):
    path = _table(tmp_path, *rows)
    with pytest.raises(ValueError, match=match) as err:
        read_frozen_table(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_the_study_command_refuses_a_damaged_table_in_one_line_and_rewrites_nothing(tmp_path, capsys):
    results = tmp_path / "frozen"
    shutil.copytree(PUBLISHED, results)
    table = results / "per_run.csv"
    lines = table.read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace(",complete,", ",complete,", 1).rsplit(",", 3)[0] + ",nan,compiled,1.0\n"  # the score cell
    table.write_text("".join(lines))
    before = {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()}
    assert study.main(["dry-run", "--results", str(results), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "per_run.csv, line 6: score 'nan' is not finite" in err[0]
    assert {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()} == before
    assert not (tmp_path / "runs").exists()


# -- not finished is not failed -------------------------------------------------------------------
def _spec(tmp_path):
    from adaptive_po.bench.run_folder import RunSpec

    return RunSpec("frozen-score", "Pendulum-v1", "esspo", 0, 4096, out=str(tmp_path / "runs"))


@pytest.mark.parametrize(
    "text, scored",
    [
        ("worker process exited with status -9 without a result\n--- last lines of w.log ---\n", False),
        ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: ADAPTIVE_PO_COMPILE must be 1, 0 or auto, got 'maybe'\n", False),
        ("Traceback (most recent call last):\n  File \"x.py\", line 1\nOSError: [Errno 28] No space left on device\n", False),
        ("FloatingPointError: non-finite parameters after update 3: pi.0.weight\n", True),
        ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: Expected parameter loc (Tensor of shape (64, 1)) of distribution Normal(loc: nan) to satisfy the constraint Real(), but found invalid values\n", True),
    ],
    ids=["killed-worker", "bad-setting", "full-disk", "diverged", "nan-distribution"],
)
def test_only_a_run_that_diverged_is_a_scored_failure(tmp_path, text, scored):
    from adaptive_po import contract

    spec = _spec(tmp_path)
    spec.run_dir.mkdir(parents=True)
    (spec.run_dir / contract.FAILED).write_text(text)
    row = frozen.finished_row(spec)
    if scored:
        assert row is not None and row["status"] == "failed" and row["score"] == 0.0
    else:
        assert row is None  # not a result: the study trains it again


def test_a_killed_worker_leaves_no_row_and_the_rerun_trains_it(tmp_path):
    from adaptive_po import contract
    from adaptive_po.bench.frozen import TableRunner

    spec = _spec(tmp_path)
    calls = []

    def killed(specs, max_members=None):  # what the local executor leaves when a worker is killed
        calls.append(len(specs))
        for s in specs:
            s.run_dir.mkdir(parents=True, exist_ok=True)
            (s.run_dir / contract.FAILED).write_text("worker process exited with status -9 without a result\n")

    runner = TableRunner(tmp_path / "per_run.csv", killed, log=lambda line: None)
    with pytest.raises(RuntimeError, match="did not finish"):
        runner.run([spec])
    assert read_frozen_table(tmp_path / "per_run.csv") == {}
    with pytest.raises(RuntimeError, match="did not finish"):  # asked again: trained again, not read as failed
        TableRunner(tmp_path / "per_run.csv", killed, log=lambda line: None).run([spec])
    assert calls == [1, 1]


def test_a_bad_compile_setting_is_refused_before_any_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ADAPTIVE_PO_COMPILE", "maybe")
    results = tmp_path / "frozen"
    shutil.copytree(PUBLISHED, results)
    assert frozen.main(["pilot", "--results", str(results), "--out", str(tmp_path / "runs"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ADAPTIVE_PO_COMPILE must be 1, 0 or auto, got 'maybe'" in err[0]
    assert study.main(["dry-run", "--results", str(results), "--out", str(tmp_path / "runs")]) == 2  # the generic runner too
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ADAPTIVE_PO_COMPILE must be 1, 0 or auto, got 'maybe'" in err[0]


def test_a_second_study_on_a_locked_results_folder_is_refused_before_it_trains(tmp_path, capsys):
    """Another live process holds the results folder's lock: the study answers one line, exit 2,
    and trains nothing (the published study's folder: complete, so it would only rewrite files)."""
    import subprocess
    import sys
    import time

    results = tmp_path / "frozen"
    shutil.copytree(PUBLISHED, results)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from adaptive_po.bench.locks import sweep_lock\n"
        f"with sweep_lock([{str(results)!r}]):\n    print('held', flush=True); time.sleep(900)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = {p.name: p.read_bytes() for p in results.iterdir() if p.is_file() and p.name != ".sweep.lock"}
        assert study.main(["study", "--results", str(results), "--out", str(tmp_path / "runs"), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err and "study:" in err[-1] and str(holder.pid) in err[-1]
        assert {p.name: p.read_bytes() for p in results.iterdir() if p.is_file() and p.name != ".sweep.lock"} == before
    finally:
        holder.kill()
        holder.wait()


def test_a_duplicate_yaml_key_is_refused_naming_it(tmp_path):
    from adaptive_po.bench.config import ConfigError, get_env_config

    source = (ROOT / "adaptive_po" / "env_configs" / "Acrobot-v1.yaml").read_text()
    (tmp_path / "Acrobot-v1.yaml").write_text(source.replace("  gamma: 0.99\n", "  gamma: 0.98\n  gamma: 0.1\n"))
    with pytest.raises(ConfigError, match=r"the key 'gamma' is given twice \(lines \d+ and \d+\)"):
        get_env_config("Acrobot-v1", str(tmp_path))


# -- rows carry their configuration ---------------------------------------------------------------
def _envs_copy(tmp_path, **changes) -> Path:
    """Every packaged environment file, with ``changes`` made to Acrobot-v1's."""
    from adaptive_po.bench.config import write_env_config_copy

    envs = tmp_path / "envs"
    shutil.copytree(ROOT / "adaptive_po" / "env_configs", envs)
    if changes:
        write_env_config_copy("Acrobot-v1", envs, **changes)
    return envs


def test_an_edited_yaml_is_refused_naming_the_row_and_nothing_is_rewritten(tmp_path, capsys):
    """The issue's case: Acrobot's n_epochs 4 -> 40 and gamma 0.99 -> 0.5 in --envs-dir. A row
    that records its configuration is refused in one line (exit 2) before anything runs; the same
    table with the packaged files passes (rows written before checksums, with no run folder here,
    are taken as committed and said to be)."""
    from adaptive_po import contract

    results = tmp_path / "frozen"
    shutil.copytree(PUBLISHED, results)
    table = results / "per_run.csv"
    rows = read_frozen_table(table)
    key = next(k for k in sorted(rows) if k[1] == "Acrobot-v1" and k[0] == "frozen-score")
    rows[key] = {**rows[key], contract.FROZEN_CONFIG_COLUMN: frozen.config_checksum(frozen.row_spec(rows[key]))}
    frozen.write_table(table, rows)
    before = {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()}
    args = ["dry-run", "--results", str(results), "--out", str(tmp_path / "runs")]
    assert study.main([*args, "--envs-dir", str(_envs_copy(tmp_path / "same"))]) == 0
    assert f"{len(rows) - 1} rows written before checksums have no run folder here: taken as committed" in capsys.readouterr().err
    edited = _envs_copy(tmp_path / "edited", hyperparams__n_epochs=40, hyperparams__gamma=0.5)
    assert study.main([*args, "--envs-dir", str(edited)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 runs were trained with another configuration" in err[0], err
    assert f"first: frozen-score Acrobot-v1 {key[2]}" in err[0] and "--redo-changed" in err[0]
    assert {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()} == before
    assert not (tmp_path / "runs").exists()


def test_a_trained_row_records_its_configuration_and_a_changed_one_is_trained_again(tmp_path):
    """A real run through the sweep: its row carries the checksum; under an edited file the table is
    refused, and with --redo-changed the row is dropped and the run trained again with the new
    configuration. A row written before checksums is checked by its run folder's config.json."""
    from types import SimpleNamespace

    from adaptive_po import contract

    out = str(tmp_path / "runs")
    same, edited = _envs_copy(tmp_path / "same"), _envs_copy(tmp_path / "edited", hyperparams__n_epochs=1)
    train, failed = frozen.train_with_sweep(1, False, redo_changed=True, executor="inline")  # the rows are the subject
    table = tmp_path / "per_run.csv"

    def spec(envs):
        return frozen.specs_for("Acrobot-v1", "ppo", [""], [0], [300], 4096, "frozen-score", out, str(envs))[0]

    runner = frozen.TableRunner(table, train, log=lambda line: None)
    (row,) = runner.run([spec(same)])
    assert row["status"] == "complete" and not failed
    assert read_frozen_table(table)[frozen.spec_key(spec(same))][contract.FROZEN_CONFIG_COLUMN] == frozen.config_checksum(spec(same))
    args = lambda envs, redo: SimpleNamespace(out=out, envs_dir=str(envs), redo_changed=redo)  # noqa: E731
    assert frozen.checked_runner(table, train, args(same, False), print).rows == runner.rows
    with pytest.raises(ValueError, match=r"per_run.csv: 1 runs were trained with another configuration .* Acrobot-v1 ppo \(defaults\) lag 0 seed 300"):
        frozen.checked_runner(table, train, args(edited, False), print)
    # a row written before checksums: its run folder's config.json checks it, and it is stamped
    legacy = {k: {**r, contract.FROZEN_CONFIG_COLUMN: ""} for k, r in runner.rows.items()}
    frozen.write_table(table, legacy)
    check = frozen.check_configs(read_frozen_table(table), out, str(same))
    assert list(check.stamped.values()) == [frozen.config_checksum(spec(same))] and not check.changed
    check = frozen.check_configs(read_frozen_table(table), out, str(edited))
    assert not check.stamped and "hyperparams.n_epochs 4 -> 1" in next(iter(check.changed.values()))
    redo = frozen.checked_runner(table, train, args(edited, True), print)
    assert redo.rows == {}
    (again,) = redo.run([spec(edited)])
    assert again[contract.FROZEN_CONFIG_COLUMN] == frozen.config_checksum(spec(edited)) != frozen.config_checksum(spec(same))
    recorded = contract.read_regular_text(spec(edited).run_dir / contract.CONFIG_FILE)
    assert '"n_epochs": 1' in recorded
