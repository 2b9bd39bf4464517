"""The two staleness dials' state, written once for both faces of the algorithm.

``policy_lag = k``: the actor acts with the parameters of ``k`` updates ago, kept in a queue of
snapshots (the newest last); ``replay = m``: each update also trains on the ``m`` rollouts before
its own, kept in a queue of ``m`` (the oldest drops out). The SB3 class's :class:`~adaptive_po.
collector.Collector` holds one queue for its run (one lag); the population learner holds one for
all its members (a lag each, one replay depth), so the two engines share this arithmetic instead
of each writing it (a queue one too long, or every member on the first member's lag, is then a
bug in one place, and the tests of either engine catch it).

The queue is agnostic of what a snapshot or a rollout is (a state dict, stacked tensors, a stored
rollout): it only says which to keep and which act.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, Sequence, TypeVar

Snapshot = TypeVar("Snapshot")
Rollout = TypeVar("Rollout")


class StaleQueue(Generic[Snapshot, Rollout]):
    """The snapshots behind the policy lags and the rollouts kept for replay.

    :param lags: each actor's policy lag (one for a single run, one per member of a population)
    :param replay: the older rollouts each update also trains on (shared by every actor)
    """

    def __init__(self, lags: Sequence[int], replay: int) -> None:
        self.lags = tuple(int(lag) for lag in lags)
        if not self.lags or min(self.lags) < 0 or replay < 0:
            raise ValueError(f"policy lags {list(self.lags)} and replay {replay} must be >= 0 (and at least one lag)")
        self.replay = int(replay)
        #: updates done so far
        self.updates = 0
        #: the parameters of the last ``max(lags) + 1`` updates, the newest last
        self.snapshots: deque[Snapshot] = deque(maxlen=max(self.lags) + 1)
        #: the last ``replay`` rollouts trained on, the newest last
        self.replayed: deque[Rollout] = deque(maxlen=max(self.replay, 1))

    @property
    def lagged(self) -> bool:
        """Whether any actor acts with older parameters than the learner's."""
        return max(self.lags) > 0

    def start(self, initial: Snapshot | None) -> None:
        """Forget every update: the initial parameters act (``None``: the caller keeps none, at lag 0)."""
        self.updates = 0
        self.snapshots.clear()
        self.replayed.clear()
        if initial is not None:
            self.snapshots.append(initial)

    def batches(self, current: Rollout) -> list[Rollout]:
        """What the next update trains on: ``current``, then the kept rollouts, newest first."""
        return [current, *reversed(self.replayed)] if self.replay > 0 else [current]

    @property
    def acting_updates(self) -> list[int]:
        """For each actor, the update whose parameters act now (0 = the initial ones)."""
        return [max(0, self.updates - lag) for lag in self.lags]

    def acting_slots(self) -> list[int]:
        """For each actor, the index in :attr:`snapshots` of the parameters that act now."""
        return [len(self.snapshots) - 1 - (self.updates - update) for update in self.acting_updates]

    def after_update(self, trained_on: Rollout, snapshot: Snapshot | None) -> None:
        """One update done: keep ``trained_on`` for replay and ``snapshot`` (the parameters after
        the update; ``None`` where the caller keeps none, at lag 0) behind the lags."""
        self.updates += 1
        if self.replay > 0:
            self.replayed.append(trained_on)
        if snapshot is not None:
            self.snapshots.append(snapshot)
