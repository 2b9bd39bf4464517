"""The frozen study's extension report (adaptive_po/analysis/reports/frozen_schedule.py): the seven
primary endpoints with Holm over the seven, the families' answers by the registered rule, C's words,
the per-task and secondary tables, the search-luck line, and a report that builds on a partial or
empty folder. Synthetic tables (two tasks, every part, 10 seeds) whose answers are known."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from adaptive_po import contract
from adaptive_po.analysis.hypothesis import Difference
from adaptive_po.analysis.reports import frozen_schedule as report
from adaptive_po.bench.frozen import row_key, write_table

TASKS = (("Acrobot-v1", 50_000), ("Pendulum-v1", 100_000))
LAGS = (0, 1, 2, 4, 8, 16, 64)
SEEDS = tuple(range(10))
SEARCH_SEEDS = (100, 101, 102)
REPO = Path(__file__).resolve().parents[1]
PUBLISHED_REAL = REPO / "docs" / "results" / "frozen"
from search_records import synthetic_envs  # noqa: E402,F401 - tests/search_records.py: environment files of the synthetic tables


from search_records import holm_by_hand as _holm_by_hand  # noqa: E402 - tests/search_records.py


def _record(tasks, arms, tax_arms, lags, fresh_arms=None) -> dict:
    return {"tasks": [{"env": e, "budget": b} for e, b in tasks], "arms": list(arms), "tax_arms": list(tax_arms), "lags": list(lags),
            "tax_lag": 8, "search_seeds": list(SEARCH_SEEDS), "score_seeds": list(SEEDS), "trials": 16, "round_size": 4,
            **({"fresh_arms": list(fresh_arms)} if fresh_arms is not None else {})}


def _row(folder, env, budget, algo, variant, lag, seed, score) -> dict:
    return {"folder": folder, "env": env, "algo": algo, "variant": variant, "policy_lag": lag, "seed": seed, "total_timesteps": budget,
            "status": "complete", "final_eval_return": score, "random_score": 0.0, "reference": 1.0, "score": score, "step": "compiled",
            "wall_time_s": 1.0}


def _pick(variant: str, trial: int = 0) -> dict:
    return {"variant": variant, "trial": trial, "search_return": 1.0, "search_score": 0.9, "optimizer_steps_per_update": 1, "updates_per_run": 196}


def _study(root: Path, *, arm1=(0.9, 0.0), arm2=(0.9, -0.05), ppo=(0.9, -0.1), dppo=(0.9, -0.1), esspo=(0.7, 0.0), arm1_tax=0.0,
           ppo_tax=0.2, dppo_tax=0.2, luck=None, seed=0, parts=contract.SCHEDULE_PARTS, tasks=TASKS, score_tasks=None, sd=0.05) -> tuple[Path, Path]:
    """This study's and the published study's committed files. Each arm's score at a lag is
    ``level + slope x log2(1 + lag) + N(0, sd)``; a tax of 0 makes the lag-8 choice the fresh one
    (no runs of its own), else the lag-8 choice scores ``tax`` above the fresh one at lag 8. ``luck``:
    the second search's selection at lag 0, its mean above arm 1's (None: the same configuration).
    ``score_tasks``: the tasks whose scoring runs are in the table (default all; the searches of
    every task in ``tasks`` are)."""
    rng = np.random.default_rng(seed)
    score_tasks = tasks if score_tasks is None else score_tasks
    results, published = root / "frozen-schedule", root / "frozen"
    results.mkdir(parents=True)
    published.mkdir(parents=True)
    ours, theirs = {}, {}

    def add(rows, folder, env, budget, algo, variant, lag, mean):
        for s in SEEDS:
            row = _row(folder, env, budget, algo, variant, lag, s, float(mean + rng.normal(0, sd)))
            rows[row_key(row)] = row

    def mean(arm, lag):
        return arm[0] + arm[1] * math.log2(1 + lag)

    plan = {"main": _record(tasks, ("esspo", "ppo"), ("esspo",), LAGS), "dppo-tax": _record(tasks, ("decoupled-ppo",), ("decoupled-ppo",), LAGS, ()),
            "luck": _record([t for t in tasks if t[0] == "Pendulum-v1"], ("esspo",), (), (0,))}
    plan = {k: v for k, v in plan.items() if k in parts}
    selected, pub_selected = {}, {}
    for env, budget in TASKS:
        pub_selected[env] = {"budget": budget, "updates_per_run": 13,
                             "esspo": {"fresh": _pick("batch_size=x0.5", 2), "lag8": _pick("batch_size=x4", 8)},
                             "ppo": {"fresh": _pick("clip_range=0.48", 12), "lag8": _pick(("n_epochs=x0.5" if ppo_tax else "clip_range=0.48"), 6)},
                             "decoupled-ppo": {"fresh": _pick("clip_range=0.3", 7)}}
        for arm, algo, variant in ((esspo, "esspo", "batch_size=x0.5"), (ppo, "ppo", "clip_range=0.48"), (dppo, "decoupled-ppo", "clip_range=0.3")):
            for lag in LAGS:
                add(theirs, "frozen-score", env, budget, algo, variant, lag, mean(arm, lag))
        add(theirs, "frozen-score", env, budget, "esspo", "batch_size=x4", 8, mean(esspo, 8))
        if ppo_tax:
            add(theirs, "frozen-score", env, budget, "ppo", "n_epochs=x0.5", 8, mean(ppo, 8) + ppo_tax)
    for env, budget in tasks:
        fresh1, fresh2 = "batch_size=rollout,kl=sampled,n_epochs=1,n_steps=x0.0625", "batch_size=rollout,n_epochs=2"
        tax1 = "batch_size=rollout,n_epochs=5" if arm1_tax else fresh1
        dppo8 = "clip_range=0.45" if dppo_tax else "clip_range=0.3"
        selected[env] = {"budget": budget, "main": {"esspo": {"fresh": _pick(fresh1), "lag8": _pick(tax1, 3)}, "ppo": {"fresh": _pick(fresh2, 5)}}}
        if "dppo-tax" in parts:
            selected[env]["dppo-tax"] = {"decoupled-ppo": {"lag8": _pick(dppo8, 9)}}
        if "luck" in parts and env == "Pendulum-v1":
            selected[env]["luck"] = {"esspo": {"fresh": _pick(fresh1 if luck is None else "batch_size=rollout,n_epochs=5", 11)}}
        for folder, n in ((contract.SCHEDULE_SEARCH_FOLDER, 144), (contract.SCHEDULE_DPPO_SEARCH_FOLDER, 48 if "dppo-tax" in parts else 0),
                          (contract.SCHEDULE_LUCK_SEARCH_FOLDER, 48 if "luck" in parts and env == "Pendulum-v1" else 0)):
            for i in range(n):  # the search's runs: 16 trials x 3 seeds per study (scores do not matter to the report)
                row = _row(folder, env, budget, "esspo", f"learning_rate=x{i // 3}", 0, SEARCH_SEEDS[i % 3], 0.5)
                ours[row_key(row)] = row
        used = 0
        for part, picks in selected[env].items():  # each choice is its search's best (the report checks it): one trial's runs become its
            for algo, tuned_picks in (picks.items() if part != "budget" else ()):
                for tuned, pick in tuned_picks.items():
                    for s in SEARCH_SEEDS:
                        folder = report.SEARCH_FOLDERS[part]
                        del ours[(folder, env, "esspo", f"learning_rate=x{15 - used}", 0, s, budget, "")]
                        row = _row(folder, env, budget, algo, pick["variant"], 0 if tuned == "fresh" else 8, s, 1.0)
                        ours[row_key(row)] = row
                    used += 1
        if (env, budget) not in score_tasks:
            continue
        for lag in LAGS:
            add(ours, contract.SCHEDULE_SCORE_FOLDER, env, budget, "esspo", fresh1, lag, mean(arm1, lag))
            add(ours, contract.SCHEDULE_SCORE_FOLDER, env, budget, "ppo", fresh2, lag, mean(arm2, lag))
        if arm1_tax:
            add(ours, contract.SCHEDULE_SCORE_FOLDER, env, budget, "esspo", tax1, 8, mean(arm1, 8) + arm1_tax)
        if "dppo-tax" in parts:
            add(ours, contract.SCHEDULE_SCORE_FOLDER, env, budget, "decoupled-ppo", dppo8, 8, mean(dppo, 8) + dppo_tax)
        if "luck" in parts and env == "Pendulum-v1" and luck is not None:
            add(ours, contract.SCHEDULE_SCORE_FOLDER, env, budget, "esspo", "batch_size=rollout,n_epochs=5", 0, mean(arm1, 0) + luck)
    from search_records import record_searches  # tests/search_records.py: the trials and the choices' means, as a study writes them

    record_searches(results, ours, selected, report.SEARCH_FOLDERS, SEARCH_SEEDS, parts=True, fill=False)
    write_table(results / "per_run.csv", ours)
    write_table(published / "per_run.csv", theirs)
    (results / "selected.json").write_text(json.dumps({"plan": plan, "selected": selected}))
    (published / "selected.json").write_text(json.dumps({"plan": {}, "selected": pub_selected}))
    cuts = {"lags": [], "parts": [p for p in contract.SCHEDULE_PARTS if p not in parts], "tasks": []}
    (results / "cuts.json").write_text(json.dumps(cuts))
    return results, published


def _analysed(results: Path, published: Path):
    *_, plan, result = report.load_and_analyse(results, published)
    rows = report.primary(result)
    return plan, result, rows, report.answers(result, rows)


def test_family_a_is_supported_when_arm_1_is_flat_in_lag_and_equal_to_ppo_at_lag_0(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    results, published = _study(tmp_path)
    plan, result, rows, answer = _analysed(results, published)
    by = {r["name"]: r for r in rows}
    assert by["A1"]["d"].estimate == pytest.approx(0.1, abs=0.02) and by["A1"]["verdict"] == "win"
    assert abs(by["A2"]["d"].estimate) < 0.05 and by["A2"]["verdict"] == "non-inferior"
    assert by["A3"]["d"].estimate == pytest.approx(-0.2, abs=0.04) and by["A3"]["verdict"] == "win"
    assert result["arm1_tax"]["A"].estimate == 0.0  # arm 1's lag-8 choice is its fresh one: tax exactly 0
    assert answer["A"] == {"answer": "supported", "interim": "supported", "complete": True}
    assert answer["B"]["answer"] == "supported"  # decoupled-ppo as ppo here
    assert by["C"]["d"].estimate == pytest.approx(0.2, abs=0.04) and answer["C"]["answer"] == "closed"
    text = report.report(results, published)
    assert "| against PPO (family A: arm 1 vs the published tuned `ppo`) | A1 2/2, A2 2/2, A3 2/2 | **supported** | (final) |" in text
    assert "| C. the searched schedule's effect on `esspo` at lag 0 | C 2/2 | **closed** |" in text
    assert "**C per task** (Holm over the tasks): " in text and "rests on" not in text  # a win on every task carries it
    assert "**What the searches chose** (fresh data" in text and "whole-rollout steps on 2 of 2 tasks" in text
    assert "Interim" not in text
    # progress: every planned run of the two tasks is in the table, less arm 1's tax runs (its lag-8 choice is the fresh one)
    planned = 2 * 352 + 58
    assert plan.total == planned
    assert f"**Progress:** {planned - 2 * 10 - 10:,} of {planned:,} planned runs" in text  # and the luck choice is the main one
    assert "| main | 288 of 288 (`schedule-search`) | 280 of 300 |" in text and "| luck | 48 of 48 (`schedule-luck-search`) | 0 of 10 |" in text


def test_family_b_is_contradicted_when_arm_1_trails_decoupled_ppo_by_0_3_at_lag_0(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    results, published = _study(tmp_path, arm1=(0.6, 0.0), ppo=(0.6, -0.1), dppo=(0.9, -0.1), esspo=(0.6, 0.0))
    _, _, rows, answer = _analysed(results, published)
    by = {r["name"]: r for r in rows}
    assert by["B2"]["d"].estimate == pytest.approx(-0.3, abs=0.04)
    assert by["B2"]["verdict"] == "inferior" and by["B2"]["p_inferior_adj"] < 0.05
    assert answer["B"]["answer"] == "contradicted"
    assert answer["A"]["answer"] == "supported"  # against ppo, level at lag 0 and flatter
    assert by["C"]["verdict"] == "equivalent" and answer["C"]["answer"] == "equivalent"
    text = report.report(results, published)
    assert "| against the proximal correction (family B: arm 1 vs the published tuned `decoupled-ppo`) | B1 2/2, B2 2/2, B3 2/2 | **contradicted** |" in text


def test_a_steeper_arm_1_contradicts_and_a_tax_loss_contradicts(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    results, published = _study(tmp_path / "a", arm1=(0.9, -0.15))
    _, _, rows, answer = _analysed(results, published)
    assert {r["name"]: r["verdict"] for r in rows}["A1"] == "loss" and answer["A"]["answer"] == "contradicted"
    # arm 1's tax 0.3 against ppo's 0: endpoint 3 a loss
    results, published = _study(tmp_path / "b", arm1_tax=0.3, ppo_tax=0.0, dppo_tax=0.0, ppo=(0.9, -0.02), dppo=(0.9, -0.02))
    _, result, rows, answer = _analysed(results, published)
    by = {r["name"]: r for r in rows}
    assert by["A3"]["d"].estimate == pytest.approx(0.3, abs=0.04) and by["A3"]["verdict"] == "loss"
    assert answer["A"]["answer"] == answer["B"]["answer"] == "contradicted"
    # C widened: arm 1 below the published esspo
    results, published = _study(tmp_path / "c", esspo=(1.1, 0.0))
    _, _, _, answer = _analysed(results, published)
    assert answer["C"]["answer"] == "widened"


def test_holm_over_the_seven_primary_tests_by_hand():
    """Differences built to have the raw p's 0.001 (A1), 0.01 (A2, one-sided non-inferiority), 0.02
    (A3), 0.04 (B1), 0.3 (B2, one-sided), 0.5 (B3), 0.6 (C): Holm over the seven by hand is 0.007,
    0.06, 0.1, 0.16, 0.9, 1, 1."""
    z = stats.norm.isf
    two = lambda p: Difference(float(z(p / 2)) * 0.01, 0.01, math.inf)  # noqa: E731
    one = lambda p: Difference(-0.1 + float(z(p)) * 0.01, 0.01, math.inf)  # noqa: E731
    ds = {"A1": two(0.001), "A2": one(0.01), "A3": two(0.02), "B1": two(0.04), "B2": one(0.3), "B3": two(0.5), "C": two(0.6)}
    result = {"endpoints": {name: {"name": name, "kind": kind, "text": name, "planned": True, "agg": ds[name], "tasks": {"x": ds[name]}, "missing": []}
                            for name, kind, _, _ in report.ENDPOINTS},
              "arm1_tax": {"A": Difference(0.5, 0.01, math.inf), "B": Difference(0.5, 0.01, math.inf)}}
    rows = report.primary(result)
    assert [r["p"] for r in rows] == pytest.approx([0.001, 0.01, 0.02, 0.04, 0.3, 0.5, 0.6])
    assert [r["p_adj"] for r in rows] == pytest.approx([0.007, 0.06, 0.1, 0.16, 0.9, 1.0, 1.0])
    assert [r["p_adj"] for r in rows] == pytest.approx(_holm_by_hand([r["p"] for r in rows]))
    # A1 a win after Holm; A2 non-inferior alone (0.01) but not shown among the seven (0.06)
    assert [r["verdict"] for r in rows][:2] == ["win", "not shown"]
    # A2's mirror (inferiority) test takes A2's place among the seven: p 0.99 there
    assert rows[1]["p_inferior"] == pytest.approx(0.99) and rows[1]["p_inferior_adj"] == pytest.approx(1.0)
    assert report.answers(result, rows)["A"]["answer"] == "not decided"


def test_the_rule_and_a_cut_endpoint_3():
    rule = report.family_rule
    assert rule("win", "non-inferior", "win", False) == "supported"
    assert rule("win", "non-inferior", "inconclusive", True) == "supported"  # arm 1's tax equivalent to 0
    assert rule("win", "non-inferior", "inconclusive", False) == "not decided"
    assert rule("equivalent", "non-inferior", "win", True) == "not decided"
    assert rule("win", "inferior", "win", True) == "contradicted" and rule("win", "non-inferior", "loss", False) == "contradicted"
    # both clauses hold (3 a loss, arm 1's tax equivalent to 0): the published report's order, supported first
    assert rule("win", "non-inferior", "loss", True) == "supported"
    assert rule("", "non-inferior", "win", True) == report.NOT_COMPLETE
    # decoupled-ppo's tax cut: B decided on B1-B2 alone, never supported
    assert rule("win", "non-inferior", None, True) == "not decided" and rule("loss", "non-inferior", None, True) == "contradicted"


def test_a_cut_decoupled_ppo_tax_decides_family_b_on_b1_and_b2(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    results, published = _study(tmp_path, parts=("main", "luck"), dppo=(0.9, 0.05))
    plan, _, rows, answer = _analysed(results, published)
    by = {r["name"]: r for r in rows}
    assert not by["B3"]["planned"] and by["B1"]["verdict"] == "loss"
    assert answer["B"] == {"answer": "contradicted", "interim": "contradicted", "complete": True}
    assert plan.total == 2 * 294 + 58
    text = report.report(results, published)
    assert "| dppo-tax | cut | cut |" in text and "| B3. retuning tax at lag 8: arm 1's - decoupled-ppo's | cut |" in text


def test_per_task_endpoints_have_holm_over_the_tasks(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    results, published = _study(tmp_path, arm1=(0.6, 0.0), ppo=(0.6, -0.1), dppo=(0.9, -0.1))
    _, result, _, _ = _analysed(results, published)
    per_task = report.per_task_verdicts(result)
    assert set(per_task) == {"A1", "A2", "A3", "B1", "B2", "B3", "C"}
    for name, rows in per_task.items():
        assert list(rows) == ["Acrobot-v1", "Pendulum-v1"]
        assert [r["p_adj"] for r in rows.values()] == pytest.approx(_holm_by_hand([r["p"] for r in rows.values()]))
    b2 = per_task["B2"]
    assert [r["p_inferior_adj"] for r in b2.values()] == pytest.approx(_holm_by_hand([r["p_inferior"] for r in b2.values()]))
    assert {r["verdict"] for r in b2.values()} == {"inferior"} and {r["verdict"] for r in per_task["A2"].values()} == {"non-inferior"}
    # a per-task number against scipy's Welch test
    fresh = result["fresh"]["Pendulum-v1"]
    x, y = fresh[(report.ARM1, 0)], fresh[(report.DPPO, 0)]
    assert b2["Pendulum-v1"]["d"].estimate == pytest.approx(float(x.mean() - y.mean()))
    c = per_task["C"]["Pendulum-v1"]
    assert c["p"] == pytest.approx(stats.ttest_ind(x, fresh[(report.PUB_ESSPO, 0)], equal_var=False).pvalue)


def test_the_secondary_tables_label_the_arms_apart_with_holm_within_each_table(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    results, published = _study(tmp_path, arm2=(0.7, -0.05))
    plan, result, _, _ = _analysed(results, published)
    tables = report.secondary(result, plan)
    task_rows, agg_rows = tables["vs_ppo"]
    assert [(r["algo"], r["lag"]) for r in agg_rows] == [(a, lag) for a in (report.ARM1, report.ARM2, report.PUB_ESSPO, report.DPPO) for lag in LAGS]
    assert len(task_rows) == 2 * 4 * len(LAGS) and {r["tasks"] for r in agg_rows} == {2}
    for rows in (task_rows, agg_rows, *tables["vs_dppo"], *tables["objective"], *tables["schedule_on_ppo"]):
        assert [r["p_adj"] for r in rows] == pytest.approx(_holm_by_hand([r["p"] for r in rows]))
    assert {r["algo"] for r in tables["vs_dppo"][1]} == {report.ARM1, report.ARM2, report.PUB_ESSPO, report.PPO}
    # arm 2 - ppo: 0.2 below at lag 0, 0.05 per unit flatter
    by = {r["what"]: r for r in tables["schedule_on_ppo"][1]}
    assert by["lag 0"]["d"].estimate == pytest.approx(-0.2, abs=0.04) and by["lag 0"]["verdict"] == "loss"
    assert by["slope, lags 0-8"]["d"].estimate == pytest.approx(0.05, abs=0.01) and by["slope, lags 0-8"]["verdict"] == "win"
    # arm 1 - arm 2 at every lag: 0.2 above at lag 0
    objective = {r["lag"]: r for r in tables["objective"][1]}
    assert list(objective) == list(LAGS) and objective[0]["d"].estimate == pytest.approx(0.2, abs=0.04)
    text = report.report(results, published)
    assert "## Secondary: every arm against ppo (Zoo schedule) at every lag" in text
    assert "## Secondary: every arm against decoupled-ppo (Zoo schedule) at every lag" in text
    assert f"| {report.ARM2} | 0 | 2 of 2 | -0.2" in text and "## Secondary: the objective's effect within one schedule (arm 1 - arm 2)" in text
    assert f"| Pendulum-v1 | {report.ARM1} | main | fresh | this study |" not in text  # labels, not parts
    assert f"| Pendulum-v1 | {report.ARM1} | fresh | this study | `batch_size=rollout,kl=sampled,n_epochs=1,n_steps=x0.0625` (0) | 1 | 196 | 1.000 |" in text  # its search runs' mean score (record_searches)
    assert f"| Acrobot-v1 | {report.PPO} | lag8 | published | `n_epochs=x0.5` (6) | 1 | 196 | 0.900 |" in text


def test_the_search_luck_line_sits_beside_a2_on_pendulum(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    results, published = _study(tmp_path / "a", luck=0.2)
    _, result, _, _ = _analysed(results, published)
    luck = result["luck"]
    assert luck["d"].estimate == pytest.approx(0.2, abs=0.05) and not luck["same"]
    text = report.report(results, published)
    line = next(line for line in text.splitlines() if line.startswith("**Search luck (Pendulum-v1, lag 0):**"))
    a2 = result["endpoints"]["A2"]["tasks"]["Pendulum-v1"]
    assert f"minus the first's (`batch_size=rollout,kl=sampled,n_epochs=1,n_steps=x0.0625`, trial 0): {report.format_difference(luck['d'])}" in line
    assert f"beside A2's lag-0 gap there (arm 1 - ppo): {report.format_difference(a2)}" in line
    assert "| luck | 48 of 48 (`schedule-luck-search`) | 10 of 10 |" in text
    # the second search chose the first's configuration: the same runs, exactly 0
    results, published = _study(tmp_path / "b", luck=None)
    _, result, _, _ = _analysed(results, published)
    assert result["luck"]["same"] and result["luck"]["d"].estimate == 0.0


def test_a_partial_table_builds_and_answers_not_decided(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    # only Acrobot's searches: nothing scored yet
    results, published = _study(tmp_path / "a", tasks=TASKS[:1], parts=("main",), score_tasks=())
    assert report.main(["--results", str(results), "--published", str(published)]) == 0
    text = (results / "verdicts.md").read_text()
    assert (results / "staleness.png").stat().st_size > 0
    assert "**Interim: the study is not complete" in text
    assert text.count(f"**{report.NOT_COMPLETE}**") == 3
    assert "| A1. slope per unit log2(1 + lag), lags 0-8: arm 1 - ppo | 0 of 1 (missing: Acrobot-v1) |" in text
    assert "| main | 144 of 144 (`schedule-search`) | 0 of 150 |" in text
    # Acrobot complete, Pendulum searched only: every endpoint over Acrobot, the answers not the study's yet
    results, published = _study(tmp_path / "b", score_tasks=TASKS[:1])
    _, result, rows, answer = _analysed(results, published)
    assert all(r["tasks"] == 1 and r["missing"] == ["Pendulum-v1"] for r in rows)
    assert {a["answer"] for a in answer.values()} == {report.NOT_COMPLETE}
    assert answer["A"]["interim"] != report.NOT_COMPLETE and all(r["verdict"] for r in rows)
    text = report.report(results, published)
    assert "| A2. lag 0: arm 1 - ppo (non-inferiority at -0.1) | 1 of 2 (missing: Pendulum-v1) |" in text
    assert "(interim, not the answer)" in text and "**Search luck (Pendulum-v1, lag 0):** not decided (the study is not complete)" in text


@pytest.mark.parametrize("table", ["missing", "empty", "header"])
def test_an_empty_folder_builds_and_says_no_runs_yet(tmp_path, table):
    results = tmp_path / "frozen-schedule"
    results.mkdir()
    (results / "plan.json").write_bytes((REPO / contract.SCHEDULE_RESULTS / "plan.json").read_bytes())  # as a starting slice writes it
    if table == "empty":
        (results / "per_run.csv").write_text("")
    elif table == "header":
        write_table(results / "per_run.csv", {})
    assert report.main(["--results", str(results), "--published", str(PUBLISHED_REAL)]) == 0
    text = (results / "verdicts.md").read_text()
    assert "**Progress: no runs yet**" in text and "the plan has 1,466 runs" in text
    assert text.count(f"**{report.NOT_COMPLETE}**") == 3
    assert "| main | 0 of 576 (`schedule-search`) | 0 of 600 |" in text
    assert "comparators" in text.split("## Limits", 1)[1] and "2026-12-01/02" in text.split("## Limits", 1)[1]
    assert (results / "staleness.png").stat().st_size > 0


@pytest.mark.parametrize("part, algo, tuned", [("main", "esspo", "fresh"), ("dppo-tax", "decoupled-ppo", "lag8")])
def test_a_choice_that_is_not_its_searchs_best_is_refused_in_one_line(tmp_path, capsys, part, algo, tuned):
    """The committed extension's choices are checked against its searches: a variant edited into
    selected.json (never searched, so never checked by the bench) is refused, exit 2."""
    import shutil

    results = tmp_path / "frozen-schedule"
    shutil.copytree(Path(__file__).resolve().parents[1] / "docs" / "results" / "frozen-schedule", results)
    data = json.loads((results / "selected.json").read_text())
    data["selected"]["Acrobot-v1"][part][algo][tuned]["variant"] = "learning_rate=x1e9"
    (results / "selected.json").write_text(json.dumps(data))
    assert report.main(["--results", str(results), "--published", str(PUBLISHED_REAL)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"Acrobot-v1 {algo} {tuned}'s variant 'learning_rate=x1e9' has 0 search runs in the table, not 3" in err[0], err


def test_the_published_report_names_the_arms_by_what_their_searches_chose_and_what_carries_c():
    folder = Path(__file__).resolve().parent.parent / "docs" / "results" / "frozen-schedule"
    text = (folder / "verdicts.md").read_text()
    assert "authors' schedule\")" not in text and f"(\"{report.ARM1}\")" in text
    assert ("`esspo (schedule search)`: Acrobot-v1 one pass of minibatches" in text
            and "(whole-rollout steps on 1 of 4 tasks: LunarLanderContinuous-v3)" in text)
    assert "The aggregate's loss (widened) rests on LunarLander-v3 alone, where arm 1's search chose one pass of minibatches" in text
    # the deviation, listed in the pre-registration and quoted by the report, counts the table's `step` column
    with open(folder / "per_run.csv", newline="") as f:
        steps = [row["step"] for row in csv.DictReader(f)]
    assert (steps.count("eager"), len(steps) - steps.count("")) == (1216, 1464)
    assert "1,216 of the 1,464 runs that record a step ran the eager step" in text
