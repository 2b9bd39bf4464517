"""Tests of adaptive_po.analysis (the core and the suite report) on synthetic run folders written
through the run-folder contract (:mod:`adaptive_po.contract`: its columns, condition names and writers)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from adaptive_po import contract, dials
from adaptive_po.analysis import (
    LoadWarning,
    auc,
    bootstrap,
    bootstrap_ci,
    interpolate_to_grid,
    iqm,
    iqm_ci,
    load_runs,
    mean_ci_over_runs,
    normalize_score,
    probability_of_improvement,
    probability_of_improvement_ci,
    stratified_bootstrap_ci,
)
from adaptive_po.analysis.plots import curve_band
from adaptive_po.analysis.reports.suite import main as report_main
from adaptive_po.analysis.reports.suite import make_report
from adaptive_po.analysis.tables import aggregate_table, condition_table, reference_scores
from cli_here import cli_here  # a command line in this process

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# synthetic run folders


def _row(columns: tuple[contract.Column, ...], values: dict) -> dict:
    """One CSV row with a value for every column of the contract: ``values`` where given (None is
    an empty cell), 0.0 for any other column (e.g. one the contract added since)."""
    unknown = set(values) - set(contract.column_names(columns))
    assert not unknown, f"not contract columns: {unknown}"
    return {c.name: values.get(c.name, 0.0) for c in columns}


def write_run(
    suite_root: Path, env: str = "CartPole-v1", algo: str = "ppo", seed: int = 0, lag: int = 0,
    noise: float = 0.0, replay: int = 0, blp: str = "actual", *, eval_steps=None, eval_returns=None,
    ess=None, total_timesteps: int | None = None, random_score: float | None = 20.0,
    solved_threshold: float | None = 475.0, status: str = "complete", folder: Path | None = None,
    n_updates: int = 5,
) -> Path:
    """Write one run folder (config.json, progress.csv, eval.csv, summary.json and, for
    status 'complete', COMPLETE; for 'failed', FAILED; for 'running', no marker) with the
    contract's file names, columns and writers."""
    eval_steps = [int(t) for t in (eval_steps if eval_steps is not None else [1000, 2000, 3000, 4000])]
    eval_returns = list(eval_returns if eval_returns is not None else [20.0, 100.0, 200.0, 300.0])
    total = int(total_timesteps if total_timesteps is not None else eval_steps[-1])
    cond = dials.condition_name(lag, noise, replay, blp)
    d = folder or suite_root / env / algo / cond / f"seed-{seed}"
    d.mkdir(parents=True, exist_ok=True)
    config = {
        "run_format": contract.RUN_FORMAT, "suite": suite_root.name, "env": env, "algo": algo, "seed": seed, "policy_lag": lag,
        "replay": replay, "action_noise": noise, "behaviour_log_prob": blp, "condition": cond,
        "total_timesteps": total, "n_envs": 8, "backend": "envpool", "device": "cpu",
        "random_score": random_score, "solved_threshold": solved_threshold,
        "eval_episodes": 10, "eval_freq": int(eval_steps[0]),
        "hyperparams": {"n_steps": 32, "batch_size": 256}, "objective_kwargs": {},
        "versions": {"adaptive_po": "0.1.0"},
    }
    contract.atomic_write_json(d / contract.CONFIG_FILE, config)
    ess = list(ess if ess is not None else np.linspace(0.95, 0.7, n_updates))
    steps = np.linspace(total / len(ess), total, len(ess)).astype(int)
    rows = [
        _row(contract.PROGRESS_COLUMNS, {
            "update": i + 1, "timesteps": int(t), "episodes": 3 * i, "time_elapsed": 0.5 * (i + 1),
            "rollout_return_mean": None if i == 0 else 10.0 * i,
            "rollout_length_mean": None if i == 0 else 10.0 * i,
            "ess": e, "ess_min": e - 0.1, "cap_fraction": 0.1, "kl_behaviour": 0.01, "ratio_max": 3.0,
            "ratio_mean": 1.0, "ratio_above_2": 0.02, "policy_loss": -0.01, "value_loss": 1.0,
            "entropy": 0.6, "learning_rate": 3e-4,
        })
        for i, (t, e) in enumerate(zip(steps, ess))
    ]
    contract.atomic_write_rows(d / contract.PROGRESS_FILE, contract.PROGRESS_COLUMNS, rows)
    contract.atomic_write_rows(d / contract.EVAL_FILE, contract.EVAL_COLUMNS, [
        _row(contract.EVAL_COLUMNS, {"timesteps": t, "eval_return_mean": r, "eval_return_std": 1.0,
                                     "eval_episodes": 10})
        for t, r in zip(eval_steps, eval_returns)
    ])
    if status == "running":
        return d
    if status == "failed":
        contract.atomic_write_text(d / contract.FAILED, "RuntimeError: boom\nTraceback ...")
        return d
    summary = {
        "final_eval_return_mean": float(eval_returns[-1]), "final_eval_return_std": 1.0, "eval_episodes": 10,
        "timesteps": total, "updates": len(ess), "wall_time_s": 1.0, "status": "complete",
    }
    assert set(summary) == set(contract.SUMMARY_REQUIRED)
    contract.write_completion(d, summary, "2025-01-01T00:00:00")  # with the integrity records
    return d


def reseal(run_dir: Path) -> None:
    """Record the run's files as they are now, as if the bench had written them so."""
    summary = json.loads((run_dir / contract.SUMMARY_FILE).read_text())
    contract.write_completion(run_dir, summary, "2025-01-01T00:00:00")


def make_suite(
    root: Path, envs=("CartPole-v1", "Acrobot-v1"), algos=("ppo", "esspo"), lags=(0, 8),
    noises=(0.0,), seeds=(0, 1), n_evals: int = 6, total: int = 6000,
) -> Path:
    """A small realistic suite: saturating curves, lag hurts PPO more than esspo, ESS drops with lag."""
    rng = np.random.default_rng(123)
    spec = {"CartPole-v1": (20.0, 475.0, 500.0), "Acrobot-v1": (-500.0, -100.0, -80.0),
            "Pendulum-v1": (-1200.0, -200.0, -150.0)}
    for env in envs:
        rnd, solved, top = spec.get(env, (0.0, 100.0, 110.0))
        for algo in algos:
            for lag in lags:
                for noise in noises:
                    for seed in seeds:
                        penalty = (0.5 if algo == "ppo" else 0.15) * (lag > 0) + 0.3 * noise
                        steps = np.linspace(total / n_evals, total, n_evals)
                        level = rnd + (top - rnd) * max(0.05, 1 - penalty) * (1 - np.exp(-3 * steps / total))
                        level = level + rng.normal(0, 0.03 * abs(top - rnd), size=n_evals)
                        ess = np.clip(np.linspace(0.98, 0.9 - 0.05 * lag, 8) + rng.normal(0, 0.01, 8), 0, 1)
                        write_run(root, env, algo, seed, lag, noise, eval_steps=steps.astype(int),
                                  eval_returns=level, ess=ess, random_score=rnd, solved_threshold=solved,
                                  total_timesteps=total, n_updates=8)
    return root


# ---------------------------------------------------------------------------------------------
# statistics


def test_iqm_hand_computed():
    assert iqm(np.arange(1, 9)) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    assert iqm(np.array([[1, 5], [2, 6], [3, 7], [4, 8]])) == pytest.approx(4.5)  # pooled over tasks
    assert iqm([7.0]) == 7.0
    assert math.isnan(iqm([]))


def test_bootstrap_ci_degenerate_and_regular():
    assert bootstrap_ci([3.0]) == (3.0, 3.0, 3.0)
    assert bootstrap_ci([2.0, 2.0, 2.0], method="BCa") == (2.0, 2.0, 2.0)
    assert all(math.isnan(v) for v in bootstrap_ci([]))
    x = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    a = bootstrap_ci(x, np.mean, n_resamples=200, seed=1)
    b = bootstrap_ci(x, np.mean, n_resamples=200, seed=1)
    assert a == b and a.estimate == pytest.approx(4.0)
    assert x.min() <= a.low <= a.estimate <= a.high <= x.max()
    bca = bootstrap_ci(x, np.mean, n_resamples=200, seed=1, method="BCa")
    assert bca.low <= bca.estimate <= bca.high
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([1.0, np.nan])


def test_probability_of_improvement_known_cases():
    assert probability_of_improvement([5, 6, 7], [1, 2, 3]) == 1.0
    assert probability_of_improvement([1, 2, 3], [5, 6, 7]) == 0.0
    assert probability_of_improvement([1, 2, 3], [1, 2, 3]) == 0.5
    assert probability_of_improvement([4, 4], [4, 4, 4]) == 0.5
    # x=1 beats none of y; x=3 beats 2 and ties 3 (1.5); x=4 beats both (2): 3.5 / 6
    assert probability_of_improvement([1, 3, 4], [2, 3]) == pytest.approx(3.5 / 6)
    # averaged over tasks (dict; run counts may differ)
    assert probability_of_improvement({"a": [5, 6], "b": [1, 2, 3]}, {"a": [1], "b": [1, 2, 3]}) == 0.75
    # matrix runs x tasks: column 0 all better, column 1 identical
    assert probability_of_improvement(np.array([[5, 1], [6, 2]]), np.array([[1, 1], [2, 2]])) == 0.75
    # against brute-force pair counting
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 5, 7).astype(float), rng.integers(0, 5, 5).astype(float)
    brute = np.mean([(xi > yj) + 0.5 * (xi == yj) for xi in x for yj in y])
    assert probability_of_improvement(x, y) == pytest.approx(brute)


def test_probability_of_improvement_ci():
    ci = probability_of_improvement_ci({"a": [5, 6, 7], "b": [3, 4]}, {"a": [1, 2, 3], "b": [0, 1]},
                                       n_resamples=100, seed=0)
    assert ci == (1.0, 1.0, 1.0)
    ci = probability_of_improvement_ci([1.0, 3, 4, 6], [2.0, 3, 5], n_resamples=300, seed=3)
    assert ci == probability_of_improvement_ci([1.0, 3, 4, 6], [2.0, 3, 5], n_resamples=300, seed=3)
    assert 0.0 <= ci.low <= ci.estimate <= ci.high <= 1.0
    with pytest.raises(ValueError, match="different tasks"):
        probability_of_improvement({"a": [1]}, {"b": [1]})


def test_normalized_score():
    assert normalize_score(250.0, 50.0, 450.0) == 0.5
    assert normalize_score(50.0, 50.0, 450.0) == 0.0
    assert normalize_score(-300.0, -500.0, -100.0) == 0.5  # negative-return envs
    np.testing.assert_allclose(normalize_score(np.array([0.0, 10.0, 20.0]), 0.0, 10.0), [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="equals random"):
        normalize_score(1.0, 5.0, 5.0)


def test_interpolate_to_grid_between_points_and_nan_beyond():
    grid = [0, 10, 15, 30, 40, 50]
    out = interpolate_to_grid([10, 20, 40], [0.0, 10.0, 30.0], grid)
    np.testing.assert_allclose(out, [np.nan, 0.0, 5.0, 20.0, 30.0, np.nan])
    # unsorted input, duplicate step (last value kept), NaN values dropped
    out = interpolate_to_grid([20, 10, 20, 30], [99.0, 0.0, 10.0, np.nan], [10, 15, 20, 25])
    np.testing.assert_allclose(out, [0.0, 5.0, 10.0, np.nan])
    assert np.isnan(interpolate_to_grid([], [], [1, 2])).all()


def test_auc_is_mean_return_over_span():
    assert auc([0, 10, 20], [0.0, 10.0, 10.0]) == pytest.approx(7.5)  # (50 + 100) / 20
    assert auc([0, 10, 20, 30], [4.0, 4.0, 4.0, np.nan]) == pytest.approx(4.0)
    assert auc([5], [3.0]) == 3.0
    assert math.isnan(auc([1, 2], [np.nan, np.nan]))


def test_mean_ci_over_runs_hand_computed():
    # Bootstrap means of two runs {a, b}: a (p=1/4), (a+b)/2 (1/2), b (1/4) -> 95% interval [a, b].
    res = mean_ci_over_runs(np.array([[0.0, 2.0], [4.0, 2.0]]), n_resamples=500, seed=0)
    np.testing.assert_allclose(res["mean"], [2.0, 2.0])
    np.testing.assert_allclose(res["low"], [0.0, 2.0])
    np.testing.assert_allclose(res["high"], [4.0, 2.0])
    np.testing.assert_array_equal(res["n"], [2, 2])
    # runs covering different points: mean over the covering runs, a single run is degenerate
    res = mean_ci_over_runs(np.array([[1.0, 3.0, np.nan], [np.nan, 5.0, np.nan]]), n_resamples=100)
    np.testing.assert_allclose(res["mean"], [1.0, 4.0, np.nan])
    np.testing.assert_allclose(res["low"][:2], [1.0, 3.0])
    np.testing.assert_allclose(res["high"][:2], [1.0, 5.0])
    np.testing.assert_array_equal(res["n"], [1, 2, 0])


def test_curve_band_runs_logging_at_different_steps():
    frame = pd.DataFrame({
        "run_dir": ["A"] * 3 + ["B"] * 2,
        "timesteps": [10, 20, 30, 15, 30],
        "return": [0.0, 10.0, 20.0, 5.0, 35.0],
    })
    grid = np.array([10.0, 15.0, 20.0, 30.0])
    # A on grid: 0, 5, 10, 20; B: NaN (before its first step), 5, 15, 35
    band = curve_band(frame, "return", grid, n_resamples=400, seed=0)
    np.testing.assert_allclose(band["mean"], [0.0, 5.0, 12.5, 27.5])
    np.testing.assert_array_equal(band["n"], [1, 2, 2, 2])
    # where one run covers a point there is no band (NaN), never a point drawn as one
    np.testing.assert_allclose(band["low"], [np.nan, 5.0, 10.0, 20.0])
    np.testing.assert_allclose(band["high"], [np.nan, 5.0, 15.0, 35.0])


def test_stratified_bootstrap_reproducible_and_contains_estimate():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(5, 3)) + np.array([0.0, 1.0, 2.0])
    a = iqm_ci(m, n_resamples=300, seed=7)
    b = iqm_ci(m, n_resamples=300, seed=7)
    assert a == b
    assert a.low <= a.estimate <= a.high
    assert a.estimate == pytest.approx(iqm(m))
    # the same data as a dict gives the same draws; unequal seed counts are accepted
    d = {j: m[:, j] for j in range(3)}
    assert stratified_bootstrap_ci(d, iqm, n_resamples=300, seed=7) == a
    c = iqm_ci({"x": [1.0, 2.0, 3.0, 4.0], "y": [10.0, 11.0]}, n_resamples=300, seed=1)
    assert c.low <= c.estimate <= c.high
    # resampling stays within tasks: one run per task -> degenerate interval
    assert iqm_ci({"x": [1.0], "y": [5.0]}, n_resamples=50) == (3.0, 3.0, 3.0)
    # a statistic without an axis argument still works (row-wise fallback)
    e = stratified_bootstrap_ci(m, lambda s: float(np.median(s)), n_resamples=50, seed=0)
    assert e.low <= e.high


def test_bootstrap_primitive_stratifies_and_keeps_each_tasks_count():
    a, b = np.array([0.0, 1.0, 2.0]), np.array([100.0, 101.0, 102.0, 103.0, 104.0])
    res = bootstrap([a, b], lambda s: np.stack([s[0].max(axis=-1), s[1].min(axis=-1),
                                                 np.full(s[0].shape[:-1], s[0].shape[-1]),
                                                 np.full(s[1].shape[:-1], s[1].shape[-1])], axis=-1),
                    n_resamples=500, seed=0)
    assert res.draws.shape == (500, 4)
    assert np.all(res.draws[:, 0] <= 2.0) and np.all(res.draws[:, 1] >= 100.0)  # never across tasks
    assert np.all(res.draws[:, 2] == 3) and np.all(res.draws[:, 3] == 5)  # each task keeps its run count
    np.testing.assert_allclose(res.estimate, [2.0, 100.0, 3, 5])
    # the same seed gives the same draws; a Generator continues one stream
    again = bootstrap([a, b], lambda s: s[0].mean(axis=-1), n_resamples=500, seed=0)
    assert again.ci == bootstrap([a, b], lambda s: s[0].mean(axis=-1), n_resamples=500, seed=0).ci
    rng = np.random.default_rng(0)
    first = bootstrap([a], lambda s: s[0].mean(axis=-1), n_resamples=50, seed=rng)
    second = bootstrap([a], lambda s: s[0].mean(axis=-1), n_resamples=50, seed=rng)
    assert not np.array_equal(first.draws, second.draws)
    # one run per stratum: nothing to resample, a degenerate interval
    one = bootstrap([[3.0], [5.0]], lambda s: s[0].mean(axis=-1) + s[1].mean(axis=-1))
    assert one.ci == (8.0, 8.0, 8.0) and one.draws is None


def test_bootstrap_primitive_known_variance_and_coverage():
    # the bootstrap variance of a mean of n values is their (ddof=0) variance / n
    x = np.random.default_rng(1).normal(size=12)
    res = bootstrap([x], lambda s: s[0].mean(axis=-1), n_resamples=40000, seed=2)
    assert np.var(res.draws) == pytest.approx(np.var(x) / x.size, rel=0.05)
    assert res.estimate == pytest.approx(x.mean())
    # the 90% percentile interval of a mean covers the true mean about 90% of the time
    rng = np.random.default_rng(3)
    hits = []
    for _ in range(400):
        sample = rng.normal(1.0, 2.0, size=30)
        ci = bootstrap([sample], lambda s: s[0].mean(axis=-1), n_resamples=400, confidence=0.9, seed=rng).ci
        hits.append(ci.low <= 1.0 <= ci.high)
    assert 0.84 <= np.mean(hits) <= 0.95


def test_bootstrap_primitive_paired_rows_and_derived_statistics():
    rng = np.random.default_rng(4)
    base = rng.normal(size=8)
    # one stratum (runs, 2): rows resampled whole, so a constant per-seed difference has no spread
    paired = bootstrap([np.column_stack([base + 1.0, base])], lambda s: (s[0][..., 0] - s[0][..., 1]).mean(axis=-1),
                       n_resamples=300, seed=0)
    assert paired.low == pytest.approx(1.0) and paired.high == pytest.approx(1.0)
    # the same arms as two strata are resampled independently: the interval widens
    apart = bootstrap([base + 1.0, base], lambda s: s[0].mean(axis=-1) - s[1].mean(axis=-1), n_resamples=300, seed=0)
    assert apart.high - apart.low > 0.3
    # a function of the same resamples: the best of two scores, at another confidence
    both = bootstrap([base, base + 0.5], lambda s: np.stack([s[0].mean(axis=-1), s[1].mean(axis=-1)], axis=-1),
                     n_resamples=300, seed=0)
    best = both.map(lambda v: np.max(v, axis=-1), confidence=0.5)
    assert best.estimate == pytest.approx(base.mean() + 0.5)
    np.testing.assert_allclose(best.draws, both.draws.max(axis=1))
    assert best.low <= best.estimate <= best.high
    # normalization: undefined scores raise, or are NaN on request
    np.testing.assert_allclose(normalize_score([1.0, 1.0, 1.0], [0.0, 5.0, np.nan], [2.0, 5.0, 3.0], undefined="nan"),
                               [0.5, np.nan, np.nan])


# ---------------------------------------------------------------------------------------------
# loading


def test_load_runs_frames_and_keys_from_config(tmp_path):
    root = make_suite(tmp_path / "quick", lags=(0, 8), noises=(0.0, 0.5), seeds=(0, 1))
    # keys come from config.json, not from the folder name
    write_run(root, "CartPole-v1", "esspo", seed=2, lag=4, folder=root / "odd" / "name" / "x" / "seed-9",
              eval_steps=[1000, 2000, 3000], eval_returns=[0.0, 10.0, 10.0])
    # the bench's hidden .logs/ and a run's tb/ folder are not run folders
    (root / ".logs").mkdir()
    (root / ".logs" / "x.spec.json").write_text("{}")
    tb = root / "CartPole-v1" / "ppo" / "lag0_noise0_replay0" / "seed-0" / "tb"
    tb.mkdir()
    (tb / "config.json").write_text("not json")
    runs = load_runs(root)
    assert len(runs.finals) == 2 * 2 * 2 * 2 * 2 + 1
    assert not runs.incomplete and not runs.failed
    odd = runs.finals[runs.finals["run_dir"].str.contains("odd")].iloc[0]
    assert (odd["policy_lag"], odd["seed"], odd["condition"]) == (4, 2, "lag4_noise0_replay0")
    assert odd["final_eval_return_mean"] == 10.0
    assert odd["auc"] == pytest.approx(7.5)  # trapezoid (5000 + 10000) / span 2000
    for col in ["env", "algo", "policy_lag", "action_noise", "replay", "behaviour_log_prob", "seed",
                "timesteps", "return"]:
        assert col in runs.evals.columns
    for col in contract.column_names(contract.PROGRESS_COLUMNS):
        assert col in runs.progress.columns
    # per-run aggregate of the same statistic keeps its name: mean of ess over the updates
    odd_progress = runs.progress[runs.progress["run_dir"] == odd["run_dir"]]
    assert odd["ess"] == pytest.approx(odd_progress["ess"].mean())
    assert runs.progress["rollout_return_mean"].isna().sum() == len(runs.finals)  # first update empty
    assert set(runs.finals["action_noise"]) == {0.0, 0.5}
    assert runs.evals.groupby("run_dir").size().eq(6).sum() == len(runs.finals) - 1


def test_incomplete_runs_are_excluded_and_failed_runs_scored_with_warning(tmp_path):
    root = tmp_path / "quick"
    write_run(root, seed=0)
    write_run(root, seed=1)
    running = write_run(root, seed=2, status="running")
    failed = write_run(root, seed=3, status="failed")
    with pytest.warns(LoadWarning) as rec:
        runs = load_runs(root)
    messages = " ".join(str(w.message) for w in rec)
    assert "seed-2" in messages and "incomplete" in messages
    assert "seed-3" in messages and "failed" in messages and "random score" in messages
    assert runs.incomplete == [running] and runs.failed == [failed] and runs.excluded == [running]
    # the failed run is a row of finals, scored at its config's random_score; the running one is out
    assert sorted(runs.finals["seed"]) == [0, 1, 3]
    row = runs.finals[runs.finals["failed"]].iloc[0]
    assert (row["seed"], row["final_eval_return_mean"], row["auc"]) == (3, 20.0, 20.0)
    assert row["failure"] == "RuntimeError: boom" and runs.scored_failed == [failed]
    assert not runs.finals.loc[~runs.finals["failed"], "failure"].any()
    # it has no curve: evals and progress hold the complete runs only
    assert set(runs.evals["seed"]) == {0, 1} and set(runs.progress["seed"]) == {0, 1}


def test_malformed_files_raise_value_error_naming_the_file(tmp_path):
    """Files written malformed (their integrity records match) are named by analysis's reader;
    files changed after completion fail the integrity check instead (tests/test_integrity.py)."""
    root = tmp_path / "quick"
    d = write_run(root)
    progress = d / "progress.csv"
    text = progress.read_text()
    header, rest = text.split("\n", 1)
    assert ",ess," in header
    progress.write_text(header.replace(",ess,", ",ess_avg,") + "\n" + rest)
    reseal(d)
    with pytest.raises(ValueError, match=r"progress.csv.*\['ess'\]"):
        load_runs(root)
    lines = text.splitlines()
    lines[2] = lines[2].replace(lines[2].split(",")[1], "oops", 1)
    progress.write_text("\n".join(lines) + "\n")
    reseal(d)
    with pytest.raises(ValueError) as exc:
        load_runs(root)
    assert str(progress) in str(exc.value) and "oops" in str(exc.value)
    progress.write_text(text)
    (d / "eval.csv").write_text("timesteps\n1000\n")
    reseal(d)
    with pytest.raises(ValueError, match="eval.csv.*eval_return_mean"):
        load_runs(root)
    write_run(root)
    (d / "config.json").write_text("{not json")
    reseal(d)  # a config.json that does not parse is damaged, named with its run
    with pytest.warns(LoadWarning, match=r"seed-0 \(config.json cannot be read"):
        with pytest.raises(ValueError, match="no complete runs"):
            load_runs(root)


def test_empty_or_all_incomplete_root_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no run folders"):
        load_runs(tmp_path)
    with pytest.raises(ValueError, match="no such directory"):
        load_runs(tmp_path / "missing")
    write_run(tmp_path / "s", status="running")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoadWarning)
        with pytest.raises(ValueError, match="no complete runs"):
            load_runs(tmp_path / "s")


def test_duplicate_runs_are_refused(tmp_path):
    root = tmp_path / "quick"
    write_run(root, seed=0)
    write_run(root, seed=0, folder=root / "copy" / "seed-0")
    with pytest.raises(ValueError, match="more than one"):
        load_runs(root)


# ---------------------------------------------------------------------------------------------
# tables


def test_condition_and_aggregate_tables(tmp_path):
    root = tmp_path / "quick"
    # CartPole: ppo lag 0 = reference (mean 300); esspo lag 0 better on every seed
    for s, (p, e) in enumerate([(290.0, 400.0), (310.0, 420.0)]):
        write_run(root, "CartPole-v1", "ppo", s, 0, eval_returns=[20, 100, 200, p], random_score=20.0)
        write_run(root, "CartPole-v1", "esspo", s, 0, eval_returns=[20, 100, 200, e], random_score=20.0)
    # Acrobot: no ppo at lag 0 -> solved_threshold reference
    write_run(root, "Acrobot-v1", "esspo", 0, 0, eval_returns=[-500, -300, -200, -100],
              random_score=-500.0, solved_threshold=-100.0)
    runs = load_runs(root)
    ct = condition_table(runs, n_resamples=100)
    row = ct[(ct["env"] == "CartPole-v1") & (ct["algo"] == "ppo")].iloc[0]
    assert row["n_seeds"] == 2 and row["final_mean"] == 300.0
    assert row["final_std"] == pytest.approx(np.std([290, 310], ddof=1))
    assert (row["final_ci_low"], row["final_ci_high"]) == (290.0, 310.0)

    # the default reference is external to the sweep: the config's solved threshold
    refs = reference_scores(runs).set_index("env")
    assert refs.loc["CartPole-v1", "reference"] == 475.0 and "solved_threshold" in refs.loc["CartPole-v1", "source"]
    default = aggregate_table(runs, n_resamples=100).table.set_index("algo")
    assert default.loc["ppo", "iqm"] == pytest.approx((300 - 20) / (475 - 20))  # not 1 by construction

    refs = reference_scores(runs, reference="auto").set_index("env")
    assert refs.loc["CartPole-v1", "reference"] == 300.0 and "ppo lag 0" in refs.loc["CartPole-v1", "source"]
    assert refs.loc["Acrobot-v1", "reference"] == -100.0 and "solved_threshold" in refs.loc["Acrobot-v1", "source"]

    agg = aggregate_table(runs, n_resamples=100, reference="auto")
    t = agg.table.set_index("algo")
    # esspo: CartPole (400-20)/280, (420-20)/280 and Acrobot 1.0 -> IQM of 3 values = trim_mean
    expected = iqm([380 / 280, 400 / 280, 1.0])
    assert t.loc["esspo", "iqm"] == pytest.approx(expected)
    assert t.loc["esspo", "poi"] == 1.0 and t.loc["esspo", "poi_n_envs"] == 1
    assert t.loc["ppo", "iqm"] == pytest.approx(1.0)
    assert "solved_threshold (config) for Acrobot-v1" in agg.normalization


# ---------------------------------------------------------------------------------------------
# report and command line


def test_report_writes_figures_and_markdown(tmp_path, capsys):
    root = make_suite(tmp_path / "quick", envs=("CartPole-v1", "Acrobot-v1"), lags=(0, 8),
                      noises=(0.0, 0.5), seeds=(0, 1))
    write_run(root, "CartPole-v1", "ppo", seed=5, lag=8, status="failed")
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoadWarning)
        rc = report_main([str(root), "--out", str(out), "--resamples", "50"])
    assert rc == 0
    printed = capsys.readouterr()
    assert "IQM normalized final return" in printed.out and "esspo" in printed.out
    assert "seed-5" in printed.err
    for name in ("curves_CartPole-v1.png", "curves_Acrobot-v1.png", "staleness.png", "noise.png", "ess.png"):
        assert (out / name).stat().st_size > 1000
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "report.md").read_text()
    for snippet in ("](staleness.png)", "](ess.png)", "](noise.png)", "](curves_CartPole-v1.png)",
                    "| algorithm | condition |", "P(algorithm > ppo)", "final return mean ± std",
                    "solved_threshold (config)", "6,000", "seed-5"):
        assert snippet in report, snippet
    results = (out / "results.md").read_text()
    assert "| algorithm | condition |" in results and "![" not in results
    agg = pd.read_csv(out / "aggregate.csv")
    assert set(agg["algo"]) == {"ppo", "esspo"} and len(agg) == 2 * 2 * 2
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_report_default_out_dir_is_ignored_on_reload(tmp_path):
    root = make_suite(tmp_path / "quick", envs=("CartPole-v1",), algos=("ppo",), lags=(0,), seeds=(0, 1))
    rep = make_report(root, n_resamples=20)
    assert rep.out_dir == root / "report" and (root / "report" / "report.md").exists()
    assert "staleness.png" not in rep.figures and rep.skipped
    again = make_report(root, n_resamples=20)  # report/ is not mistaken for runs
    assert len(again.runs.finals) == 2


def test_a_single_arm_report_names_no_baseline_and_no_interval_from_one_seed(tmp_path, capsys):
    """One esspo run, no ppo: nothing is compared with a baseline that was not run, and no
    interval is drawn from one run (it would be a point: ``0.62 [0.62, 0.62]``)."""
    root = tmp_path / "one"
    write_run(root, algo="esspo", eval_returns=[20.0, 100.0, 200.0, 300.0])
    assert report_main([str(root), "--resamples", "50"]) == 0
    printed = capsys.readouterr().out
    report = (root / "report" / "report.md").read_text()
    results = (root / "report" / "results.md").read_text()
    for text in (printed, report, results):
        assert "ppo" not in text and "P(algorithm >" not in text
        assert "There is no baseline to compare with" in text and "n = 1, no interval" in text
        # no interval whose bounds are one number: "0.62 [0.62, 0.62]", "[300.0, 300.0]"
        assert not re.search(r"\[([-\d.,]+), \1\]", text), text
    assert "Verdicts against" not in report
    agg = pd.read_csv(root / "report" / "aggregate.csv")
    assert agg["iqm_low"].isna().all() and agg["iqm"].notna().all()
    cells = pd.read_csv(root / "report" / "conditions.csv")
    assert cells["final_ci_low"].isna().all() and cells["final_mean"].tolist() == [300.0]


def test_one_seed_per_env_gives_no_interval_two_seeds_do(tmp_path):
    root = tmp_path / "s"
    for env in ("CartPole-v1", "Acrobot-v1"):
        write_run(root, env=env, algo="ppo", seed=0)
        write_run(root, env=env, algo="esspo", seed=0)
    write_run(root, env="CartPole-v1", algo="esspo", seed=1, eval_returns=[20.0, 50.0, 80.0, 150.0])
    runs = load_runs(root)
    agg = aggregate_table(runs, n_resamples=50).table.set_index("algo")
    # ppo: one run in each env -> no interval; esspo: two runs on CartPole -> an interval
    assert np.isnan(agg.loc["ppo", "iqm_low"]) and np.isfinite(agg.loc["esspo", "iqm_low"])
    # P(esspo > ppo) rests on one ppo run per env: no interval
    assert np.isfinite(agg.loc["esspo", "poi"]) and np.isnan(agg.loc["esspo", "poi_low"])
    cells = condition_table(runs, n_resamples=50).set_index(["env", "algo"])
    assert np.isnan(cells.loc[("Acrobot-v1", "esspo"), "final_ci_low"])
    assert np.isfinite(cells.loc[("CartPole-v1", "esspo"), "final_ci_low"])


def test_reports_import_the_core_never_each_other_and_each_runs_as_a_module():
    import ast

    reports = sorted((REPO / "adaptive_po" / "analysis" / "reports").glob("*.py"))
    names = {p.stem for p in reports} - {"__init__"}
    assert names == {"suite", "paper", "staleness_and_paper_verdicts", "equal_tuning", "minatar", "fresh_data", "r2vpo", "reissue", "minatar_learning", "minatar_gymnax", "ale_curves", "pqn_cleanrl", "pqn_minatar", "abs_claim", "pqn_staleness"}
    for path in reports:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = ("." * node.level) + (node.module or "")
                assert not (node.level == 1 and node.module), f"{path.name} imports the report {target}"
                assert "reports" not in (node.module or ""), f"{path.name} imports {target}"
    # each ends by running its main as a module (`if __name__ == "__main__": ...exit(main())`), whose
    # --help works (in this process); one of them runs as a real `python -m` too
    for path in reports:
        if path.stem == "__init__":
            continue
        last = ast.parse(path.read_text()).body[-1]
        assert isinstance(last, ast.If) and ast.unparse(last.test) == "__name__ == '__main__'", f"{path.name} does not end with its __main__ guard"
        assert ast.unparse(last.body[-1]) in ("sys.exit(main())", "raise SystemExit(main())"), f"{path.name}: {ast.unparse(last)}"
    for name in sorted(names):
        proc = cli_here([sys.executable, "-m", f"adaptive_po.analysis.reports.{name}", "--help"], cwd=REPO)
        assert proc.returncode == 0, (name, proc.stderr)
        assert f"adaptive_po.analysis.reports.{name}" in proc.stdout or name == "suite", proc.stdout
    proc = subprocess.run([sys.executable, "-m", "adaptive_po.analysis.reports.r2vpo", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "adaptive_po.analysis.reports.r2vpo" in proc.stdout, proc.stderr


def test_cli_bad_root_exits_1(tmp_path, capsys):
    assert report_main([str(tmp_path / "nothing")]) == 1
    assert "no such directory" in capsys.readouterr().err
    proc = cli_here([sys.executable, "-m", "adaptive_po.analysis", str(tmp_path)], cwd=REPO)
    assert proc.returncode == 1 and "no run folders" in proc.stderr
