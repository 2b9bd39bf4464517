"""After R2VPO's published staleness-grid report: rebuilt byte for byte from its committed table,
on exactly the published PPO runs of the same cells."""

from pathlib import Path

import pandas as pd

from adaptive_po.analysis.reports.r2vpo import main

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def test_the_r2vpo_verdicts_rebuild_from_the_committed_table(tmp_path):
    assert main(["--table", str(RESULTS / "r2vpo" / "per_run.csv"), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "verdicts.md").read_bytes() == (RESULTS / "r2vpo" / "verdicts.md").read_bytes()


def test_the_r2vpo_table_pairs_each_cell_with_the_published_ppo_runs():
    table = pd.read_csv(RESULTS / "r2vpo" / "per_run.csv")
    published = pd.read_csv(RESULTS / "staleness" / "per_run.csv")
    key = ["env", "condition", "seed", "total_timesteps"]
    arm, ppo = table[table["algo"] == "r2vpo"], table[table["algo"] == "ppo"]
    assert len(arm) == len(ppo) == 80 and set(table["algo"]) == {"r2vpo", "ppo"}
    assert sorted(map(tuple, arm[key].to_numpy().tolist())) == sorted(map(tuple, ppo[key].to_numpy().tolist()))
    merged = ppo.merge(published[published["algo"] == "ppo"], on=key, suffixes=("", "_published"))
    assert len(merged) == 80 and (merged["final_eval_return"] == merged["final_eval_return_published"]).all()
