"""The run-folder contract (adaptive_po/contract.py): analysis reads through it alone, the
README shows its tables, its helpers behave, and a real tiny run loads in analysis."""

from __future__ import annotations

import ast
import csv
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from adaptive_po import contract, dials

REPO = Path(__file__).resolve().parents[1]
ANALYSIS = REPO / "adaptive_po" / "analysis"
ANALYSIS_MODULES = tuple(f"adaptive_po.analysis{m}" for m in ("", ".load", ".stats", ".tables", ".plots", ".output", ".reports.suite"))


# ---------------------------------------------------------------------------------------------
# analysis imports nothing of the training code but the contract


def test_analysis_imports_no_torch_and_only_the_contract():
    code = (
        "import importlib, json, sys\n"
        f"for name in {ANALYSIS_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps({'torch': 'torch' in sys.modules,\n"
        "                  'adaptive_po': sorted(m for m in sys.modules if m.split('.')[0] == 'adaptive_po')}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded["torch"] is False
    assert [m for m in loaded["adaptive_po"] if not m.startswith("adaptive_po.analysis")] == [
        "adaptive_po", "adaptive_po.contract", "adaptive_po.dials"]


def _adaptive_po_imports(path: Path) -> list[tuple[int, str]]:
    """Every module of adaptive_po a file imports, as ``(line, dotted name)``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "adaptive_po"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "adaptive_po":
            # ``from adaptive_po import contract`` imports the submodule contract
            if node.module == "adaptive_po":
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def test_analysis_sources_import_only_the_contract():
    files = sorted(ANALYSIS.rglob("*.py"))
    assert files
    imports = {f.relative_to(ANALYSIS).as_posix(): _adaptive_po_imports(f) for f in files}
    # the studies' plan layer (plan files, the pilot rule, the cut order) sits beside the contract: torch-free
    allowed = ("adaptive_po.contract", "adaptive_po.dials", "adaptive_po.studies")
    wrong = {name: [i for i in found if not i[1].startswith(allowed)] for name, found in imports.items()}
    assert not any(wrong.values()), f"analysis imports training code besides the contract: {wrong}"
    assert imports["load.py"], "analysis.load should take its schema from the contract"
    studies = {f.name: _adaptive_po_imports(f) for f in sorted((ANALYSIS.parent / "studies").glob("*.py"))}
    beyond = {name: [i for i in found if not i[1].startswith(("adaptive_po.contract", "adaptive_po.studies"))] for name, found in studies.items()}
    assert studies and not any(beyond.values()), f"the studies layer imports beyond the contract: {beyond}"


def test_readme_shows_the_contract_tables():
    readme = (REPO / "runs" / "README.md").read_text(encoding="utf-8")
    for columns in (contract.PROGRESS_COLUMNS, contract.EVAL_COLUMNS):
        assert contract.markdown_table(columns) in readme, (
            "runs/README.md is out of date: paste contract.markdown_table(...) again"
        )


# ---------------------------------------------------------------------------------------------
# the contract's own facts and helpers


def test_columns_are_consistent():
    progress = contract.column_names(contract.PROGRESS_COLUMNS)
    assert len(set(progress)) == len(progress)
    assert progress[:2] == ("update", "timesteps")
    assert "ess" in progress and "ess_mean" not in progress
    # the statistics the algorithms report are exactly the per-update columns of progress.csv
    assert set(contract.UPDATE_STATISTICS) <= set(progress)
    assert not set(contract.UPDATE_STATISTICS) & {"update", "timesteps", "episodes", "time_elapsed",
                                                  "rollout_return_mean", "rollout_length_mean"}
    for columns in (contract.PROGRESS_COLUMNS, contract.EVAL_COLUMNS):
        assert all(c.meaning for c in columns)
        assert all(c.required for c in columns if c.always)
    assert set(contract.CONDITION_KEYS) < set(contract.RUN_KEYS)
    # the budget is part of a run's key (two budgets of one cell are two runs), and every config has it
    assert "total_timesteps" in contract.RUN_KEYS and "total_timesteps" in contract.CONFIG_REQUIRED
    table = contract.markdown_table(contract.EVAL_COLUMNS).splitlines()
    assert table[:2] == ["| column | meaning |", "|---|---|"] and len(table) == 2 + len(contract.EVAL_COLUMNS)


@pytest.mark.parametrize("args, name", [
    ((4, 0.5, 0), "lag4_noise0.5_replay0"),
    ((0, 0.0, 0), "lag0_noise0_replay0"),
    ((0, 0, 0, "actual"), "lag0_noise0_replay0"),
    ((8, 1, 2), "lag8_noise1_replay2"),
    ((1, 0.0001, 0), "lag1_noise0.0001_replay0"),
    ((2, 0.25, 1, "policy"), "lag2_noise0.25_replay1_blp-policy"),
    ((np.int64(4), np.float64(0.5), np.int64(0)), "lag4_noise0.5_replay0"),
])
def test_condition_name(args, name):
    assert dials.condition_name(*args) == name


def test_is_complete_and_run_dir(tmp_path):
    rel = contract.run_relative_dir("quick", "CartPole-v1", "ppo", dials.condition_name(0, 0.0, 0), 3)
    assert rel == Path("quick/CartPole-v1/ppo/lag0_noise0_replay0/seed-3")
    d = tmp_path / rel
    d.mkdir(parents=True)
    assert not contract.is_complete(d)
    contract.atomic_write_text(d / contract.FAILED, "boom")
    assert not contract.is_complete(d)
    contract.atomic_write_json(d / contract.COMPLETE, {"finished_at": "now"})
    assert contract.is_complete(d)


def test_atomic_write_replaces_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "new" / "folder" / "file.txt"  # parents are created
    contract.atomic_write_text(target, "first")
    contract.atomic_write_text(target, "second")
    assert target.read_text() == "second"
    assert os.listdir(target.parent) == ["file.txt"]
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's private 0600
    contract.atomic_write_json(tmp_path / "x.json", {"b": [1, 2.5, None], "a": "é"})
    assert json.loads((tmp_path / "x.json").read_text(encoding="utf-8")) == {"a": "é", "b": [1, 2.5, None]}


def test_failing_writer_keeps_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "progress.csv"
    contract.atomic_write_text(target, "old content\n")

    def half_then_fail(tmp: str) -> None:
        with open(tmp, "w") as fh:
            fh.write("half")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError, match="writer failed"):
        contract.atomic_write(target, half_then_fail)
    assert target.read_text() == "old content\n"
    assert os.listdir(tmp_path) == ["progress.csv"]
    # a writer failing before the target exists leaves no file at all
    with pytest.raises(RuntimeError):
        contract.atomic_write(tmp_path / "other.csv", half_then_fail)
    assert os.listdir(tmp_path) == ["progress.csv"]


def test_atomic_write_rows_exactly_the_contract_columns(tmp_path):
    path = tmp_path / "eval.csv"
    contract.atomic_write_rows(path, contract.EVAL_COLUMNS, [
        {"timesteps": 0, "eval_return_mean": 1.5, "eval_return_std": float("nan"), "eval_episodes": None},
        {"timesteps": 100, "eval_return_mean": 2.0, "not_a_column": 7},  # missing and extra keys
    ])
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == list(contract.column_names(contract.EVAL_COLUMNS))
    assert rows[1:] == [["0", "1.5", "", ""], ["100", "2.0", "", ""]]
    assert path.read_text().endswith("\n") and "\r" not in path.read_text()


# ---------------------------------------------------------------------------------------------
# end to end: a real tiny run, loaded by analysis


def test_real_runs_load_in_analysis(tmp_path):
    from adaptive_po.bench.run_folder import RunSpec
    from adaptive_po.bench.process_engine import execute_run
    from adaptive_po.analysis import LoadWarning, load_runs

    specs = [
        RunSpec(suite="t", env="CartPole-v1", algo="esspo", seed=0, total_timesteps=600, out=str(tmp_path),
                device="cpu"),
        RunSpec(suite="t", env="CartPole-v1", algo="ppo", seed=0, total_timesteps=600, out=str(tmp_path),
                device="cpu", dials=dials.DataDials(policy_lag=2)),
    ]
    for spec in specs:
        result = execute_run(spec)
        assert result["status"] == "complete", result.get("traceback")

    with warnings.catch_warnings():
        warnings.simplefilter("error", LoadWarning)
        runs = load_runs(tmp_path / "t")

    finals = runs.finals.set_index("algo")
    assert len(runs.finals) == 2 and set(finals.index) == {"esspo", "ppo"}
    assert finals.loc["esspo", "condition"] == dials.condition_name(0, 0.0, 0)
    assert finals.loc["ppo", "condition"] == dials.condition_name(2, 0.0, 0)
    assert finals.loc["ppo", "policy_lag"] == 2
    for col in contract.column_names(contract.PROGRESS_COLUMNS):
        assert col in runs.progress.columns, col
    for col in ("timesteps", "return", "return_std", "eval_episodes"):  # eval_return_* renamed
        assert col in runs.evals.columns, col
    for run_dir, progress in runs.progress.groupby("run_dir"):
        d = Path(run_dir)
        summary = json.loads((d / contract.SUMMARY_FILE).read_text())
        config = json.loads((d / contract.CONFIG_FILE).read_text())
        assert set(contract.SUMMARY_REQUIRED) <= set(summary)
        assert config["run_format"] == contract.RUN_FORMAT
        assert len(progress) == summary["updates"] > 0
        assert progress["update"].tolist() == list(range(1, len(progress) + 1))
        assert runs.evals[runs.evals["run_dir"] == run_dir]["timesteps"].iloc[-1] == summary["timesteps"]
    ess = runs.progress["ess"]
    assert ess.notna().all() and (ess > 0).all() and (ess <= 1 + 1e-9).all()
    assert ((runs.finals["ess"] > 0) & (runs.finals["ess"] <= 1 + 1e-9)).all()
    assert all(math.isfinite(v) for v in runs.finals["final_eval_return_mean"])


def test_one_liveness_check_for_every_owner(tmp_path):
    """``contract.pid_alive`` is the one check of the bench's locks and attempt folders, the
    report's staging folders and the Ray reaper: a running process is alive; a zombie, a reaped
    pid and a reused pid (another start time) are not. No other module probes processes itself."""
    import re
    import subprocess
    import sys
    import time

    from adaptive_po import contract

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = contract.process_stat(child.pid)[2]
        assert contract.pid_alive(child.pid) and contract.pid_alive(child.pid, start)
        assert not contract.pid_alive(child.pid, start + 1)  # the pid, but a later process
        child.kill()
        deadline = time.time() + 10
        while contract.process_stat(child.pid)[0] != "Z" and time.time() < deadline:
            time.sleep(0.01)
        assert not contract.pid_alive(child.pid)  # killed, not yet reaped: a zombie
    finally:
        child.kill()
        child.wait()
    assert not contract.pid_alive(child.pid, start) and not contract.pid_alive(0)
    package = Path(contract.__file__).parent
    probing = sorted(
        str(path.relative_to(package)) for path in package.rglob("*.py")
        if re.search(r"os\.kill\(\w+, 0\)", path.read_text())
    )
    assert probing == ["contract.py"]
