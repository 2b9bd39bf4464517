"""MinAtar under larger lags and sampler mismatch (docs/results/minatar-stress/preregistration.md),
the second MinAtar design as a plan file: its pilot stresses `ppo` with lags and sampler conditions,
reuses the first pilot's lag-0 runs from that study's committed table, and selects (game, stressor)
pairs by the first pilot's rule; a study table keeps each run's sampler in its key."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from adaptive_po import contract
from adaptive_po.analysis import study_report
from adaptive_po.bench import study
from adaptive_po.bench.study_table import read_table, row_key, spec_key, write_table
from adaptive_po.contract import FROZEN_CURVE_COLUMN as CURVE_COLUMN
from adaptive_po.studies import cuts as cut_order
from adaptive_po.studies import pilot as pilot_rule
from adaptive_po.studies.plan import load_plan
from search_records import synthetic_envs  # noqa: F401 - tests/search_records.py: environment files of the synthetic tables

RESULTS = Path(__file__).parents[1] / "docs" / "results" / "minatar-stress"
PLAN = load_plan(RESULTS / "plan.toml")
P = PLAN.pilot
PLAN_TEXT = (RESULTS / "plan.toml").read_text()


def _row(folder: str, game: str, lag: int, sampler: str, seed: int, at_1m: float, final: float) -> dict:
    """A pilot row of a game whose random score is 0 and reference 10 (scores = returns / 10)."""
    curve = f"0:0.0 1000000:{at_1m!r} 2007040:{final!r}"
    return {"folder": folder, "env": game, "algo": "ppo", "variant": "", "policy_lag": lag, "seed": seed, "total_timesteps": P.budget,
            "status": "complete", "final_eval_return": final, "random_score": 0.0, "reference": 10.0, "score": final / 10.0, "step": "",
            "wall_time_s": 3600.0, "config_sha256": "", "sampler": sampler, CURVE_COLUMN: curve}


def _table(returns: dict) -> tuple[dict, dict]:
    """(this pilot's table, the fresh runs' table) from ``{(game, condition): (returns at 1M, final returns)}``
    (condition "lag0" or a stressor's name; 1.0 everywhere else)."""
    ours, fresh = {}, {}
    for game in P.tasks:
        for seed_i, seed in enumerate(P.seeds):
            at_1m, final = returns.get((game, "lag0"), ([1.0] * 3, [1.0] * 3))
            row = _row(P.fresh_from.folder, game, 0, "", seed, at_1m[seed_i], final[seed_i])
            fresh[row_key(row)] = row
            for x in P.stressors:
                at_1m, final = returns.get((game, x.name), ([1.0] * 3, [1.0] * 3))
                row = _row(P.folder, game, x.lag, x.sampler, seed, at_1m[seed_i], final[seed_i])
                ours[row_key(row)] = row
    return ours, fresh


def _results(tmp_path: Path) -> tuple[dict, Path]:
    """(this pilot's table of equal scores everywhere, a results folder whose plan reads the fresh runs from a table beside it)."""
    ours, fresh = _table({})
    results = tmp_path / "minatar-stress"
    results.mkdir()
    (results / "plan.toml").write_text(PLAN_TEXT.replace('"../minatar-learning/per_run.csv"', '"../fresh/per_run.csv"'))
    (tmp_path / "fresh").mkdir()
    write_table(tmp_path / "fresh" / "per_run.csv", fresh)
    return ours, results


def test_the_plan_holds_the_registered_pilot_and_design():
    assert P.algo == "ppo" and P.tasks == ("Freeway-MinAtar", "Asterix-MinAtar") and P.seeds == (200, 201, 202) and P.budget == 2_000_000
    assert [(x.name, x.lag, x.sampler) for x in P.stressors] == [("lag16", 16, ""), ("lag64", 64, ""), ("T1.2", 0, "T1.2"), ("fp8", 0, "fp8-e4m3")]
    assert P.fresh_from.folder == "minatar-learning-pilot" and (RESULTS / P.fresh_from.table).resolve() == RESULTS.parent / "minatar-learning" / "per_run.csv"
    assert (P.rule.learns_at_least, P.rule.hurt_at_least, P.rule.hurt_at_least_se, P.rule.min_tasks) == (0.5, 0.05, 1.0, 1)
    d = PLAN.design
    assert d.arms == ("esspo", "ppo", "decoupled-ppo", "quatro") and d.seeds == (0, 1, 2, 3, 4) and dict(d.midpoints) == {"lag16": 4, "lag64": 8}
    assert [(c.what, c.values, c.rule, c.keep) for c in PLAN.cuts] == [("arms", ("quatro",), "", 0), ("midpoints", (), "", 0), ("tasks", (), "dearest", 1)]
    assert [(e.id, e.kind, e.arm, e.versus, e.family) for e in PLAN.endpoints if e.family] == [
        ("1", "slope", "esspo", "ppo", "primary"), ("2", "non-inferiority", "esspo", "ppo", "primary"), ("3", "slope", "esspo", "decoupled-ppo", "primary")]
    assert PLAN.limit_core_hours == 12.0


def test_the_pilot_runs_ppo_under_each_stressor_and_not_lag_0_again():
    specs = study.pilot_specs(PLAN)
    assert len(specs) == 2 * 4 * 3 and {s.algo for s in specs} == {"ppo"} and {s.suite for s in specs} == {P.folder}
    conditions = {s.condition for s in specs}
    assert conditions == {"lag16_noise0_replay0", "lag64_noise0_replay0", "lag0_noise0_replay0_T1.2", "lag0_noise0_replay0_fp8-e4m3"}
    hot = [s for s in specs if s.condition.endswith("T1.2")]
    assert {(s.dials.sampler_temperature, s.dials.sampler_precision, s.dials.policy_lag) for s in hot} == {(1.2, "fp32", 0)}
    assert {spec_key(s)[-1] for s in specs} == {"", "T1.2", "fp8-e4m3"}
    assert not any(s.dials.is_fresh for s in specs)  # the lag-0 runs are pilot 1's


def test_the_fresh_runs_are_the_first_pilots_committed_runs_at_this_pilots_configuration(tmp_path):
    rows = study.fresh_table(PLAN)
    assert len(rows) == 2 * 3 and {(k[0], k[2], k[4], k[6], k[7]) for k in rows} == {("minatar-learning-pilot", "ppo", 0, 2_000_000, "")}
    assert {k[1] for k in rows} == set(P.tasks) and {k[5] for k in rows} == set(P.seeds)
    # a fresh table that lacks one of them is refused, naming the table and the run
    table = read_table(RESULTS.parent / "minatar-learning" / "per_run.csv")
    gone = next(k for k in sorted(rows))
    del table[gone]
    (tmp_path / "old").mkdir()
    write_table(tmp_path / "old" / "per_run.csv", table)
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "plan.toml").write_text(PLAN_TEXT.replace('"../minatar-learning/per_run.csv"', '"../old/per_run.csv"'))
    with pytest.raises(ValueError, match=r"old/per_run.csv: the pilot's fresh run .*Asterix-MinAtar.* is not in the table \(1 of 6 missing\)"):
        study.fresh_table(load_plan(tmp_path / "new" / "plan.toml"))


def test_each_pair_is_kept_at_the_first_budget_where_ppo_learns_and_the_stressor_hurts_it():
    ours, fresh = _table({
        ("Freeway-MinAtar", "lag0"): ([6.0, 6.2, 5.8], [9.0, 9.1, 8.9]),
        # lag 16 hurts at 1M: kept at 1M
        ("Freeway-MinAtar", "lag16"): ([2.0, 2.5, 1.5], [8.9, 9.0, 9.1]),
        # the sampler costs nothing at 1M, 0.3 at 2M: kept at 2M
        ("Freeway-MinAtar", "T1.2"): ([6.0, 6.1, 5.9], [6.0, 6.2, 5.8]),
        # fp8 costs 0.2 on average at 2M but less than one standard error
        ("Freeway-MinAtar", "fp8"): ([6.0, 6.2, 5.8], [9.0, 1.0, 9.0]),
        ("Freeway-MinAtar", "lag64"): ([6.0, 6.2, 5.8], [9.0, 9.1, 8.9]),
        # Asterix does not learn at lag 0: no pair of it qualifies, however much a stressor costs
        ("Asterix-MinAtar", "lag0"): ([3.0] * 3, [4.0, 4.5, 4.2]),
        ("Asterix-MinAtar", "lag64"): ([0.0] * 3, [0.0, 0.1, 0.2]),
    })
    rows = pilot_rule.pilot_rows(PLAN, {**ours, **fresh})
    assert len(rows) == 2 * 4 * 2 and all(r["complete"] for r in rows)
    by = {(r["env"], r["stressor"], r["budget"]): r for r in rows}
    assert by[("Freeway-MinAtar", "lag16", 1_000_000)]["hurt"] == pytest.approx(0.4)
    assert by[("Freeway-MinAtar", "T1.2", 2_000_000)]["T1.2_mean"] == pytest.approx(0.6)
    assert by[("Freeway-MinAtar", "fp8", 2_000_000)]["hurts"] is False
    assert by[("Asterix-MinAtar", "lag64", 2_000_000)]["hurts"] is True and by[("Asterix-MinAtar", "lag64", 2_000_000)]["learns"] is False
    chosen = pilot_rule.select(PLAN, rows)
    assert chosen == [("Freeway-MinAtar", "lag16", 1_000_000), ("Freeway-MinAtar", "T1.2", 2_000_000)]
    text = pilot_rule.pilot_text(PLAN, rows, chosen, pilot_rule.fresh_returns(PLAN, rows))
    assert "| Freeway-MinAtar | `lag16` | 1,000,000 | 6 (0) | 6.00 | 0.600 (0.020) | 0.200 (0.050) | +0.400 (0.031) |" in text
    assert "- Freeway-MinAtar under `lag16` at 1,000,000 steps" in text and "- Freeway-MinAtar under `T1.2` at 2,000,000 steps" in text
    assert "Dropped (no budget qualifies): Freeway-MinAtar under `lag64`, Freeway-MinAtar under `fp8`, Asterix-MinAtar under `lag16`" in text
    assert "`T1.2`: the sampler's logits divided by 1.2" in text and "`fp8`: the sampler's network in fp8-e4m3" in text
    assert "not run again" in text and "the study is not run" not in text


def test_where_no_pair_qualifies_the_pilot_is_the_result_and_the_study_is_refused(tmp_path, synthetic_envs, capsys):
    envs = synthetic_envs(0.0, 10.0)
    ours, results = _results(tmp_path)  # every condition scores the same: nothing hurts
    partial = dict(ours)
    del partial[next(iter(sorted(partial)))]
    write_table(results / "per_run.csv", partial)
    plan = load_plan(results / "plan.toml")
    lines = []
    assert study.write_selection(plan, results, str(envs), log=lines.append) is None
    assert lines == ["the pilot is not complete (23 of 24 runs): no selection yet"]
    write_table(results / "per_run.csv", ours)
    assert study.write_selection(plan, results, str(envs), log=lines.append) == []
    text = (results / "pilot.md").read_text()
    assert "**No (game, stressor) pair qualifies: as registered, the study is not run.** The pilot is the result: No stressor" in text
    assert contract.read_committed_json(results / "selection.json")["pairs"] == []
    assert study.main(["study", "--results", str(results), "--envs-dir", str(envs)]) == 2
    assert "0 pairs qualify, fewer than 1: as registered, the study is not run" in capsys.readouterr().err
    # the report says so, from the committed files, with the pilot's figure
    assert study_report.main(["--results", str(results)]) == 0
    verdicts = (results / "verdicts.md").read_text()
    assert "**No (game, stressor) pair qualifies: as registered, the study is not run.** The pilot is the result (24 runs" in verdicts
    assert (results / "pilot.png").stat().st_size > 10_000


def test_the_report_refuses_a_run_the_pilot_does_not_have_and_says_an_unfinished_pilot(tmp_path, synthetic_envs, capsys):
    synthetic_envs(0.0, 10.0)
    ours, results = _results(tmp_path)
    half = dict(sorted(ours.items())[:12])
    write_table(results / "per_run.csv", half)
    assert study_report.main(["--results", str(results)]) == 0
    assert "**The pilot is not complete** (12 of its 24 runs" in (results / "verdicts.md").read_text()
    key = next(iter(half))
    stray = {**half[key], "sampler": "T1.5"}
    write_table(results / "per_run.csv", {**half, row_key(stray): stray})
    assert study_report.main(["--results", str(results)]) == 2
    assert "(its stressor (lag, sampler))" in capsys.readouterr().err


def test_a_study_table_keeps_each_runs_sampler_in_its_key_and_refuses_one_it_cannot_read(tmp_path):
    ours, _ = _table({})
    write_table(tmp_path / "t.csv", ours)
    header = (tmp_path / "t.csv").read_text().splitlines()[0].split(",")
    assert "sampler" in header
    back = read_table(tmp_path / "t.csv")
    assert set(back) == set(ours) and {k[7] for k in back} == {"", "T1.2", "fp8-e4m3"}
    # two runs that differ in their sampler only are two rows
    assert len({k[:7] for k in back if k[4] == 0}) == len(P.tasks) * len(P.seeds)
    text = (tmp_path / "t.csv").read_text().replace(",T1.2,", ",T1,", 1)
    (tmp_path / "t.csv").write_text(text)
    (tmp_path / "t.csv.sha256").unlink()
    with pytest.raises(ValueError, match=r"t\.csv, line \d+: sampler 'T1' is not a sampler condition"):
        read_table(tmp_path / "t.csv")
    # a table whose runs all sample cleanly is written without the column (the published tables)
    clean = {k: {c: v for c, v in r.items() if c != "sampler"} for k, r in ours.items() if not k[7]}
    write_table(tmp_path / "c.csv", clean)
    assert "sampler" not in (tmp_path / "c.csv").read_text().splitlines()[0]


@pytest.mark.parametrize("old, new, named", [
    ("stressors = [", "lags = [0, 8]\nstressors = [", r"pilot\.lags: either lags \(fresh, stale\) or stressors"),
    ('{ name = "lag64", lag = 64 }', '{ name = "lag16", lag = 64 }', r"pilot\.stressors: names and conditions must be distinct"),
    ('sampler = "fp8-e4m3"', 'sampler = "fp9"', r"pilot\.stressors\[3\]\.sampler: sampler 'fp9' is not a sampler condition"),
    ('{ name = "lag64", lag = 64 }', '{ name = "lag64" }', r"pilot\.stressors\[1\]\.lag: a stressor stresses"),
    ("midpoints = { lag16 = 4, lag64 = 8 }", "midpoints = { lag16 = 4, lag64 = 80 }", r"design\.midpoints: 'lag64': a lag stressor's midpoint"),
    ("midpoints = { lag16 = 4, lag64 = 8 }", 'midpoints = { "T1.2" = 1 }', r"design\.midpoints: 'T1.2'"),
    ('kind = "slope", over = "stressor", arm = "esspo", versus = "ppo"', 'kind = "slope", arm = "esspo", versus = "ppo"',
     r"endpoints\[0\]\.over: a slope of a design by stressor"),
])
def test_a_malformed_stressor_plan_is_one_line_naming_the_key(tmp_path, old, new, named):
    assert old in PLAN_TEXT
    (tmp_path / "plan.toml").write_text(PLAN_TEXT.replace(old, new, 1))
    with pytest.raises(ValueError, match=named) as err:
        load_plan(tmp_path / "plan.toml")
    assert "\n" not in str(err.value)


def test_sampler_names_read_back_as_the_dials_they_name():
    from adaptive_po.dials import DataDials, sampler_dials, sampler_name

    for dials in ({}, {"sampler_temperature": 1.2}, {"sampler_precision": "fp8-e4m3"}, {"sampler_temperature": 0.5, "sampler_precision": "bf16"}):
        d = DataDials(**dials)
        name = sampler_name(d.sampler_temperature, d.sampler_precision)
        assert sampler_dials(name) == dials and d.condition.endswith(name)
    for bad in ("T1", "fp32", "fp8-e4m3_T1.2", "T1.2_T1.3", "Tx", "T0", "x"):
        with pytest.raises(ValueError, match=repr(bad)):
            sampler_dials(bad)
    assert math.isfinite(sampler_dials("T1.2")["sampler_temperature"])


def _selection(results: Path, pairs, speed: float = 600.0) -> None:
    contract.atomic_write_json(results / "selection.json", {
        "pairs": [{"env": e, "stressor": x, "budget": b} for e, x, b in pairs], "order": "in the registered order",
        "seconds_per_million": {task: speed for task in P.tasks}, "pilot": []})


def test_each_selected_pair_runs_lag_0_its_stressor_and_its_midpoint_for_every_arm(tmp_path):
    (tmp_path / "plan.toml").write_text(PLAN_TEXT)
    plan = load_plan(tmp_path / "plan.toml")
    _selection(tmp_path, [("Freeway-MinAtar", "lag64", 2_000_000), ("Asterix-MinAtar", "T1.2", 1_000_000)])
    tasks, speeds = study.read_selection(plan, tmp_path)
    assert tasks == [("Freeway-MinAtar/lag64", 2_000_000), ("Asterix-MinAtar/T1.2", 1_000_000)]
    runs = cut_order.apply_cuts(plan, tasks)
    assert dict(runs.conditions) == {"Freeway-MinAtar/lag64": ((0, ""), (8, ""), (64, "")), "Asterix-MinAtar/T1.2": ((0, ""), (0, "T1.2"))}
    assert runs.runs() == (3 + 2) * 4 * 5 == len(study.study_specs(plan, runs))
    specs = study.arm_specs(plan, runs, "Asterix-MinAtar/T1.2", 1_000_000, "esspo")
    assert {(s.env, s.dials.policy_lag, s.dials.sampler_temperature, s.total_timesteps) for s in specs} == {
        ("Asterix-MinAtar", 0, 1.0, 1_000_000), ("Asterix-MinAtar", 0, 1.2, 1_000_000)}
    assert {s.seed for s in specs} == set(range(5)) and {s.suite for s in specs} == {"minatar-stress-score"}
    # the midpoints cut: the lag pair's slope is over lag 0 and its stressor
    assert cut_order.apply_cuts(plan, tasks, {"arms": [], "midpoints": ["lag16", "lag64"], "pairs": []}).conditions["Freeway-MinAtar/lag64"] == (
        (0, ""), (64, ""))
    # a selection naming a stressor the plan does not have is refused, naming the file
    _selection(tmp_path, [("Freeway-MinAtar", "lag32", 2_000_000)])
    with pytest.raises(ValueError, match=r"selection.json: not a selection of this study \(stressor 'lag32'"):
        study.read_selection(plan, tmp_path)


@pytest.mark.parametrize("limit, cut", [
    (17.0, {"arms": [], "midpoints": [], "pairs": []}),
    # quatro first, then every midpoint, then the dearest pair (the lag pair: three conditions), never below one pair
    (15.0, {"arms": ["quatro"], "midpoints": [], "pairs": []}),
    (11.0, {"arms": ["quatro"], "midpoints": ["lag16", "lag64"], "pairs": []}),
    (8.0, {"arms": ["quatro"], "midpoints": ["lag16", "lag64"], "pairs": ["Freeway-MinAtar/lag64"]}),
    (1.0, {"arms": ["quatro"], "midpoints": ["lag16", "lag64"], "pairs": ["Freeway-MinAtar/lag64"]}),
])
def test_the_registered_cut_order_cuts_quatro_then_the_midpoints_then_the_dearest_pair(tmp_path, limit, cut):
    tasks = [("Freeway-MinAtar/lag64", 2_000_000), ("Asterix-MinAtar/T1.2", 2_000_000)]
    # 300 s per million steps: ~0.167 core-hours a run of 2.00704M steps; 4 arms x (3 + 2) conditions x 5 seeds = 100 runs, 16.7 h;
    # 12.5 h without quatro, 10.0 h without the midpoints as well, 5.0 h with the sampler pair alone
    speeds = {task: 300.0 for task in P.tasks}
    cuts, lines = study.plan_cuts(PLAN, tasks, speeds, limit=limit)
    assert cuts == cut, lines
    assert lines[0].startswith("The dry run before the study's first run: 2 pairs, 100 runs, 16.7 core-hours")
    assert cut_order.check_cuts(PLAN, cuts, tmp_path / "cuts.json") == cuts
    with pytest.raises(ValueError, match=r"cuts.json: pairs \['Breakout-MinAtar/lag64'\] cannot be cut"):
        cut_order.check_cuts(PLAN, {**cuts, "pairs": ["Breakout-MinAtar/lag64"]}, tmp_path / "cuts.json")


def test_the_report_counts_the_studys_runs_on_the_selected_pairs_and_refuses_one_not_planned(tmp_path, synthetic_envs, capsys):
    synthetic_envs(0.0, 10.0)
    ours, results = _results(tmp_path)
    _selection(results, [("Freeway-MinAtar", "lag64", 2_000_000), ("Asterix-MinAtar", "T1.2", 2_000_000)])
    run = {**_row(PLAN.design.folder, "Asterix-MinAtar", 0, "T1.2", 3, 1.0, 1.0), "algo": "quatro"}
    write_table(results / "per_run.csv", {**ours, row_key(run): run})
    assert study_report.main(["--results", str(results)]) == 0
    text = (results / "verdicts.md").read_text()
    assert "**Selected by the pilot:** Freeway-MinAtar under `lag64` at 2,000,000 steps; Asterix-MinAtar under `T1.2`" in text
    assert "**Progress:** 1 of the study's 100 runs" in text
    stray = {**run, "policy_lag": 8}  # lag 8 is the lag64 pair's midpoint, not the sampler pair's
    write_table(results / "per_run.csv", {**ours, row_key(stray): stray})
    assert study_report.main(["--results", str(results)]) == 2
    assert "(its place in the selected pairs' design)" in capsys.readouterr().err


def test_the_report_reads_each_pairs_slope_over_its_whole_range_and_the_registered_rule(tmp_path, synthetic_envs):
    """Each arm's score falls linearly in x over a pair's conditions (its drop over the whole range);
    the seeds' noise is the same at every condition, so the slopes are exact: endpoint 1 is esspo's
    drop minus ppo's on every pair, +0.2, whatever the pair's range of x."""
    synthetic_envs(0.0, 10.0)
    ours, results = _results(tmp_path)
    _selection(results, [("Freeway-MinAtar", "lag64", 2_000_000), ("Asterix-MinAtar", "T1.2", 2_000_000)])
    drops = {"esspo": -0.1, "ppo": -0.3, "decoupled-ppo": -0.1, "quatro": -0.3}
    rows = dict(ours)
    plan = load_plan(results / "plan.toml")
    runs = cut_order.apply_cuts(plan, study.read_selection(plan, results)[0])
    for pair, budget in runs.tasks:
        conditions = runs.conditions[pair]
        reach = study_report.pair_x(plan, pair, conditions[-1])
        for arm, drop in drops.items():
            for lag, sampler in conditions:
                x = study_report.pair_x(plan, pair, (lag, sampler))
                for seed, noise in zip(range(5), (-0.01, 0.0, 0.01, -0.005, 0.005)):
                    score = 0.8 + drop * x / reach + noise
                    run = {**_row(plan.design.folder, pair.split("/")[0], lag, sampler, seed, 10 * score, 10 * score), "algo": arm,
                           "total_timesteps": budget}
                    rows[row_key(run)] = run
    write_table(results / "per_run.csv", rows)
    assert study_report.main(["--results", str(results)]) == 0
    text = (results / "verdicts.md").read_text()
    assert "**Progress:** 100 of the study's 100 runs" in text and "Interim" not in text
    assert "Against `ppo`, the claim (as robust to the stressor, not worse on fresh data) is supported." in text
    assert "| 1. robustness to the stressor: esspo - ppo | +0.2000 [" in text
    assert "| 3. robustness to the stressor: esspo - decoupled-ppo | +0.0000 [" in text
    assert "Against `decoupled-ppo`, `esspo`'s robustness to the stressor is equivalent." in text
    assert "| Freeway-MinAtar/lag64 | +0.2000 [" in text and "| Asterix-MinAtar/T1.2 | +0.2000 [" in text
