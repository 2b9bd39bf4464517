"""Our PQN beside CleanRL's documented PQN (docs/results/pqn-cleanrl): the report compares each task's
final training return over seeds with CleanRL's mean ± sd, says where our interval misses their band,
and refuses a table that is not of it."""

from __future__ import annotations

import pandas as pd
import pytest

from adaptive_po.analysis.reports import pqn_cleanrl


def _table(finals: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for env, values in finals.items():
        for seed, value in enumerate(values):
            curve = " ".join(f"{s}:{value * s / 500_224:.4g}" for s in range(512, 500_225, 512 * 50))
            rows.append({"suite": "pqn-cleanrl", "env": env, "algo": "pqn", "seed": seed, "total_timesteps": 500_000, "status": "complete",
                         "final_eval_return": value, "final_train_return": value, "eval_curve": f"0:0 500224:{value}", "train_curve": curve})
    return pd.DataFrame(rows)


def test_the_report_says_where_our_interval_misses_cleanrls_band(tmp_path):
    # CartPole within the band; Acrobot far below it with a tight interval
    table = _table({"CartPole-v1": [490.0, 500.0, 495.0], "Acrobot-v1": [-150.0, -151.0, -149.0]})
    table.to_csv(tmp_path / "per_run.csv", index=False)
    assert pqn_cleanrl.main(["--table", str(tmp_path / "per_run.csv"), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| CartPole-v1 | 495.0 [482.6, 507.4] | 5.0 | 490.0, 500.0, 495.0 | 495.0 | 495.13 ± 6.89 | no |" in text
    assert "| Acrobot-v1 | -150.0 [-152.5, -147.5] | 1.0 |" in text and "| -95.63 ± 5.73 | yes |" in text
    assert "outside CleanRL's band** on: Acrobot-v1 (-150.0 against -95.63 ± 5.73)" in text
    assert (tmp_path / "out" / "curves.png").stat().st_size > 10_000


@pytest.mark.parametrize("edit, named", [
    (lambda t: t.assign(env="MountainCar-v0"), "'MountainCar-v0' is not of this report"),
    (lambda t: t.assign(algo="ppo"), "'ppo' is not of this report"),
])
def test_a_table_not_of_this_report_is_refused_in_one_line(tmp_path, capsys, edit, named):
    edit(_table({"CartPole-v1": [495.0, 490.0]})).to_csv(tmp_path / "per_run.csv", index=False)
    assert pqn_cleanrl.main(["--table", str(tmp_path / "per_run.csv"), "--out", str(tmp_path / "out")]) == 2
    out = capsys.readouterr().out.strip()
    assert named in out and "\n" not in out
