"""The data-condition vocabulary of the analysis: fresh data, the paper's headline conditions, the
axes of the mismatch figure, and selecting the runs of a condition in a frame.

The six data dials, their names and defaults are the run-folder contract's
(:class:`adaptive_po.dials.DataDials`, ``DIAL_NAMES``, ``DIAL_DEFAULTS``); nothing here
spells them out again. How conditions are named and ordered is :mod:`adaptive_po.analysis.labels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from adaptive_po.dials import DIAL_DEFAULTS, DataDials

__all__ = ["FRESH", "NamedCondition", "HEADLINE_CONDITIONS", "MISMATCH_AXES", "same_level", "fresh_except"]

#: fresh data: every dial at its default (no lag, no noise, no replay, the sampler at T = 1 and
#: fp32, its own log-probs)
FRESH: dict[str, Any] = dict(DIAL_DEFAULTS)
#: the axes of the mismatch-level figure (policy lag has a figure of its own)
MISMATCH_AXES: tuple[str, ...] = (
    "sampler_temperature", "sampler_precision", "behaviour_log_prob", "action_noise", "replay",
)


def same_level(a, b) -> bool:
    """Two values of one dial are the same level (numbers compared with ``np.isclose``)."""
    if isinstance(b, str) or isinstance(a, str):
        return a == b
    return bool(np.isclose(float(a), float(b)))


def _level_mask(series: pd.Series, val) -> pd.Series:
    if isinstance(val, str):
        return series == val
    return pd.Series(np.isclose(series.to_numpy(dtype=float), float(val)), index=series.index)


@dataclass(frozen=True)
class NamedCondition:
    """A named data condition: a value for every data dial (``dials.DIAL_NAMES``)."""

    label: str
    values: Mapping[str, Any]

    @classmethod
    def of(cls, label: str, **dials) -> "NamedCondition":
        """The condition with these dials (validated by ``DataDials``), the others at their defaults."""
        return cls(label, DataDials(**dials).to_dict())

    def mask(self, df: pd.DataFrame) -> pd.Series:
        """Rows of ``df`` (with a column per dial) under this condition."""
        m = pd.Series(True, index=df.index)
        for key, val in self.values.items():
            m &= _level_mask(df[key], val)
        return m

    def matches(self, values: Mapping[str, Any]) -> bool:
        return all(same_level(values[k], v) for k, v in self.values.items())


#: the paper's headline conditions, in the order of the x axis of ``iqm_conditions.png``
HEADLINE_CONDITIONS: tuple[NamedCondition, ...] = (
    NamedCondition.of("fresh"),
    NamedCondition.of("lag 16", policy_lag=16),
    NamedCondition.of("T=1.2", sampler_temperature=1.2),
    NamedCondition.of("fp8-e4m3", sampler_precision="fp8-e4m3"),
    NamedCondition.of("fp8-e4m3, learner log-prob", sampler_precision="fp8-e4m3", behaviour_log_prob="policy"),
)


def fresh_except(df: pd.DataFrame, axis: str) -> pd.DataFrame:
    """Rows of ``df`` where every dial but ``axis`` is at its fresh value."""
    return df[NamedCondition("fresh", {k: v for k, v in FRESH.items() if k != axis}).mask(df)]
