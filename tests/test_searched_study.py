"""A searched study trained from its plan file (``adaptive_po.bench.searched``): the frozen-schedule
plan gives the parts, record, calibration and cuts its own module registered; the after-QUATRO plan
is the pre-registered design; a learning-rate part reruns tuned picks at scaled learning rates; and a
tiny plan trains end to end and replays from its table alone."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from adaptive_po.bench import searched
from adaptive_po.bench.frozen import TableRunner, read_table, spec_key
from adaptive_po.studies.plan import load_plan

REPO = Path(__file__).resolve().parents[1]
SCHEDULE = REPO / "docs/results/frozen-schedule"
QUATRO = REPO / "docs/results/frozen-quatro"

TINY = """schema = 1
title = "tiny"
task_noun = "task"

[commands]
run = "python -m adaptive_po.bench.study"
report = "none"

[files]
table = "per_run.csv"
selection = "selected.json"
cuts = "cuts.json"
pilot = "plan.toml"
verdicts = "verdicts.md"
picks = "selected.json"
trials = "trials.csv"
record = "plan.json"

[design]
tasks = [{ env = "CartPole-v1", budget = 512 }]
folder = "tiny-score"
arms = ["quatro"]
lags = [0, 1]
seeds = [0]
configurations = "searched"
limits = ""

[search]
folder = "tiny-search"
seeds = [100]
trials = 2
round_size = 2
sampler_seed = 0
space = "zoo-factors"
own = { quatro = { radius = [0.002, 0.05, 0.01] } }

[tax]
lag = 1
arms = ["quatro"]

[[parts]]
name = "q"
arms = ["quatro"]
tax_arms = ["quatro"]
folder = "tiny-search"
space = "zoo-factors"
own = { quatro = { radius = [0.002, 0.05, 0.01] } }

[[parts]]
name = "lr"
kind = "learning-rate"
arms = ["quatro"]
factors = [4.0]
lags = [0]
folder = "tiny-lr"

[cost]
limit_core_hours = 1.0
recorded_speeds = "population"

[[endpoints]]
id = "Q2"
kind = "non-inferiority"
arm = "quatro"
versus = "quatro"
lag = 0
margin = 0.1
family = "primary"
label = "lag 0"
short = "Q2"

[[secondary]]
kind = "learning-rate"
arms = ["quatro"]
part = "lr"
"""


def _tiny(tmp_path: Path, text: str = TINY):
    (tmp_path / "plan.toml").write_text(text)
    return load_plan(tmp_path / "plan.toml")


def test_the_schedule_plan_gives_the_parts_calibration_and_cuts_it_registered():
    plan = load_plan(SCHEDULE / "plan.toml")
    tasks = searched.fixed_tasks(plan, SCHEDULE)
    assert [e for e, _ in tasks] == ["Acrobot-v1", "Pendulum-v1", "LunarLanderContinuous-v3", "LunarLander-v3"]
    made = searched.all_parts(plan, tasks)
    assert list(made) == ["main", "dppo-tax", "luck"]
    main, dppo, luck = made.values()
    assert main.arms == ("esspo", "ppo") and main.tuning_lags("esspo") == (0, 8) and main.tuning_lags("ppo") == (0,)
    assert dppo.tuning_lags("decoupled-ppo") == (8,) and dppo.swept_arms == ()  # its fresh configuration is the published one
    assert luck.tasks == (("Pendulum-v1", 100_000),) and luck.lags == (0,) and (luck.sampler_seed, main.sampler_seed) == (1, 0)
    assert main.search_runs() == (2 + 1) * 16 * 3 and main.score_runs() == (2 * 7 + 1) * 10
    assert searched.record(made) == json.loads((SCHEDULE / "plan.json").read_text())  # as its slices wrote it
    ratios = searched.source_ratios(plan)
    assert ratios == pytest.approx((1.12, 1.43), abs=0.005)  # the pre-registration's calibration on the published runs
    assert not any(searched.plan_cuts(plan, tasks, ratios)[0].values())  # within its 16 core-hours: nothing cut
    cuts, lines = searched.plan_cuts(plan, tasks, ratios, limit=0.01)  # the registered order, to its floor of 2 tasks
    assert cuts == {"lags": [64], "parts": ["luck", "dppo-tax"], "tasks": ["LunarLander-v3", "LunarLanderContinuous-v3"]}
    assert lines[0].startswith("The dry run before the study's first run") and "x1.12" in lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("study", ["frozen-schedule", "frozen"])
def test_the_generic_runner_replays_a_published_study_byte_for_byte_from_its_table_alone(tmp_path, study):
    """A published study, trained by its own module before the plan file (the frozen study: one
    search, files flat; its extension: three parts), replayed by the generic runner from the
    committed table: nothing trains, and its searches and selections are rewritten byte for byte."""
    for name in ("frozen-schedule", "frozen"):
        shutil.copytree(REPO / "docs/results" / name, tmp_path / name)
    results = tmp_path / study
    for name in ("trials.csv", "selected.json"):
        (results / name).unlink()
    plan = load_plan(results / "plan.toml")
    tasks = searched.fixed_tasks(plan, results)
    cuts, _, committed = searched.committed_cuts(plan, results, tasks, searched.source_ratios(plan))
    assert committed and not any(cuts.values())

    def must_not_train(specs, max_members=None):
        raise AssertionError(f"trained {len(specs)} runs the table holds")

    made = searched.all_parts(plan, tasks, cuts, out=str(tmp_path / "runs"))
    assert searched.run(plan, made, TableRunner(results / "per_run.csv", must_not_train, log=lambda line: None), results, log=lambda line: None)
    for name in ("trials.csv", "selected.json"):
        assert (results / name).read_bytes() == (REPO / "docs/results" / study / name).read_bytes(), name


def test_the_quatro_plan_is_the_preregistered_design():
    plan = load_plan(QUATRO / "plan.toml")
    searched.check_tasks_from(plan)
    tasks = searched.fixed_tasks(plan, QUATRO)
    assert [e for e, _ in tasks] == ["Acrobot-v1", "Pendulum-v1", "LunarLanderContinuous-v3", "LunarLander-v3"]
    made = searched.all_parts(plan, tasks)
    assert list(made) == ["quatro", "r2vpo", "r2vpo-tax", "lr"]
    q, r, rt, lr = made.values()
    assert (q.arms, q.tax_arms, q.trials, q.round_size, q.search_seeds) == (("quatro",), ("quatro",), 16, 4, (100, 101, 102))
    assert (q.search_runs(), q.score_runs()) == (96, 80) and (r.search_runs(), r.score_runs()) == (48, 70)
    assert (rt.search_runs(), rt.score_runs()) == (48, 10) and lr.runs() == 100
    assert lr.from_arms == ("esspo", "ppo", "decoupled-ppo") and lr.source == (REPO / "docs/results/frozen").resolve()
    cuts, lines = searched.plan_cuts(plan, tasks, searched.source_ratios(plan))
    assert cuts["lags"] == [64] and cuts["tasks"] == ["LunarLander-v3"] and not cuts["parts"] and "3.6 core-hours" in lines[-1]
    assert [(e.id, e.family) for e in plan.endpoints] == [("Q1", "primary"), ("Q2", "primary"), ("Q3", "primary"), ("R1", "primary"),
                                                          ("R2", "primary"), ("R3", "primary"), ("Q-tax", ""), ("R-tax", "")]
    # the published study's fresh picks are there for every arm the learning-rate part reads from it
    theirs = lr.source_picks()
    for env, budget in lr.tasks:
        other = {a: v["fresh"]["variant"] for a, v in theirs[env].items() if isinstance(v, dict) and "fresh" in v}
        specs = lr.specs(env, budget, {"quatro": "radius=0.02", "r2vpo": ""}, other)
        assert len(specs) == 100 and {s.dials.policy_lag for s in specs} == {0, 8} and {s.seed for s in specs} == set(range(5))


def test_the_tasks_must_be_those_of_the_study_they_come_from(tmp_path):
    text = (QUATRO / "plan.toml").read_text().replace('{ env = "Pendulum-v1", budget = 100_000 }', '{ env = "Pendulum-v1", budget = 200_000 }')
    (tmp_path / "frozen-quatro").mkdir()
    shutil.copytree(REPO / "docs/results/frozen", tmp_path / "frozen")
    plan = _tiny(tmp_path / "frozen-quatro", text)
    with pytest.raises(ValueError, match=r"design\.tasks .* are not those of .*frozen"):
        searched.check_tasks_from(plan)


@pytest.mark.parametrize("variant, factor, scaled", [
    ("", 4.0, "learning_rate=x4"),
    ("batch_size=x0.5,learning_rate=x0.26,n_epochs=x0.5", 4.0, "batch_size=x0.5,learning_rate=x1.04,n_epochs=x0.5"),
    ("clip_range=0.11,learning_rate=x0.87", 16.0, "clip_range=0.11,learning_rate=x13.92"),
])
def test_a_learning_rate_factor_multiplies_the_tuned_one(variant, factor, scaled):
    assert searched.scale_learning_rate("ppo" if "clip" in variant else "esspo", variant, factor) == scaled


def test_a_learning_rate_part_without_its_picks_is_refused_naming_the_arm(tmp_path):
    plan = _tiny(tmp_path)
    lr = searched.all_parts(plan, plan.design.tasks)["lr"]
    with pytest.raises(ValueError, match=r"lr: no fresh pick of \['quatro'\] on CartPole-v1"):
        lr.specs("CartPole-v1", 512, {}, {})


@pytest.mark.parametrize("old, new, named", [
    ("factors = [4.0]", "factors = [1.0, 4.0]", r"parts\[1\]\.factors: x1 is the sweep's own runs"),
    ('kind = "learning-rate"\narms = ["quatro"]', 'kind = "learning-rate"\narms = ["ppo"]', r"parts\[1\]\.arms: the design's arms only"),
    ("lags = [0]\nfolder", "lags = [4]\nfolder", r"parts\[1\]\.tasks: the design's tasks, lags and seeds only"),
    ('kind = "learning-rate"', 'kind = "learning-rate"\nfrom = "../frozen"', r"parts\[1\]\.from: given exactly where from_arms are"),
    ('kind = "learning-rate"', 'kind = "fine-tune"', r"parts\[1\]\.kind: expected search or learning-rate"),
    ('part = "lr"', 'part = "q"', r"secondary\[0\]\.part: a learning-rate table names its learning-rate part"),
])
def test_a_malformed_learning_rate_part_is_one_line_naming_the_key(tmp_path, old, new, named):
    assert old in TINY
    with pytest.raises(ValueError, match=named) as err:
        _tiny(tmp_path, TINY.replace(old, new, 1))
    assert "\n" not in str(err.value)


def test_a_learning_rate_part_comes_after_every_search_part(tmp_path):
    head, q, lr = TINY.split("[[parts]]\n")
    lr, tail = lr.split("[cost]")
    with pytest.raises(ValueError, match="a learning-rate part comes after every search part"):
        _tiny(tmp_path, f"{head}[[parts]]\n{lr}[[parts]]\n{q}[cost]{tail}")


@pytest.mark.slow
@pytest.mark.parametrize("space", ["zoo-factors", "schedule"])
def test_a_tiny_plan_trains_its_parts_and_replays_from_its_table_alone(tmp_path, space):
    from adaptive_po.bench.sweep import run_sweep

    results, out = tmp_path / "results", tmp_path / "runs"
    results.mkdir()
    plan = _tiny(results, TINY.replace('space = "zoo-factors"', f'space = "{space}"'))

    def train(specs, max_members=None):
        run_sweep(list(specs), executor="inline", show_progress=False, command="study", max_members=max_members)

    made = searched.all_parts(plan, plan.design.tasks, out=str(out))
    quiet = lambda line: None  # noqa: E731
    assert searched.run(plan, made, TableRunner(results / "per_run.csv", train, log=quiet), results, log=quiet)
    table = read_table(results / "per_run.csv")
    assert all(row["status"] == "complete" for row in table.values())
    folders = [k[0] for k in table]
    assert folders.count("tiny-search") == 2 * 2  # fresh and lag 1: 2 trials x 1 seed
    trials = list(csv.DictReader((results / "trials.csv").open()))
    assert {(r["part"], r["tuned_at"]) for r in trials} == {("q", "fresh"), ("q", "lag1")}
    selected = json.loads((results / "selected.json").read_text())
    assert selected["plan"] == searched.record(made)
    fresh = selected["selected"]["CartPole-v1"]["q"]["quatro"]["fresh"]["variant"]
    score = {(k[2], k[3], k[4]) for k in table if k[0] == "tiny-score"}
    assert {("quatro", fresh, 0), ("quatro", fresh, 1)} <= score
    lr = [(k[2], k[3], k[4]) for k in table if k[0] == "tiny-lr"]
    assert lr == [("quatro", searched.scale_learning_rate("quatro", fresh, 4.0), 0)]
    text = (results / "trials.csv").read_text(), (results / "selected.json").read_text()
    shutil.rmtree(out)

    def must_not_train(specs, max_members=None):
        raise AssertionError(f"trained {len(specs)} runs the table holds: {[spec_key(s) for s in specs]}")

    made = searched.all_parts(plan, plan.design.tasks, out=str(out))
    assert searched.run(plan, made, TableRunner(results / "per_run.csv", must_not_train, log=quiet), results, log=quiet)
    assert ((results / "trials.csv").read_text(), (results / "selected.json").read_text()) == text


def test_the_dry_run_of_the_quatro_plan_writes_nothing(tmp_path, capsys):
    """Before the first run the dry run decides the cuts by the registered order (on a copy without
    the committed files); on the study's folder it reads the committed cuts; neither writes a file."""
    from adaptive_po.bench import study

    for name in ("frozen-quatro", "frozen"):
        shutil.copytree(REPO / "docs/results" / name, tmp_path / name)
    fresh = tmp_path / "frozen-quatro"
    for name in ("cuts.json", "per_run.csv", "per_run.csv.sha256", "trials.csv", "selected.json", "plan.json"):
        (fresh / name).unlink(missing_ok=True)
    before = sorted(p.name for p in fresh.iterdir())
    assert study.main(["dry-run", "--results", str(fresh), "--out", str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    assert "1608 runs" in err and "cut lag 64" in err and "cut task LunarLander-v3" in err and "1196 runs" in err
    assert sorted(p.name for p in fresh.iterdir()) == before
    if (QUATRO / "cuts.json").exists():  # the study has started: its committed cuts stand
        before = {p.name: p.read_bytes() for p in QUATRO.iterdir() if p.is_file()}
        assert study.main(["dry-run", "--results", str(QUATRO), "--out", str(tmp_path / "runs")]) == 0
        err = capsys.readouterr().err
        assert "cuts as committed" in err and "'tasks': ['LunarLander-v3']" in err and "1196 runs" in err
        assert {p.name: p.read_bytes() for p in QUATRO.iterdir() if p.is_file()} == before


def test_a_searched_design_on_fixed_tasks_has_no_pilot_command(tmp_path, capsys):
    from adaptive_po.bench import study

    _tiny(tmp_path)
    assert study.main(["pilot", "--results", str(tmp_path)]) == 2
    assert "has no pilot: its commands are dry-run and study" in capsys.readouterr().err
    assert not (tmp_path / "per_run.csv").exists() and not (tmp_path / "cuts.json").exists()


def _flat_tiny() -> str:
    """The tiny plan without parts (one search, written flat as the frozen study's files are), two
    arms, ppo also tuned at the tax lag, two scoring seeds."""
    text = TINY.split("[[parts]]")[0] + "[cost]" + TINY.split("[cost]")[1].split("[[secondary]]")[0]
    text = text.replace('arms = ["quatro"]\nlags = [0, 1]\nseeds = [0]', 'arms = ["esspo", "ppo"]\nlags = [0, 1]\nseeds = [0, 1]')
    text = text.replace('[tax]\nlag = 1\narms = ["quatro"]', '[tax]\nlag = 1\narms = ["ppo"]').replace("trials = 2", "trials = 3")
    text = text.replace('own = { quatro = { radius = [0.002, 0.05, 0.01] } }', 'own = { ppo = { clip_range = [0.1, 0.5, 0.2] } }')
    return text.replace('arm = "quatro"\nversus = "quatro"', 'arm = "esspo"\nversus = "ppo"')


@pytest.mark.slow
def test_a_study_stopped_after_a_slice_continues_from_its_committed_table_alone(tmp_path):
    """Slice 1 stops after its first batch; the run folders are then deleted (a fresh machine has
    only the committed table); slice 2 trains exactly what the table lacks and never a run it
    holds; a third invocation, again without run folders, replays the whole study from the table,
    trains nothing, and writes its searches and picks byte for byte, flat (no parts)."""
    from adaptive_po.bench.sweep import run_sweep

    results, out = tmp_path / "results", tmp_path / "runs"
    results.mkdir()
    plan = _tiny(results, _flat_tiny())
    assert not plan.parts and plan.design.arms == ("esspo", "ppo")
    trained: list[list[tuple]] = []
    box: list[TableRunner] = []

    def train(specs, max_members=None):
        trained.append([spec_key(s) for s in specs])
        run_sweep(list(specs), executor="inline", show_progress=False, command="study", max_members=max_members)
        if len(trained) == 1 and box:
            box[0].deadline = 0.0  # the slice's time is over after its first batch

    quiet = lambda line: None  # noqa: E731
    made = searched.all_parts(plan, plan.design.tasks, out=str(out))
    box.append(TableRunner(results / "per_run.csv", train, log=quiet))
    assert searched.run(plan, made, box[0], results, log=quiet) is False
    first = set(read_table(results / "per_run.csv"))
    assert first and len(trained) == 1 and first == set(trained[0])
    shutil.rmtree(out)  # the next slice runs on a machine that has only the committed table

    trained.clear()
    box.clear()
    assert searched.run(plan, made, TableRunner(results / "per_run.csv", train, log=quiet), results, log=quiet)
    again = {k for batch in trained for k in batch}
    assert not again & first  # nothing of the table was trained again
    final = read_table(results / "per_run.csv")
    assert set(final) == first | again
    folders = [k[0] for k in final]
    assert folders.count("tiny-search") == made["main"].search_runs() == 9  # esspo fresh, ppo fresh and lag 1: 3 trials x 1 seed
    assert 8 <= folders.count("tiny-score") <= 10  # sweep 2 arms x 2 lags x 2 seeds; ppo's tax shared where its lag-1 pick is the fresh one
    trials, picks = (results / "trials.csv").read_text(), json.loads((results / "selected.json").read_text())
    assert trials.startswith("env,budget,algo,tuned_at,") and "part" not in trials.splitlines()[0]
    assert picks["plan"] == made["main"].record() and set(picks["selected"]["CartPole-v1"]) == {"budget", "updates_per_run", "esspo", "ppo"}
    shutil.rmtree(out)

    def must_not_train(specs, max_members=None):
        raise AssertionError(f"trained {len(specs)} runs the table holds")

    assert searched.run(plan, made, TableRunner(results / "per_run.csv", must_not_train, log=quiet), results, log=quiet)
    assert (results / "trials.csv").read_text() == trials and json.loads((results / "selected.json").read_text()) == picks
