"""Every file a result depends on is verified (issue 22, case 2).

The chain of records written at completion: ``COMPLETE`` records ``summary.json``'s size and
sha256, ``summary.json`` those of ``config.json``, ``progress.csv`` and ``eval.csv``. A complete run
whose chain is broken or missing (an older run format), whose numbers are not finite, or whose
``summary.json`` does not hold the final evaluation of ``eval.csv`` is damaged: the bench redoes it
and analysis leaves it out, naming it with the reason.

The fast tests use run folders written through the contract's own writers; the slow ones edit the
folders of a real ``adaptive-po bench`` the way the issue did (the final return 32.6 -> 500, the
``files`` key deleted, NaN and Infinity, ``config.json``'s env changed) and check analysis (in
process and its command line) and a rerun of the bench.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest

from adaptive_po import contract, dials
from adaptive_po.contract import COMPLETE, verify_complete_run
from adaptive_po.analysis import LoadWarning, load_runs
from cli_here import cli_here  # a command line in this process

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "500"}
CONDITION = dials.condition_name(0, 0.0, 0)


# -- run folders written through the contract -----------------------------------------------------
def write_run(root: Path, algo: str = "esspo", seed: int = 0, final: float = 300.0) -> Path:
    """A complete run folder as the bench leaves it: config, progress, eval, summary, COMPLETE."""
    d = root / "CartPole-v1" / algo / CONDITION / f"seed-{seed}"
    config = {
        "run_format": contract.RUN_FORMAT, "suite": root.name, "env": "CartPole-v1", "algo": algo, "seed": seed,
        **dials.DIAL_DEFAULTS, "variant": "", "total_timesteps": 2000, "n_envs": 8,
        "random_score": 20.0, "solved_threshold": 475.0, "eval_episodes": 10, "eval_freq": 1000,
    }
    contract.atomic_write_json(d / contract.CONFIG_FILE, config)
    progress = [{c.name: 0.5 for c in contract.PROGRESS_COLUMNS} | {"update": i, "timesteps": 1000 * i} for i in (1, 2)]
    contract.atomic_write_rows(d / contract.PROGRESS_FILE, contract.PROGRESS_COLUMNS, progress)
    contract.atomic_write_rows(d / contract.EVAL_FILE, contract.EVAL_COLUMNS, [
        {"timesteps": t, "eval_return_mean": r, "eval_return_std": 1.0, "eval_episodes": 10}
        for t, r in ((0, 20.0), (1000, 100.0), (2000, final))
    ])
    summary = {"final_eval_return_mean": final, "final_eval_return_std": 1.0, "eval_episodes": 10, "timesteps": 2000,
               "updates": 2, "wall_time_s": 1.0, "status": "complete", contract.SUMMARY_DIVERGED: None}
    contract.write_completion(d, summary, "2026-01-01T00:00:00+00:00")
    return d


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def edit_json(path: Path, drop: tuple[str, ...] = (), **changes) -> None:
    """Edit a JSON file by hand, as a user would (NaN and Infinity as Python's json writes them)."""
    data = read_json(path)
    for key in drop:
        del data[key]
    data.update(changes)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def reseal(run_dir: Path) -> None:
    """Recompute every record, as a forger (or a bench that wrote these very files) would."""
    summary = read_json(run_dir / contract.SUMMARY_FILE)
    contract.write_completion(run_dir, summary, "2026-01-01T00:00:00+00:00")


def last_eval(run_dir: Path) -> float:
    with open(run_dir / contract.EVAL_FILE, newline="") as fh:
        return float(list(csv.DictReader(fh))[-1]["eval_return_mean"])


# -- the chain of records -------------------------------------------------------------------------
def test_completion_records_every_file_a_result_depends_on(tmp_path):
    d = write_run(tmp_path / "quick")
    assert verify_complete_run(d) is None and verify_complete_run(d, check_schema=False) is None
    summary, marker = read_json(d / contract.SUMMARY_FILE), read_json(d / COMPLETE)
    # every file analysis reads is covered: three by summary.json, summary.json by COMPLETE
    assert set(summary[contract.SUMMARY_FILES]) == {contract.CONFIG_FILE, contract.PROGRESS_FILE, contract.EVAL_FILE}
    assert set(marker[contract.COMPLETE_FILES]) == {contract.SUMMARY_FILE}
    assert marker[contract.COMPLETE_FILES][contract.SUMMARY_FILE] == contract.file_record(d / contract.SUMMARY_FILE)
    assert contract.RUN_FORMAT >= contract.INTEGRITY_FORMAT == 3


@pytest.mark.parametrize("name", [contract.CONFIG_FILE, contract.PROGRESS_FILE, contract.EVAL_FILE, contract.SUMMARY_FILE])
def test_one_changed_byte_in_any_file_is_named(tmp_path, name):
    d = write_run(tmp_path / "quick")
    data = bytearray((d / name).read_bytes())
    i = data.index(b"2")  # a digit in every file: the same size, another content
    data[i : i + 1] = b"3"
    (d / name).write_bytes(bytes(data))
    assert verify_complete_run(d) == f"{name} differs from the file recorded at completion (sha256)"
    (d / name).write_bytes(bytes(data) + b" ")
    assert f"{name} has " in verify_complete_run(d) and "at completion" in verify_complete_run(d)
    (d / name).unlink()
    assert verify_complete_run(d) == f"{name} is missing"


def test_a_missing_or_edited_record_is_damage_not_a_pass(tmp_path):
    d = write_run(tmp_path / "quick")
    # deleting summary.json's records changes summary.json: COMPLETE's record catches it
    edit_json(d / contract.SUMMARY_FILE, drop=(contract.SUMMARY_FILES,))
    assert "summary.json" in verify_complete_run(d) and "at completion" in verify_complete_run(d)
    # ... and with COMPLETE's record redone too, the missing record itself is the problem
    contract.atomic_write_json(d / COMPLETE, contract.complete_marker(d, "now"))
    assert verify_complete_run(d) == "no integrity record (summary.json has no 'files')"
    d = write_run(tmp_path / "other")
    contract.atomic_write_json(d / COMPLETE, {"finished_at": "now"})  # the marker of run format 2
    assert verify_complete_run(d) == "no integrity record (COMPLETE records no checksum of summary.json)"
    (d / COMPLETE).write_text("")  # an empty marker (touch COMPLETE)
    assert verify_complete_run(d).startswith("COMPLETE cannot be read")
    contract.atomic_write_json(d / COMPLETE, {"files": {contract.SUMMARY_FILE: "x"}})
    assert verify_complete_run(d) == "COMPLETE records no size and checksum for summary.json"


def test_a_run_of_the_previous_format_is_damaged_and_names_its_format(tmp_path):
    """What run format 2 wrote: summary.json records only the two CSV files; COMPLETE nothing."""
    root = tmp_path / "quick"
    old = write_run(root, seed=0)
    edit_json(old / contract.CONFIG_FILE, run_format=2)
    summary = read_json(old / contract.SUMMARY_FILE)
    summary[contract.SUMMARY_FILES] = {n: contract.file_record(old / n) for n in (contract.PROGRESS_FILE, contract.EVAL_FILE)}
    contract.atomic_write_json(old / contract.SUMMARY_FILE, summary)
    contract.atomic_write_json(old / COMPLETE, {"finished_at": "2025-01-01T00:00:00"})
    new = write_run(root, seed=1)
    why = verify_complete_run(old)
    assert why.startswith("no integrity record") and "run format 2" in why and "rerun of the bench" in why
    with pytest.warns(LoadWarning) as caught:
        runs = load_runs(root)
    assert runs.damaged == {old: why} and runs.finals["run_dir"].tolist() == [str(new)]
    message = " ".join(str(w.message) for w in caught)
    assert "seed-0 (no integrity record" in message and "run format 2" in message


def test_nonfinite_numbers_are_named_even_with_valid_records(tmp_path):
    d = write_run(tmp_path / "quick")
    for value, shown in ((math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf")):
        edit_json(d / contract.SUMMARY_FILE, final_eval_return_mean=value)
        reseal(d)
        assert verify_complete_run(d) == f"summary.json: final_eval_return_mean = {shown} is not a finite number"
    edit_json(d / contract.SUMMARY_FILE, final_eval_return_mean="500")
    reseal(d)
    assert verify_complete_run(d) == "summary.json: final_eval_return_mean = '500' is not a number"
    edit_json(d / contract.SUMMARY_FILE, final_eval_return_mean=300.0, wall_time_s=math.inf)
    reseal(d)
    assert verify_complete_run(d) == "summary.json: wall_time_s = inf is not a finite number"
    edit_json(d / contract.SUMMARY_FILE, wall_time_s=1.0)
    edit_json(d / contract.CONFIG_FILE, solved_threshold=math.inf)
    reseal(d)
    assert verify_complete_run(d) == "config.json: solved_threshold = inf is not a finite number"
    edit_json(d / contract.CONFIG_FILE, solved_threshold=475.0)
    reseal(d)
    assert verify_complete_run(d) is None
    # a non-finite final evaluation in eval.csv (the one analysis reports)
    text = (d / contract.EVAL_FILE).read_text().replace(",300.0,", ",inf,")
    (d / contract.EVAL_FILE).write_text(text)
    edit_json(d / contract.SUMMARY_FILE, final_eval_return_mean=300.0)
    reseal(d)
    assert verify_complete_run(d) == "eval.csv row 3: eval_return_mean = 'inf' is not a finite number"
    assert verify_complete_run(d, check_schema=False) == verify_complete_run(d)


def test_files_written_malformed_are_caught_behind_valid_records(tmp_path):
    """Checks that hold even where the records match (a bench that wrote these very files)."""
    d = write_run(tmp_path / "quick")
    text = (d / contract.PROGRESS_FILE).read_text()
    (d / contract.PROGRESS_FILE).write_text(text[:-5])  # mid-row, no final newline
    reseal(d)
    assert verify_complete_run(d) == "progress.csv is cut short (no final newline)"
    (d / contract.PROGRESS_FILE).write_text("\n".join(text.splitlines()[:-1]) + "\n")  # one update short
    reseal(d)
    assert verify_complete_run(d) == "progress.csv has 1 rows, summary.json says 2 updates"


def test_the_final_return_is_the_last_evaluation(tmp_path):
    root = tmp_path / "quick"
    d = write_run(root, final=32.6)
    edit_json(d / contract.SUMMARY_FILE, final_eval_return_mean=500.0)
    reseal(d)  # even with every record redone, summary.json must hold eval.csv's final evaluation
    assert verify_complete_run(d) == ("summary.json: final_eval_return_mean = 500.0, but the final evaluation "
                                      "(the last row of eval.csv) has 32.6")
    write_run(root, final=32.6)
    runs = load_runs(root)
    assert runs.finals["final_eval_return_mean"].tolist() == [32.6] == [last_eval(d)]


def test_a_damaged_run_is_redone_not_skipped(tmp_path):
    """The bench's resume check (completed_summary) does not trust a damaged run."""
    from adaptive_po.bench.run_folder import RunSpec, completed_summary, config_for
    from adaptive_po.bench.process_engine import execute_run

    spec = RunSpec(suite="quick", env="CartPole-v1", algo="esspo", seed=0, total_timesteps=256, out=str(tmp_path),
                   device="cpu", tensorboard=False)
    assert execute_run(spec)["status"] == "complete"
    assert verify_complete_run(spec.run_dir) is None
    assert completed_summary(spec, config_for(spec)) is not None
    edit_json(spec.run_dir / contract.SUMMARY_FILE, final_eval_return_mean=math.nan)
    assert completed_summary(spec, config_for(spec)) is None
    result = execute_run(spec)
    assert result["status"] == "complete" and math.isfinite(result["final_return"])
    assert verify_complete_run(spec.run_dir) is None


# -- a real bench, edited the way the issue did ---------------------------------------------------
def bench_cmd(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--envs", "CartPole-v1",
        "--algos", "esspo,ppo", "--seeds", "2", "--lags", "0", "--timesteps", "1024", "--executor", "inline",
        "--out", str(out), "--device", "cpu", "--no-report", "--no-progress", "--engine", "process", *extra,
    ]


@pytest.fixture(scope="module")
def bench_out(tmp_path_factory) -> Path:
    """The issue's ``B`` (smaller): four complete runs of a real bench (its jobs in the driver's
    process: the run folders are the subject here, not the workers), made once for the tests of
    the ``integrity`` xdist group."""
    out = tmp_path_factory.mktemp("bench")
    done = cli_here(bench_cmd(out), env=ENV)
    assert done.returncode == 0, done.stderr
    return out


def run_dir(out: Path, algo: str, seed: int) -> Path:
    return out / "quick" / "CartPole-v1" / algo / CONDITION / f"seed-{seed}"


@pytest.mark.slow
@pytest.mark.xdist_group("integrity")
def test_edited_results_are_named_by_analysis_and_redone_by_the_bench(bench_out, tmp_path):
    out = tmp_path / "runs"
    shutil.copytree(bench_out, out)
    originals = {(a, s): (run_dir(out, a, s) / contract.EVAL_FILE).read_text() for a in ("esspo", "ppo") for s in (0, 1)}
    for (algo, seed), _ in originals.items():
        d = run_dir(out, algo, seed)
        assert verify_complete_run(d) is None
        assert read_json(d / contract.SUMMARY_FILE)["final_eval_return_mean"] == last_eval(d)
    intact = run_dir(out, "ppo", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoadWarning)
        before = load_runs(out / "quick").finals

    # the edits, one per run (and a fourth run left intact)
    edited = {
        run_dir(out, "esspo", 0): "final return 500",
        run_dir(out, "esspo", 1): "files key deleted",
        run_dir(out, "ppo", 0): "NaN",
    }
    edit_json(run_dir(out, "esspo", 0) / contract.SUMMARY_FILE, final_eval_return_mean=500.0)
    edit_json(run_dir(out, "esspo", 1) / contract.SUMMARY_FILE, drop=(contract.SUMMARY_FILES,))
    edit_json(run_dir(out, "ppo", 0) / contract.SUMMARY_FILE, final_eval_return_mean=math.nan)
    for d in edited:
        assert "summary.json" in verify_complete_run(d) and "at completion" in verify_complete_run(d)

    # analysis: left out and named, never counted; the intact run's number is unchanged
    with pytest.warns(LoadWarning) as caught:
        runs = load_runs(out / "quick")
    message = " ".join(str(w.message) for w in caught)
    assert set(runs.damaged) == set(edited) and runs.finals["run_dir"].tolist() == [str(intact)]
    for d in edited:
        assert f"{d.parent.parent.name}/{CONDITION}/{d.name} (summary.json" in message
    kept = before.set_index("run_dir").loc[str(intact), "final_eval_return_mean"]
    assert runs.finals["final_eval_return_mean"].tolist() == [kept] == [last_eval(intact)]
    report = cli_here([sys.executable, "-m", "adaptive_po.analysis", str(out / "quick"), "--out", str(tmp_path / "report"),
                             "--resamples", "50"], env=ENV)
    assert report.returncode == 0, report.stderr
    for d in edited:
        assert f"esspo/{CONDITION}/{d.name}" in report.stderr or f"ppo/{CONDITION}/{d.name}" in report.stderr
    assert "integrity check" in report.stderr

    # the bench: a dry run and a rerun redo exactly the damaged runs, naming them
    dry = cli_here(bench_cmd(out, "--dry-run"), env=ENV)
    assert dry.returncode == 0, dry.stderr
    shown = dry.stdout + dry.stderr
    assert "already complete: 1; to run: 3 (the cost estimate below is theirs)" in shown, shown
    assert "4 runs, 4,096 environment steps in all" in shown and "cost estimate (process engine): 3,072 environment steps" in shown, shown
    for d in edited:
        assert f"redo quick/CartPole-v1/{d.parent.parent.name}/{CONDITION}/{d.name}: summary.json" in shown, shown
    rerun = cli_here(bench_cmd(out), env=ENV)
    assert rerun.returncode == 0, rerun.stderr
    assert "3 complete, 1 skipped" in rerun.stderr, rerun.stderr
    for d in edited:
        assert f"{d.parent.parent.name}/{CONDITION}/{d.name}:" in rerun.stderr and "redo" in rerun.stderr
    for (algo, seed), text in originals.items():
        d = run_dir(out, algo, seed)
        assert verify_complete_run(d) is None
        assert (d / contract.EVAL_FILE).read_text() == text  # the same runs (fixed seeds), redone
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoadWarning)
        assert len(load_runs(out / "quick").finals) == 4


@pytest.mark.slow
@pytest.mark.xdist_group("integrity")
def test_infinity_a_changed_env_and_an_old_format_are_damage_too(bench_out, tmp_path):
    out = tmp_path / "runs"
    shutil.copytree(bench_out, out)
    inf, env, old = run_dir(out, "esspo", 0), run_dir(out, "esspo", 1), run_dir(out, "ppo", 0)
    edit_json(inf / contract.SUMMARY_FILE, final_eval_return_mean=math.inf)
    edit_json(env / contract.CONFIG_FILE, env="Acrobot-v1")  # a CartPole run posing as Acrobot
    # what run format 2 left: no config.json record, no summary.json record in COMPLETE
    edit_json(old / contract.CONFIG_FILE, run_format=2)
    summary = read_json(old / contract.SUMMARY_FILE)
    summary[contract.SUMMARY_FILES] = {n: contract.file_record(old / n) for n in (contract.PROGRESS_FILE, contract.EVAL_FILE)}
    contract.atomic_write_json(old / contract.SUMMARY_FILE, summary)
    contract.atomic_write_json(old / COMPLETE, {"finished_at": "2025-01-01T00:00:00"})
    assert "summary.json" in verify_complete_run(inf)
    assert verify_complete_run(env).startswith("config.json has ") and "at completion" in verify_complete_run(env)
    assert "run format 2" in verify_complete_run(old)

    with pytest.warns(LoadWarning) as caught:
        runs = load_runs(out / "quick")
    assert set(runs.damaged) == {inf, env, old} and set(runs.finals["env"]) == {"CartPole-v1"}
    assert len(runs.finals) == 1 and "Acrobot-v1" not in set(runs.evals["env"])
    message = " ".join(str(w.message) for w in caught)
    assert "run format 2" in message and "seed-1 (config.json has " in message

    rerun = cli_here(bench_cmd(out), env=ENV)
    assert rerun.returncode == 0, rerun.stderr
    assert "3 complete, 1 skipped" in rerun.stderr, rerun.stderr
    for d in (inf, env, old):
        assert verify_complete_run(d) is None
        assert read_json(d / contract.CONFIG_FILE)["env"] == "CartPole-v1"
        assert read_json(d / contract.CONFIG_FILE)["run_format"] == contract.RUN_FORMAT
