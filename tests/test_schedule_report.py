"""The frozen study's extension (docs/results/frozen-schedule) through the generic report of a
searched design (adaptive_po/analysis/searched_report.py), its committed plan file on synthetic
tables (its two cheapest tasks, every part, 10 seeds) whose answers are known: the seven primary
endpoints with Holm over the seven, the families' answers, C per task, the per-task and secondary
tables, the search-luck line, the drift note, a study in progress and an empty folder; and what the
committed verdicts say of the arms."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from adaptive_po.analysis import searched_report as report
from adaptive_po.analysis.hypothesis import Difference
from adaptive_po.bench.frozen import write_table
from adaptive_po.studies.plan import load_plan

from search_records import add_searches, analysed, holm_by_hand, noisy_rows, planted, record_searches, synthetic_envs  # noqa: F401 - tests/search_records.py

REPO = Path(__file__).resolve().parents[1]
SCHEDULE = REPO / "docs" / "results" / "frozen-schedule"
TASKS = (("Acrobot-v1", 50_000), ("Pendulum-v1", 100_000))
LAGS = (0, 1, 2, 4, 8, 16, 64)
SEEDS = tuple(range(10))
SEARCH_SEEDS = (100, 101, 102)
FOLDERS = {"main": "schedule-search", "dppo-tax": "schedule-dppo-search", "luck": "schedule-luck-search"}
ARM1, ARM2 = "esspo", "ppo"
PPO, DPPO, ESSPO = "ppo (Zoo schedule)", "decoupled-ppo (Zoo schedule)", "esspo (Zoo schedule)"
FRESH1, FRESH2, TAX1, SECOND = ("batch_size=rollout,kl=sampled,n_epochs=1,n_steps=x0.0625", "batch_size=rollout,n_epochs=2",
                                "batch_size=rollout,n_epochs=5", "learning_rate=x2,n_epochs=1")
NOT_COMPLETE = "not decided (the study is not complete)"


def _plan_text() -> str:
    """The committed plan on the two cheapest tasks."""
    text = (SCHEDULE / "plan.toml").read_text()
    old = ('tasks = [{ env = "Acrobot-v1", budget = 50_000 }, { env = "Pendulum-v1", budget = 100_000 },\n'
           '         { env = "LunarLanderContinuous-v3", budget = 300_000 }, { env = "LunarLander-v3", budget = 500_000 }]')
    assert old in text
    return text.replace(old, 'tasks = [{ env = "Acrobot-v1", budget = 50_000 }, { env = "Pendulum-v1", budget = 100_000 }]')


def _pick(variant: str, trial: int = 0, updates: int | None = 196) -> dict:
    """A pick as a search records it (the published study's picks: their task's updates per run only)."""
    return {"variant": variant, "trial": trial, "search_return": 1.0, "search_score": 0.9, "optimizer_steps_per_update": 1,
            **({"updates_per_run": updates} if updates else {})}


def _study(root: Path, *, arm1=(0.9, 0.0), arm2=(0.9, -0.05), ppo=(0.9, -0.1), dppo=(0.9, -0.1), esspo=(0.7, 0.0), arm1_tax=0.0,
           ppo_tax=0.2, dppo_tax=0.2, luck=None, seed=0, parts=tuple(FOLDERS), searched=TASKS, score_tasks=None, sd=0.05) -> Path:
    """This study's and the published study's committed files. Each arm's score at a lag is
    ``level + slope x log2(1 + lag) + N(0, sd)``; a tax of 0 makes the lag-8 pick the fresh one
    (``decoupled-ppo``'s: the published fresh pick, rerun here), else the lag-8 pick scores ``tax``
    above the fresh one at lag 8. ``luck``: the second search's pick at lag 0, its mean above arm
    1's (None: the first search's pick). ``searched``: the tasks searched; ``score_tasks``: the
    tasks whose scoring runs are in the table (default: every one searched)."""
    rng = np.random.default_rng(seed)
    score_tasks = searched if score_tasks is None else score_tasks
    results, published = root / "frozen-schedule", root / "frozen"
    results.mkdir(parents=True)
    published.mkdir(parents=True)
    (results / "plan.toml").write_text(_plan_text())
    ours, theirs, selected, theirs_selected = {}, {}, {}, {}

    add, mean = noisy_rows(rng, sd, SEEDS), planted

    for env, budget in TASKS:
        theirs_selected[env] = {"budget": budget, "updates_per_run": 13,
                                "esspo": {"fresh": _pick("batch_size=x0.5", 2, None), "lag8": _pick("batch_size=x4", 8, None)},
                                "ppo": {"fresh": _pick("clip_range=0.48", 12, None), "lag8": _pick("n_epochs=x0.5" if ppo_tax else "clip_range=0.48", 6, None)},
                                "decoupled-ppo": {"fresh": _pick("clip_range=0.3", 7, None)}}
        for arm, algo, variant in ((esspo, "esspo", "batch_size=x0.5"), (ppo, "ppo", "clip_range=0.48"), (dppo, "decoupled-ppo", "clip_range=0.3")):
            for lag in LAGS:
                add(theirs, "frozen-score", env, budget, algo, variant, lag, mean(arm, lag))
        add(theirs, "frozen-score", env, budget, "esspo", "batch_size=x4", 8, mean(esspo, 8))
        if ppo_tax:
            add(theirs, "frozen-score", env, budget, "ppo", "n_epochs=x0.5", 8, mean(ppo, 8) + ppo_tax)
    for env, budget in searched:
        dppo8 = "clip_range=0.45" if dppo_tax else "clip_range=0.3"
        picks = {"main": {"esspo": {"fresh": _pick(FRESH1), "lag8": _pick(TAX1 if arm1_tax else FRESH1, 3)}, "ppo": {"fresh": _pick(FRESH2, 5)}},
                 "dppo-tax": {"decoupled-ppo": {"lag8": _pick(dppo8, 9)}}, "luck": {"esspo": {"fresh": _pick(FRESH1 if luck is None else SECOND, 11)}}}
        selected[env] = {"budget": budget, **{p: v for p, v in picks.items() if p in parts and (p != "luck" or env == "Pendulum-v1")}}
        add_searches(lambda *a: add(ours, *a), selected[env], env, budget, FOLDERS, SEARCH_SEEDS)  # the pick returned 1.0, one other 0.5
        if (env, budget) not in score_tasks:
            continue
        for lag in LAGS:
            add(ours, "schedule-score", env, budget, "esspo", FRESH1, lag, mean(arm1, lag))
            add(ours, "schedule-score", env, budget, "ppo", FRESH2, lag, mean(arm2, lag))
        if arm1_tax:
            add(ours, "schedule-score", env, budget, "esspo", TAX1, 8, mean(arm1, 8) + arm1_tax)
        if "dppo-tax" in parts:
            add(ours, "schedule-score", env, budget, "decoupled-ppo", dppo8, 8, mean(dppo, 8) + dppo_tax)
        if "luck" in parts and env == "Pendulum-v1" and luck is not None:
            add(ours, "schedule-score", env, budget, "esspo", SECOND, 0, mean(arm1, 0) + luck)
    record_searches(results, ours, selected, FOLDERS, SEARCH_SEEDS, parts=True, fill=False)
    write_table(results / "per_run.csv", ours)
    write_table(published / "per_run.csv", theirs)
    (results / "selected.json").write_text(json.dumps({"plan": {}, "selected": selected}))
    (published / "selected.json").write_text(json.dumps({"plan": {}, "selected": theirs_selected}))
    (results / "cuts.json").write_text(json.dumps({"lags": [], "parts": [p for p in FOLDERS if p not in parts], "tasks": []}))
    return results


def _text(results: Path) -> str:
    study = report.load(results)
    return report.report_text(study, report.analyse(study))


def test_family_a_is_supported_when_arm_1_is_flat_in_lag_and_equal_to_ppo_at_lag_0(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    results = _study(tmp_path)
    _, result, rows, answers = analysed(results)
    assert rows["A1"]["d"].estimate == pytest.approx(0.1, abs=0.02) and rows["A1"]["verdict"] == "win"
    assert abs(rows["A2"]["d"].estimate) < 0.05 and rows["A2"]["verdict"] == "non-inferior"
    assert rows["A3"]["d"].estimate == pytest.approx(-0.2, abs=0.04) and rows["A3"]["verdict"] == "win"
    assert result["endpoints"]["A-tax"]["agg"].estimate == 0.0  # arm 1's lag-8 pick is its fresh one: tax exactly 0
    assert answers["A"]["answer"] == "supported" and answers["A"]["complete"]
    assert answers["B"]["answer"] == "supported"  # decoupled-ppo as ppo here
    assert rows["C"]["d"].estimate == pytest.approx(0.2, abs=0.04) and answers["C"]["answer"] == "closed"
    text = _text(results)
    assert "| against PPO (family A: arm 1 vs the published tuned `ppo`) | A1 2/2, A2 2/2, A3 2/2, A-tax 2/2 | **supported** | (final) |" in text
    assert "| C. the searched schedule's effect on `esspo` at lag 0 | C 2/2 | **closed** | (final) |" in text
    assert "**C per task** (Holm over the tasks): " in text and "rests on" not in text  # a win on every task carries it
    assert "**What the searches chose** (fresh data" in text and "whole-rollout steps on 2 of 2 tasks" in text
    assert "`esspo (schedule search)`: Acrobot-v1 1 whole-rollout step per update" in text
    assert "Interim" not in text
    # 2 x 352 runs per task and the luck search's 58 on Pendulum-v1, as the pre-registration counts them
    assert "of 762 planned runs" in text and "| main | search | `schedule-search` | 36 | 288 | 300 |" in text


def test_family_b_is_contradicted_when_arm_1_trails_decoupled_ppo_by_0_3_at_lag_0(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path, arm1=(0.6, 0.0), ppo=(0.6, -0.1), dppo=(0.9, -0.1), esspo=(0.6, 0.0))
    _, _, rows, answers = analysed(results)
    assert rows["B2"]["d"].estimate == pytest.approx(-0.3, abs=0.04)
    assert rows["B2"]["verdict"] == "inferior" and rows["B2"]["p_inferior_adj"] < 0.05
    assert answers["B"]["answer"] == "contradicted" and answers["A"]["answer"] == "supported"
    assert rows["C"]["verdict"] == "equivalent" and answers["C"]["answer"] == "equivalent"
    assert "| against the proximal correction (family B: arm 1 vs the published tuned `decoupled-ppo`) | B1 2/2, B2 2/2, B3 2/2, B-tax 2/2 | " \
           "**contradicted** |" in _text(results)


def test_a_steeper_arm_1_contradicts_a_tax_loss_contradicts_and_c_widens(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    _, _, rows, answers = analysed(_study(tmp_path / "a", arm1=(0.9, -0.15)))
    assert rows["A1"]["verdict"] == "loss" and answers["A"]["answer"] == "contradicted"
    # arm 1's tax 0.3 against ppo's 0: endpoint 3 a loss
    _, _, rows, answers = analysed(_study(tmp_path / "b", arm1_tax=0.3, ppo_tax=0.0, dppo_tax=0.0, ppo=(0.9, -0.02), dppo=(0.9, -0.02)))
    assert rows["A3"]["d"].estimate == pytest.approx(0.3, abs=0.04) and rows["A3"]["verdict"] == "loss"
    assert answers["A"]["answer"] == answers["B"]["answer"] == "contradicted"
    results = _study(tmp_path / "c", esspo=(1.1, 0.0))
    _, _, rows, answers = analysed(results)
    assert answers["C"]["answer"] == "widened"
    text = _text(results)
    assert "The aggregate's loss (widened) rests on" not in text or "where the search of `esspo (schedule search)` chose" in text


def test_holm_over_the_seven_primary_tests_by_hand():
    """Differences built to have the raw p's 0.001 (A1), 0.01 (A2, one-sided non-inferiority), 0.02
    (A3), 0.04 (B1), 0.3 (B2, one-sided), 0.5 (B3), 0.6 (C): Holm over the seven by hand is 0.007,
    0.06, 0.1, 0.16, 0.9, 1, 1; arm 1's own taxes outside the family."""
    z = stats.norm.isf
    two = lambda p: Difference(float(z(p / 2)) * 0.01, 0.01, math.inf)  # noqa: E731
    one = lambda p: Difference(-0.1 + float(z(p)) * 0.01, 0.01, math.inf)  # noqa: E731
    ds = {"A1": two(0.001), "A2": one(0.01), "A3": two(0.02), "B1": two(0.04), "B2": one(0.3), "B3": two(0.5), "C": two(0.6),
          "A-tax": Difference(0.5, 0.01, math.inf), "B-tax": Difference(0.5, 0.01, math.inf)}
    study = SimpleNamespace(plan=load_plan(SCHEDULE / "plan.toml"))
    result = {"endpoints": {e.id: {"endpoint": e, "planned": True, "agg": ds[e.id], "tasks": {"x": ds[e.id]}, "missing": []}
                            for e in study.plan.endpoints}}
    rows = report.primary(study, result)[:7]
    assert [r["p"] for r in rows] == pytest.approx([0.001, 0.01, 0.02, 0.04, 0.3, 0.5, 0.6])
    assert [r["p_adj"] for r in rows] == pytest.approx([0.007, 0.06, 0.1, 0.16, 0.9, 1.0, 1.0])
    assert [r["p_adj"] for r in rows] == pytest.approx(holm_by_hand([r["p"] for r in rows]))
    # A1 a win after Holm; A2 non-inferior alone (0.01) but not shown among the seven (0.06)
    assert [r["verdict"] for r in rows][:2] == ["win", "not shown"]
    # A2's mirror (inferiority) test takes A2's place among the seven: p 0.99 there
    assert rows[1]["p_inferior"] == pytest.approx(0.99) and rows[1]["p_inferior_adj"] == pytest.approx(1.0)
    assert {a["decision"].name: a["answer"] for a in report.answers(study, report.primary(study, result))}["A"] == "not decided"


def test_a_cut_decoupled_ppo_tax_decides_family_b_on_b1_and_b2(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path, parts=("main", "luck"), dppo=(0.9, 0.05))
    _, _, rows, answers = analysed(results)
    assert not rows["B3"]["planned"] and not rows["B-tax"]["planned"] and rows["B1"]["verdict"] == "loss"
    assert answers["B"]["answer"] == "contradicted" and answers["B"]["complete"]
    text = _text(results)
    assert "| dppo-tax | search | `schedule-dppo-search` | 0 | cut | cut |" in text
    assert "| B3. retuning tax at lag 8: arm 1's - decoupled-ppo's | primary | cut |" in text


def test_per_task_endpoints_have_holm_over_the_tasks(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path, arm1=(0.6, 0.0), ppo=(0.6, -0.1), dppo=(0.9, -0.1))
    study, result, _, _ = analysed(results)
    per_task = report.per_task_verdicts(study, result)
    assert set(per_task) == {"A1", "A2", "A3", "B1", "B2", "B3", "C", "A-tax", "B-tax"}
    for rows in per_task.values():
        assert list(rows) == ["Acrobot-v1", "Pendulum-v1"]
        assert [r["p_adj"] for r in rows.values()] == pytest.approx(holm_by_hand([r["p"] for r in rows.values()]))
    b2 = per_task["B2"]
    assert [r["p_inferior_adj"] for r in b2.values()] == pytest.approx(holm_by_hand([r["p_inferior"] for r in b2.values()]))
    assert {r["verdict"] for r in b2.values()} == {"inferior"} and {r["verdict"] for r in per_task["A2"].values()} == {"non-inferior"}
    fresh = result["fresh"]["Pendulum-v1"]  # a per-task number against scipy's Welch test
    x, y = fresh[(ARM1, 0)], fresh[(DPPO, 0)]
    assert b2["Pendulum-v1"]["d"].estimate == pytest.approx(float(x.mean() - y.mean()))
    assert per_task["C"]["Pendulum-v1"]["p"] == pytest.approx(stats.ttest_ind(x, fresh[(ESSPO, 0)], equal_var=False).pvalue)
    text = _text(results)
    assert "A2/B2's mirror test (p of \"the arm is worse by less than the margin\"" in text
    # each tax over the tasks, the comparators' included (the published report's A3c/B3c)
    assert result["tax_over"][(PPO, "")].estimate == pytest.approx(0.2, abs=0.04) and "| ppo (Zoo schedule)'s tax | 2 of 2 |" in text


def test_the_secondary_tables_with_holm_within_each_table(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path, arm2=(0.7, -0.05))
    study, result, _, _ = analysed(results)
    (_, vs_ppo, *ppo_rows), (_, vs_dppo, *dppo_rows) = report.head_to_heads(study, result)
    assert (vs_ppo, vs_dppo) == (PPO, DPPO)
    assert [(r["algo"], r["lag"]) for r in ppo_rows[1]] == [(a, lag) for a in (ARM1, ARM2, ESSPO, DPPO) for lag in LAGS]
    assert len(ppo_rows[0]) == 2 * 4 * len(LAGS) and {r["tasks"] for r in ppo_rows[1]} == {2}
    assert {r["algo"] for r in dppo_rows[1]} == {ARM1, ARM2, ESSPO, PPO}
    on_ppo, objective = (report.difference(study, result, s) for s in study.plan.secondary if s.kind == "difference")
    for rows in (*ppo_rows, *dppo_rows, *on_ppo, *objective):
        assert [r["p_adj"] for r in rows] == pytest.approx(holm_by_hand([r["p"] for r in rows]))
    # arm 2 - ppo: 0.2 below at lag 0, 0.05 per unit flatter (its slope's margin per unit)
    by = {r["what"]: r for r in on_ppo[1]}
    assert by["lag 0"]["d"].estimate == pytest.approx(-0.2, abs=0.04) and by["lag 0"]["verdict"] == "loss"
    assert by["slope, lags 0-8"]["d"].estimate == pytest.approx(0.05, abs=0.01) and by["slope, lags 0-8"]["verdict"] == "win"
    assert [(r["env"], r["what"]) for r in on_ppo[0]] == [(env, w) for env, _ in TASKS for w in ("lag 0", "slope, lags 0-8")]
    # arm 1 - arm 2 at every lag: 0.2 above at lag 0
    assert [r["what"] for r in objective[1]] == [f"lag {lag}" for lag in LAGS] and objective[1][0]["d"].estimate == pytest.approx(0.2, abs=0.04)
    text = _text(results)
    assert "## Secondary: each arm minus `ppo (Zoo schedule)` at every lag" in text and "## Secondary: each arm minus `decoupled-ppo (Zoo schedule)` at every lag" in text
    assert "## Secondary: the schedule's effect on PPO (arm 2 - ppo)\n\nPre-registered as secondary and descriptive: `ppo (schedule search)` minus" in text
    assert "## Secondary: the objective's effect within one schedule (arm 1 - arm 2)" in text
    # the configurations with their optimizer steps per update, at lag 8, updates per run (a comparator's from its task) and search return
    assert (f"| Pendulum-v1 | esspo (schedule search) | fresh | main | this study | `{FRESH1}` (0) | 1 epoch, whole-rollout batches, rollout "
            "length x0.0625, kl sampled | 1 | 8 | 196 | ") in text
    assert "| Acrobot-v1 | ppo (Zoo schedule) | lag8 |  | the published frozen-tuning study | `n_epochs=x0.5` (6) | epochs x0.5 | 1 | 8 | 13 | " in text


def test_the_search_luck_line_sits_beside_a2_on_pendulum(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path / "a", luck=0.2)
    study, result, _, _ = analysed(results)
    luck, = report.search_luck(study, result, next(s for s in study.plan.secondary if s.kind == "search-luck"))
    assert luck["env"] == "Pendulum-v1" and luck["d"].estimate == pytest.approx(0.2, abs=0.05) and not luck["same"]
    line = next(line for line in _text(results).splitlines() if line.startswith("**Search luck (Pendulum-v1, lag 0):**"))
    a2 = result["endpoints"]["A2"]["tasks"]["Pendulum-v1"]
    assert f"the second search's selection (`{SECOND}`, trial 1) minus the first's (`{FRESH1}`, trial 0): {report.format_difference(luck['d'])}" in line
    assert f"beside A2's estimate there: {report.format_difference(a2)}" in line
    # the second search chose the first's configuration: the same runs, exactly 0
    results = _study(tmp_path / "b", luck=None)
    study, result, _, _ = analysed(results)
    luck, = report.search_luck(study, result, next(s for s in study.plan.secondary if s.kind == "search-luck"))
    assert luck["same"] and luck["d"].estimate == 0.0 and "the same runs, a difference of exactly 0" in _text(results)
    # the luck part cut: its line says so
    assert "**Search luck (part `luck`):** cut by the pre-registered order." in _text(_study(tmp_path / "c", parts=("main", "dppo-tax")))


def test_a_lag_8_pick_that_is_the_published_fresh_one_has_no_tax_and_its_drift_is_shown(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    results = _study(tmp_path, dppo_tax=0.0)
    study, result, rows, _ = analysed(results)
    assert result["taxes"][("decoupled-ppo", "dppo-tax")] == {env: Difference(0.0, 0.0, math.inf) for env, _ in TASKS}
    assert set(report.drift(study)) == {("decoupled-ppo", env) for env, _ in TASKS}
    assert "`decoupled-ppo`'s lag-8 search chose the fresh pick of the published frozen-tuning study on Acrobot-v1, Pendulum-v1" in _text(results)


def test_a_study_in_progress_builds_and_answers_not_decided(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)
    # only Acrobot's searches: nothing scored yet
    results = _study(tmp_path / "a", searched=TASKS[:1], parts=("main",), score_tasks=())
    assert report.main(["--results", str(results)]) == 0
    text = (results / "verdicts.md").read_text()
    assert (results / "staleness.png").stat().st_size > 0
    assert "**Interim: the study is not complete" in text and text.count(f"**{NOT_COMPLETE}**") == 3
    assert "| A1. slope per unit log2(1 + lag), lags 0-8: arm 1 - ppo | primary | 0 of 2 (missing: Acrobot-v1, Pendulum-v1) |" in text
    # Acrobot complete, Pendulum searched only: every endpoint over Acrobot, the answers not the study's yet
    results = _study(tmp_path / "b", score_tasks=TASKS[:1])
    _, _, rows, answers = analysed(results)
    assert all(r["tasks"] == 1 and r["missing"] == ["Pendulum-v1"] for r in rows.values())
    assert {a["answer"] for a in answers.values()} == {NOT_COMPLETE}
    assert answers["A"]["reading"] != NOT_COMPLETE and all(r["verdict"] for r in rows.values())
    text = _text(results)
    assert "| A2. lag 0: arm 1 - ppo (non-inferiority at -0.1) | primary | 1 of 2 (missing: Pendulum-v1) |" in text
    assert "(interim, not the answer)" in text and f"**Search luck (Pendulum-v1, lag 0):** {NOT_COMPLETE} (the second search's selection" in text


@pytest.mark.parametrize("table", ["missing", "header"])
def test_an_empty_folder_builds_and_says_no_runs_yet(tmp_path, table):
    results = tmp_path / "frozen-schedule"
    results.mkdir()
    shutil.copy(SCHEDULE / "plan.toml", results / "plan.toml")
    shutil.copytree(REPO / "docs" / "results" / "frozen", tmp_path / "frozen")
    if table == "header":
        write_table(results / "per_run.csv", {})
    assert report.main(["--results", str(results)]) == 0
    text = (results / "verdicts.md").read_text()
    assert "**Progress: no runs yet**" in text and "the plan has 1,466 runs" in text
    assert text.count(f"**{NOT_COMPLETE}**") == 3 and "**What the searches chose:** nothing yet" in text
    assert "| main | search | `schedule-search` | 0 | 576 | 600 |" in text
    assert "2026-12-01/02" in text.split("## Limits", 1)[1]  # the plan's own limit, beside the pre-registration's
    assert (results / "staleness.png").stat().st_size > 0


def test_the_committed_verdicts_name_the_arms_by_what_their_searches_chose_and_what_carries_c():
    """(tests/test_searched_report.py checks that the committed verdicts are what the report builds.)"""
    text = (SCHEDULE / "verdicts.md").read_text()
    # the arms named by what their searches chose, and the task that carries C's aggregate
    assert ("`esspo (schedule search)`: Acrobot-v1 one pass of minibatches" in text
            and "(whole-rollout steps on 1 of 4 tasks: LunarLanderContinuous-v3)" in text)
    assert ("The aggregate's loss (widened) rests on LunarLander-v3 alone, where the search of `esspo (schedule search)` chose one pass of "
            "minibatches (256 optimizer steps per update)") in text
    # the deviation, listed in the pre-registration and quoted by the report, counts the table's `step` column
    assert "1,216 of the 1,464 runs that record a step ran the eager step" in text
