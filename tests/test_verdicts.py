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
    assert b["verdict"] == "tie" and b["failed"] == 1 and b["runs"] == 5  # the failure is counted, not dropped
    assert b["mean"] == pytest.approx(np.mean([0.0, 4.8, 4.1, 3.6, 4.4]))  # ... and scored at the random score
    agg = verdicts.aggregates(table, games, "ppo")
    row = agg.iloc[0]
    assert row["tasks"] == 2 and row["mean_diff"] == pytest.approx(((6.04 - 2.01) + (3.38 - 4.0)) / 2 / 10, abs=1e-9)


def test_a_verdict_the_aggregators_disagree_on_is_not_printed_as_one():
    # one game where esspo gains a lot on two seeds (pulls the mean up), small losses elsewhere (the IQM)
    table = _table({
        ("A", "ppo"): [5.0] * 8, ("A", "esspo"): [4.8, 4.8, 4.8, 4.8, 4.8, 4.8, 10.0, 10.0],
        ("B", "ppo"): [5.0] * 8, ("B", "esspo"): [4.8] * 6 + [10.0] * 2,
    })
    games = verdicts.per_task(table, "ppo")
    agg = verdicts.aggregates(table, games, "ppo").iloc[0]
    assert agg["mean_diff"] > 0 and agg["iqm_diff"] < 0
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
    assert verdicts.win_tie_loss(games, "ppo")[("esspo", "lag0_noise0_replay0")] == (0, 0, 0)
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


def test_every_number_in_the_readme_minatar_prose_is_in_its_report():
    text = RESULTS_README.read_text()
    section = text.split("## Results: MinAtar", 1)[1].split(minatar.README_BEGIN, 1)[0]
    reports = "".join((PUBLISHED / name).read_text() for name in ("verdicts.md", "reference_check.md", "reference_gap.md", "results.md"))
    numbers = set(re.findall(r"(?<![\w.])[-+]?\d+\.\d+", section))
    assert numbers, "the prose quotes the report"
    missing = sorted(n for n in numbers if n not in reports)
    assert not missing, f"numbers in the results page's MinAtar prose that no report contains: {missing}"
