"""PQN's evidence tables (docs/results/pqn-minatar, abs, pqn-staleness) and what their runs select.

* **The variants the runs are selected by**: ``batch_scaling=abs`` turns the after-ABS dial on for any
  algorithm (and sends the run to the process engine), ``width=x<f>`` widens every hidden layer of
  PQN's Q-network; anything else is refused for PQN, naming what it takes; ``bench --variant`` runs them.
* **The reports, on tiny real runs** (the bench, a few thousand steps, in ``tmp_path``): the numbers
  are recomputed here independently (Welch's interval with scipy's t quantile, the cost from each run's
  ``summary.json``, the dial's means from each run's ``progress.csv``), and "not shown" stands exactly
  where an interval spans zero.
* **Bad input** is one line and exit status 2: a table of another report, a missing column or file.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from adaptive_po.analysis.reports import abs_claim, pqn_minatar, pqn_staleness
from adaptive_po.analysis.run_curves import NOT_SHOWN, difference_verdict
from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.jobs import plan_jobs
from adaptive_po.bench.run_folder import RunSpec, config_for, read_settings
from adaptive_po.bench.variants import apply_variant, make_variant, parse_variant
from adaptive_po.hyperparams import PQNHyperparams


# -- the variants -----------------------------------------------------------------------------------
def test_pqn_takes_the_dial_and_the_width_and_nothing_else() -> None:
    assert parse_variant("pqn", "batch_scaling=abs,width=x4") == {"batch_scaling": ("dial", "abs"), "width": ("scale", 4.0)}
    assert make_variant(width="x4", batch_scaling="abs") == "batch_scaling=abs,width=x4"
    assert parse_variant("ppo", "batch_scaling=abs") == {"batch_scaling": ("dial", "abs")}
    for algo, variant, named in [
        ("pqn", "n_epochs=x2", "pqn takes no variants but width=x<factor> and batch_scaling=abs"),
        ("pqn", "width=4", "width takes a factor such as x4, got '4'"),
        ("pqn", "width=x0", "must be a finite number > 0"),
        ("pqn", "batch_scaling=on", "batch_scaling takes one of ['abs']"),
        ("ppo", "width=x4", "unknown knob 'width' for ppo"),
        ("pqn", "width=x4,batch_scaling=abs", "write it as 'batch_scaling=abs,width=x4'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            parse_variant(algo, variant)


def test_the_variants_set_pqns_width_and_dial_keeping_the_files_knobs() -> None:
    hp = get_env_config("Breakout-MinAtar").pqn
    wide, _ = apply_variant("pqn", "batch_scaling=abs,width=x4", hp, {})
    assert (wide.width, wide.batch_scaling, wide.n_steps, wide.network) == (4.0, {}, 32, "minatar")
    knobs = PQNHyperparams.from_preset("classic", {"batch_scaling": {"t_max": 256}})
    assert apply_variant("pqn", "batch_scaling=abs", knobs, {})[0].batch_scaling == {"t_max": 256}
    # the policy objectives: the dial on, the environment's other settings untouched
    ppo = get_env_config("CartPole-v1").hyperparams
    dialled, kwargs = apply_variant("ppo", "batch_scaling=abs", ppo, {"clip_range": 0.2})
    assert dialled.batch_scaling == {} and dialled.n_steps == ppo.n_steps and kwargs == {"clip_range": 0.2}
    # config.json: the width only where a variant sets it (runs made before it still match on resume)
    assert "width" not in PQNHyperparams.from_preset("minatar").to_json()
    spec = RunSpec(suite="abs", env="Breakout-MinAtar", algo="pqn", seed=0, total_timesteps=8192, variant="width=x4")
    assert config_for(spec)["hyperparams"]["width"] == 4.0 and read_settings(spec).hp.width == 4.0


def test_width_multiplies_every_hidden_layer_of_the_q_network() -> None:
    from gymnasium import spaces
    from torch import nn

    from adaptive_po.pqn import QNetwork

    def widths(net: QNetwork) -> list[int]:
        return [m.out_channels if isinstance(m, nn.Conv2d) else m.out_features for m in net.layers if isinstance(m, (nn.Conv2d, nn.Linear))]

    grid = spaces.Box(0, 1, (4, 10, 10))
    assert widths(QNetwork(grid, 3, "minatar")) == [16, 128, 3]
    assert widths(QNetwork(grid, 3, "minatar", width=4)) == [64, 512, 3]  # conv 64 -> dense 512, the actions stay 3
    assert widths(QNetwork(spaces.Box(-1, 1, (4,)), 2, "mlp", width=0.5)) == [60, 42, 2]
    with pytest.raises(ValueError, match="PQN width must be a finite number > 0"):
        QNetwork(grid, 3, "minatar", width=0)


def test_a_dial_variant_goes_to_the_process_engine() -> None:
    specs = [RunSpec(suite="abs", env="CartPole-v1", algo="ppo", seed=s, total_timesteps=3000, variant=v) for v in ("", "batch_scaling=abs") for s in (0, 1)]
    jobs = plan_jobs(specs, "population")
    assert [(job.population, {s.variant for s in job.specs}) for job in jobs] == [(True, {""}), (False, {"batch_scaling=abs"}), (False, {"batch_scaling=abs"})]


def test_bench_runs_each_variant_given(capsys) -> None:
    from adaptive_po.cli import main

    code = main(["bench", "--suite", "minatar", "--envs", "Breakout-MinAtar", "--algos", "pqn", "--variant", "batch_scaling=abs", "--variant", "width=x4",
                 "--seeds", "1", "--lags", "0", "--timesteps", "8192", "--suite-name", "abs", "--dry-run", "--list-runs", "--no-report"])
    out = capsys.readouterr().out.split()
    assert code == 0 and out == ["abs/Breakout-MinAtar/pqn@batch_scaling=abs/lag0_noise0_replay0/seed-0", "abs/Breakout-MinAtar/pqn@width=x4/lag0_noise0_replay0/seed-0"]


# -- tiny real runs ---------------------------------------------------------------------------------
def _bench(out: Path, *args: str) -> None:
    from adaptive_po.cli import main

    assert main(["bench", *args, "--out", str(out), "--executor", "inline", "--no-report", "--no-progress"]) == 0


def _report(module, argv: list[str]) -> str:
    assert module.main(argv) == 0
    return (Path(argv[argv.index("--out") + 1]) / "report.md").read_text()


def _welch(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """mean(x) - mean(y) and its Welch 95% interval, computed here from the definition."""
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    half = stats.t.ppf(0.975, df) * math.sqrt(vx + vy)
    diff = x.mean() - y.mean()
    assert np.allclose(stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95), (diff - half, diff + half))
    return diff, diff - half, diff + half


def _cell(diff: float, low: float, high: float) -> str:
    return f"{diff:.1f} [{low:.1f}, {high:.1f}]"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Tiny real runs of each table: PQN and PPO on Breakout-MinAtar (8,192 steps, 2 seeds), PQN with the
    dial there; PPO with and without the dial on CartPole (3,000 steps, 3 seeds); PQN at lags 0 and 4
    on CartPole (2,048 steps, 3 seeds)."""
    root = tmp_path_factory.mktemp("runs")
    minatar = ["--suite", "minatar", "--envs", "Breakout-MinAtar", "--seeds", "2", "--lags", "0", "--timesteps", "8192"]
    _bench(root, *minatar, "--algos", "pqn,ppo", "--suite-name", "pqn-minatar", "--engine", "process")
    _bench(root, *minatar, "--algos", "pqn", "--variant", "batch_scaling=abs", "--suite-name", "abs")
    _bench(root, "--suite", "staleness", "--envs", "CartPole-v1", "--algos", "ppo", "--variant", "", "--variant", "batch_scaling=abs", "--seeds", "3",
           "--lags", "0", "--timesteps", "3000", "--suite-name", "abs", "--engine", "process")
    _bench(root, "--suite", "staleness", "--envs", "CartPole-v1", "--algos", "pqn", "--seeds", "3", "--lags", "0,4", "--timesteps", "2048",
           "--suite-name", "pqn-staleness")
    return root


def _summaries(folder: Path) -> dict[tuple[str, int], dict]:
    """``(algo label, seed) -> summary.json`` of every run under ``folder``."""
    return {(path.parents[2].name, int(path.parent.name.split("-")[1])): json.loads(path.read_text()) for path in folder.rglob("summary.json")}


@pytest.mark.slow
def test_pqn_minatar_reports_final_returns_the_difference_and_the_cost(runs, tmp_path) -> None:
    out = tmp_path / "pqn-minatar"
    text = _report(pqn_minatar, ["--runs", str(runs / "pqn-minatar"), "--out", str(out)])
    table = pd.read_csv(out / "per_run.csv")
    assert len(table) == 4 and (table["wall_time_s"] > 0).all() and (table["status"] == "complete").all()
    summaries = _summaries(runs / "pqn-minatar")
    costs = {}
    for algo in ("pqn", "ppo"):
        per_run = [summaries[(algo, s)]["wall_time_s"] / (summaries[(algo, s)]["timesteps"] / 1e6) for s in (0, 1)]
        mean, half = np.mean(per_run), stats.t.ppf(0.975, 1) * np.std(per_run, ddof=1) / math.sqrt(2)
        costs[algo] = mean
        assert mean > 0 and f"{mean:.0f} [{mean - half:.0f}, {mean + half:.0f}] |" in text
    finals = {a: table[table["algo"] == a].sort_values("seed")["final_eval_return"].to_numpy(float) for a in ("pqn", "ppo")}
    diff, low, high = _welch(finals["pqn"], finals["ppo"]) if finals["pqn"].std() + finals["ppo"].std() > 0 else (np.nan,) * 3
    verdict = NOT_SHOWN if not np.isfinite(low) or low <= 0 <= high else ("pqn ahead" if low > 0 else "ppo ahead")
    row = next(line for line in text.splitlines() if line.startswith("| Breakout-MinAtar | ") and "pqn / ppo" not in line and line.count("|") == 5)
    assert f"| {verdict} | {costs['pqn'] / costs['ppo']:.2f} |" in row
    if np.isfinite(low):
        assert _cell(diff, low, high) in row
    # the table rebuilds the same report byte for byte, and its figure
    again = tmp_path / "again"
    assert _report(pqn_minatar, ["--table", str(out / "per_run.csv"), "--out", str(again)]) == text
    assert (out / "curves.png").stat().st_size > 10_000


@pytest.mark.slow
def test_abs_claim_reports_the_dials_difference_and_what_it_logged(runs, tmp_path) -> None:
    out = tmp_path / "abs"
    text = _report(abs_claim, ["--runs", str(runs / "abs"), str(runs / "pqn-minatar"), "--out", str(out)])
    table = pd.read_csv(out / "per_run.csv")
    # ppo's Breakout runs in runs/pqn-minatar are not of this report: left out
    assert sorted(set(zip(table["env"], table["algo"]))) == [
        ("Breakout-MinAtar", "pqn"), ("Breakout-MinAtar", "pqn@batch_scaling=abs"), ("CartPole-v1", "ppo"), ("CartPole-v1", "ppo@batch_scaling=abs")]
    # each run's logged means, from its progress.csv
    for folder in (runs / "abs").rglob("progress.csv"):
        rows = list(csv.DictReader(folder.open()))
        algo, seed = folder.parents[2].name, int(folder.parent.name.split("-")[1])
        run = table[(table["algo"] == algo) & (table["seed"] == seed)].iloc[0]
        if algo == "ppo":
            assert math.isnan(run["rollout_steps_mean"]) and math.isnan(run["behaviour_divergence_mean"])
        else:
            assert run["rollout_steps_mean"] == pytest.approx(np.mean([float(r["rollout_steps"]) for r in rows]))
            assert run["behaviour_divergence_mean"] == pytest.approx(np.mean([float(r["behaviour_divergence"]) for r in rows]))
    assert (table[table["algo"] == "pqn@batch_scaling=abs"]["rollout_steps_mean"] != 32).any()  # the dial moved the rollout
    for env, off, on in (("CartPole-v1", "ppo", "ppo@batch_scaling=abs"), ("Breakout-MinAtar", "pqn", "pqn@batch_scaling=abs")):
        x = table[table["algo"] == on].sort_values("seed")["final_eval_return"].to_numpy(float)
        y = table[table["algo"] == off].sort_values("seed")["final_eval_return"].to_numpy(float)
        row = next(line for line in text.splitlines() if line.startswith(f"| {env} | ") and "dense 512" not in line)
        if x.std() + y.std() > 0:
            diff, low, high = _welch(x, y)
            assert f"| {_cell(diff, low, high)} | {NOT_SHOWN if low <= 0 <= high else ('the dial ahead' if low > 0 else 'the dial behind')} |" in row
        on_steps = table[table["algo"] == on]["rollout_steps_mean"].mean()
        assert f" / {on_steps:.1f} |" in row
    # the wider network's arms were not run here: their rows say so
    assert "| Breakout-MinAtar | 4x wider (conv 64 -> dense 512) | 0 / 0 | - | - | - | not shown |" in text
    assert _report(abs_claim, ["--table", str(out / "per_run.csv"), "--out", str(tmp_path / "again")]) == text


@pytest.mark.slow
def test_pqn_staleness_reports_each_lag_against_lag_zero(runs, tmp_path) -> None:
    out = tmp_path / "pqn-staleness"
    text = _report(pqn_staleness, ["--runs", str(runs / "pqn-staleness"), "--out", str(out)])
    table = pd.read_csv(out / "per_run.csv")
    assert sorted(table["policy_lag"].unique()) == [0, 4] and len(table) == 6
    lag = {k: table[table["policy_lag"] == k].sort_values("seed")["final_eval_return"].to_numpy(float) for k in (0, 4)}
    for k, values in lag.items():
        half = stats.t.ppf(0.975, 2) * values.std(ddof=1) / math.sqrt(3)
        assert f"| CartPole-v1 | {k} | 3 | {values.mean():.1f} [{values.mean() - half:.1f}, {values.mean() + half:.1f}] |" in text
    row = next(line for line in text.splitlines() if line.startswith("| CartPole-v1 | 4 |"))
    if lag[4].std() + lag[0].std() > 0:
        diff, low, high = _welch(lag[4], lag[0])
        assert row.endswith(f"| {_cell(diff, low, high)} | {NOT_SHOWN if low <= 0 <= high else ('above lag 0' if low > 0 else 'below lag 0')} |")
    assert "| CartPole-v1 | 16 | 0 | - | - | not shown |" in text
    assert (out / "staleness.png").stat().st_size > 10_000
    assert _report(pqn_staleness, ["--table", str(out / "per_run.csv"), "--out", str(tmp_path / "again")]) == text


def test_not_shown_stands_exactly_where_the_interval_spans_zero() -> None:
    assert difference_verdict(-1.0, 2.0, "up", "down") == NOT_SHOWN
    assert difference_verdict(0.0, 2.0, "up", "down") == NOT_SHOWN  # touching zero: not excluded
    assert difference_verdict(0.5, 2.0, "up", "down") == "up"
    assert difference_verdict(-3.0, -0.1, "up", "down") == "down"
    assert difference_verdict(float("nan"), float("nan"), "up", "down") == NOT_SHOWN
    # and in a report: a synthetic lag table where lag 4 is clearly below and lag 16 is not shown
    rows = [{"suite": "pqn-staleness", "env": "CartPole-v1", "algo": "pqn", "seed": s, "total_timesteps": 100_000, "status": "complete",
             "final_eval_return": v, "final_train_return": v, "eval_curve": f"0:0 100352:{v}", "train_curve": "", "policy_lag": lag}
            for lag, values in ((0, (500.0, 490.0, 495.0)), (4, (100.0, 110.0, 105.0)), (16, (300.0, 700.0, 495.0))) for s, v in enumerate(values)]
    text = pqn_staleness.report_markdown(pd.DataFrame(rows))
    assert "| CartPole-v1 | 4 | 3 | 105.0 [92.6, 117.4] | -390.0 [-401.3, -378.7] | below lag 0 |" in text
    assert re.search(r"\| CartPole-v1 \| 16 \| 3 \| .* \| not shown \|", text)


# -- bad input --------------------------------------------------------------------------------------
def _minimal(extra: dict) -> pd.DataFrame:
    return pd.DataFrame([{"suite": "s", "env": "Breakout-MinAtar", "algo": "pqn", "seed": 0, "total_timesteps": 8192, "status": "complete",
                          "final_eval_return": 1.0, "final_train_return": 1.0, "eval_curve": "0:0 8192:1", "train_curve": "4096:1 8192:1", **extra}])


@pytest.mark.parametrize("module, table, named", [
    (pqn_minatar, _minimal({"wall_time_s": 1.0}).assign(env="Asterix-MinAtar"), "env 'Asterix-MinAtar' is not of this report"),
    (pqn_minatar, _minimal({"wall_time_s": 1.0}).assign(algo="esspo"), "algo 'esspo' is not of this report"),
    (pqn_minatar, _minimal({}), "missing columns ['wall_time_s']"),
    (abs_claim, _minimal({"rollout_steps_mean": 32.0, "behaviour_divergence_mean": 0.1}).assign(algo="ppo"), "'ppo' on Breakout-MinAtar is not of this report"),
    (abs_claim, _minimal({"rollout_steps_mean": 32.0, "behaviour_divergence_mean": 0.1}).assign(env="Pong-v5"), "env 'Pong-v5' is not of this report"),
    (abs_claim, _minimal({"rollout_steps_mean": 32.0}), "missing columns ['behaviour_divergence_mean']"),
    (pqn_staleness, _minimal({"policy_lag": 0}), "env 'Breakout-MinAtar' is not of this report"),
    (pqn_staleness, _minimal({"policy_lag": 64}).assign(env="CartPole-v1"), "policy_lag '64' is not of this report"),
    (pqn_staleness, _minimal({"policy_lag": 0}).assign(env="CartPole-v1", algo="ppo"), "algo 'ppo' is not of this report"),
])
def test_a_table_not_of_the_report_is_refused_in_one_line(tmp_path, capsys, module, table, named) -> None:
    table.to_csv(tmp_path / "per_run.csv", index=False)
    assert module.main(["--table", str(tmp_path / "per_run.csv"), "--out", str(tmp_path / "out")]) == 2
    out = capsys.readouterr().out.strip()
    assert named in out and "\n" not in out and not (tmp_path / "out").exists()


@pytest.mark.parametrize("module", [pqn_minatar, abs_claim, pqn_staleness])
def test_missing_input_is_refused_in_one_line(tmp_path, capsys, module) -> None:
    assert module.main(["--table", str(tmp_path / "nothing.csv"), "--out", str(tmp_path / "out")]) == 2
    assert module.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [f"error: no per-run table at {tmp_path / 'nothing.csv'}", f"error: no run folders at {tmp_path / 'runs'}"]
    assert not (tmp_path / "out").exists()


def test_a_width_beyond_the_networks_limits_is_refused_before_compute() -> None:
    from adaptive_po.hyperparams import MAX_LAYER_WIDTH

    with pytest.raises(ValueError, match=re.escape(f"width x200: net_arch: a layer of 25,600 units is wider than the limit of {MAX_LAYER_WIDTH:,}")):
        apply_variant("pqn", "width=x200", get_env_config("Breakout-MinAtar").pqn, {})


@pytest.mark.slow
def test_runs_added_to_a_committed_table_continue_it_as_one_folder_would(runs, tmp_path) -> None:
    """A study in slices on a fresh machine: the committed table holds the earlier slice's runs, the
    folder only this slice's; ``--add`` gives the table (and report) the whole folder would."""
    import shutil

    whole = tmp_path / "whole"
    text = _report(pqn_staleness, ["--runs", str(runs / "pqn-staleness"), "--out", str(whole)])
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, seeds in ((first, {0, 1}), (second, {2})):  # two slices' run folders: seeds 0-1, then seed 2
        shutil.copytree(runs / "pqn-staleness", folder / "pqn-staleness")
        for run in list((folder / "pqn-staleness").rglob("seed-*")):
            if int(run.name.split("-")[1]) not in seeds:
                shutil.rmtree(run)
    out = tmp_path / "published"
    _report(pqn_staleness, ["--runs", str(first / "pqn-staleness"), "--out", str(out)])
    assert len(pd.read_csv(out / "per_run.csv")) == 4
    assert _report(pqn_staleness, ["--runs", str(second / "pqn-staleness"), "--out", str(out), "--add"]) == text
    key = ["env", "algo", "seed", "total_timesteps"]
    merged, full = (pd.read_csv(p / "per_run.csv").sort_values(key).reset_index(drop=True) for p in (out, whole))
    pd.testing.assert_frame_equal(merged, full)
    # adding the same runs again changes nothing
    assert _report(pqn_staleness, ["--runs", str(second / "pqn-staleness"), "--out", str(out), "--add"]) == text


# -- the published tables ---------------------------------------------------------------------------

PUBLISHED = Path(__file__).resolve().parents[1] / "docs" / "results"


@pytest.mark.parametrize("module, folder, runs", [(pqn_minatar, "pqn-minatar", 20), (pqn_staleness, "pqn-staleness", 45)])
def test_a_published_report_rebuilds_byte_for_byte_from_its_committed_table(tmp_path, module, folder, runs) -> None:
    """What `make reports-from-tables` runs: the committed table alone gives the committed report, and
    the table holds every planned run, complete."""
    import shutil

    from adaptive_po.analysis.run_curves import REPORT_FILE, TABLE_FILE

    out = tmp_path / folder
    shutil.copytree(PUBLISHED / folder, out)
    assert module.main(["--table", str(out / TABLE_FILE), "--out", str(out)]) == 0
    assert (out / REPORT_FILE).read_bytes() == (PUBLISHED / folder / REPORT_FILE).read_bytes()
    table = pd.read_csv(PUBLISHED / folder / TABLE_FILE)
    assert len(table) == runs and set(table["status"]) == {"complete"} and sorted(table["seed"].unique()) == [0, 1, 2, 3, 4]
