"""The generic report of a searched design (adaptive_po/analysis/searched_report.py): synthetic
committed folders (a plan file like the after-QUATRO study's, two tasks, a comparator study) with
planted effects whose verdicts are known; Holm by hand; the decision rule per arm; a study in
progress; a foreign row; the learning-rate table against scipy; the build with no runs; and the
committed verdicts of the searched studies (frozen-quatro, frozen-schedule), which are what the
report builds."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from adaptive_po import contract
from adaptive_po.analysis import searched_report as report
from adaptive_po.analysis import study_report
from adaptive_po.bench.frozen import write_table

from search_records import add_searches, analysed, holm_by_hand, noisy_rows, planted, record_searches, synthetic_envs, synthetic_row  # noqa: F401 - tests/search_records.py

REPO = Path(__file__).resolve().parents[1]
TASKS = (("Acrobot-v1", 50_000), ("Pendulum-v1", 100_000))
LAGS = (0, 1, 2, 4, 8, 16)
SEEDS = tuple(range(10))
SEARCH_SEEDS = (100, 101, 102)
LR_SEEDS = (0, 1, 2, 3, 4)
FOLDERS = {"quatro": "syn-search", "r2vpo": "syn-r2vpo-search", "r2vpo-tax": "syn-r2vpo-tax-search"}
PPO = "ppo (frozen study)"

PLAN = """schema = 1
title = "A synthetic searched study"
task_noun = "task"

[commands]
run = "python -m adaptive_po.bench.study"
report = "python -m adaptive_po.analysis.study_report --results synthetic"

[files]
table = "per_run.csv"
selection = "selected.json"
cuts = "cuts.json"
pilot = "preregistration.md"
verdicts = "verdicts.md"
picks = "selected.json"
trials = "trials.csv"
record = "plan.json"

[design]
tasks = [{ env = "Acrobot-v1", budget = 50_000 }, { env = "Pendulum-v1", budget = 100_000 }]
folder = "syn-score"
arms = ["quatro", "r2vpo"]
lags = [0, 1, 2, 4, 8, 16]
seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
configurations = "searched"
limits = "Synthetic numbers."

[search]
folder = "syn-search"
seeds = [100, 101, 102]
trials = 16
round_size = 4
sampler_seed = 0
space = "zoo-factors"

[tax]
lag = 8
arms = ["quatro", "r2vpo"]

[[parts]]
name = "quatro"
arms = ["quatro"]
tax_arms = ["quatro"]
folder = "syn-search"
space = "zoo-factors"

[[parts]]
name = "r2vpo"
arms = ["r2vpo"]
folder = "syn-r2vpo-search"
space = "zoo-factors"

[[parts]]
name = "r2vpo-tax"
arms = ["r2vpo"]
fresh_arms = []
tax_arms = ["r2vpo"]
folder = "syn-r2vpo-tax-search"
space = "zoo-factors"

[[parts]]
name = "lr"
kind = "learning-rate"
arms = ["quatro", "r2vpo"]
from = "../frozen"
from_arms = ["ppo"]
factors = [4.0, 16.0]
lags = [0, 8]
seeds = [0, 1, 2, 3, 4]
folder = "syn-lr"

[cost]
limit_core_hours = 4.0
recorded_speeds = "population"

[[cuts]]
what = "lags"
values = [16]

[[cuts]]
what = "parts"
values = ["r2vpo-tax", "lr"]

[[comparators]]
kind = "study"
name = "the synthetic published study"
label = "frozen study"
results = "../frozen"
folder = "frozen-score"
arms = { "ppo (frozen study)" = "ppo" }
""" + "".join(f"""
[[endpoints]]
id = "{x}1"
kind = "slope"
arm = "{arm}"
versus = "ppo (frozen study)"
lags = [0, 1, 2, 4, 8]
margin = 0.1
family = "primary"
label = "{x}1. slope: {arm} - ppo"
short = "{x}1"
digits = 4

[[endpoints]]
id = "{x}2"
kind = "non-inferiority"
arm = "{arm}"
versus = "ppo (frozen study)"
lag = 0
margin = 0.1
family = "primary"
label = "{x}2. lag 0: {arm} - ppo"
short = "{x}2"

[[endpoints]]
id = "{x}3"
kind = "tax"
arm = "{arm}"
versus = "ppo (frozen study)"
lag = 8
margin = 0.1
family = "primary"
{part}label = "{x}3. tax: {arm}'s - ppo's"
short = "{x}3"
""" for x, arm, part in (("Q", "quatro", ""), ("R", "r2vpo", 'part = "r2vpo-tax"\n'))) + "".join(f"""
[[endpoints]]
id = "{x}-tax"
kind = "tax"
arm = "{arm}"
lag = 8
margin = 0.1
family = ""
{part}label = "{arm}'s own tax"
short = "{arm}'s tax"
""" for x, arm, part in (("Q", "quatro", ""), ("R", "r2vpo", 'part = "r2vpo-tax"\n'))) + "".join(f"""
[[decisions]]
name = "{arm}"
sentence = "{arm} against ppo: {{answer}}."
supported = [["{x}1=win", "{x}2=non-inferior", "{x}3=win"], ["{x}1=win", "{x}2=non-inferior", "{x}-tax=within-margin"]]
contradicted = [["{x}1=loss"], ["{x}2=inferior"], ["{x}3=loss"]]
otherwise = "not decided"
undecided = "not decided (the study is not complete)"
""" for x, arm in (("Q", "quatro"), ("R", "r2vpo"))) + """
[[secondary]]
kind = "head-to-head"
arms = ["quatro", "r2vpo"]
comparators = ["ppo (frozen study)"]
margin = 0.1

[[secondary]]
kind = "learning-rate"
arms = ["quatro", "r2vpo", "ppo (frozen study)"]
part = "lr"
"""

FRESH = {"quatro": "radius=0.02", "r2vpo": "variance_target=0.03", "ppo": "clip_range=0.48"}
TAXED = {"quatro": "radius=0.04", "r2vpo": "variance_target=0.06", "ppo": "n_epochs=x0.5"}


def _pick(variant: str, trial: int = 1) -> dict:
    return {"variant": variant, "trial": trial, "search_return": 1.0, "search_score": 1.0}


def _study(root: Path, *, quatro=(0.9, 0.0), r2vpo=(0.9, -0.15), ppo=(0.9, -0.1), quatro_tax=0.0, r2vpo_tax=0.0, ppo_tax=0.2,
           score_tasks=TASKS, cuts=None, lr_drop=None, seed=0, sd=0.05) -> Path:
    """This study's and the comparator study's committed files. Each arm's score at a lag is
    ``level + slope x log2(1 + lag) + N(0, sd)``; a tax of 0 makes the lag-8 pick the fresh one,
    else the lag-8 pick scores ``tax`` above the fresh one at lag 8. ``lr_drop``: ``{arm: (drop at
    x4, drop at x16)}``, the learning-rate part's runs below the arm's x1 mean (None: no such runs).
    ``score_tasks``: the tasks whose scoring runs are in the table (every task is searched)."""
    rng = np.random.default_rng(seed)
    results, published = root / "study", root / "frozen"
    results.mkdir(parents=True)
    published.mkdir(parents=True)
    (results / "plan.toml").write_text(PLAN)
    (results / "preregistration.md").write_text("# Synthetic\n\n## Limits, stated before any run\n\n- Synthetic.\n\n## Deviations\n\nNone yet.\n")
    ours, theirs = {}, {}

    add, mean = noisy_rows(rng, sd, SEEDS), planted

    selected, theirs_selected = {}, {}
    for env, budget in TASKS:
        theirs_selected[env] = {"budget": budget, "ppo": {"fresh": _pick(FRESH["ppo"], 3), "lag8": _pick(TAXED["ppo"] if ppo_tax else FRESH["ppo"], 5)}}
        for lag in (0, 1, 2, 4, 8, 16, 64):
            add(theirs, "frozen-score", env, budget, "ppo", FRESH["ppo"], lag, mean(ppo, lag))
        if ppo_tax:
            add(theirs, "frozen-score", env, budget, "ppo", TAXED["ppo"], 8, mean(ppo, 8) + ppo_tax)
        picks = {"quatro": {"quatro": {"fresh": _pick(FRESH["quatro"]), "lag8": _pick(TAXED["quatro"] if quatro_tax else FRESH["quatro"])}},
                 "r2vpo": {"r2vpo": {"fresh": _pick(FRESH["r2vpo"])}}, "r2vpo-tax": {"r2vpo": {"lag8": _pick(TAXED["r2vpo"] if r2vpo_tax else FRESH["r2vpo"])}}}
        selected[env] = {"budget": budget, **{p: v for p, v in picks.items() if p not in (cuts or {}).get("parts", ())}}
        add_searches(lambda *a: add(ours, *a), selected[env], env, budget, FOLDERS, SEARCH_SEEDS)  # the pick returned 1.0, one other 0.5
        if (env, budget) not in score_tasks:
            continue
        for arm, level in (("quatro", quatro), ("r2vpo", r2vpo)):
            for lag in LAGS:
                if lag not in (cuts or {}).get("lags", ()):
                    add(ours, "syn-score", env, budget, arm, FRESH[arm], lag, mean(level, lag))
        if quatro_tax:
            add(ours, "syn-score", env, budget, "quatro", TAXED["quatro"], 8, mean(quatro, 8) + quatro_tax)
        if r2vpo_tax and "r2vpo-tax" not in (cuts or {}).get("parts", ()):
            add(ours, "syn-score", env, budget, "r2vpo", TAXED["r2vpo"], 8, mean(r2vpo, 8) + r2vpo_tax)
        for arm, (x4, x16) in (lr_drop or {}).items():
            algo, level = ("ppo", ppo) if arm == PPO else (arm, {"quatro": quatro, "r2vpo": r2vpo}[arm])
            for lag in (0, 8):
                for factor, drop in ((4.0, x4), (16.0, x16)):
                    add(ours, "syn-lr", env, budget, algo, contract.scaled_learning_rate(FRESH[algo], factor), lag, mean(level, lag) - drop, LR_SEEDS)
    record_searches(results, ours, selected, FOLDERS, SEARCH_SEEDS, parts=True, fill=False)
    write_table(results / "per_run.csv", ours)
    write_table(published / "per_run.csv", theirs)
    (results / "selected.json").write_text(json.dumps({"plan": {}, "selected": selected}))
    (published / "selected.json").write_text(json.dumps({"selected": theirs_selected}))
    if cuts is not None:
        (results / "cuts.json").write_text(json.dumps(cuts))
    return results


def test_a_flat_arm_is_supported_and_a_planted_slope_loss_contradicts(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    results = _study(tmp_path)
    _, result, rows, answers = analysed(results)
    # quatro: flat, level with ppo at lag 0, its lag-8 pick its fresh one (tax 0) against ppo's tax 0.2
    assert rows["Q1"]["d"].estimate == pytest.approx(0.1, abs=0.02) and rows["Q1"]["verdict"] == "win"
    assert rows["Q2"]["verdict"] == "non-inferior"
    assert rows["Q3"]["d"].estimate == pytest.approx(-0.2, abs=0.04) and rows["Q3"]["verdict"] == "win"
    assert result["endpoints"]["Q-tax"]["agg"].estimate == 0.0 and rows["Q-tax"]["verdict"] == "equivalent"
    assert answers["quatro"]["answer"] == "supported" and answers["quatro"]["complete"]
    # r2vpo: 0.05 per unit steeper than ppo: a loss, and the rule contradicts
    assert rows["R1"]["d"].estimate == pytest.approx(-0.05, abs=0.02) and rows["R1"]["verdict"] == "loss"
    assert answers["r2vpo"]["answer"] == "contradicted"
    text = report.report_text(report.load(results), result)
    assert "**quatro against ppo: supported.** **r2vpo against ppo: contradicted.**" in text
    assert "| quatro | Q1 2/2, Q2 2/2, Q3 2/2, Q-tax 2/2 | **supported** | (final) |" in text
    # each arm named by what its search chose
    assert "`quatro`: Acrobot-v1 radius 0.02 (trial 1)" in text and "| Acrobot-v1 | r2vpo | lag8 | r2vpo-tax | this study |" in text


def test_planted_equal_arms_are_not_wins(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path, quatro=(0.9, -0.1), ppo=(0.9, -0.1), quatro_tax=0.2, ppo_tax=0.2)
    _, _, rows, answers = analysed(results)
    for name in ("Q1", "Q3"):
        assert rows[name]["verdict"] in ("equivalent", "inconclusive"), rows[name]
    assert abs(rows["Q1"]["d"].estimate) < 0.02 and abs(rows["Q3"]["d"].estimate) < 0.05
    assert answers["quatro"]["answer"] == "not decided"  # neither a win nor a loss: the rule's otherwise


def test_holm_over_the_family_by_hand_and_a_per_task_number_against_scipy(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path, quatro=(0.85, -0.03), r2vpo=(0.8, -0.12), sd=0.1)
    study, result, rows, _ = analysed(results)
    family = [rows[i] for i in ("Q1", "Q2", "Q3", "R1", "R2", "R3")]
    assert [r["p_adj"] for r in family] == pytest.approx(holm_by_hand([r["p"] for r in family]))
    # a non-inferiority endpoint's p: one-sided Welch of "worse by 0.1 or more", over tasks the mean of per-task differences
    d = rows["Q2"]["d"]
    pairs = [(result["fresh"][env][("quatro", 0)], result["fresh"][env][(PPO, 0)]) for env, _ in TASKS]
    assert d.estimate == pytest.approx(np.mean([x.mean() - y.mean() for x, y in pairs]))
    v = [x.var(ddof=1) / len(x) / 4 for pair in pairs for x in pair]
    assert d.se == pytest.approx(math.sqrt(sum(v)))
    assert d.df == pytest.approx(sum(v) ** 2 / sum(vi ** 2 / 9 for vi in v))
    assert rows["Q2"]["p"] == pytest.approx(stats.t.sf((d.estimate + 0.1) / d.se, d.df))
    # the head-to-head's per-task Welch test is scipy's, Holm within its table
    (_, _, task_rows, agg_rows), = report.head_to_heads(study, result)
    row = next(r for r in task_rows if (r["env"], r["algo"], r["lag"]) == ("Pendulum-v1", "r2vpo", 4))
    x, y = result["fresh"]["Pendulum-v1"][("r2vpo", 4)], result["fresh"]["Pendulum-v1"][(PPO, 4)]
    assert row["p"] == pytest.approx(stats.ttest_ind(x, y, equal_var=False).pvalue)
    for table in (task_rows, agg_rows):
        assert [r["p_adj"] for r in table] == pytest.approx(holm_by_hand([r["p"] for r in table]))
    assert {(r["algo"], r["lag"]) for r in agg_rows} == {(a, lag) for a in ("quatro", "r2vpo") for lag in LAGS}


def test_a_study_in_progress_is_undecided_and_names_the_missing_task(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path, score_tasks=TASKS[:1])
    _, _, rows, answers = analysed(results)
    assert all(r["tasks"] == 1 and r["missing"] == ["Pendulum-v1"] for r in rows.values())
    assert {a["answer"] for a in answers.values()} == {"not decided (the study is not complete)"}
    assert answers["quatro"]["reading"] == "supported"  # the reading so far, not the answer
    assert report.main(["--results", str(results)]) == 0
    text = (results / "verdicts.md").read_text()
    assert "| Q1. slope: quatro - ppo | primary | 1 of 2 (missing: Pendulum-v1) |" in text
    assert "**Interim: the study is not complete" in text and "| quatro | Q1 1/2, Q2 1/2, Q3 1/2, Q-tax 1/2 | **not decided (the study is not complete)** | supported (interim, not the answer) |" in text


def test_a_cut_part_cuts_its_endpoints_and_the_rule_decides_without_them(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    cuts = {"lags": [16], "parts": ["r2vpo-tax", "lr"]}
    results = _study(tmp_path, r2vpo=(0.9, 0.0), cuts=cuts)
    _, _, rows, answers = analysed(results)
    assert not rows["R3"]["planned"] and not rows["R-tax"]["planned"] and math.isnan(rows["R3"]["p_adj"])
    assert rows["R1"]["verdict"] == "win" and rows["R2"]["verdict"] == "non-inferior"
    assert answers["r2vpo"]["answer"] == "not decided" and answers["r2vpo"]["complete"]  # never supported without its tax
    family = [rows[i] for i in ("Q1", "Q2", "Q3", "R1", "R2")]  # Holm over the five left
    assert [r["p_adj"] for r in family] == pytest.approx(holm_by_hand([r["p"] for r in family]))


def test_a_foreign_row_is_refused_in_one_line_and_nothing_is_written(tmp_path, synthetic_envs, capsys):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path)
    from adaptive_po.bench.frozen import read_table

    table = read_table(results / "per_run.csv")
    for key in [("syn-score", "Acrobot-v1", "quatro", FRESH["quatro"], 3, 0, 50_000, ""),  # a lag the plan does not have
                ("syn-score", "Acrobot-v1", "ppo", FRESH["ppo"], 0, 0, 50_000, ""),  # an arm the design does not have
                ("syn-other", "Acrobot-v1", "quatro", FRESH["quatro"], 0, 0, 50_000, "")]:  # a folder
        rows = dict(table)
        rows[key] = synthetic_row(key[0], key[1], key[6], key[2], key[3], key[4], key[5], 0.5)
        write_table(results / "per_run.csv", rows)
        assert report.main(["--results", str(results)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"the run {key} is not in the plan" in err[0], err
        assert not (results / "verdicts.md").exists() and not (results / "staleness.png").exists()


def test_the_learning_rate_drop_is_welchs_with_holm_over_the_table(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path, lr_drop={"quatro": (0.0, 0.02), "r2vpo": (0.1, 0.5), PPO: (0.2, 0.6)}, sd=0.05)
    study = report.load(results)
    table = report.learning_rate(study, ("quatro", "r2vpo", PPO), "lr")
    rows = table["rows"]
    assert len(rows) == 2 * 2 * 3 and all(set(r["at"]) == {1.0, 4.0, 16.0} for r in rows)
    for r in rows:
        x16, x1 = r["at"][16.0], r["at"][1.0]
        assert len(x1) == len(x16) == 5  # x1: the sweep's runs on the part's seeds
        welch = stats.ttest_ind(x16, x1, equal_var=False)
        assert r["d"].estimate == pytest.approx(x16.mean() - x1.mean())
        assert r["p"] == pytest.approx(welch.pvalue)
        assert r["d"].ci() == pytest.approx(tuple(welch.confidence_interval(0.95)))
    assert [r["p_adj"] for r in rows] == pytest.approx(holm_by_hand([r["p"] for r in rows]))
    by = {(r["env"], r["lag"], r["arm"]): r for r in rows}
    assert by[("Acrobot-v1", 0, PPO)]["verdict"] == "lower" and by[("Acrobot-v1", 0, "quatro")]["verdict"] == "not shown"
    text = report.report_text(study, report.analyse(study))
    assert "## Secondary: the learning rate (part `lr`)" in text and "| Acrobot-v1 | 0 | ppo (frozen study) |" in text


def test_no_runs_yet_builds_with_every_answer_undecided(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = tmp_path / "study"
    results.mkdir()
    (results / "plan.toml").write_text(PLAN)
    shutil.copytree(_study(tmp_path / "other").parent / "frozen", tmp_path / "frozen")
    assert study_report.main(["--results", str(results)]) == 0  # the generic study report hands a searched plan here
    text = (results / "verdicts.md").read_text()
    assert "**Progress: no runs yet**" in text and "**What the searches chose:** nothing yet" in text
    assert text.count("**not decided (the study is not complete)**") == 2
    assert (results / "staleness.png").stat().st_size > 0


@pytest.mark.parametrize("name", ["frozen-quatro", "frozen-schedule"])
def test_the_committed_verdicts_of_a_searched_study_are_what_the_report_builds(tmp_path, name):
    for folder in (name, "frozen"):
        shutil.copytree(REPO / "docs" / "results" / folder, tmp_path / folder)
    (tmp_path / name / "verdicts.md").unlink()
    assert report.main(["--results", str(tmp_path / name)]) == 0
    assert (tmp_path / name / "verdicts.md").read_text() == (REPO / "docs" / "results" / name / "verdicts.md").read_text()
