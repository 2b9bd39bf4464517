"""The frozen-tuning staleness study (docs/results/frozen/preregistration.md): the pilot's selection
rule, the pre-registered cut order, and a study that stops after a slice and continues on a
"fresh machine" from its committed table alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptive_po.bench import frozen
from adaptive_po.bench.frozen import (
    PILOT_FOLDERS, PILOT_SEEDS, StudyPlan, TableRunner, pilot_rows, read_table, select_tasks, spec_key,
    write_table,
)
from search_records import synthetic_envs  # noqa: E402,F401 - tests/search_records.py: environment files of the synthetic tables


def _pilot_table(scores: dict[tuple[str, int], tuple[list[float], list[float]]], returns: dict[tuple[str, int], list[float]] | None = None):
    """A pilot table from normalized scores per (task, budget): (lag 0, lag 8), 5 seeds each."""
    rows = {}
    for env, budgets in frozen.CANDIDATES:
        for index, budget in enumerate(budgets):
            fresh, stale = scores.get((env, budget), ([0.0] * 5, [0.0] * 5))
            for lag, values in ((0, fresh), (8, stale)):
                for seed, value in zip(PILOT_SEEDS, values):
                    ret = (returns or {}).get((env, budget), [value * 100.0] * 5)[PILOT_SEEDS.index(seed)] if lag == 0 else value * 100.0
                    row = {"folder": PILOT_FOLDERS[index], "env": env, "algo": "ppo", "variant": "", "policy_lag": lag, "seed": seed,
                           "total_timesteps": budget, "status": "complete", "final_eval_return": ret, "random_score": 0.0,
                           "reference": 100.0, "score": value, "step": "compiled", "wall_time_s": 1.0}
                    rows[frozen.row_key(row)] = row
    return rows


def test_the_pilot_rule_learns_not_saturated_hurt_and_the_first_qualifying_budget():
    good = ([0.9, 0.8, 0.85, 0.95, 0.9], [0.5, 0.6, 0.4, 0.55, 0.5])
    table = _pilot_table(
        {
            ("CartPole-v1", 50_000): good,  # saturated: every lag-0 seed at 500
            ("CartPole-v1", 25_000): good,
            ("Acrobot-v1", 100_000): ([0.9] * 5, [0.9, 0.91, 0.89, 0.9, 0.9]),  # not hurt
            ("Acrobot-v1", 50_000): good,
            ("Pendulum-v1", 100_000): ([0.4, 0.45, 0.5, 0.4, 0.3], [0.0] * 5),  # does not learn
            ("MountainCar-v0", 300_000): ([0.9, 0.1, 0.9, 0.1, 0.9], [0.5, 0.6, 0.4, 0.55, 0.5]),  # hurt < 1 se
            ("LunarLander-v3", 500_000): good,
            ("LunarLanderContinuous-v3", 300_000): ([0.6] * 5, [0.56] * 5),  # hurt 0.04 < 0.05
        },
        returns={("CartPole-v1", 50_000): [500.0] * 5, ("CartPole-v1", 25_000): [500.0, 500.0, 400.0, 500.0, 500.0]},
    )
    rows = pilot_rows(table)
    assert select_tasks(rows) == [("CartPole-v1", 25_000), ("Acrobot-v1", 50_000), ("LunarLander-v3", 500_000)]
    by = {(r["env"], r["budget"]): r for r in rows}
    assert by[("CartPole-v1", 50_000)]["saturated"] and not by[("CartPole-v1", 25_000)]["saturated"]
    assert not by[("Acrobot-v1", 100_000)]["hurts"] and not by[("Pendulum-v1", 100_000)]["learns"]
    assert not by[("MountainCar-v0", 300_000)]["hurts"] and not by[("LunarLanderContinuous-v3", 300_000)]["hurts"]
    text = frozen.pilot_text(rows, select_tasks(rows))
    assert "3 tasks qualify, fewer than the six" in text and "Dropped (no budget qualifies): Pendulum-v1, MountainCar-v0, LunarLanderContinuous-v3" in text
    del table[next(iter(table))]
    with pytest.raises(ValueError, match="pilot is not complete for \\['CartPole-v1 at 50,000'\\]"):
        select_tasks(pilot_rows(table))


def test_the_cut_order_is_lag_64_then_vtrace_then_the_dearest_task():
    tasks = [("Acrobot-v1", 100_000), ("LunarLander-v3", 500_000), ("Pendulum-v1", 100_000)]
    full = sum(r["core_hours"] for r in frozen.estimate_hours(StudyPlan(tasks=tuple(tasks))))
    cuts, lines = frozen.plan_cuts(tasks, limit=full + 1)
    assert cuts == {"lags": [], "arms": [], "tasks": []} and "nothing is cut" in lines[-1]
    cuts, _ = frozen.plan_cuts(tasks, limit=full * 0.97)
    assert cuts == {"lags": [64], "arms": [], "tasks": []}
    cuts, _ = frozen.plan_cuts(tasks, limit=full * 0.85)
    assert cuts == {"lags": [64], "arms": ["vtrace"], "tasks": []}
    cuts, lines = frozen.plan_cuts(tasks, limit=full * 0.5)
    assert cuts == {"lags": [64], "arms": ["vtrace"], "tasks": ["LunarLander-v3"]}
    assert lines[-1].startswith("- cut task LunarLander-v3 (the dearest)")


def test_a_table_row_that_does_not_parse_is_named(tmp_path):
    path = tmp_path / "per_run.csv"
    row = {"folder": "frozen-score", "env": "CartPole-v1", "algo": "ppo", "variant": "", "policy_lag": 0, "seed": 0,
           "total_timesteps": 512, "status": "complete", "final_eval_return": 9.5, "random_score": 22.0, "reference": 475.0,
           "score": (9.5 - 22.0) / (475.0 - 22.0), "step": "eager", "wall_time_s": 3.0}
    write_table(path, {frozen.row_key(row): row})
    assert read_table(path)[frozen.row_key(row)]["final_eval_return"] == 9.5
    path.write_text(path.read_text().replace(",complete,", ",done,"))
    with pytest.raises(ValueError, match="per_run.csv, line 2: status 'done'"):
        read_table(path)


def _synthetic_study(results: Path, esspo_slope: float, ppo_slope: float, ppo_tax: float, seed: int = 0) -> None:
    """A complete study's committed files (two tasks, every arm, lag and seed): scores
    0.9 + slope x log2(1 + lag) + N(0, 0.05); esspo's lag-8 choice is its fresh one (tax 0),
    ppo's lag-8 choice scores ``ppo_tax`` above its fresh choice at lag 8."""
    import json
    import math

    import numpy as np

    rng = np.random.default_rng(seed)
    tasks = [("Pendulum-v1", 4096), ("Acrobot-v1", 4096)]
    results.mkdir(parents=True)
    pilot = [{"env": e, "budget": b, "qualifies": True, "lag0_mean": 0.9, "lag8_mean": 0.7} for e, b in tasks]
    (results / frozen.PILOT_SELECTION_FILE).write_text(json.dumps({"tasks": [{"env": e, "budget": b} for e, b in tasks],
                                                                  "cuts": {"arms": [], "lags": [], "tasks": []}, "pilot": pilot}))
    plan = (RESULTS / "plan.toml").read_text()  # the published plan, its pilot's candidates the synthetic budgets
    for old in ("CartPole-v1 = [50_000, 25_000]", "Acrobot-v1 = [100_000, 50_000]", "Pendulum-v1 = [100_000]"):
        assert old in plan
    plan = plan.replace("Acrobot-v1 = [100_000, 50_000]", "Acrobot-v1 = [4096]").replace("Pendulum-v1 = [100_000]", "Pendulum-v1 = [4096]")
    (results / "plan.toml").write_text(plan)
    slopes = {"esspo": esspo_slope, "ppo": ppo_slope, "decoupled-ppo": ppo_slope, "vtrace": 2 * ppo_slope}
    rows, selected = {}, {}

    def add(folder, env, algo, variant, lag, seed, budget, score):
        row = {"folder": folder, "env": env, "algo": algo, "variant": variant, "policy_lag": lag, "seed": seed,
               "total_timesteps": budget, "status": "complete", "final_eval_return": score, "random_score": 0.0,
               "reference": 1.0, "score": score, "step": "compiled", "wall_time_s": 1.0}
        rows[frozen.row_key(row)] = row

    for env, budget in tasks:
        for s in frozen.PILOT_SEEDS:  # the pilot the selection names, and each choice's search
            add(frozen.PILOT_FOLDERS[0], env, "ppo", "", 0, s, budget, 0.9)
            add(frozen.PILOT_FOLDERS[0], env, "ppo", "", 8, s, budget, 0.7)
        selected[env] = {"budget": budget}
        for algo in frozen.ARMS:
            pick = {"variant": "", "trial": 0, "search_return": 1.0, "search_score": 0.5}
            selected[env][algo] = {"fresh": pick}
            if algo in frozen.TAX_ARMS:
                selected[env][algo]["lag8"] = {**pick, "variant": "clip_range=0.3", "trial": 5} if algo == "ppo" else pick
            for tuned, choice in selected[env][algo].items():
                for s in frozen.SEARCH_SEEDS:
                    add(frozen.SEARCH_FOLDER, env, algo, choice["variant"], 0 if tuned == "fresh" else 8, s, budget, 1.0)
            cells = [("", lag, 0.9 + slopes[algo] * math.log2(1 + lag)) for lag in frozen.LAGS]
            if algo == "ppo":
                cells.append(("clip_range=0.3", 8, 0.9 + ppo_slope * math.log2(9) + ppo_tax))
            for variant, lag, mean in cells:
                for s in frozen.SCORE_SEEDS:
                    add(frozen.SCORE_FOLDER, env, algo, variant, lag, s, budget, float(mean + rng.normal(0, 0.05)))
    from search_records import record_searches  # tests/search_records.py: the trials and the choices' means, as a study writes them

    record_searches(results, rows, selected, {"": frozen.SEARCH_FOLDER}, frozen.SEARCH_SEEDS)
    write_table(results / frozen.TABLE_FILE, rows)
    (results / frozen.SELECTION_FILE).write_text(json.dumps({"plan": {}, "selected": selected}))


def _analysed(results: Path):
    """The generic report of a searched design on ``results``: its study, numbers, endpoint rows by id and the claim's answer."""
    from adaptive_po.analysis import searched_report as report

    study = report.load(results)
    result = report.analyse(study)
    rows = report.primary(study, result)
    return study, result, {r["id"]: r for r in rows}, report.answers(study, rows)[0]["answer"]


def test_the_report_reads_the_endpoints_and_the_decision_from_the_table(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    from adaptive_po.analysis import searched_report as report

    _synthetic_study(tmp_path / "a", esspo_slope=-0.02, ppo_slope=-0.1, ppo_tax=0.2)
    study, result, rows, answer = _analysed(tmp_path / "a")
    assert rows["1"]["d"].estimate == pytest.approx(0.08, abs=0.02)
    assert [rows[i]["verdict"] for i in ("1", "2", "3")] == ["win", "non-inferior", "win"]
    assert rows["3"]["d"].estimate == pytest.approx(-0.2, abs=0.04) and rows["esspo-tax"]["d"].estimate == 0.0
    assert answer == "supported"
    text = report.report_text(study, result)
    assert "**The claim is supported.**" in text and "| robust to staleness without retuning | 1 2/2, 2 2/2, 3 2/2, esspo-tax 2/2 | **supported** |" in text
    assert "| Pendulum-v1 | ppo | lag8 | main | this study | `clip_range=0.3` (5) |" in text

    _synthetic_study(tmp_path / "b", esspo_slope=-0.1, ppo_slope=-0.02, ppo_tax=0.0)
    _, _, rows, answer = _analysed(tmp_path / "b")
    assert rows["1"]["verdict"] == "loss" and answer == "contradicted"


def test_per_task_verdicts_and_the_secondary_tables_are_welch_with_holm_within_each_family(tmp_path, synthetic_envs):
    """Pre-registered: each endpoint per task with Holm over that endpoint's tasks; every other arm
    against ppo at every lag, per task and over tasks, each table with its own Holm."""
    synthetic_envs(0.0, 1.0)  # the synthetic tables' random score and reference
    import numpy as np
    from scipy import stats

    from adaptive_po.analysis import searched_report as report
    from adaptive_po.analysis.hypothesis import holm

    _synthetic_study(tmp_path / "a", esspo_slope=-0.02, ppo_slope=-0.1, ppo_tax=0.2)
    study, result, _, _ = _analysed(tmp_path / "a")

    by_endpoint = report.per_task_verdicts(study, result)
    assert set(by_endpoint) == {"1", "2", "3", "esspo-tax"} and all(set(rows) == {"Pendulum-v1", "Acrobot-v1"} for rows in by_endpoint.values())
    slopes = by_endpoint["1"]
    raw = [slopes[env]["p"] for env in ("Pendulum-v1", "Acrobot-v1")]
    assert [slopes[env]["p_adj"] for env in ("Pendulum-v1", "Acrobot-v1")] == pytest.approx(list(holm(raw)))
    assert {r["verdict"] for r in slopes.values()} == {"win"}  # esspo loses 0.02 per unit, ppo 0.1
    assert {r["verdict"] for r in by_endpoint["2"].values()} == {"non-inferior"}  # equal at lag 0
    assert {r["verdict"] for r in by_endpoint["3"].values()} == {"win"}  # ppo's tax 0.2, esspo's 0

    (_, comparator, task_rows, agg_rows), _ = report.head_to_heads(study, result)  # the pre-registered table against ppo first
    others = [a for a in frozen.ARMS if a != "ppo"]
    assert comparator == "ppo" and len(task_rows) == 2 * len(others) * len(frozen.LAGS) and len(agg_rows) == len(others) * len(frozen.LAGS)
    assert {r["tasks"] for r in agg_rows} == {2}
    # one row against scipy's Welch test, and Holm over the whole per-task table
    row = next(r for r in task_rows if (r["env"], r["algo"], r["lag"]) == ("Pendulum-v1", "esspo", 8))
    fresh = result["fresh"]["Pendulum-v1"]
    x, y = fresh[("esspo", 8)], fresh[("ppo", 8)]
    assert row["d"].estimate == pytest.approx(float(np.mean(x) - np.mean(y)))
    assert row["p"] == pytest.approx(stats.ttest_ind(x, y, equal_var=False).pvalue)
    assert [r["p_adj"] for r in task_rows] == pytest.approx(list(holm([r["p"] for r in task_rows])))
    assert [r["p_adj"] for r in agg_rows] == pytest.approx(list(holm([r["p"] for r in agg_rows])))
    verdicts = {(r["algo"], r["lag"]): r["verdict"] for r in agg_rows}
    assert verdicts[("esspo", 8)] == "win" and verdicts[("vtrace", 8)] == "loss"  # slopes -0.02 and -0.2 against -0.1
    assert verdicts[("esspo", 0)] == verdicts[("decoupled-ppo", 0)] == "equivalent"  # equal means at lag 0, noise 0.05
    text = report.report_text(study, result)
    assert "## Per task" in text and "## Secondary: each arm minus `ppo` at every lag" in text
    assert "| esspo | 8 | 2 of 2 | +" in text and "| Pendulum-v1 | vtrace | 64 | -" in text


def test_the_slope_is_least_squares_on_log2_of_one_plus_lag():
    from adaptive_po.analysis.endpoints import slope

    lags = [0, 1, 3, 7] * 3
    b, se, df = slope(lags, [1.0 - 0.25 * __import__("math").log2(1 + lag) for lag in lags])
    assert b == pytest.approx(-0.25) and se == pytest.approx(0.0, abs=1e-12) and df == 10


RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "frozen"


def test_the_committed_pilot_and_verdicts_rebuild_from_the_committed_tables(tmp_path):
    """pilot.md's table and selection, selection.json's tasks, and verdicts.md (the generic report of
    a searched design, from the plan) are what the code makes of the committed per_run.csv (and
    selected.json) alone."""
    import json

    from adaptive_po.analysis import searched_report as report

    table = read_table(RESULTS / frozen.TABLE_FILE)
    rows = pilot_rows(table)
    chosen = sorted(select_tasks(rows), key=lambda t: t[1] * frozen.seconds_per_million(t[0]))
    committed = (RESULTS / "pilot.md").read_text()
    assert committed.startswith(frozen.pilot_text(rows, chosen))
    record = json.loads((RESULTS / frozen.PILOT_SELECTION_FILE).read_text())
    kept = [t for t in chosen if t[0] not in record["cuts"]["tasks"]]
    assert [(t["env"], t["budget"]) for t in record["tasks"]] == kept
    study = report.load(RESULTS)
    assert (RESULTS / "verdicts.md").read_text() == report.report_text(study, report.analyse(study))


def test_the_dry_run_counts_each_population_once_and_calibrates_on_the_runs_done():
    def row(folder, algo, variant, lag, seed, wall):
        return {"folder": folder, "env": "Pendulum-v1", "algo": algo, "variant": variant, "policy_lag": lag, "seed": seed,
                "total_timesteps": 100_000, "status": "complete", "final_eval_return": -300.0, "random_score": -1200.0,
                "reference": -200.0, "score": 0.9, "step": "compiled", "wall_time_s": wall}

    rows = [row(frozen.SEARCH_FOLDER, "ppo", "clip_range=0.3", 0, s, 60.0 + s % 2) for s in frozen.SEARCH_SEEDS]
    rows += [row(frozen.SEARCH_FOLDER, "ppo", "clip_range=0.3", 8, s, 61.0) for s in frozen.SEARCH_SEEDS]  # one population of 6
    rows += [row(frozen.SEARCH_FOLDER, "esspo", "", 0, s, 30.0) for s in frozen.SEARCH_SEEDS]
    rows += [row(frozen.SCORE_FOLDER, "esspo", "", lag, s, 200.0) for lag in frozen.LAGS for s in frozen.SCORE_SEEDS]  # 2 populations of 35
    table = {frozen.row_key(r): r for r in rows}
    assert frozen.measured_seconds(table, frozen.SEARCH_FOLDER, "Pendulum-v1", 100_000) == (91.0, 9)
    assert frozen.measured_seconds(table, frozen.SCORE_FOLDER, "Pendulum-v1", 100_000) == (400.0, 70)
    plan = StudyPlan(tasks=(("Pendulum-v1", 100_000), ("Acrobot-v1", 50_000)))
    modeled_search, modeled_score = frozen._modeled_seconds("Pendulum-v1", 100_000, 9, 70)
    rows = frozen.estimate_hours(plan, table)
    assert rows[0]["search_ratio"] == pytest.approx(91.0 / modeled_search) and rows[0]["score_ratio"] == pytest.approx(400.0 / modeled_score)
    left = frozen._modeled_seconds("Acrobot-v1", 50_000, plan.search_runs(), plan.score_runs())
    assert rows[1]["core_hours"] == pytest.approx(sum(left) / 3600)
    assert rows[1]["calibrated_core_hours"] == pytest.approx((left[0] * rows[0]["search_ratio"] + left[1] * rows[0]["score_ratio"]) / 3600)


def test_each_run_reaches_the_table_as_it_finishes_not_when_its_batch_ends(tmp_path):
    """A train that tells each finished run (the sweep's ``on_run_done``) has it recorded there and
    then: a slice killed later in the batch (a session's end: no Python cleanup runs) keeps it. Each
    run is recorded once, and the batch's end records the rest."""
    from adaptive_po.bench.process_engine import execute_run

    out, table = tmp_path / "runs", tmp_path / "results" / frozen.TABLE_FILE
    specs = frozen.specs_for("CartPole-v1", "ppo", [""], [0], [0, 1], 256, frozen.SCORE_FOLDER, str(out))
    seen = []

    def train(todo, max_members=None, on_done=None):
        assert execute_run(todo[0])["status"] == "complete"
        on_done(todo[0])
        seen.append(set(read_table(table)))  # on disk before the batch's next run starts
        assert execute_run(todo[1])["status"] == "complete"

    runner = TableRunner(table, train, log=lambda line: None)
    runner.run(specs)
    assert seen == [{spec_key(specs[0])}]
    assert set(read_table(table)) == {spec_key(s) for s in specs} and runner.trained == 2


def test_a_stopped_slices_finished_runs_reach_the_table(tmp_path):
    """A slice stopped in the middle of a batch (Ctrl-C, the session's end) loses no finished run:
    the runs it completed are recorded as it stops, and a slice whose time is already over records
    what an earlier, killed slice left complete (with today's configuration only) before it stops."""
    from adaptive_po.bench.process_engine import execute_run

    out, table = tmp_path / "runs", tmp_path / "results" / frozen.TABLE_FILE
    specs = frozen.specs_for("CartPole-v1", "ppo", [""], [0], [0, 1, 2], 256, frozen.SCORE_FOLDER, str(out))

    def interrupted(todo, max_members=None):
        assert execute_run(todo[0])["status"] == "complete"
        raise KeyboardInterrupt  # the batch's other runs never finish

    runner = TableRunner(table, interrupted, log=lambda line: None)
    with pytest.raises(KeyboardInterrupt):
        runner.run(specs)
    assert set(read_table(table)) == {spec_key(specs[0])} and runner.trained == 1

    # a killed slice left run 1 complete; the next slice's time is over before it starts a batch
    assert execute_run(specs[1])["status"] == "complete"
    (specs[2].run_dir).mkdir(parents=True)  # run 2 never finished
    over = TableRunner(table, interrupted, deadline=0.0, log=lambda line: None)
    with pytest.raises(frozen.SliceOver):
        over.run(specs)
    assert set(read_table(table)) == {spec_key(s) for s in specs[:2]}

    # a complete folder of another configuration is not taken for the run
    other = frozen.specs_for("CartPole-v1", "ppo", [""], [0], [2], 512, frozen.SCORE_FOLDER, str(out))[0]
    assert other.run_dir == specs[2].run_dir and execute_run(other)["status"] == "complete"
    with pytest.raises(frozen.SliceOver):
        TableRunner(table, interrupted, deadline=0.0, log=lambda line: None).run(specs)
    assert spec_key(specs[2]) not in read_table(table)


def test_a_slice_starts_no_population_after_its_time(tmp_path, monkeypatch):
    """A slice's ``--hours`` is checked before each population, not only before each batch of them:
    with one local worker, a batch of three one-run jobs whose time runs out while the first is
    training finishes that one, starts neither of the others and says the slice is over; the table
    holds the finished run only. (The clock is the test's: it passes the deadline as the first run
    ends. The jobs are the process engine's, the cheapest real ones.)"""
    import inspect
    import types

    from adaptive_po.bench import local_executor
    from adaptive_po.bench.study_table import train_with_sweep
    from adaptive_po.bench.sweep import run_sweep
    from adaptive_po.contract import COMPLETE

    # the studies' trainer hands the slice's deadline on to the sweep
    assert "start_by" in inspect.signature(train_with_sweep(1, False, False)[0]).parameters
    clock = [0.0]
    fake = types.SimpleNamespace(monotonic=lambda: clock[0], sleep=local_executor.time.sleep, time=local_executor.time.time)
    monkeypatch.setattr(local_executor, "time", fake)  # the sweep's and the table runner's clock (local_executor.past)
    out, table = tmp_path / "runs", tmp_path / "results" / frozen.TABLE_FILE
    specs = frozen.specs_for("CartPole-v1", "ppo", [""], [0], [0, 1, 2], 256, frozen.SCORE_FOLDER, str(out))
    started = []

    def timed(todo, max_members=None, on_done=None, start_by=None):
        def done(spec):
            on_done(spec)
            clock[0] = 10.0  # the slice's time is over once a job has finished

        started.append(start_by)
        run_sweep(list(todo), workers=1, show_progress=False, engine="process", command="test", on_run_done=done, start_by=start_by)

    runner = TableRunner(table, timed, deadline=5.0, log=lambda line: None)
    with pytest.raises(frozen.SliceOver):
        runner.run(specs)
    assert started == [5.0]
    assert set(read_table(table)) == {spec_key(specs[0])} and runner.trained == 1
    assert [(s.run_dir / COMPLETE).exists() for s in specs] == [True, False, False]

    # without a deadline, a later slice trains the two runs left, and only them
    clock[0] = 0.0
    rest = TableRunner(table, timed, log=lambda line: None)
    rest.run(specs)
    assert started[-1] is None and rest.trained == 2 and set(read_table(table)) == {spec_key(s) for s in specs}
