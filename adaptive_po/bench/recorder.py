"""One run's records, for both engines: progress rows, evaluations, their files, and when to evaluate.

The process engine (:mod:`adaptive_po.bench.process_engine`, one SB3 run) and the population engine
(:mod:`adaptive_po.bench.population_engine`, K runs in lockstep) keep one :class:`RunRecorder` per run.
It is the one place that builds a progress row from an update's statistics, decides whether an
update went non-finite, schedules the periodic evaluations, and writes ``progress.csv``,
``eval.csv`` and the live ``.status.json`` atomically (the contract in
:mod:`adaptive_po.contract`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adaptive_po import contract

#: seconds between rewrites of progress.csv during training (it is always written at the end)
PROGRESS_WRITE_INTERVAL = 5.0

#: the statistics whose non-finite value fails a run
LOSS_STATISTICS: tuple[str, ...] = ("loss", "value_loss", "policy_loss")


def nonfinite_reason(stats: Mapping[str, float], update: int, parameters_finite: bool = True) -> str | None:
    """Why update ``update`` failed the run (a non-finite loss, or a non-finite parameter), or None."""
    losses = {name: float(stats[name]) for name in LOSS_STATISTICS}
    if not all(math.isfinite(v) for v in losses.values()):
        return f"non-finite loss at update {update}: {losses}"
    if not parameters_finite:
        return f"non-finite parameter at update {update}: {losses}"
    return None


class RunRecorder:
    """Progress and evaluations of one run, written into ``run_dir``.

    :param total_timesteps: the run's budget; evaluations are due every ``eval_every`` steps
        before it (the final evaluation at the budget is the driver's).
    """

    def __init__(self, run_dir: Path, total_timesteps: int, eval_every: int, started: float | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.total_timesteps = int(total_timesteps)
        self.eval_every = int(eval_every)
        self.next_eval = self.eval_every
        self.started = time.time() if started is None else started
        self.progress: list[dict[str, Any]] = []
        # progress.csv's text, kept as it grows: each rewrite formats only the rows added since the
        # last one (formatting every row at every rewrite made a long run's writes quadratic)
        self._progress_text: list[str] = [contract.csv_text(contract.PROGRESS_COLUMNS, [])]
        self._formatted = 0
        self.evaluations: list[dict[str, Any]] = []
        self._last_write = 0.0

    # -- evaluations ------------------------------------------------------------------------------
    def evaluation_due(self, timesteps: int) -> bool:
        """Whether the step count has crossed the next multiple of ``eval_every`` (before the
        budget); when it has, the schedule moves past ``timesteps``."""
        if not (timesteps >= self.next_eval and timesteps < self.total_timesteps):
            return False
        while self.next_eval <= timesteps:
            self.next_eval += self.eval_every
        return True

    def add_evaluation(self, timesteps: int, returns: Sequence[float]) -> dict[str, Any]:
        """Record one deterministic evaluation (episode returns) and rewrite ``eval.csv``."""
        row = {
            "timesteps": int(timesteps),
            "eval_return_mean": float(np.mean(returns)),
            "eval_return_std": float(np.std(returns)),
            "eval_episodes": len(returns),
        }
        self.evaluations.append(row)
        contract.atomic_write_rows(self.run_dir / contract.EVAL_FILE, contract.EVAL_COLUMNS, self.evaluations)
        return row

    # -- updates ----------------------------------------------------------------------------------
    def add_update(
        self,
        stats: Mapping[str, float],
        *,
        timesteps: int,
        episodes: int,
        returns: Sequence[float],
        lengths: Sequence[float],
    ) -> dict[str, Any]:
        """Record one update's progress row (``returns`` and ``lengths``: the recent training
        episodes) and rewrite ``progress.csv`` if the last write is older than the interval."""
        row = {
            "update": len(self.progress) + 1,
            "timesteps": int(timesteps),
            "episodes": int(episodes),
            "time_elapsed": round(time.time() - self.started, 3),
            "rollout_return_mean": float(np.mean(returns)) if len(returns) else None,
            "rollout_length_mean": float(np.mean(lengths)) if len(lengths) else None,
            **{name: float(stats[name]) for name in contract.UPDATE_STATISTICS},
            **{name: (float(stats[name]) if name in stats else None) for name in contract.OPTIONAL_STATISTICS},
        }
        self.progress.append(row)
        self.write_progress()
        return row

    def write_progress(self, force: bool = False) -> None:
        """``progress.csv`` and the live status file, at most every :data:`PROGRESS_WRITE_INTERVAL`."""
        now = time.time()
        if not force and now - self._last_write < PROGRESS_WRITE_INTERVAL:
            return
        self._last_write = now
        self._progress_text.append(contract.csv_text(contract.PROGRESS_COLUMNS, self.progress[self._formatted :], header=False))
        self._formatted = len(self.progress)
        contract.atomic_write_text(self.run_dir / contract.PROGRESS_FILE, "".join(self._progress_text))
        timesteps = self.progress[-1]["timesteps"] if self.progress else 0
        contract.atomic_write_json(
            self.run_dir / contract.STATUS_FILE, {"timesteps": timesteps, "total_timesteps": self.total_timesteps}
        )
