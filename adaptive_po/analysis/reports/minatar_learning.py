"""MinAtar at learning budgets (``docs/results/minatar-learning/``): the report command its verdicts
name. The report is the generic one (:mod:`adaptive_po.analysis.study_report`) over the study's
plan file, ``docs/results/minatar-learning/plan.toml``; this module only gives it the study's
folder and plan as defaults."""

from __future__ import annotations

from typing import Sequence

from .. import study_report as study

RESULTS = "docs/results/minatar-learning"
PLAN = f"{RESULTS}/plan.toml"


def main(argv: Sequence[str] | None = None) -> int:
    return study.main(argv, prog="python -m adaptive_po.analysis.reports.minatar_learning", results=RESULTS, plan=PLAN,
                      name="minatar-learning report")


if __name__ == "__main__":
    raise SystemExit(main())
