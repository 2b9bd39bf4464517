"""Our MinAtar PPO beside the published PPO at equal settings: the report from its committed table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from adaptive_po.analysis.reports import minatar_gymnax as report

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "minatar-gymnax"


def test_the_published_report_rebuilds_byte_for_byte_from_its_table(tmp_path):
    out = tmp_path / "minatar-gymnax"
    shutil.copytree(RESULTS, out)
    assert report.main(["--table", str(out / report.TABLE_FILE), "--out", str(out)]) == 0
    assert (out / report.REPORT_FILE).read_bytes() == (RESULTS / report.REPORT_FILE).read_bytes()
    assert (out / report.FIGURE_FILE).stat().st_size > 10_000
    table = pd.read_csv(RESULTS / report.TABLE_FILE)
    assert len(table) == 10 and set(table["status"]) == {"complete"}
    assert set(table["env"]) == set(report.PUBLISHED) and sorted(table["seed"].unique()) == [0, 1, 2, 3, 4]


def curve(values: dict[int, float]) -> str:
    return " ".join(f"{s}:{v}" for s, v in values.items())


def synthetic(train_at_1m: list[float]) -> pd.DataFrame:
    rows = []
    for env in report.PUBLISHED:
        for seed, value in enumerate(train_at_1m):
            rows.append({
                "suite": "minatar-gymnax", "env": env, "algo": "ppo", "seed": seed, "total_timesteps": 2_007_040, "status": "complete",
                "final_eval_return": value, "final_train_return": value,
                "eval_curve": curve({950_000: value, 1_950_000: value}),
                report.TRAIN_CURVE: curve({8192: 0.5, 958_464: value, 966_656: value + 100, 1_916_928: value}),
            })
    return pd.DataFrame(rows)


def test_clearly_below_needs_the_published_value_above_every_seed_and_the_interval():
    low = report.comparison(synthetic([3.0, 3.5, 4.0]))
    breakout_1m = low[(low["env"] == "Breakout-MinAtar-gymnax") & (low["step"] == 959_936)].iloc[0]
    assert list(breakout_1m["train"]) == [3.0, 3.5, 4.0]  # the point nearest 959,936 is 958,464, not 966,656
    assert breakout_1m["clearly_below"] and breakout_1m["reach"] == 0
    mixed = report.comparison(synthetic([3.0, 3.5, 17.0]))
    row = mixed[(mixed["env"] == "Breakout-MinAtar-gymnax") & (mixed["step"] == 959_936)].iloc[0]
    assert not row["clearly_below"] and row["reach"] == 1
    text = report.report_markdown(synthetic([3.0, 3.5, 4.0]), low)
    assert "**clearly below**" in text and "not clearly below" not in text
    assert "**not clearly below**" in report.report_markdown(synthetic([20.0, 60.0, 90.0]), report.comparison(synthetic([20.0, 60.0, 90.0])))


def test_a_bad_table_is_one_line_with_exit_2(tmp_path, capsys):
    assert report.main(["--table", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "out")]) == 2
    assert "no per-run table at" in capsys.readouterr().out
    bad = synthetic([1.0, 2.0]).drop(columns=[report.TRAIN_CURVE])
    bad.to_csv(tmp_path / "bad.csv", index=False)
    assert report.main(["--table", str(tmp_path / "bad.csv"), "--out", str(tmp_path / "out")]) == 2
    assert "missing columns ['train_curve']" in capsys.readouterr().out
    other = synthetic([1.0, 2.0]).assign(env="Freeway-MinAtar")
    other.to_csv(tmp_path / "other.csv", index=False)
    assert report.main(["--table", str(tmp_path / "other.csv"), "--out", str(tmp_path / "out")]) == 2
    assert "games without a published reference here: ['Freeway-MinAtar']" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("step, expected", [(0, 0.5), (959_936, 3.0), (963_000, 103.0), (5_000_000, 3.0)])
def test_a_curves_value_is_its_point_nearest_the_step(step, expected):
    assert report.value_at(curve({8192: 0.5, 958_464: 3.0, 966_656: 103.0, 1_916_928: 3.0}), step) == expected
