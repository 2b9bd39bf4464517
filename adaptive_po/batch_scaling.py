"""After ABS: the rollout length of each update set from how far the last update moved the behaviour.

A reconstruction of the idea of "Scalable (On-Policy) RL via Adaptive Batch Scaling" (arXiv
2605.21557), whose formula and code are not public; hence "after ABS", and every knob is declared
here with its default and its reason. After each update the learner measures a behavioural
divergence ``d`` between the policies before and after that update (for :class:`~adaptive_po.pqn.PQN`:
the share of the update's fresh states whose greedy action changed), and the next rollout takes

    ``T = clip(base * round(c / (d * base)), t_min, t_max)`` steps per environment,

a whole multiple of ``base``: an update that moved the behaviour much is followed by a short rollout
(the data goes stale fast, so update again soon), one that barely moved it by a long rollout (a
larger batch, less gradient noise per update). ``d = 0`` takes ``t_max``.

Torch-free: pure arithmetic on numbers, so that a test can script a divergence sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

#: the divergence at which the configured rollout length is kept (``c = REFERENCE_DIVERGENCE * n_steps``):
#: PQN on CartPole changes the greedy action of a few percent of the states per update once it learns
REFERENCE_DIVERGENCE = 0.05


@dataclass(frozen=True, kw_only=True)
class AfterABS:
    """The after-ABS dial's knobs, each ``None`` for its default relative to the algorithm's
    configured ``n_steps`` (:meth:`resolve`).

    :param c: divergence x steps: the rollout length is ``c / d`` steps per environment. Default
        ``REFERENCE_DIVERGENCE * n_steps`` (the configured length at a 5% greedy-action change).
    :param base: rollout lengths are whole multiples of this many steps. Default ``max(1, n_steps // 4)``
        (four lengths per configured rollout: coarse enough that the length does not jitter every update).
    :param t_min: the shortest rollout, steps per environment. Default ``base``.
    :param t_max: the longest rollout, steps per environment. Default ``4 * n_steps`` (the rollout buffer
        and the update's memory grow with it; four times the authors' batch).
    """

    c: float | None = None
    base: int | None = None
    t_min: int | None = None
    t_max: int | None = None

    def __post_init__(self) -> None:
        c = self.c
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < math.inf):
            raise ValueError(f"after-ABS c must be a finite number > 0, got {c!r}")
        for name in ("base", "t_min", "t_max"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"after-ABS {name} must be a positive integer, got {value!r}")

    def resolve(self, n_steps: int) -> "AfterABS":
        """The knobs with every default filled in for the configured ``n_steps``; ``ValueError``
        where ``t_min > t_max`` or a bound is not a multiple of ``base``."""
        base = self.base if self.base is not None else max(1, n_steps // 4)
        t_min = self.t_min if self.t_min is not None else base
        t_max = self.t_max if self.t_max is not None else 4 * n_steps
        c = float(self.c) if self.c is not None else REFERENCE_DIVERGENCE * n_steps
        if t_min > t_max:
            raise ValueError(f"after-ABS t_min={t_min} is larger than t_max={t_max}")
        for name, value in (("t_min", t_min), ("t_max", t_max)):
            if value % base:
                raise ValueError(f"after-ABS {name}={value} is not a whole multiple of base={base}")
        return AfterABS(c=c, base=base, t_min=t_min, t_max=t_max)

    def next_rollout_steps(self, divergence: float) -> int:
        """Steps per environment of the next rollout after an update of behavioural ``divergence``
        (a number in [0, 1]; ``ValueError`` otherwise). Call on :meth:`resolve`'d knobs."""
        if self.c is None or self.base is None or self.t_min is None or self.t_max is None:
            raise ValueError("next_rollout_steps needs resolved knobs: call AfterABS.resolve(n_steps) first")
        if isinstance(divergence, bool) or not isinstance(divergence, (int, float)) or not 0.0 <= divergence <= 1.0:
            raise ValueError(f"a behavioural divergence must be a number in [0, 1], got {divergence!r}")
        multiples = self.c / (divergence * self.base) if divergence > 0.0 else math.inf
        if multiples >= self.t_max / self.base:  # d = 0 (or tiny): the longest rollout, no overflow
            return self.t_max
        steps = self.base * round(multiples)
        return int(min(max(steps, self.t_min), self.t_max))


def after_abs(value: "AfterABS | Mapping[str, Any] | None") -> "AfterABS | None":
    """``None`` (the dial off), an :class:`AfterABS`, or its knobs as a mapping (an environment file's
    ``batch_scaling: {t_max: 256}``) as an :class:`AfterABS`; ``TypeError``/``ValueError`` otherwise."""
    if value is None or isinstance(value, AfterABS):
        return value
    if isinstance(value, Mapping):
        return AfterABS(**value)
    raise TypeError(f"batch_scaling must be None, an AfterABS or a mapping of its knobs, got {type(value).__name__}")
