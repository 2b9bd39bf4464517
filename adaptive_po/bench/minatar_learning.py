"""MinAtar at learning budgets (``docs/results/minatar-learning/``): the command its pre-registration
and its pilot name. The study is its plan file, ``docs/results/minatar-learning/plan.toml``, run
by the generic runner (:mod:`adaptive_po.bench.study`); this module only gives that runner the
study's folder and plan as defaults."""

from __future__ import annotations

from typing import Sequence

from adaptive_po.bench import study

RESULTS = "docs/results/minatar-learning"
PLAN = f"{RESULTS}/plan.toml"


def main(argv: Sequence[str] | None = None) -> int:
    return study.main(argv, prog="python -m adaptive_po.bench.minatar_learning", results=RESULTS, plan=PLAN, name="minatar_learning")


if __name__ == "__main__":
    raise SystemExit(main())
