"""Test support: a synthetic study's search records made whole, as a real study writes them.

The reports check each choice in ``selected.json`` against ``trials.csv`` and the search's runs in
the table (its trial, its mean return and score; every variant searched has a trial). A synthetic
study gives its choices by hand; :func:`record_searches` adds the lower-returning trials that come
before a choice's trial number, sets each choice's ``search_return`` and ``search_score`` to its
runs' means, and writes ``trials.csv``. :func:`add_searches`: each search's runs, its pick above one
other variant; :func:`analysed`: a searched study through the generic report. :func:`synthetic_envs`:
environment files with a synthetic table's random score and reference.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pytest

from adaptive_po.contract import PACKAGED_ENVS_DIR, frozen_row_key


def _picks(selected: Mapping[str, Any], parts: bool):
    for env, chosen in selected.items():
        groups = [(part, picks) for part, picks in chosen.items() if isinstance(picks, Mapping)] if parts else [("", chosen)]
        for part, picks in groups:
            for algo, tuned_picks in picks.items():
                if not isinstance(tuned_picks, Mapping):
                    continue
                for tuned, pick in tuned_picks.items():
                    yield env, int(chosen["budget"]), part, algo, tuned, pick


def record_searches(results: Path, rows: dict, selected: Mapping[str, Any], folders: Mapping[str, str], seeds: Sequence[int],
                    tax_lag: int = 8, parts: bool = False, fill: bool = True) -> None:
    """``rows`` (the table being made) and ``selected``'s choices completed in place, and
    ``results/trials.csv`` written; ``folders``: each part's search folder (``{"": folder}``
    without parts). ``fill``: add trials below the choice up to its trial number; else the choice's
    trial number becomes its place among the variants the table has (no runs added)."""
    trials = []
    for env, budget, part, algo, tuned, pick in _picks(selected, parts):
        folder, lag = folders[part], 0 if tuned == "fresh" else tax_lag
        runs: dict[str, dict[int, dict]] = {}
        for key, row in rows.items():
            if key[0] == folder and key[1:3] == (env, algo) and key[4] == lag and key[6] == budget:
                runs.setdefault(key[3], {})[key[5]] = row
        chosen = runs[pick["variant"]]
        others = sorted(v for v in runs if v != pick["variant"])
        low = min(float(r["final_eval_return"]) for by_seed in runs.values() for r in by_seed.values()) - 1.0
        if not fill:
            pick["trial"] = min(int(pick["trial"]), len(others))
        for i in range(len(others), int(pick["trial"])):  # trials before the choice's, below it
            variant = f"filler_trial={i}"
            for s in seeds:
                row = {**chosen[s], "variant": variant, "final_eval_return": low}
                row["score"] = (low - row["random_score"]) / (row["reference"] - row["random_score"])
                rows[frozen_row_key(row)] = row
            runs[variant] = {s: rows[(folder, env, algo, variant, lag, s, budget, "")] for s in seeds}
            others.append(variant)
        order = others[: int(pick["trial"])] + [pick["variant"]] + others[int(pick["trial"]):]
        for number, variant in enumerate(order):
            got = [runs[variant][s] for s in seeds]
            record = {"part": part, "env": env, "budget": budget, "algo": algo, "tuned_at": tuned, "trial": number, "variant": variant,
                      "failed_runs": sum(r["status"] == "failed" for r in got),
                      "search_return": float(np.mean([float(r["final_eval_return"]) for r in got])),
                      "search_score": float(np.mean([float(r["score"]) for r in got]))}
            trials.append(record)
            if variant == pick["variant"]:
                pick.update(search_return=record["search_return"], search_score=record["search_score"])
    columns = ["part"] * parts + ["env", "budget", "algo", "tuned_at", "trial", "variant", "failed_runs", "search_return", "search_score"]
    with open(results / "trials.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: (repr(v) if isinstance(v, float) else v) for k, v in t.items()} for t in trials)


def noisy_rows(rng: np.random.Generator, sd: float, seeds: Sequence[int]) -> Callable[..., None]:
    """``add(rows, folder, env, budget, algo, variant, lag, mean, seeds=seeds)``: one synthetic run a
    seed into ``rows``, its score ``mean`` plus N(0, ``sd``) noise."""

    def add(rows: dict, folder: str, env: str, budget: int, algo: str, variant: str, lag: int, mean: float, seeds: Sequence[int] = seeds) -> None:
        for s in seeds:
            row = synthetic_row(folder, env, budget, algo, variant, lag, s, float(mean + rng.normal(0, sd)))
            rows[frozen_row_key(row)] = row

    return add


def planted(arm: tuple[float, float], lag: int) -> float:
    """A planted arm's mean score at ``lag``: ``(level, slope)`` gives level + slope x log2(1 + lag)."""
    return arm[0] + arm[1] * math.log2(1 + lag)


def add_searches(add: Callable[..., None], by_part: Mapping[str, Any], env: str, budget: int, folders: Mapping[str, str],
                 seeds: Sequence[int], tax_lag: int = 8) -> None:
    """Each search of one task's picks (``{part: {arm: {tuned: pick}}}``, ``budget`` left out) as
    its runs: ``add(folder, env, budget, algo, variant, lag, mean, seeds)`` for its pick returning
    1.0 and one other variant 0.5, on the search ``seeds``."""
    for part, by_arm in by_part.items():
        for algo, tuned_picks in (by_arm.items() if part != "budget" else ()):
            for tuned, pick in tuned_picks.items():
                lag = 0 if tuned == "fresh" else tax_lag
                add(folders[part], env, budget, algo, pick["variant"], lag, 1.0, seeds)
                add(folders[part], env, budget, algo, f"learning_rate=x{0.5 if tuned == 'fresh' else 0.7}", lag, 0.5, seeds)


def analysed(results: Path) -> tuple[Any, dict, dict[str, dict], dict[str, dict]]:
    """A searched study's committed folder through the generic report: (study, result, the
    endpoints' rows by id, the answers by decision)."""
    from adaptive_po.analysis import searched_report as report

    study = report.load(results)
    result = report.analyse(study)
    rows = report.primary(study, result)
    return study, result, {r["id"]: r for r in rows}, {a["decision"].name: a for a in report.answers(study, rows)}


def holm_by_hand(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, written out apart from the code under test."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        out[i] = running
    return out


def synthetic_row(folder: str, env: str, budget: int, algo: str, variant: str, lag: int, seed: int, score: float) -> dict:
    """One complete run of a synthetic table whose random score is 0 and reference 1 (its return is its score)."""
    return {"folder": folder, "env": env, "algo": algo, "variant": variant, "policy_lag": lag, "seed": seed, "total_timesteps": budget,
            "status": "complete", "final_eval_return": score, "random_score": 0.0, "reference": 1.0, "score": score, "step": "compiled",
            "wall_time_s": 1.0}


@pytest.fixture
def synthetic_envs(tmp_path, monkeypatch):
    """``make(random_score, reference)``: copies of the packaged environment files whose random score
    and reference (``solved_threshold``) are the synthetic studies' (a synthetic table normalizes by
    them; the reports and the study check every row against its environment file), made the default
    ``$ADAPTIVE_PO_ENVS`` of the reports for the test; returns the folder (the bench's ``envs_dir``)."""

    def make(random_score: float, reference: float) -> Path:
        folder = tmp_path / "synthetic-envs"
        folder.mkdir(exist_ok=True)
        for path in sorted(PACKAGED_ENVS_DIR.glob("*.yaml")):
            text = re.sub(r"(?m)^random_score:.*$", f"random_score: {random_score!r}", path.read_text())
            text = re.sub(r"(?m)^solved_threshold:.*$", f"solved_threshold: {reference!r}", text)
            (folder / path.name).write_text(text)
        monkeypatch.setenv("ADAPTIVE_PO_ENVS", str(folder))
        return folder

    return make
