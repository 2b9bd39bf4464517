"""Equal tuning with held-out selection (`adaptive-po tune`, `adaptive_po.analysis.reports.equal_tuning`): the search space is
the same for every objective, selection never sees the scoring seeds, a failed run scores the
random score, an interrupted search resumes, and the published report rebuilds from its tables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from adaptive_po import contract
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.tuning import (
    OWN_SPACE, TuningPlan, condition_name, default_params, params_variant, plan_specs, run_score,
)
from adaptive_po.bench.variants import apply_variant, objective_knobs, parse_variant
from adaptive_po.hyperparams import Hyperparams
from cli_here import cli_here  # a command line in this process

ROOT = Path(__file__).resolve().parents[1]
#: the results page: the reports' generated blocks and the prose that quotes them
RESULTS_README = ROOT / "docs" / "results" / "README.md"
PUBLISHED = ROOT / "docs" / "results" / "tuned"


def test_the_default_configuration_is_the_plain_algorithm_folder():
    for algo in ("esspo", "ppo", "cispo"):
        assert params_variant(algo, default_params(algo)) == ""
    variant = params_variant("ppo", {"learning_rate": 1.734, "n_epochs": 0.5, "batch_size": 1.0, "clip_range": 0.2})
    assert variant == "learning_rate=x1.7,n_epochs=x0.5"  # two significant digits, defaults left out
    assert parse_variant("ppo", variant)  # canonical: the sweep accepts it as is
    assert params_variant("ppo", {"clip_range": 0.337}) == "clip_range=0.34"


def test_every_objective_searches_the_same_shared_space_and_only_knobs_it_has():
    for algo, knobs in OWN_SPACE.items():
        assert set(knobs) <= set(objective_knobs(algo)), algo
    assert set(default_params("esspo")) == {"learning_rate", "n_epochs", "batch_size"}  # no knob of its own
    assert set(default_params("ppo")) - set(default_params("esspo")) == {"clip_range"}


def test_batch_size_is_a_shared_factor_capped_at_one_rollout():
    hp = Hyperparams(source="test", policy="MlpPolicy", n_envs=4, n_steps=64, batch_size=64, n_epochs=10, learning_rate=1e-3)
    assert apply_variant("esspo", "batch_size=x2", hp, {})[0].batch_size == 128
    assert apply_variant("esspo", "batch_size=x0.5", hp, {})[0].batch_size == 32
    assert apply_variant("esspo", "batch_size=x8", hp, {})[0].batch_size == 256  # the rollout
    with pytest.raises(ValueError, match="factor"):
        parse_variant("esspo", "batch_size=64")


def test_a_plan_whose_selection_could_see_its_scoring_seeds_is_refused():
    with pytest.raises(ValueError, match=r"\[1\].*held out"):
        TuningPlan(envs=("CartPole-v1",), algos=("ppo",), search_seeds=(1, 7), score_seeds=(0, 1)).check()
    with pytest.raises(ValueError, match="trials"):
        TuningPlan(envs=("CartPole-v1",), algos=("ppo",), trials=0).check()
    assert condition_name({}) == "fresh" and condition_name({"policy_lag": 16}) == "policy_lag=16"


def test_a_run_that_did_not_complete_scores_the_random_score(tmp_path):
    spec = RunSpec(suite="tuning-search", env="CartPole-v1", algo="ppo", seed=100, total_timesteps=512, out=str(tmp_path))
    spec.run_dir.mkdir(parents=True)
    contract.atomic_write_text(spec.run_dir / contract.FAILED, "diverged\n")
    assert run_score(spec, 22.0) == (22.0, True)
    plan = TuningPlan(envs=("CartPole-v1",), algos=("ppo",), out=str(tmp_path), timesteps=512, search_seeds=(100,))
    specs = plan_specs(plan, "CartPole-v1", "ppo", ["", "clip_range=0.3", ""], (100,), "tuning-search")
    assert len(specs) == 4  # 2 variants (the repeat dropped) x fresh and lag 16
    assert {s.dials.policy_lag for s in specs} == {0, 16} and {s.seed for s in specs} == {100}


def _tune(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return cli_here(
        [sys.executable, "-m", "adaptive_po", "tune", "--envs", "CartPole-v1", "--algos", "esspo,ppo", "--trials", "3",
         "--round-size", "2", "--timesteps", "512", "--search-seeds", "100", "--score-seeds", "0,1", "--stale-lag", "2",
         "--no-progress", "--executor", "inline", "--out", str(out), *extra],
    )


def test_bad_tuning_requests_are_refused_before_compute(tmp_path):
    bad = _tune(tmp_path, "--stale-lag", "0")
    assert bad.returncode == 2 and "--stale-lag" in bad.stderr
    overlap = cli_here(
        [sys.executable, "-m", "adaptive_po", "tune", "--envs", "CartPole-v1", "--search-seeds", "2,9", "--score-seeds", "3", "--out", str(tmp_path), "--dry-run"],
    )
    assert overlap.returncode == 2 and "[2]" in overlap.stderr and "held out" in overlap.stderr
    unknown = cli_here(
        [sys.executable, "-m", "adaptive_po", "tune", "--envs", "NoSuchEnv-v0", "--out", str(tmp_path), "--dry-run"],
    )
    assert unknown.returncode == 2 and "NoSuchEnv-v0" in unknown.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_search_select_score_resume_and_rebuild_from_tables(tmp_path):
    out = tmp_path / "runs"
    first = _tune(out)
    assert first.returncode == 0, first.stderr[-3000:]
    search, score = out / "tuning-search", out / "tuning-score"
    trials = pd.read_csv(search / "trials.csv", keep_default_na=False)
    assert len(trials) == 6 and set(trials["algo"]) == {"esspo", "ppo"}
    assert (trials[trials["trial"] == 0]["variant"] == "").all()  # the default is trial 0 of every study
    selection = json.loads((search / "selected.json").read_text())
    for algo, chosen in selection["selected"]["CartPole-v1"].items():
        mine = trials[trials["algo"] == algo]
        for name, pick in chosen.items():
            assert pick["search_score"] == pytest.approx(mine[f"score[{name}]"].max(), abs=1e-3)
    # scoring used the scoring seeds only, and the search never did
    assert {int(p.name.split("-")[1]) for p in score.glob("*/*/*/seed-*")} == {0, 1}
    assert {int(p.name.split("-")[1]) for p in search.glob("*/*/*/seed-*")} == {100}
    # a rerun resumes: nothing trains again, the same trials are asked and selected
    before = (search / "trials.csv").read_text()
    again = _tune(out)
    assert again.returncode == 0 and "done  " not in again.stderr, again.stderr[-2000:]
    assert (search / "trials.csv").read_text() == before
    # the report, then the same report from its tables alone
    report = tmp_path / "report"
    made = cli_here([sys.executable, "-m", "adaptive_po.analysis.reports.equal_tuning", "--runs", str(search), str(score), "--out", str(report)])
    assert made.returncode == 0, made.stderr
    rebuilt = tmp_path / "rebuilt"
    again = cli_here([sys.executable, "-m", "adaptive_po.analysis.reports.equal_tuning", "--tables", str(report), "--out", str(rebuilt)])
    assert again.returncode == 0, again.stderr
    assert (report / "verdicts.md").read_text() == (rebuilt / "verdicts.md").read_text()
    text = (report / "verdicts.md").read_text()
    assert "## Default against default" in text and "## Tuned against tuned" in text and "## The retuning tax" in text


@pytest.mark.skipif(not (PUBLISHED / "per_run.csv").is_file(), reason="the tuned suite is not published yet")
def test_the_published_tuned_report_rebuilds_from_its_committed_tables(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(RESULTS_README.read_text())
    made = cli_here(
        [sys.executable, "-m", "adaptive_po.analysis.reports.equal_tuning", "--tables", str(PUBLISHED), "--out", str(tmp_path), "--readme", str(readme)], cwd=ROOT,
    )
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "verdicts.md").read_text() == (PUBLISHED / "verdicts.md").read_text()
    assert readme.read_text() == RESULTS_README.read_text()
