"""Failures are scored, never dropped; the budget is part of a run's key.

Small run folders written through the run-folder contract: a FAILED run is a row of the loaded
finals scored at its environment's random score and counted in the report's per-cell table; two
budgets of one cell are two runs, kept apart and never pooled silently; a tuning cell keeps an
environment where one configuration failed.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from adaptive_po import contract, dials
from adaptive_po.analysis.load import LoadWarning, load_runs
from adaptive_po.analysis.paper_data import load_paper_runs, one_budget_per_env
from adaptive_po.analysis.reports.paper import make_paper_report
from adaptive_po.analysis.reports.suite import make_report
from adaptive_po.analysis.tables import aggregate_table, condition_table
from adaptive_po.analysis.tuning_tax import config_scores
from test_analysis import write_run
from test_paper_analysis import SPEC
from test_paper_analysis import write_run as write_paper_run


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoadWarning)
        return fn(*args, **kwargs)


def write_failed(root: Path, env: str, algo: str, seed: int, *, variant: str = "", lag: int = 0,
                 total: int = 4000, random_score: float | None = None) -> Path:
    """A FAILED run folder as the bench leaves it when a run dies early: config.json and FAILED,
    no eval.csv, progress.csv or summary.json."""
    rnd, solved = SPEC[env]
    cond = dials.condition_name(lag, 0.0, 0)
    d = root / env / contract.algo_label(algo, variant) / cond / f"seed-{seed}"
    d.mkdir(parents=True, exist_ok=True)
    contract.atomic_write_json(d / contract.CONFIG_FILE, {
        "run_format": contract.RUN_FORMAT, "suite": root.name, "env": env, "algo": algo, "seed": seed,
        "policy_lag": lag, "replay": 0, "action_noise": 0.0, "behaviour_log_prob": "actual", "condition": cond,
        "total_timesteps": total, "n_envs": 8, "random_score": rnd if random_score is None else random_score,
        "solved_threshold": solved, "eval_episodes": 10, "eval_freq": total // 2, "variant": variant,
        "sampler_temperature": 1.0, "sampler_precision": "fp32",
    })
    contract.atomic_write_text(d / contract.FAILED, "FloatingPointError: non-finite loss\nTraceback ...\n")
    return d


# -- failures are scored ----------------------------------------------------------------------------
def test_a_failed_run_is_scored_at_random_and_counted_in_the_report(tmp_path):
    root = tmp_path / "quick"
    for seed, (p, e) in enumerate([(300.0, 400.0), (310.0, 420.0), (320.0, 440.0)]):
        write_run(root, "CartPole-v1", "ppo", seed, eval_returns=[20, 100, 200, p])
        if seed < 2:
            write_run(root, "CartPole-v1", "esspo", seed, eval_returns=[20, 100, 200, e])
    failed = write_run(root, "CartPole-v1", "esspo", 2, status="failed")  # with partial curves
    # an env whose only run failed, without any curve: the report still draws what it can
    lonely = write_run(root, "Acrobot-v1", "esspo", 0, random_score=-500.0, solved_threshold=-100.0, status="failed")
    (lonely / contract.EVAL_FILE).unlink()
    (lonely / contract.PROGRESS_FILE).unlink()
    write_run(root, "Acrobot-v1", "ppo", 0, eval_returns=[-500, -400, -300, -200], random_score=-500.0,
              solved_threshold=-100.0)
    running = write_run(root, "CartPole-v1", "esspo", 3, status="running")

    with pytest.warns(LoadWarning) as rec:
        runs = load_runs(root)
    messages = " ".join(str(w.message) for w in rec)
    assert "scored 2 failed run(s)" in messages and "seed-2" in messages  # named, not dropped
    assert "incomplete" in messages and "seed-3" in messages  # still running: out, named
    assert runs.excluded == [running] and sorted(runs.failed) == sorted([failed, lonely])
    f = runs.finals.set_index(["env", "algo", "seed"])
    assert f.loc[("CartPole-v1", "esspo", 2), "failed"] and f.loc[("CartPole-v1", "esspo", 2), "final_eval_return_mean"] == 20.0
    assert f.loc[("Acrobot-v1", "esspo", 0), "final_eval_return_mean"] == -500.0
    assert f.loc[("Acrobot-v1", "esspo", 0), "auc"] == -500.0
    assert not f.loc[("CartPole-v1", "ppo", 0), "failed"]

    # the per-cell table counts it: 3 runs, 1 failed, its mean pulled down by the random score
    ct = condition_table(runs, n_resamples=50).set_index(["env", "algo"])
    assert ct.loc[("CartPole-v1", "esspo"), "n_seeds"] == 3 and ct.loc[("CartPole-v1", "esspo"), "n_failed"] == 1
    assert ct.loc[("CartPole-v1", "esspo"), "final_mean"] == pytest.approx((400 + 420 + 20) / 3)
    assert ct.loc[("CartPole-v1", "ppo"), "n_failed"] == 0
    # the aggregate too: normalized 0
    agg = aggregate_table(runs, n_resamples=50)
    esspo = agg.table[agg.table["algo"] == "esspo"].iloc[0]
    assert esspo["n_runs"] == 4 and esspo["n_envs"] == 2  # 3 on CartPole (1 failed), 1 failed on Acrobot
    assert "scored, never dropped" in agg.normalization and "`random_score`" in agg.normalization

    rep = _quiet(make_report, root, tmp_path / "out", n_resamples=50)
    report = rep.report_md.read_text()
    assert "| env | algorithm | condition | steps | seeds | failed |" in report
    rows = [line for line in report.splitlines() if line.startswith("| CartPole-v1 |")]
    assert any("| esspo |" in r and "| 3 | **1** |" in r for r in rows), rows
    assert any("| ppo |" in r and "| 3 | 0 |" in r for r in rows), rows
    assert "## Failed runs (scored, not left out)" in report
    assert "CartPole-v1/esspo/lag0_noise0_replay0/seed-2`: scored 20" in report and "FloatingPointError" not in report
    assert "RuntimeError: boom" in report
    assert "seed-3`: incomplete" in report  # left out, named
    assert "2 failed run(s) (`FAILED`, scored at their environment's random score)" in report
    assert "curves_CartPole-v1.png" in rep.figures and "curves_Acrobot-v1.png" in rep.figures
    assert (tmp_path / "out" / "ess.png").stat().st_size > 1000
    # an env whose every run failed has no curve to draw: named, not an error
    solo = tmp_path / "solo"
    write_run(solo, "CartPole-v1", "ppo", 0)
    gone = write_run(solo, "Acrobot-v1", "esspo", 0, random_score=-500.0, solved_threshold=-100.0, status="failed")
    (gone / contract.EVAL_FILE).unlink()
    rep = _quiet(make_report, solo, tmp_path / "solo-out", n_resamples=20)
    assert "curves_Acrobot-v1.png" not in rep.figures
    assert any("every run of Acrobot-v1 failed" in s for s in rep.skipped)
    csv = pd.read_csv(tmp_path / "solo-out" / "runs.csv")
    assert csv["failed"].tolist().count(True) == 1


def test_a_failed_run_that_cannot_be_scored_is_left_out_and_named(tmp_path):
    root = tmp_path / "quick"
    write_run(root, seed=0)
    no_random = write_run(root, seed=1, random_score=None, status="failed")
    no_config = write_run(root, seed=2, status="failed")
    (no_config / contract.CONFIG_FILE).unlink()
    with pytest.warns(LoadWarning, match="cannot be scored") as rec:
        runs = load_runs(root)
    messages = " ".join(str(w.message) for w in rec)
    assert "seed-1 (its config.json has no random_score" in messages and "seed-2 (no config.json)" in messages
    assert list(runs.unscored) == [no_random, no_config] and runs.excluded == [no_random, no_config]
    assert runs.finals["seed"].tolist() == [0] and not runs.finals["failed"].any()


# -- the budget is part of the key ------------------------------------------------------------------
def test_two_budgets_of_one_cell_are_two_runs_kept_apart(tmp_path):
    root = tmp_path / "quick"
    for seed in (0, 1):
        write_run(root, "CartPole-v1", "ppo", seed, eval_returns=[20, 100, 200, 300], total_timesteps=4000)
        # the same cell and seed at twice the budget (another suite's folder under the same root)
        write_run(root, "CartPole-v1", "ppo", seed, eval_steps=[2000, 4000, 6000, 8000],
                  eval_returns=[20, 200, 400, 470], total_timesteps=8000, folder=root / "long" / f"seed-{seed}")
    write_run(root, "CartPole-v1", "esspo", 0, total_timesteps=4000)
    write_run(root, "CartPole-v1", "ppo", 0, lag=8, total_timesteps=4000)  # a staleness figure to draw
    with pytest.warns(LoadWarning) as rec:
        runs = load_runs(root)  # not refused as duplicates
    messages = " ".join(str(w.message) for w in rec)
    assert "several budgets" in messages and "CartPole-v1 ppo lag0_noise0_replay0: 4,000 steps (2 runs), 8,000 steps (2 runs)" in messages
    assert len(runs.finals) == 6 and "total_timesteps" in contract.RUN_KEYS

    # the per-cell table keeps the budgets apart: never one mean over 300 and 470
    ct = condition_table(runs, n_resamples=50)
    ppo = ct[(ct["algo"] == "ppo") & (ct["policy_lag"] == 0)].set_index("total_timesteps")
    assert sorted(ppo.index) == [4000, 8000]
    assert ppo.loc[4000, "final_mean"] == 300.0 and ppo.loc[8000, "final_mean"] == 470.0
    assert (ppo["n_seeds"] == 2).all()
    # the aggregate, which pools an env's runs, says so
    agg = aggregate_table(runs, n_resamples=50)
    assert any("CartPole-v1: runs at budgets 4,000, 8,000" in n and "ppo" in n for n in agg.notes), agg.notes

    rep = _quiet(make_report, root, tmp_path / "out", n_resamples=50)
    report = rep.report_md.read_text()
    rows = [line for line in report.splitlines() if line.startswith("| CartPole-v1 | ppo | lag 0")]
    assert len(rows) == 2 and "| 4,000 |" in rows[0] and "| 8,000 |" in rows[1]
    # the figures draw the budgets apart (a panel or a line style each) and do not break
    assert {"curves_CartPole-v1.png", "staleness.png", "ess.png"} <= set(rep.figures)
    assert "runs at budgets 4,000, 8,000 steps enter the aggregate together" in report

    # the same budget twice is still a duplicate
    write_run(root, "CartPole-v1", "esspo", 0, total_timesteps=4000, folder=root / "copy" / "seed-0")
    with pytest.raises(ValueError, match="more than one run folder"):
        _quiet(load_runs, root)


def test_one_budget_per_env_keeps_the_first_roots_budget():
    df = pd.DataFrame({
        "env": ["A", "A", "A", "B", "B"],
        "root": ["r1", "r2", "r2", "r2", "r2"],
        "total_timesteps": [100, 200, 100, 50, 50],
    })
    kept, notes = one_budget_per_env(df, "headline")
    assert kept.index.tolist() == [0, 2, 3, 4]
    assert notes == ["headline: A at 100 steps (the budget of r1, the first root holding it); "
                     "left out 1 run(s) at other budgets: 200 steps in r2 (1 run)"]


def test_the_paper_sections_never_borrow_a_run_from_another_budget(tmp_path):
    """The paper root runs esspo at lag 16 with seed 0 only on Acrobot; the staleness root has
    seeds 0 and 1 there at twice the budget. Seed 1 is missing at the paper's budget: the pooled
    headline counts one run there, not a run borrowed from the other budget."""
    paper, stale = tmp_path / "paper", tmp_path / "staleness"
    for env in SPEC:
        for seed in (0, 1):
            for algo, score in (("esspo", 0.6), ("ppo", 0.5)):
                write_paper_run(paper, env, algo, seed, score)
                if not (env == "Acrobot-v1" and algo == "esspo" and seed == 1):
                    write_paper_run(paper, env, algo, seed, score - 0.1, lag=16)
    write_failed(paper, "CartPole-v1", "esspo", 2)  # counted at score 0
    for lag in (0, 4, 16, 64):
        for env in SPEC:
            for seed in (0, 1):
                write_paper_run(stale, env, "esspo", seed, 0.9, lag=lag, total=8000)
                write_paper_run(stale, env, "ppo", seed, 0.9, lag=lag, total=8000)

    data = _quiet(load_paper_runs, [paper, stale])
    f = data.finals
    both = f[(f["env"] == "Acrobot-v1") & (f["algo"] == "esspo") & (f["policy_lag"] == 16) & (f["seed"] == 0)]
    assert sorted(both["total_timesteps"]) == [4000, 8000]  # two runs, not a duplicate
    assert not any("also in an earlier root" in n for n in data.notes)
    failed = f[f["failed"]].iloc[0]
    assert failed["score"] == 0.0 and failed["final_eval_return_mean"] == SPEC["CartPole-v1"][0]

    rep = _quiet(make_paper_report, [paper, stale], tmp_path / "out", n_resamples=50)
    iqm = rep.tables["iqm_conditions"].set_index(["algo", "condition"])
    assert iqm.loc[("esspo", "lag 16"), "n_runs"] == 3  # 2 CartPole + 1 Acrobot: seed 1 not borrowed
    assert iqm.loc[("esspo", "lag 16"), "iqm"] == pytest.approx(0.5)  # none of the staleness root's 0.9
    assert iqm.loc[("esspo", "fresh"), "n_runs"] == 5  # the failed run counts, at 0
    report = rep.report_md.read_text()
    assert "headline and mismatch: Acrobot-v1 at 4,000 steps (the budget of" in report
    assert "left out" in report and "8,000 steps in" in report
    assert "(1 failed, scored 0)" in report and "1 failed, scored at the random score" in report
    # the staleness section uses the staleness root alone, at its own budget
    st = rep.tables["iqm_staleness"].set_index(["algo", "level"])
    assert st.loc[("esspo", 16), "n_runs"] == 4 and st.loc[("esspo", 16), "iqm"] == pytest.approx(0.9)


# -- the tuning tax keeps an env where a configuration failed ---------------------------------------
def test_a_tuning_cell_keeps_its_env_when_a_configuration_failed(tmp_path):
    root = tmp_path / "sensitivity"
    for env in SPEC:
        for seed in (0, 1):
            write_paper_run(root, env, "ppo", seed, 0.8)
            write_paper_run(root, env, "ppo", seed, 0.4, lag=16)
            write_paper_run(root, env, "ppo", seed, 0.6, variant="clip_range=0.3", lag=16)
            if env == "CartPole-v1":
                write_paper_run(root, env, "ppo", seed, 0.6, variant="clip_range=0.3")
            else:  # every run of this configuration failed on Acrobot: scored 0, the env kept
                write_failed(root, env, "ppo", seed, variant="clip_range=0.3")
    data = _quiet(load_paper_runs, [root])
    cells = {c.cond_label: c for c in config_scores(data.scored, n_resamples=50)}
    fresh = cells["fresh"]
    assert fresh.envs == ["Acrobot-v1", "CartPole-v1"] and fresh.dropped_envs == []
    assert fresh.failed == {"": {}, "clip_range=0.3": {"Acrobot-v1": 2}}
    k = fresh.configs.index("clip_range=0.3")
    assert fresh.scores[k] == pytest.approx((0.6 + 0.0) / 2)  # the failures count at 0
    assert fresh.scores[fresh.configs.index("")] == pytest.approx(0.8)

    rep = _quiet(make_paper_report, [root], tmp_path / "out", n_resamples=50)
    report = rep.report_md.read_text()
    assert "not run with every configuration" not in report
    assert "tuning: ppo (clip_range=0.3) at fresh: 2 failed run(s) on Acrobot-v1 scored at the random score (0)" in report
    assert "(4, 2 failed)" in report
    spread = rep.tables["tuning_spread"].set_index("cond_label")
    assert spread.loc["fresh", "n_envs"] == 2 and spread.loc["fresh", "worst"] == pytest.approx(0.3)

    # two budgets of one env in a tuning cell are refused, never averaged
    mixed = data.scored.copy()
    mixed.loc[mixed.index[0], "total_timesteps"] = 8000
    with pytest.raises(ValueError, match="budgets 4,000, 8,000"):
        config_scores(mixed, n_resamples=20)
    assert np.isfinite(data.scored["score"]).all()


def test_the_verdicts_per_run_table_holds_each_failed_run_once(tmp_path):
    from adaptive_po.analysis.verdicts import per_run_table, per_task

    root = tmp_path / "quick"
    for seed in range(3):
        write_run(root, "CartPole-v1", "ppo", seed, eval_returns=[20, 100, 200, 300.0 + seed])
    write_run(root, "CartPole-v1", "esspo", 0, eval_returns=[20, 100, 200, 400.0])
    write_failed(root, "CartPole-v1", "esspo", 1)
    table = _quiet(per_run_table, root)
    assert len(table) == 5
    esspo = table[table["algo"] == "esspo"].set_index("seed")
    assert list(esspo["status"]) == ["complete", "failed"]
    assert esspo.loc[1, "final_eval_return"] == esspo.loc[1, "random_score"]
    cell = per_task(table, "ppo").set_index("algo").loc["esspo"]
    assert cell["runs"] == 2 and cell["failed"] == 1
