"""ALE's first learning curves (docs/results/ale-curves): the report reads each run's training and
evaluation curves at the file's evaluation steps, beside the random and human scores, from the
committed table alone, and refuses a table that is not of it."""

from __future__ import annotations

import pandas as pd
import pytest

from adaptive_po.analysis.reports import ale_curves


def _table(rows) -> pd.DataFrame:
    out = []
    for algo, seed, slope in rows:
        train = " ".join(f"{s}:{1.5 + slope * s / 1e6:.4g}" for s in range(1024, 1_000_449, 1024))
        evaluation = " ".join(f"{s}:{2.0 + slope * s / 1e6:.4g}" for s in (0, 250_000, 500_000, 750_000, 1_000_448))
        out.append({"suite": "ale-curves", "env": "Breakout-v5", "algo": algo, "seed": seed, "total_timesteps": 1_000_000, "status": "complete",
                    "final_eval_return": 2.0 + slope * 1.000448, "final_train_return": 1.5 + slope, "eval_curve": evaluation,
                    "train_curve": train})
    return pd.DataFrame(out)


def test_the_report_reads_each_run_at_the_files_evaluation_steps_beside_the_guides(tmp_path):
    table = _table([("ppo", 0, 20.0), ("ppo", 1, 10.0), ("esspo", 0, 0.1)])
    table.to_csv(tmp_path / "per_run.csv", index=False)
    assert ale_curves.main(["--table", str(tmp_path / "per_run.csv"), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "report.md").read_text()
    # ppo seed 0: 1.5 + 20 x s/1M at the training point nearest each step
    assert "| `ppo` | 0 | complete | 6.5 | 11.5 | 16.5 | 21.5 | 22.0 | 22.0 |" in text
    # the mean over two seeds with its interval, and the multiple of the random score
    assert "- `ppo`: training return at 1M steps 16.5 [-47.1, 80.1] over 2 seed(s), 9.7 times the random score (2 of 2 seed(s) above it)" in text
    assert "- `esspo`: training return at 1M steps 1.6 (one seed: no interval) over 1 seed(s), 0.9 times the random score (0 of 1 seed(s) above it)" in text
    assert "414.66" in text and "no difference between the arms is tested" in text
    assert (tmp_path / "out" / "curves.png").stat().st_size > 10_000


@pytest.mark.parametrize("edit, named", [
    (lambda t: t.assign(env="Pong-v5"), "'Pong-v5' is not of this report"),
    (lambda t: t.assign(algo="vtrace"), "'vtrace' is not of this report"),
    (lambda t: t.drop(columns=["train_curve"]), "missing columns ['train_curve']"),
])
def test_a_table_not_of_this_report_is_refused_in_one_line(tmp_path, capsys, edit, named):
    edit(_table([("ppo", 0, 20.0)])).to_csv(tmp_path / "per_run.csv", index=False)
    assert ale_curves.main(["--table", str(tmp_path / "per_run.csv"), "--out", str(tmp_path / "out")]) == 2
    out = capsys.readouterr().out.strip()
    assert named in out and "\n" not in out and not (tmp_path / "out").exists()
