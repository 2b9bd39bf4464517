"""Divergence caught and named, for both engines, so that a sweep survives a run that diverges.

* :func:`error_line`: the cause of a failure in one line, ``Type: message``, for the sweep's
  line: the exception of a traceback's last block, its first line only, never the tail of a tensor.
* :func:`compact_traceback`: a traceback with tensor dumps folded, for the ``FAILED`` file.
* :func:`nonfinite_parameters` / :func:`check_finite`: the parameters a diverged update left
  non-finite, and the ``FloatingPointError`` that names them.
* :func:`divergence_reason`: a run that diverged *without* a NaN, read from its progress rows: a
  KL statistic below zero (``kl_behaviour``, ``kl_behaviour_sampled`` and ``approx_kl`` are
  non-negative by construction, so a negative one is numerical breakdown), or the policy's entropy
  collapsed to zero while the critic's loss exploded. ``summary.json`` records it as
  ``"diverged"`` (null for a healthy run) and the sweep and the report name such runs.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

#: statistics that are KL divergences (or their per-sample estimates, non-negative term by term)
KL_STATISTICS: tuple[str, ...] = ("kl_behaviour", "kl_behaviour_sampled", "approx_kl")
#: below this a KL statistic is not rounding noise (float32 rounding of terms near 0 stays ~1e-7)
KL_TOLERANCE = 1e-6
#: an entropy at or below this counts as collapsed (a deterministic policy)
ENTROPY_COLLAPSED = 1e-6
#: a value loss above this counts as exploded (returns of the classic tasks stay far below 1e3)
VALUE_LOSS_EXPLODED = 1e6
#: the longest cause :func:`error_line` returns
MAX_ERROR_CHARS = 300

_TENSOR_ROW = re.compile(r"^\s*\[?\[[-+0-9eE.,\sinfa]*\]\]?,?\s*$")


def error_line(text_or_error: str | BaseException) -> str:
    """``Type: first line of the message`` of an exception, or of the last exception of a
    traceback's text (a chained traceback's final block), at most :data:`MAX_ERROR_CHARS` long."""
    if isinstance(text_or_error, BaseException):
        message = str(text_or_error).strip().splitlines()
        line = f"{type(text_or_error).__name__}: {message[0]}" if message else type(text_or_error).__name__
        return _clip(line)
    lines = text_or_error.rstrip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    start = frames[-1] + 1 if frames else 0
    for line in lines[start:]:
        if line.strip() and not line.startswith((" ", "\t")):
            return _clip(line.strip())
    for line in lines:
        if line.strip():
            return _clip(line.strip())
    return "failed"


def _clip(line: str) -> str:
    line = re.sub(r"\s*tensor\(.*$", " (tensor values omitted)", line)
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."


def compact_traceback(text: str, keep: int = 3) -> str:
    """``text`` with every run of more than ``keep`` tensor-dump lines (``[nan, nan],``) folded
    into one line saying how many were left out."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) > keep:
            out.extend(run[:keep])
            out.append(f"        ... ({len(run) - keep} more lines of tensor values)")
        else:
            out.extend(run)
        run.clear()

    for line in text.splitlines():
        if _TENSOR_ROW.match(line) and line.strip():
            run.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def nonfinite_parameters(named_parameters: Iterable[tuple[str, Any]]) -> list[str]:
    """Names of the tensors with a NaN or an infinity."""
    import torch

    with torch.no_grad():
        return [name for name, value in named_parameters if not bool(torch.isfinite(value).all())]


def check_finite(named_parameters: Iterable[tuple[str, Any]], where: str) -> None:
    """``FloatingPointError`` naming the non-finite parameters, if any."""
    bad = nonfinite_parameters(named_parameters)
    if bad:
        shown = ", ".join(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        raise FloatingPointError(f"non-finite parameters {where}: {shown} (the update diverged)")


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if not math.isnan(number) else None


def divergence_reason(rows: Iterable[Mapping[str, Any]]) -> str | None:
    """Why a run whose numbers stayed finite has diverged anyway, or None: the first update where
    a KL statistic is negative, and the first where the entropy collapsed while the value loss
    exploded (see the module's docstring)."""
    reasons: dict[str, str] = {}
    for row in rows:
        update = row.get("update", "?")
        for name in KL_STATISTICS:
            value = _number(row.get(name))
            if name not in reasons and value is not None and value < -KL_TOLERANCE:
                reasons[name] = f"{name} {value:.3g} < 0 at update {update} (a KL cannot be negative)"
        entropy, value_loss = _number(row.get("entropy")), _number(row.get("value_loss"))
        if (
            "collapse" not in reasons
            and entropy is not None
            and value_loss is not None
            and entropy <= ENTROPY_COLLAPSED
            and value_loss > VALUE_LOSS_EXPLODED
        ):
            reasons["collapse"] = (
                f"entropy {entropy:.3g} with value_loss {value_loss:.3g} at update {update} "
                "(the policy collapsed while the critic exploded)"
            )
    return "; ".join(reasons.values()) or None


def divergence_of_file(progress_csv: str | Path) -> str | None:
    """:func:`divergence_reason` of a ``progress.csv`` (None if it cannot be read)."""
    try:
        with open(progress_csv, newline="", encoding="utf-8") as fh:
            return divergence_reason(csv.DictReader(fh))
    except (OSError, csv.Error, UnicodeDecodeError):
        return None
