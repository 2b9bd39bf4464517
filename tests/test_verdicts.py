"""Verdicts (adaptive_po.analysis.verdicts) and the MinAtar report: per-task verdicts, aggregates that drop no game, failures scored, and the
committed report rebuilt from its committed per-run table (the README's numbers included)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from adaptive_po.analysis import verdicts
from adaptive_po.analysis.reports import minatar

ROOT = Path(__file__).resolve().parent.parent
#: the results page: the reports' generated blocks and the prose that quotes them
RESULTS_README = ROOT / "docs" / "results" / "README.md"
PUBLISHED = ROOT / "docs" / "results" / "minatar"


def _table(scores: dict[tuple[str, str], list[float]], failed: tuple[str, str, int] | None = None) -> pd.DataFrame:
    rows = []
    for (env, algo), values in scores.items():
        for seed, value in enumerate(values):
            status = "failed" if failed == (env, algo, seed) else "complete"
            rows.append({
                "suite": "minatar", "env": env, "algo": algo, "condition": "lag0_noise0_replay0", "policy_lag": 0, "seed": seed, "total_timesteps": 1000,
                "status": status, "random_score": 0.0, "solved_threshold": 10.0,
                "final_eval_return": 0.0 if status == "failed" else value, "final_train_return": value, "auc": value, "eval_curve": "",
            })
    return pd.DataFrame(rows)


def test_a_clear_win_a_tie_and_a_failure_scored_at_random():
    table = _table({
        ("A", "ppo"): [2.0, 2.1, 1.9, 2.0, 2.05], ("A", "esspo"): [6.0, 6.1, 5.9, 6.2, 6.0],
        ("B", "ppo"): [3.0, 5.0, 4.0, 3.5, 4.5], ("B", "esspo"): [3.2, 4.8, 4.1, 3.6, 4.4],
    }, failed=("B", "esspo", 0))
    games = verdicts.per_task(table, "ppo")
    a = games[(games["env"] == "A") & (games["algo"] == "esspo")].iloc[0]
    b = games[(games["env"] == "B") & (games["algo"] == "esspo")].iloc[0]
    assert a["verdict"] == "win" and a["diff_low"] > 0
    assert b["verdict"] == "inconclusive" and b["failed"] == 1 and b["runs"] == 5  # the failure is counted, not dropped
    assert b["mean"] == pytest.approx(np.mean([0.0, 4.8, 4.1, 3.6, 4.4]))  # ... and scored at the random score
    agg = verdicts.aggregates(table, games, "ppo")
    row = agg.iloc[0]
    assert row["tasks"] == 2 and row["mean_diff"] == pytest.approx(((6.04 - 2.01) + (3.38 - 4.0)) / 2 / 10, abs=1e-9)


def test_a_verdict_the_aggregators_disagree_on_is_not_printed_as_one():
    # esspo gains a lot on a quarter of the seeds (pulls the mean up, significantly), small losses elsewhere (the IQM)
    table = _table({
        ("A", "ppo"): [5.0] * 16, ("A", "esspo"): [4.8] * 12 + [10.0] * 4,
        ("B", "ppo"): [5.0] * 16, ("B", "esspo"): [4.8] * 12 + [10.0] * 4,
    })
    games = verdicts.per_task(table, "ppo")
    agg = verdicts.aggregates(table, games, "ppo").iloc[0]
    assert agg["mean_diff"] > 0 and agg["iqm_diff"] < 0 and agg["p_holm"] < 0.05
    assert agg["verdict"] == "depends on aggregation"


def test_one_seed_gives_no_interval_and_no_verdict():
    """One run of an arm per game: a difference to it has no interval (it would show the other arm's
    spread alone, or a point), so no win or loss is called on it, per game or in the aggregate."""
    table = _table({("A", "ppo"): [2.0], ("A", "esspo"): [6.0], ("B", "ppo"): [3.0, 3.2, 2.9], ("B", "esspo"): [7.0]})
    games = verdicts.per_task(table, "ppo")
    a = games[(games["env"] == "A") & (games["algo"] == "esspo")].iloc[0]
    assert a["diff"] == pytest.approx(4.0) and np.isnan(a["diff_low"]) and a["verdict"] == verdicts.NO_VERDICT
    assert np.isnan(a["low"])  # the arm's own mean has no interval either
    b = games[(games["env"] == "B") & (games["algo"] == "esspo")].iloc[0]
    assert np.isnan(b["diff_low"]) and b["verdict"] == verdicts.NO_VERDICT  # ppo's 3 seeds do not make esspo's 1 an interval
    agg = verdicts.aggregates(table, games, "ppo").iloc[0]
    assert np.isnan(agg["mean_low"]) and np.isnan(agg["iqm_low"]) and agg["verdict"] == verdicts.NO_VERDICT
    assert verdicts.win_tie_loss(games, "ppo")[("esspo", "lag0_noise0_replay0")] == (0, 0, 0, 0)
    text = verdicts.verdicts_markdown(table, games, verdicts.aggregates(table, games, "ppo"), "ppo", title="t", made_by="a test")
    assert "n = 1, no interval" in text and "nan" not in text
    assert not re.search(r"\[([-+\d.]+), \1\]", text), text


def test_saturated_games_are_marked_and_left_out_of_the_aggregates():
    table = _table({
        ("A", "ppo"): [9.8, 9.9, 10.0], ("A", "esspo"): [9.7, 9.9, 10.0],
        ("B", "ppo"): [2.0, 2.5, 3.0], ("B", "esspo"): [5.0, 5.5, 6.0],
    })
    games = verdicts.per_task(table, "ppo")
    assert games[games["env"] == "A"]["saturated"].all() and not games[games["env"] == "B"]["saturated"].any()
    agg = verdicts.aggregates(table, games, "ppo").iloc[0]
    assert agg["tasks"] == 1 and agg["left_out_saturated"] == 1


def test_the_published_minatar_report_rebuilds_from_its_committed_table_alone(tmp_path):
    readme = tmp_path / "README.md"
    shutil.copy(RESULTS_README, readme)
    assert minatar.main(["--table", str(PUBLISHED / "per_run.csv"), "--out", str(tmp_path), "--readme", str(readme)]) == 0
    for name in ("verdicts.md", "reference_check.md"):
        assert (tmp_path / name).read_text() == (PUBLISHED / name).read_text(), f"{name} differs from its rebuild"
    assert readme.read_text() == RESULTS_README.read_text(), "the results page's MinAtar block differs from the report"


def test_saturation_is_decided_per_pair_so_a_bystander_arm_changes_nothing():
    """Adding a third arm that does not saturate task A leaves the esspo-ppo aggregate as it was
    (before, saturation looked at every arm of the suite)."""
    scores = {
        ("A", "ppo"): [9.8, 9.9, 10.0, 9.9], ("A", "esspo"): [9.7, 9.9, 10.0, 9.8],
        ("B", "ppo"): [2.0, 2.5, 3.0, 2.2], ("B", "esspo"): [5.0, 5.5, 6.0, 5.2],
    }
    pair = _table(scores)
    both = _table({**scores, ("A", "tis-pg"): [1.0, 2.0, 1.5, 1.2], ("B", "tis-pg"): [1.0, 1.1, 0.9, 1.0]})
    rows = []
    for table in (pair, both):
        games = verdicts.per_task(table, "ppo")
        agg = verdicts.aggregates(table, games, "ppo")
        rows.append(agg[agg["algo"] == "esspo"].iloc[0])
    assert rows[0]["tasks"] == rows[1]["tasks"] == 1
    for key in ("mean_diff", "mean_low", "mean_high", "p"):
        assert rows[0][key] == pytest.approx(rows[1][key])
    tis = verdicts.aggregates(both, verdicts.per_task(both, "ppo"), "ppo").set_index("algo").loc["tis-pg"]
    assert tis["tasks"] == 2 and tis["left_out_saturated"] == 0  # the bystander's own aggregate counts task A


@pytest.mark.parametrize("name", ["staleness", "paper", "minatar", "fresh-data", "tuned"])
def test_published_verdicts_are_the_same_under_20_bootstrap_seeds(name):
    """The verdicts rest on Welch tests (no resampling); the descriptive IQM's bootstrap seed must
    never change one (the IQM's point estimate, which can turn a verdict into "depends on
    aggregation", does not depend on the seed)."""
    table = pd.read_csv(ROOT / "docs" / "results" / name / "per_run.csv")
    first = None
    for seed in range(20):
        tasks = verdicts.per_task(table, "ppo", seed, previous=False)
        agg = verdicts.aggregates(table, tasks, "ppo", seed, previous=False)
        words = (tasks["verdict"].tolist(), agg["verdict"].tolist())
        first = first or words
        assert words == first, f"{name}: the verdicts change with bootstrap seed {seed}"
