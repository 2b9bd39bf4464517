"""MinAtar at learning budgets (docs/results/minatar-learning/preregistration.md): the pilot's two
budgets read off one set of runs, its selection rule, the registered cut order, the table's
learning curves, and the claim that lets the pilot read 1M off its 2M runs."""

from __future__ import annotations

import json

import pytest
import yaml

from pathlib import Path

from adaptive_po.analysis import study_report as generic
from adaptive_po.bench import minatar_learning as ml
from adaptive_po.bench import study
from adaptive_po.bench.study_table import TableRunner, finished_row, read_table, row_key, spec_key, specs_for, write_table
from adaptive_po.contract import FROZEN_CURVE_COLUMN as CURVE_COLUMN, parse_curve
from adaptive_po.studies import cuts as cut_order
from adaptive_po.studies import pilot as pilot_rule
from adaptive_po.studies.plan import load_plan
from search_records import synthetic_envs  # noqa: E402,F401 - tests/search_records.py: environment files of the synthetic tables

#: the study's plan file, as committed (the runner's and the report's defaults)
PLAN = load_plan(Path(__file__).parents[1] / ml.PLAN)
P, D = PLAN.pilot, PLAN.design


def _row(game: str, lag: int, seed: int, at_1m: float, final: float, status: str = "complete", wall: float = 3600.0) -> dict:
    """A pilot row of a game whose random score is 0 and reference 10 (scores = returns / 10)."""
    failed = status == "failed"
    curve = "" if failed else f"0:0.0 500032:{at_1m / 2!r} 1000000:{at_1m!r} 1500032:{final!r} 2007040:{final!r}"
    return {"folder": P.folder, "env": game, "algo": "ppo", "variant": "", "policy_lag": lag, "seed": seed,
            "total_timesteps": P.budget, "status": status, "final_eval_return": 0.0 if failed else final, "random_score": 0.0,
            "reference": 10.0, "score": 0.0 if failed else final / 10.0, "step": "", "wall_time_s": float("nan") if failed else wall,
            "config_sha256": "", CURVE_COLUMN: curve}


def _pilot_table(returns: dict[str, dict[int, tuple[list[float], list[float]]]]) -> dict:
    """Per game: lag -> (returns at 1M, final returns) for seeds 200-202."""
    rows = {}
    for game in P.tasks:
        for lag in P.lags:
            at_1m, final = returns.get(game, {}).get(lag, ([1.0] * 3, [1.0] * 3))
            for seed, a, f in zip(P.seeds, at_1m, final):
                row = _row(game, lag, seed, a, f)
                rows[row_key(row)] = row
    return rows


def test_the_pilot_is_ppo_at_lags_0_and_8_on_seeds_outside_the_scoring_set():
    specs = study.pilot_specs(PLAN)
    assert len(specs) == len(P.tasks) * 2 * 3 == 30
    assert {s.algo for s in specs} == {"ppo"} and {s.variant for s in specs} == {""}
    assert {s.dials.policy_lag for s in specs} == {0, 8} and {s.total_timesteps for s in specs} == {2_000_000}
    assert {s.seed for s in specs} == {200, 201, 202} and not {s.seed for s in specs} & set(D.seeds)
    assert {s.suite for s in specs} == {P.folder} and {s.env for s in specs} == set(P.tasks)


def test_each_game_is_kept_at_the_first_budget_where_ppo_learns_and_lag_8_hurts_it():
    table = _pilot_table({
        # learns at 1M (0.6) and lag 8 hurts it there: kept at 1M although 2M qualifies too
        "Breakout-MinAtar": {0: ([6.0, 6.2, 5.8], [9.0] * 3), 8: ([2.0, 2.5, 1.5], [3.0, 3.1, 2.9])},
        # at 1M it does not learn (0.3); at 2M it does and lag 8 hurts: kept at 2M
        "Freeway-MinAtar": {0: ([3.0] * 3, [7.0, 7.5, 6.5]), 8: ([1.0] * 3, [4.0, 4.2, 3.8])},
        # learns, but lag 8 costs less than 0.05 at both budgets
        "Asterix-MinAtar": {0: ([8.0] * 3, [9.0] * 3), 8: ([7.8, 7.7, 7.9], [8.8, 8.9, 8.7])},
        # learns, lag 8 costs 0.2 on average but less than one standard error (two seeds collapse)
        "SpaceInvaders-MinAtar": {0: ([9.0, 1.0, 9.0], [9.0, 1.0, 9.0]), 8: ([5.0, 5.0, 3.0], [5.0, 5.0, 3.0])},
    })
    rows = pilot_rule.pilot_rows(PLAN, table)
    by = {(r["env"], r["budget"]): r for r in rows}
    assert pilot_rule.select(PLAN, rows) == [("Breakout-MinAtar", 1_000_000), ("Freeway-MinAtar", 2_000_000)]
    assert by[("Breakout-MinAtar", 1_000_000)]["lag0_mean"] == pytest.approx(0.6)  # read at step 1,000,000, not the end
    assert by[("Breakout-MinAtar", 2_000_000)]["lag0_mean"] == pytest.approx(0.9)
    assert not by[("Freeway-MinAtar", 1_000_000)]["learns"] and by[("Freeway-MinAtar", 2_000_000)]["qualifies"]
    assert by[("Asterix-MinAtar", 2_000_000)]["learns"] and not by[("Asterix-MinAtar", 2_000_000)]["hurts"]
    assert by[("SpaceInvaders-MinAtar", 1_000_000)]["hurt"] > 0.05 and not by[("SpaceInvaders-MinAtar", 1_000_000)]["hurts"]
    assert not by[("Seaquest-MinAtar", 1_000_000)]["learns"]  # 0.1 everywhere
    text = pilot_rule.pilot_text(PLAN, rows, pilot_rule.select(PLAN, rows), pilot_rule.fresh_returns(PLAN, rows))
    assert "- Freeway-MinAtar at 2,000,000 steps" in text and "Dropped (no budget qualifies): Asterix-MinAtar, Seaquest-MinAtar, SpaceInvaders-MinAtar" in text
    assert "| Breakout-MinAtar | 6.0 | 16.6 | 9.0 | 15.4 |" in text and "| Seaquest-MinAtar | 1.0 | not published |" in text


def test_a_diverged_run_scores_the_random_score_at_both_budgets_and_a_missing_evaluation_is_named():
    table = _pilot_table({})
    bad = _row("Breakout-MinAtar", 0, 200, 0.0, 0.0, status="failed")
    table[row_key(bad)] = bad
    rows = {(r["env"], r["budget"]): r for r in pilot_rule.pilot_rows(PLAN, table)}
    assert rows[("Breakout-MinAtar", 1_000_000)]["failed"] == 1
    assert rows[("Breakout-MinAtar", 1_000_000)]["lag0_mean"] == pytest.approx((0.0 + 0.1 + 0.1) / 3)
    short = _row("Freeway-MinAtar", 8, 201, 1.0, 1.0)
    short[CURVE_COLUMN] = "0:0.0 950016:1.0 2007040:1.0"
    table[row_key(short)] = short
    with pytest.raises(ValueError, match=r"Freeway-MinAtar.*no evaluation at step 1,000,000"):
        pilot_rule.pilot_rows(PLAN, table)


def test_the_pilot_writes_no_selection_before_it_is_complete_and_then_orders_by_its_measured_cost(tmp_path, synthetic_envs):
    envs = synthetic_envs(0.0, 10.0)  # the synthetic tables' random score and reference
    table = _pilot_table({
        "Breakout-MinAtar": {0: ([6.0, 6.2, 5.8], [9.0] * 3), 8: ([2.0, 2.5, 1.5], [3.0, 3.1, 2.9])},
        "Freeway-MinAtar": {0: ([6.0, 6.2, 5.8], [9.0] * 3), 8: ([2.0, 2.5, 1.5], [3.0, 3.1, 2.9])},
    })
    for key, row in table.items():  # Breakout's populations took twice Freeway's time
        row["wall_time_s"] = 7200.0 if key[1] == "Breakout-MinAtar" else 3600.0
    partial = dict(table)
    del partial[next(iter(partial))]
    write_table(tmp_path / PLAN.files["table"], partial)
    assert study.write_selection(PLAN, tmp_path, envs, log=lambda line: None) is None and not (tmp_path / PLAN.files["selection"]).exists()
    write_table(tmp_path / PLAN.files["table"], table)
    assert study.write_selection(PLAN, tmp_path, envs, log=lambda line: None) == [("Freeway-MinAtar", 1_000_000), ("Breakout-MinAtar", 1_000_000)]
    games, speeds = study.read_selection(PLAN, tmp_path)
    # 3,600 s per population of 3 runs of 2,007,040 steps
    assert speeds["Freeway-MinAtar"] == pytest.approx(3600 / 3 / 2.00704) and speeds["Breakout-MinAtar"] == pytest.approx(2 * speeds["Freeway-MinAtar"])
    assert (tmp_path / PLAN.files["pilot"]).read_text().startswith("# The pilot")


def test_the_cut_order_is_lag_16_then_the_dearest_game_then_seeds_never_below_the_minimum():
    games = [("Breakout-MinAtar", 1_000_000), ("Freeway-MinAtar", 2_000_000), ("Asterix-MinAtar", 2_000_000)]
    speeds = {g: 100.0 for g in P.tasks} | {"Asterix-MinAtar": 150.0}
    cuts, lines = study.plan_cuts(PLAN, games, speeds, limit=1000.0)
    assert cuts == {"lags": [], "games": [], "seeds": []} and "nothing is cut" in lines[-1]
    full = study.core_hours(PLAN, cut_order.apply_cuts(PLAN, games, cuts), speeds)
    # 120 runs per game: Breakout 120 x 1M x 100 s, Freeway 120 x 2M x 100 s, Asterix 120 x 2M x 150 s
    assert full == pytest.approx(120 * (100 + 200 + 300) / 3600)
    cuts, lines = study.plan_cuts(PLAN, games, speeds, limit=14.0)  # 20 h; 15 without lag 16
    assert cuts == {"lags": [16], "games": ["Asterix-MinAtar"], "seeds": []}
    cuts, lines = study.plan_cuts(PLAN, games, speeds, limit=3.0)
    assert cuts == {"lags": [16], "games": ["Asterix-MinAtar"], "seeds": [9, 8, 7, 6, 5]}
    plan = cut_order.apply_cuts(PLAN, games, cuts)
    assert plan.lags == (0, 2, 8) and plan.seeds == (0, 1, 2, 3, 4) and len(plan.tasks) == 2 and plan.runs() == 90
    assert "runs anyway" in lines[-1]


def test_the_cuts_file_is_checked_before_the_study_trains(tmp_path):
    path = tmp_path / PLAN.files["cuts"]
    path.write_text(json.dumps({"lags": [16], "games": [], "seeds": [9]}))
    assert study.read_cuts(PLAN, path) == {"lags": [16], "games": [], "seeds": [9]}
    for bad, named in (({"lags": [8], "games": [], "seeds": []}, r"lags \[8\] cannot be cut"),
                       ({"lags": [], "games": [], "seeds": [3]}, r"seeds \[3\] cannot be cut"),
                       ({"lags": []}, "expected the keys")):
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=named):
            study.read_cuts(PLAN, path)


def test_the_study_refuses_to_run_without_a_pilot_or_with_fewer_than_two_games(tmp_path, capsys):
    assert ml.main(["study", "--results", str(tmp_path), "--out", str(tmp_path / "runs")]) == 2
    assert "no selection yet: run the pilot first" in capsys.readouterr().err
    (tmp_path / PLAN.files["selection"]).write_text(json.dumps({"games": [{"env": "Breakout-MinAtar", "budget": 1_000_000}],
                                                          "seconds_per_million": {}}))
    assert ml.main(["study", "--results", str(tmp_path), "--out", str(tmp_path / "runs")]) == 2
    assert "fewer than 2: as registered, the study is not run" in capsys.readouterr().err
    (tmp_path / PLAN.files["selection"]).write_text(json.dumps({"games": [{"env": "Pong-MinAtar", "budget": 1_000_000}], "seconds_per_million": {}}))
    assert ml.main(["study", "--results", str(tmp_path)]) == 2
    assert "'Pong-MinAtar', 1000000) is not one of this study's games" in capsys.readouterr().err
    assert ml.main(["pilot", "--results", str(tmp_path), "--hours", "0"]) == 2
    assert "--hours must be in (0, 24], got 0.0" in capsys.readouterr().err


def test_the_table_keeps_learning_curves_and_refuses_one_that_does_not_parse(tmp_path):
    row = _row("Breakout-MinAtar", 0, 200, 6.0, 9.0)
    path = tmp_path / PLAN.files["table"]
    write_table(path, {row_key(row): row})
    assert "eval_curve" in path.read_text().splitlines()[0]
    assert read_table(path)[row_key(row)][CURVE_COLUMN] == row[CURVE_COLUMN]
    plain = {k: v for k, v in row.items() if k != CURVE_COLUMN}
    write_table(path, {row_key(plain): plain})  # the frozen studies' tables have no curve column
    assert "eval_curve" not in path.read_text()
    row[CURVE_COLUMN] = "0:0.0 1000000:x"
    write_table(path, {row_key(row): row})
    with pytest.raises(ValueError, match=r"line 2: eval_curve pair '1000000:x' is not step:return"):
        read_table(path)
    row[CURVE_COLUMN] = "0:0.0 1000000:1.0 500000:2.0"
    write_table(path, {row_key(row): row})
    with pytest.raises(ValueError, match="steps do not increase at '500000:2.0'"):
        read_table(path)


def test_every_game_runs_a_constant_learning_rate_and_clip_and_evaluates_at_one_million():
    """What lets the pilot read 1M off its 2M runs: no schedule in the games' settings depends on
    the budget, and the evaluation schedule has a point at step 1,000,000 exactly."""
    from adaptive_po.bench.config import evaluation_timesteps, get_env_config

    for game in P.tasks:
        config = get_env_config(game)
        assert isinstance(config.hyperparams.learning_rate, float) and isinstance(config.hyperparams.clip_range, float), game
        assert 1_000_000 in evaluation_timesteps(config, P.budget), game


@pytest.mark.slow
def test_a_longer_runs_curve_equals_a_shorter_runs_before_its_end(tmp_path):
    """The pilot's 1M read-off, on a small task with constant settings: a population run of budget
    2T evaluates, at every step before T, exactly what a run of budget T does (nothing before a
    run's end depends on its budget), records an evaluation at T itself, and the table holds both
    curves."""
    from adaptive_po.bench.sweep import run_sweep

    envs = tmp_path / "envs"
    envs.mkdir()
    config = yaml.safe_load((Path(__file__).parents[1] / "adaptive_po/env_configs/CartPole-v1.yaml").read_text())
    config["hyperparams"].update(learning_rate=1e-3, clip_range=0.2, n_epochs=2)
    config["evaluation"] = {"episodes": 2, "every": 256}
    (envs / "CartPole-v1.yaml").write_text(yaml.safe_dump(config))
    short = specs_for("CartPole-v1", "ppo", [""], [0, 2], [0, 1], 768, P.folder, str(tmp_path / "runs"), str(envs))
    long = specs_for("CartPole-v1", "ppo", [""], [0, 2], [0, 1], 1536, P.folder, str(tmp_path / "runs2"), str(envs))
    table = tmp_path / PLAN.files["table"]
    runner = TableRunner(table, lambda specs, max_members=None: run_sweep(list(specs), executor="inline", show_progress=False, command="test"),
                         log=lambda line: None, curves=True)
    runner.run(short + long)
    rows = read_table(table)
    for s, l in zip(short, long):
        a = dict(parse_curve(rows[spec_key(s)][CURVE_COLUMN]))
        b = dict(parse_curve(rows[spec_key(l)][CURVE_COLUMN]))
        before = {step: value for step, value in a.items() if step < 768}
        assert sorted(before) == [0, 256, 512] and all(b[step] == value for step, value in before.items()), (a, b)
        assert 768 in b and finished_row(l, curve=True)[CURVE_COLUMN] == rows[spec_key(l)][CURVE_COLUMN]


def _study(results, slopes: dict[str, float], lag0: dict[str, float] | None = None, games=("Breakout-MinAtar", "Freeway-MinAtar"),
           missing: int = 0, seed: int = 0) -> None:
    """A study's committed files: its selection, and per game, arm, lag and seed a scoring run whose
    normalized score is 0.8 + lag0[arm] + slopes[arm] x log2(1 + lag) + N(0, 0.03), with a curve;
    the last ``missing`` runs left out (a study in progress)."""
    import math

    import numpy as np

    rng = np.random.default_rng(seed)
    results.mkdir(parents=True, exist_ok=True)
    (results / PLAN.files["selection"]).write_text(json.dumps({"games": [{"env": g, "budget": 1_000_000} for g in games], "seconds_per_million": {}}))
    rows = {}
    for game in games:
        for arm in D.arms:
            for lag in D.lags:
                for s in D.seeds:
                    score = 0.8 + (lag0 or {}).get(arm, 0.0) + slopes[arm] * math.log2(1 + lag) + float(rng.normal(0, 0.03))
                    row = {"folder": D.folder, "env": game, "algo": arm, "variant": "", "policy_lag": lag, "seed": s,
                           "total_timesteps": 1_000_000, "status": "complete", "final_eval_return": score * 10.0, "random_score": 0.0,
                           "reference": 10.0, "score": score, "step": "", "wall_time_s": 100.0, "config_sha256": "",
                           CURVE_COLUMN: f"0:0.0 500032:{score * 5.0!r} 1007616:{score * 10.0!r}"}
                    rows[row_key(row)] = row
    for key in sorted(rows)[len(rows) - missing:]:
        del rows[key]
    write_table(results / PLAN.files["table"], rows)


def test_the_report_reads_the_registered_endpoints_and_both_answers(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 10.0)  # the synthetic tables' random score and reference
    from adaptive_po.analysis.reports import minatar_learning as report

    _study(tmp_path / "a", {"esspo": -0.02, "ppo": -0.12, "decoupled-ppo": -0.02})
    assert report.main(["--results", str(tmp_path / "a")]) == 0
    text = (tmp_path / "a" / "verdicts.md").read_text()
    assert "Against `ppo`, the claim (as robust to a stale actor, not worse on fresh data) is supported." in text
    assert "Against `decoupled-ppo`, `esspo`'s slope is equivalent." in text and "Interim" not in text
    table, plan = generic.load(tmp_path / "a", PLAN.path)
    rows = generic.primary(plan, generic.analyse(table, plan))
    assert rows[0]["d"].estimate == pytest.approx(0.10, abs=0.01) and rows[0]["verdict"] == "win"
    assert rows[1]["verdict"] == "non-inferior" and rows[2]["verdict"] == "equivalent"
    assert (tmp_path / "a" / "curves.png").stat().st_size > 10_000 and (tmp_path / "a" / "staleness.png").stat().st_size > 10_000

    # esspo worse on fresh data by 0.3, and losing more per doubling than decoupled-ppo: contradicted, behind
    _study(tmp_path / "b", {"esspo": -0.12, "ppo": -0.12, "decoupled-ppo": -0.02}, lag0={"esspo": -0.3})
    report.main(["--results", str(tmp_path / "b")])
    text = (tmp_path / "b" / "verdicts.md").read_text()
    assert "is contradicted. Against `decoupled-ppo`, `esspo`'s slope is behind." in text
    assert "| 2. lag 0: esspo - ppo (non-inferiority at -0.1) | -0.3" in text and "| inferior |" in text


def test_the_report_of_a_study_in_progress_says_so_and_before_the_pilot_says_that(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 10.0)  # the synthetic tables' random score and reference
    from adaptive_po.analysis.reports import minatar_learning as report

    _study(tmp_path / "a", {"esspo": -0.02, "ppo": -0.12, "decoupled-ppo": -0.02}, missing=5)
    report.main(["--results", str(tmp_path / "a")])
    text = (tmp_path / "a" / "verdicts.md").read_text()
    assert "**Interim, 1 of 2 games complete" in text and "235 of 240 runs" in text
    (tmp_path / "b").mkdir()
    report.main(["--results", str(tmp_path / "b")])
    assert "**The pilot is not complete** (0 of its runs" in (tmp_path / "b" / "verdicts.md").read_text()
    _study(tmp_path / "c", {"esspo": 0.0, "ppo": 0.0, "decoupled-ppo": 0.0}, games=("Breakout-MinAtar",))
    report.main(["--results", str(tmp_path / "c")])
    assert "1 game(s) qualify, fewer than 2: as registered, the study is not run." in (tmp_path / "c" / "verdicts.md").read_text()
    # a pilot that selects no game has decided too: the study is not run, not "the pilot is not complete"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / PLAN.files["selection"]).write_text(json.dumps({"games": [], "seconds_per_million": {}}))
    report.main(["--results", str(tmp_path / "d")])
    text = (tmp_path / "d" / "verdicts.md").read_text()
    assert "0 game(s) qualify, fewer than 2: as registered, the study is not run." in text and "not complete" not in text


def test_the_pilots_figure_shows_every_game_from_the_table_alone(tmp_path, synthetic_envs):
    synthetic_envs(0.0, 10.0)  # the synthetic tables' random score and reference
    from adaptive_po.analysis.reports import minatar_learning as report

    write_table(tmp_path / PLAN.files["table"], _pilot_table({"Breakout-MinAtar": {0: ([6.0, 6.2, 5.8], [9.0] * 3), 8: ([2.0, 2.5, 1.5], [3.0] * 3)}}))
    assert report.main(["--results", str(tmp_path)]) == 0
    assert (tmp_path / "pilot.png").stat().st_size > 10_000 and not (tmp_path / "curves.png").exists()
    steps, mean, half = generic.curve_band([_row("Breakout-MinAtar", 0, s, a, 9.0) for s, a in zip(P.seeds, (6.0, 6.2, 5.8))])
    assert list(steps) == [0, 500032, 1_000_000, 1_500_032, 2_007_040] and mean[2] == pytest.approx(6.0) and half[2] > 0
