"""``RunRecorder``: progress.csv rewritten during training from its text so far (each row
formatted once) must be, byte for byte, the CSV of every row written at once."""

from __future__ import annotations

import math

from adaptive_po import contract
from adaptive_po.bench import recorder as R


def test_progress_rewrites_equal_the_whole_csv_written_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "PROGRESS_WRITE_INTERVAL", 0.0)  # rewrite at every update
    rec = R.RunRecorder(tmp_path, total_timesteps=1000, eval_every=100)
    stats = {name: 0.1 * i for i, name in enumerate(contract.UPDATE_STATISTICS)}
    stats["loss"] = stats["value_loss"] = stats["policy_loss"] = 1.0
    for update in range(7):
        varied = {**stats, contract.UPDATE_STATISTICS[0]: math.nan if update == 3 else update / 3}
        rec.add_update(varied, timesteps=100 * (update + 1), episodes=update, returns=[1.5, 2.0][: update % 3], lengths=[10.0, 12.0][: update % 3])
        whole = contract.csv_text(contract.PROGRESS_COLUMNS, rec.progress)
        assert (tmp_path / contract.PROGRESS_FILE).read_text() == whole
    assert whole.count("\n") == 8  # the header and 7 rows
    assert ",," in whole  # NaN and None are empty cells


def test_progress_between_rewrites_then_forced(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "PROGRESS_WRITE_INTERVAL", 3600.0)  # only the first and the forced write
    rec = R.RunRecorder(tmp_path, total_timesteps=1000, eval_every=100)
    stats = {name: 1.0 for name in contract.UPDATE_STATISTICS}
    for update in range(5):
        rec.add_update(stats, timesteps=10 * (update + 1), episodes=0, returns=[], lengths=[])
    assert (tmp_path / contract.PROGRESS_FILE).read_text().count("\n") == 2  # header + the first row
    rec.write_progress(force=True)
    assert (tmp_path / contract.PROGRESS_FILE).read_text() == contract.csv_text(contract.PROGRESS_COLUMNS, rec.progress)
