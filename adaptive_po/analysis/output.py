"""The one way every report writes its figures and tables: through the contract's atomic write,
so a reader (or a second analysis run) never sees a half-written figure or table.

This module imports no matplotlib: a report that writes tables only stays free of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from adaptive_po.contract import atomic_write

__all__ = ["save_figure", "save_csv"]


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Save a matplotlib figure as PNG (the format is explicit: the temporary name has no .png)
    and close it."""
    import matplotlib.pyplot as plt  # the figure exists, so matplotlib is loaded already

    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi))
    finally:
        plt.close(fig)


def save_csv(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Save a table as CSV without its index."""
    return atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))
