"""Tests of the paper report (adaptive_po.analysis.reports.paper, and of the loader's sampler/variant keys) on synthetic run folders
written through the run-folder contract, with known normalized scores."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from adaptive_po import contract, dials
from adaptive_po.analysis.load import LoadWarning, load_runs, pretty_condition
from adaptive_po.analysis.comparisons import iqm_by_level
from adaptive_po.analysis.conditions import HEADLINE_CONDITIONS
from adaptive_po.analysis.paper_data import load_paper_runs
from adaptive_po.analysis.reports.paper import main, make_paper_report
from adaptive_po.analysis.stats import performance_profile
from adaptive_po.analysis.tuning_tax import config_scores, retuning_cost, tuning_profile, tuning_spread

REPO = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"
#: env -> (random_score, solved_threshold); a span of 400 in both
SPEC = {"CartPole-v1": (20.0, 420.0), "Acrobot-v1": (-500.0, -100.0)}
RESAMPLES = 200


# Plain writes (the contract's atomic writers fsync every file: slow for hundreds of runs).
def _json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


def _rows(path: Path, columns, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=contract.column_names(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def write_run(
    root: Path, env: str, algo: str, seed: int, score: float, *, variant: str = "", lag: int = 0,
    temperature: float = 1.0, precision: str = "fp32", blp: str = "actual", total: int = 4000,
    legacy: bool = False,
) -> Path:
    """One complete run folder whose final return normalizes to ``score`` with the env's
    random_score / solved_threshold; ``legacy`` leaves out the keys older configs lack."""
    rnd, solved = SPEC[env]
    final = rnd + score * (solved - rnd)
    cond = dials.condition_name(lag, 0.0, 0, blp, temperature, precision)
    d = root / env / contract.algo_label(algo, variant) / cond / f"seed-{seed}"
    d.mkdir(parents=True, exist_ok=True)
    config = {
        "run_format": contract.RUN_FORMAT, "suite": root.name, "env": env, "algo": algo, "seed": seed,
        "policy_lag": lag, "replay": 0, "action_noise": 0.0, "behaviour_log_prob": blp, "condition": cond,
        "total_timesteps": total, "n_envs": 8, "random_score": rnd, "solved_threshold": solved,
        "eval_episodes": 10, "eval_freq": total // 2,
    }
    if not legacy:
        config.update(variant=variant, sampler_temperature=temperature, sampler_precision=precision)
    _json(d / contract.CONFIG_FILE, config)
    progress = []
    for i in range(3):
        row = {c.name: 0.0 for c in contract.PROGRESS_COLUMNS}
        row.update(update=i + 1, timesteps=(i + 1) * total // 3, ess=0.9)
        progress.append(row)
    _rows(d / contract.PROGRESS_FILE, contract.PROGRESS_COLUMNS, progress)
    _rows(d / contract.EVAL_FILE, contract.EVAL_COLUMNS, [
        {"timesteps": total // 2, "eval_return_mean": rnd, "eval_return_std": 1.0, "eval_episodes": 10},
        {"timesteps": total, "eval_return_mean": final, "eval_return_std": 1.0, "eval_episodes": 10},
    ])
    summary = {"final_eval_return_mean": final, "final_eval_return_std": 1.0, "eval_episodes": 10,
               "timesteps": total, "updates": 3, "wall_time_s": 1.0, "status": "complete"}
    assert set(summary) == set(contract.SUMMARY_REQUIRED)
    _json(d / contract.SUMMARY_FILE, contract.sealed_summary(d, summary))  # the integrity records
    _json(d / contract.COMPLETE, contract.complete_marker(d, "2025-01-01T00:00:00"))
    return d


#: esspo's fresh scores: pooled IQM = mean(0.3, 0.4, 0.5, 0.6) = 0.45
ESS_FRESH = {"CartPole-v1": [0.1, 0.2, 0.3, 0.4], "Acrobot-v1": [0.5, 0.6, 0.7, 0.8]}
SEEDS = range(4)


def make_paper_root(root: Path) -> Path:
    """esspo, ppo and tis-pg under the five headline conditions, 2 envs x 4 seeds: esspo ties
    with ppo on fresh data (IQM 0.45 each; tis-pg 0.35), wins at lag 16 (0.9 vs <= 0.3) and loses
    with the learner's log-prob under fp8 (0.3 vs tis-pg's 0.6)."""
    rng = np.random.default_rng(0)
    for cond in HEADLINE_CONDITIONS:
        v = cond.values
        kw = dict(lag=v["policy_lag"], temperature=v["sampler_temperature"], precision=v["sampler_precision"],
                  blp=v["behaviour_log_prob"])
        for env in SPEC:
            for seed in SEEDS:
                if cond.label == "fresh":
                    ess = ESS_FRESH[env][seed]
                elif cond.label == "lag 16":
                    ess = 0.9 + 0.01 * seed
                else:
                    ess = 0.6 + 0.01 * seed
                if cond.label == "fp8-e4m3, learner log-prob":
                    ess = 0.3 + 0.01 * seed
                write_run(root, env, "esspo", seed, ess, **kw)
                base = {"fresh": 0.45, "lag 16": 0.2}.get(cond.label, 0.5)
                write_run(root, env, "ppo", seed, base + rng.normal(0, 0.02), **kw)
                tis = base - 0.1 if cond.label == "fresh" else base + 0.1
                write_run(root, env, "tis-pg", seed, tis + rng.normal(0, 0.02), **kw)
    return root


#: per (algo, variant): (fresh score, lag-16 score), the same in every env and seed +- 0.05
SENSITIVITY = {
    ("ppo", ""): (0.8, 0.3),
    ("ppo", "clip_range=0.3"): (0.6, 0.7),
    ("ppo", "clip_range=0.1"): (0.4, 0.5),
    ("esspo", ""): (0.7, 0.65),
    ("esspo", "n_epochs=x0.25"): (0.5, 0.55),
}


def make_sensitivity_root(root: Path, seeds=range(2)) -> Path:
    for (algo, variant), (fresh, stale) in SENSITIVITY.items():
        for lag, score in ((0, fresh), (16, stale)):
            for env in SPEC:
                for seed in seeds:  # seed 0 at -0.05, seed 1 at +0.05: the mean is the score
                    write_run(root, env, algo, seed, score + (0.1 * seed - 0.05), variant=variant, lag=lag)
    return root


def make_staleness_root(root: Path) -> Path:
    for lag in (0, 4, 16, 64):
        for env in SPEC:
            for seed in range(2):
                write_run(root, env, "esspo", seed, 0.8 - 0.002 * lag, lag=lag)
                write_run(root, env, "ppo", seed, 0.8 - 0.01 * lag, lag=lag)
    return root


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("runs")
    return {"paper": make_paper_root(base / "paper"), "sensitivity": make_sensitivity_root(base / "sensitivity"),
            "staleness": make_staleness_root(base / "staleness")}


# ---------------------------------------------------------------------------------------------
# the loader's new keys


def test_loader_fills_old_configs_and_labels_variants(tmp_path):
    root = tmp_path / "mixed"
    write_run(root, "CartPole-v1", "ppo", 0, 0.5, legacy=True)
    write_run(root, "CartPole-v1", "ppo", 0, 0.6, variant="clip_range=0.3,n_epochs=x0.25")
    write_run(root, "CartPole-v1", "ppo", 0, 0.7, temperature=1.2)
    write_run(root, "CartPole-v1", "ppo", 0, 0.8, precision="fp8-e4m3", blp="policy")
    f = load_runs(root).finals.set_index("condition")
    legacy = f[(f["variant"] == "") & (f.index == "lag0_noise0_replay0")].iloc[0]
    assert (legacy["algo"], legacy["base_algo"], legacy["sampler_temperature"], legacy["sampler_precision"]) == \
        ("ppo", "ppo", 1.0, "fp32")
    var = f[f["variant"] != ""].iloc[0]
    assert var["algo"] == "ppo@clip_range=0.3,n_epochs=x0.25" and var["base_algo"] == "ppo"
    assert f.loc["lag0_noise0_replay0_T1.2", "sampler_temperature"] == 1.2
    assert f.loc["lag0_noise0_replay0_fp8-e4m3_blp-policy", "sampler_precision"] == "fp8-e4m3"
    assert pretty_condition(0, 0.0, 0, "actual", 1.2, "fp32") == "lag 0, noise 0, T=1.2"
    assert pretty_condition(0, 0.0, 0, "policy", 1.0, "fp8-e4m3") == "lag 0, noise 0, fp8-e4m3, learner log-prob"


# ---------------------------------------------------------------------------------------------
# statistics on known scores


def test_normalization_uses_the_configs_references_not_ppo(roots):
    data = load_paper_runs([roots["paper"]])
    f = data.finals
    row = f[(f["algo"] == "esspo") & (f["cond_label"] == "fresh") & (f["env"] == "Acrobot-v1") & (f["seed"] == 2)].iloc[0]
    assert row["final_eval_return_mean"] == pytest.approx(-500 + 0.7 * 400)
    assert row["score"] == pytest.approx((row["final_eval_return_mean"] - row["random_score"])
                                         / (row["solved_threshold"] - row["random_score"]))
    assert row["score"] == pytest.approx(0.7)
    ppo_fresh = f[(f["algo"] == "ppo") & (f["cond_label"] == "fresh")]
    assert abs(ppo_fresh["score"].mean() - 1.0) > 0.3  # PPO at lag 0 is not 1 by construction
    refs = data.references.set_index("env")
    assert refs.loc["Acrobot-v1", "random_values"] == "-500" and refs.loc["Acrobot-v1", "reference_values"] == "-100"


def test_iqm_and_profile_of_known_scores(roots):
    data = load_paper_runs([roots["paper"]])
    fresh = data.scored[(data.scored["cond_label"] == "fresh") & (data.scored["algo"] == "esspo")]
    t = iqm_by_level(fresh, "cond_label", ["fresh"], n_resamples=RESAMPLES).iloc[0]
    assert t["iqm"] == pytest.approx(0.45)
    assert t["low"] <= 0.45 <= t["high"] and t["n_runs"] == 8 and t["n_envs"] == 2 and t["seeds_per_env"] == "4"
    per_env = {env: np.array(v) for env, v in ESS_FRESH.items()}
    prof = performance_profile(per_env, [0.35, 0.0, 0.9], n_resamples=RESAMPLES)
    # CartPole: 1 of 4 runs above 0.35, Acrobot: 4 of 4 -> mean over envs 0.625
    assert prof["fraction"] == pytest.approx([0.625, 1.0, 0.0])
    assert prof["low"][0] <= 0.625 <= prof["high"][0]


def test_tuning_spread_profile_and_retuning_cost(roots):
    data = load_paper_runs([roots["sensitivity"]])
    cells = {(c.base_algo, c.cond_label): c for c in config_scores(data.scored, n_resamples=RESAMPLES)}
    assert set(cells) == {("ppo", "fresh"), ("ppo", "lag 16"), ("esspo", "fresh"), ("esspo", "lag 16")}
    spread = tuning_spread(list(cells.values())).set_index(["base_algo", "cond_label"])
    s = spread.loc[("ppo", "fresh")]
    assert (s["best"], s["median"], s["worst"]) == pytest.approx((0.8, 0.6, 0.4))
    assert (s["best_config"], s["median_config"], s["worst_config"]) == ("default", "clip_range=0.3", "clip_range=0.1")
    assert s["n_configs"] == 3 and s["n_envs"] == 2 and s["seeds_per_env"] == "2"
    assert s["worst_low"] <= 0.4 <= s["best_high"]
    prof = tuning_profile(cells[("ppo", "fresh")], [0.5, 0.7, 0.9])
    assert prof["fraction"] == pytest.approx([2 / 3, 1 / 3, 0.0])

    cost = retuning_cost(list(cells.values()), n_resamples=RESAMPLES).set_index("base_algo")
    ppo = cost.loc["ppo"]
    # best on fresh data: the default (0.8); at lag 16 it scores 0.3, clip_range=0.3 scores 0.7
    assert ppo["fresh_best_config"] == "default" and ppo["best_config"] == "clip_range=0.3"
    assert ppo["fresh_best_score"] == pytest.approx(0.3) and ppo["best_score"] == pytest.approx(0.7)
    assert ppo["cost"] == pytest.approx(0.4)
    assert ppo["cost_low"] == pytest.approx(0.4) and ppo["cost_high"] == pytest.approx(0.4)  # paired seeds
    ess = cost.loc["esspo"]  # its default stays best: no retuning cost
    assert ess["best_config"] == "default" and ess["cost"] == 0.0


# ---------------------------------------------------------------------------------------------
# the report


def test_report_figures_tables_and_verdicts(roots, tmp_path, capsys):
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoadWarning)
        rc = main([str(roots[k]) for k in ("paper", "sensitivity", "staleness")]
                  + ["--out", str(out), "--resamples", str(RESAMPLES)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "lag 16: esspo **wins** against tis-pg" in printed and "fresh: esspo ties against ppo" in printed
    assert "fp8-e4m3, learner log-prob: esspo **loses** against tis-pg" in printed
    for name in ("iqm_conditions.png", "iqm_staleness.png", "iqm_mismatch.png", "profiles.png",
                 "tuning_profiles.png", "retuning_cost.png"):
        data = (out / name).read_bytes()
        assert data[:8] == PNG and len(data) > 5000, name
    report = (out / "report.md").read_text()
    for snippet in (
        "## Normalization (external references)", "| env | random score (0) | solved threshold (1) |",
        "| -500 | -100 |", "## Where esspo wins, ties and loses", "lag 16: esspo **wins**",
        "fresh: esspo ties", "| algorithm | fresh | lag 16 | T=1.2 | fp8-e4m3 | fp8-e4m3, learner log-prob |",
        "0.45 [", "(2×4)", "| lag 0 | lag 4 | lag 16 | lag 64 |", "![Performance profiles](profiles.png)",
        "runs > 0.5", "### Spread over configurations", "0.80 [0.75, 0.85] (default)", "0.40 [",
        "(clip_range=0.1)", "### Retuning cost", "0.40 [0.40, 0.40]", "clip_range=0.3",
        "![Retuning cost](retuning_cost.png)", "once, from the first root given",
    ):
        assert snippet in report, snippet
    # the sensitivity root's default-knob runs share keys with the paper root: the pooled headline
    # counts the paper's (first root), the tuning tax the sensitivity root's own
    iqm_fresh = pd.read_csv(out / "iqm_conditions.csv").set_index(["algo", "condition"])
    assert iqm_fresh.loc[("esspo", "fresh"), "iqm"] == pytest.approx(0.45)
    assert iqm_fresh.loc[("esspo", "fresh"), "n_runs"] == 8
    cost = pd.read_csv(out / "retuning_cost.csv").set_index("base_algo")
    assert cost.loc["ppo", "cost"] == pytest.approx(0.4)
    assert not list(out.glob(".*.tmp"))


def test_report_without_variants_or_lag_sweep_skips_those_figures(tmp_path):
    root = tmp_path / "paper"
    for env in SPEC:
        for seed in range(2):
            write_run(root, env, "esspo", seed, 0.5 + 0.1 * seed)
            write_run(root, env, "ppo", seed, 0.4 + 0.1 * seed)
    rep = make_paper_report([root], tmp_path / "out", n_resamples=50)
    assert set(rep.figures) == {"iqm_conditions.png", "profiles.png"}
    assert any("tuning_profiles.png" in s for s in rep.skipped)
    report = rep.report_md.read_text()
    assert "_No root holds knob variants" in report and "fresh: esspo ties" in report


def test_cli_errors_and_no_torch(tmp_path, capsys):
    assert main([str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 1
    assert "no such directory" in capsys.readouterr().err
    code = "import sys, json, adaptive_po.analysis.reports.paper; print(json.dumps('torch' in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) is False
