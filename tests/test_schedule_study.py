"""The frozen study's extension under the authors' schedule (``adaptive_po.bench.schedule_study``):
its plan is the pre-registered one, its search asks the schedule space, and it resumes from its
committed table alone, like the published study."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from adaptive_po.bench import schedule_study as study
from adaptive_po.bench.frozen import StudyPlan, TableRunner, read_table, spec_key
from adaptive_po.bench.tuning import ONE_PASS, ScheduleSpace, make_study, ask_new
from adaptive_po.bench.variants import apply_variant, parse_variant
from adaptive_po.bench.config import get_env_config

PUBLISHED = Path(__file__).resolve().parents[1] / "docs" / "results" / "frozen"


def test_the_plan_is_the_preregistered_one():
    parts = study.plans()
    assert list(parts) == ["main", "dppo-tax", "luck"]
    main, dppo, luck = parts["main"], parts["dppo-tax"], parts["luck"]
    assert main.tasks == study.TASKS and main.arms == ("esspo", "ppo") and main.tax_arms == ("esspo",)
    assert main.lags == (0, 1, 2, 4, 8, 16, 64) and main.score_seeds == tuple(range(10)) and main.search_seeds == (100, 101, 102)
    assert main.trials == 16 and main.tuning_lags("esspo") == (0, 8) and main.tuning_lags("ppo") == (0,)
    assert dppo.tuning_lags("decoupled-ppo") == (8,) and dppo.swept_arms == ()  # its fresh configuration is the published one
    assert luck.tasks == (("Pendulum-v1", 100_000),) and luck.lags == (0,) and luck.sampler_seed != main.sampler_seed
    assert main.search_runs() == (2 + 1) * 16 * 3 and main.score_runs() == (2 * 7 + 1) * 10
    study.check_published(PUBLISHED)  # the same four tasks as the published study, in its order
    # the cut order: lag 64, the luck search, decoupled-ppo's tax, then the dearest task
    cut = study.plans(cuts={"lags": [64], "parts": ["luck", "dppo-tax"], "tasks": ["LunarLander-v3"]})
    assert list(cut) == ["main"] and 64 not in cut["main"].lags and len(cut["main"].tasks) == 3
    cuts, lines = study.plan_cuts(limit=0.01)
    assert cuts["lags"] == [64] and cuts["parts"] == ["luck", "dppo-tax"] and len(cuts["tasks"]) == 2 and "LunarLander-v3" in cuts["tasks"]


def test_the_schedule_space_names_every_schedule_and_its_default_is_the_authors():
    space = study.SPACE
    assert space.variant("esspo", space.default("esspo")) == "batch_size=rollout,kl=sampled,n_epochs=1,n_steps=x0.0625"
    assert space.variant("ppo", space.default("ppo")) == "batch_size=rollout,n_epochs=1,n_steps=x0.0625"
    assert space.variant("esspo", {"learning_rate": 2.0, "n_steps": 1.0, "steps": ONE_PASS, "kl": "analytic"}) == "learning_rate=x2,n_epochs=1"
    pendulum = get_env_config("Pendulum-v1").hyperparams
    study_ = make_study("Pendulum-v1", "esspo", 0, 4, space=space)
    seen: set[str] = set()
    for _ in range(12):  # every asked variant is canonical and in the space
        _, variant = ask_new(study_, "esspo", seen, space=space)
        parsed = parse_variant("esspo", variant)
        hp, kwargs = apply_variant("esspo", variant, pendulum, {})
        assert parsed["n_epochs"][0] == "fix" and hp.n_epochs in (1, 2, 5)
        assert hp.n_steps * 16 in {int(1024 * f * 16) for f in space.rollout_factors}
        if "batch_size" in parsed:
            assert hp.batch_size == hp.n_envs * hp.n_steps  # whole-rollout steps
        else:
            assert hp.n_epochs == 1 and hp.batch_size == 64  # one pass of the Zoo minibatches
        assert 0.25 * 1e-3 <= hp.learning_rate <= 16 * 1e-3 + 1e-12
    assert len(seen) == 12
    ppo = make_study("Pendulum-v1", "ppo", 0, 4, space=space)
    assert all("kl=" not in ask_new(ppo, "ppo", set(), space=space)[1] for _ in range(4))


def test_the_corners_give_the_optimizer_steps_of_each_schedule():
    rows = {(r["env"], r["schedule"]): r for r in study.schedule_corners()}
    pendulum_zoo = rows[("Pendulum-v1", "the Zoo's (published study's default)")]
    assert pendulum_zoo["steps_per_update"] == 10 * 64 and pendulum_zoo["updates_per_run"] == 25
    one_step = rows[("Pendulum-v1", "rollout x0.0625, 1 whole-rollout step")]
    assert (one_step["rollout"], one_step["samples_per_step"], one_step["steps_per_run"]) == (256, 256, 391)


def _tiny_parts(out: Path) -> dict[str, StudyPlan]:
    space = ScheduleSpace(rollout_factors=(0.5, 1.0), steps=(1, 2, ONE_PASS), default_rollout=0.5, own={"ppo": {"clip_range": (0.1, 0.5, 0.2)}})
    common = dict(search_seeds=(100,), score_seeds=(0,), trials=2, round_size=2, tax_lag=1, score_folder=study.SCORE_FOLDER, out=str(out))
    task = (("CartPole-v1", 512),)
    return {
        "main": StudyPlan(tasks=task, arms=("esspo", "ppo"), tax_arms=("esspo",), lags=(0, 1), space=space, search_folder=study.SEARCH_FOLDER, **common),
        "dppo-tax": StudyPlan(tasks=task, arms=("decoupled-ppo",), tax_arms=("decoupled-ppo",), fresh_arms=(), lags=(0, 1),
                              space=study.DPPO_SPACE, search_folder=study.DPPO_SEARCH_FOLDER, **common),
        "luck": StudyPlan(tasks=task, arms=("esspo",), tax_arms=(), lags=(0,), space=space, sampler_seed=1,
                          search_folder=study.LUCK_SEARCH_FOLDER, **common),
    }


@pytest.mark.slow
def test_the_study_runs_its_three_parts_and_replays_from_its_table_alone(tmp_path):
    from adaptive_po.bench.sweep import run_sweep

    results, out = tmp_path / "results", tmp_path / "runs"
    results.mkdir()
    trained: list = []

    def train(specs, max_members=None):
        trained.extend(spec_key(s) for s in specs)
        run_sweep(list(specs), executor="inline", show_progress=False, command="frozen", max_members=max_members)

    parts = _tiny_parts(out)
    assert study.run_study(parts, TableRunner(results / "per_run.csv", train, log=lambda line: None), results, log=lambda line: None)
    table = read_table(results / "per_run.csv")
    folders = [k[0] for k in table]
    assert folders.count(study.SEARCH_FOLDER) == 3 * 2  # esspo fresh and lag 1, ppo fresh: 2 trials x 1 seed
    assert folders.count(study.DPPO_SEARCH_FOLDER) == 2 and folders.count(study.LUCK_SEARCH_FOLDER) == 2
    assert all(row["status"] == "complete" for row in table.values())
    trials = list(csv.DictReader((results / "trials.csv").open()))
    assert {r["part"] for r in trials} == {"main", "dppo-tax", "luck"}
    assert {(r["algo"], r["tuned_at"]) for r in trials if r["part"] == "dppo-tax"} == {("decoupled-ppo", "lag1")}
    selected = json.loads((results / "selected.json").read_text())
    pick = selected["selected"]["CartPole-v1"]["main"]["esspo"]["fresh"]
    assert pick["variant"].endswith("n_steps=x0.5") or "n_steps" not in pick["variant"]
    assert pick["updates_per_run"] == 512 // (8 * (16 if "n_steps=x0.5" in pick["variant"] else 32))
    # the sweep holds esspo's and ppo's fresh picks at lags 0 and 1; the luck pick at lag 0
    score = {(k[2], k[3], k[4]) for k in table if k[0] == study.SCORE_FOLDER}
    for algo in ("esspo", "ppo"):
        variant = selected["selected"]["CartPole-v1"]["main"][algo]["fresh"]["variant"]
        assert {(algo, variant, 0), (algo, variant, 1)} <= score
    assert ("esspo", selected["selected"]["CartPole-v1"]["luck"]["esspo"]["fresh"]["variant"], 0) in score
    assert ("decoupled-ppo", selected["selected"]["CartPole-v1"]["dppo-tax"]["decoupled-ppo"]["lag1"]["variant"], 1) in score
    text = (results / "trials.csv").read_text(), (results / "selected.json").read_text()
    shutil.rmtree(out)

    def must_not_train(specs, max_members=None):
        raise AssertionError(f"trained {len(specs)} runs the table holds")

    assert study.run_study(_tiny_parts(out), TableRunner(results / "per_run.csv", must_not_train, log=lambda line: None), results,
                           log=lambda line: None)
    assert ((results / "trials.csv").read_text(), (results / "selected.json").read_text()) == text


def test_bad_input_is_refused_in_one_line_before_compute(tmp_path, capsys):
    assert study.main(["study", "--results", str(tmp_path), "--hours", "0", "--dry-run"]) == 2
    assert "--hours" in capsys.readouterr().err
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "selection.json").write_text(json.dumps({"tasks": [{"env": "Acrobot-v1", "budget": 50000}]}))
    assert study.main(["study", "--results", str(tmp_path), "--published", str(tmp_path / "pub"), "--dry-run"]) == 2
    assert "not this study's" in capsys.readouterr().err
