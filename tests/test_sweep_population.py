"""The bench on the population engine: jobs of many runs, the same run folders as the process
engine, resume, a killed population worker, and the dry run's estimate. Real worker processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from adaptive_po.dials import DataDials, dial_product
from adaptive_po.contract import COMPLETE, FAILED, STATUS_FILE, SUMMARY_FILE
from adaptive_po.bench.jobs import group_populations, population_key
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.bench.jobs import plan_jobs
from adaptive_po.bench.grid import Grid, expand_grid
from adaptive_po.bench.sweep import run_sweep
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

from cli_here import cli_here  # noqa: E402 - tests/cli_here.py: a command line in this process

def bench(out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--envs", "CartPole-v1", "--algos", "esspo,ppo",
        "--seeds", "2", "--lags", "0,2", "--timesteps", "512", "--workers", "2", "--out", str(out), "--device", "cpu",
        "--no-report", "--no-progress", *extra,
    ]
    return cli_here(cmd, env=ENV)  # the driver here; its population workers are processes of their own


def run_files(out: Path) -> dict[str, list[str]]:
    """Each run folder (relative to ``out``) and the files in it; TensorBoard event files, named
    after the time, host and process, are counted by folder."""
    runs = {}
    for complete in out.rglob(COMPLETE):
        run_dir = complete.parent
        names = []
        for path in run_dir.rglob("*"):
            if path.is_file():
                rel = path.relative_to(run_dir)
                names.append(str(rel.parent / "events") if rel.name.startswith("events.out.tfevents") else str(rel))
        runs[str(run_dir.relative_to(out))] = sorted(names)
    return runs


def specs_of(out: Path, **kw) -> list[RunSpec]:
    base = dict(suite="quick", envs=["CartPole-v1"], algos=["esspo", "ppo"], seeds=[0, 1], conditions=[DataDials()])
    return expand_grid(Grid(**{**base, **kw}, device="cpu", out=str(out)))


# -- jobs -----------------------------------------------------------------------------------------
def test_populations_respect_the_key_and_the_size_limit(tmp_path):
    specs = specs_of(tmp_path, envs=["CartPole-v1", "Acrobot-v1"], seeds=[0, 1, 2], conditions=dial_product(policy_lag=[0, 2], action_noise=[0.0, 0.5]), timesteps=4096)
    specs += specs_of(tmp_path / "other", seeds=[0, 1], timesteps=2048)  # another budget: other populations
    groups = group_populations(specs, max_members=5)
    assert sorted((str(s.run_dir), s.total_timesteps) for g in groups for s in g) == sorted((str(s.run_dir), s.total_timesteps) for s in specs)
    assert all(1 <= len(g) <= 5 and len({population_key(s) for s in g}) == 1 for g in groups)
    by_key: dict = {}
    for group in groups:
        by_key.setdefault(population_key(group[0]), []).append(len(group))
    # 2 envs x 2 algos x 1 budget: 12 runs each -> 5 + 5 + 2; 2 algos x the other budget: 2 runs each
    assert len(by_key) == 6 and sorted(map(sorted, by_key.values())) == [[2]] * 2 + [[2, 5, 5]] * 4
    # members keep the sweep's order; different seeds, lags and noise share a population
    first = groups[0]
    assert first == [s for s in specs if population_key(s) == population_key(first[0])][:5]
    assert len({(s.seed, s.dials.policy_lag, s.dials.action_noise) for s in first}) == 5
    assert [len(g) for g in group_populations(specs[:3], max_members=1)] == [1, 1, 1]
    with pytest.raises(ValueError, match="max_members"):
        group_populations(specs, max_members=0)


def test_plan_jobs_stacks_cnn_runs_too(tmp_path):
    cartpole = specs_of(tmp_path, timesteps=512)
    pong = [RunSpec(suite="quick", env="Pong-v5", algo=a, seed=0, total_timesteps=2048, out=str(tmp_path)) for a in ("esspo", "ppo")]
    jobs = plan_jobs(cartpole + pong, "population")
    assert [(j.population, len(j.specs)) for j in jobs] == [(True, 2), (True, 2), (True, 1), (True, 1)]
    assert [s for j in jobs for s in j.specs] == [*[s for s in cartpole if s.algo == "esspo"], *[s for s in cartpole if s.algo == "ppo"], *pong]
    process = plan_jobs(cartpole + pong, "process")
    assert [(j.population, j.specs) for j in process] == [(False, (s,)) for s in cartpole + pong]
    assert [len(j.specs) for j in plan_jobs(cartpole, "population", max_members=1)] == [1, 1, 1, 1]
    with pytest.raises(ValueError, match="'threads'"):
        plan_jobs(cartpole, "threads")


# -- the bench ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_population_and_process_engines_write_the_same_runs_and_resume(tmp_path):
    population = bench(tmp_path / "population", "--engine", "population")
    assert population.returncode == 0, population.stderr
    assert "8 complete, 0 skipped (already complete), 0 failed" in population.stderr
    # the process engine's runs, one after another in one process (the executor is not what differs)
    process = bench(tmp_path / "process", "--engine", "process", "--executor", "inline", "--workers", "1")
    assert process.returncode == 0, process.stderr
    assert "8 complete" in process.stderr and not (tmp_path / "process" / "quick" / ".logs").exists()  # no worker
    files = run_files(tmp_path / "population")
    assert len(files) == 8 and files == run_files(tmp_path / "process")
    # the inline executor computes what the workers did, bit for bit
    inline = run_sweep(specs_of(tmp_path / "inline", conditions=dial_product(policy_lag=[0, 2]), timesteps=512, tensorboard=False),
                       executor="inline", show_progress=False)
    assert len(inline.complete) == 8 and run_files(tmp_path / "inline") == files
    for summary in (tmp_path / "population").rglob(SUMMARY_FILE):
        twin = tmp_path / "inline" / summary.relative_to(tmp_path / "population")
        assert json.loads(twin.read_text())["final_eval_return_mean"] == json.loads(summary.read_text())["final_eval_return_mean"]
    for run_dir in (tmp_path / "population").rglob(COMPLETE):
        assert not (run_dir.parent / FAILED).exists() and not (run_dir.parent / STATUS_FILE).exists()
        config = json.loads((run_dir.parent / "config.json").read_text())
        assert config["total_timesteps"] == 512 and config["env"] == "CartPole-v1"
    # two population workers (esspo, ppo), each with the four runs of its algorithm
    logs = tmp_path / "population" / "quick" / ".logs"
    jobs = [json.loads(p.read_text()) for p in logs.glob("*.spec.json")]
    assert sorted((len(j), {s["algo"] for s in j}.pop()) for j in jobs) == [(4, "esspo"), (4, "ppo")]

    again = bench(tmp_path / "population", "--engine", "population")
    assert again.returncode == 0, again.stderr
    assert "0 complete, 8 skipped (already complete), 0 failed" in again.stderr
    assert run_files(tmp_path / "population") == files


class WorkerKiller(threading.Thread):
    """SIGKILLs the first population worker under ``out`` once one of its runs has progressed."""

    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True)
        self.out = out
        self.killed: list[RunSpec] | None = None
        self.stop = threading.Event()

    def _population_worker(self) -> tuple[int, Path] | None:
        for entry in Path("/proc").iterdir():
            try:
                args = (entry / "cmdline").read_bytes().decode().split("\0") if entry.name.isdigit() else []
            except OSError:
                continue
            if "_run_population" in args and str(self.out) in " ".join(args):
                return int(entry.name), Path(args[args.index("_run_population") + 1])
        return None

    def run(self) -> None:
        while not self.stop.is_set():
            found = self._population_worker()
            if found is not None:
                pid, spec_path = found
                try:
                    members = [RunSpec.from_dict(d) for d in json.loads(spec_path.read_text())]
                except (OSError, ValueError):
                    members = []
                started = [m for m in members if (m.run_dir / STATUS_FILE).exists() or (m.run_dir / "progress.csv").exists()]
                if started and not any((m.run_dir / COMPLETE).exists() for m in members):
                    os.kill(pid, signal.SIGKILL)
                    self.killed = members
                    return
            time.sleep(0.01)


@pytest.mark.slow
def test_killed_population_worker_fails_its_runs_and_the_sweep_goes_on(tmp_path):
    out = tmp_path / "runs"
    specs = specs_of(out, timesteps=4096)  # esspo and ppo populations, two seeds each; 16 updates to be caught in
    killer = WorkerKiller(out)
    killer.start()
    try:
        first = run_sweep(specs, workers=1, show_progress=False, engine="population")
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed is not None, "no population worker was caught mid-run"
    victims = {str(s.relative_dir) for s in killer.killed}
    assert len(victims) == 2 and {s.algo for s in killer.killed} == {"esspo"}
    assert sorted(r["relative_dir"] for r in first.failed) == sorted(victims)
    assert all("without a result" in r["error"] for r in first.failed)
    assert sorted(r["relative_dir"] for r in first.complete) == sorted(str(s.relative_dir) for s in specs if s.algo == "ppo")
    for spec in killer.killed:
        assert (spec.run_dir / FAILED).is_file() and not (spec.run_dir / COMPLETE).exists()
        assert "without a result" in (spec.run_dir / FAILED).read_text()

    second = run_sweep(specs, workers=1, show_progress=False, engine="population")
    assert second.ok and sorted(r["relative_dir"] for r in second.complete) == sorted(victims) and len(second.skipped) == 2
    for spec in specs:
        assert (spec.run_dir / COMPLETE).is_file() and not (spec.run_dir / FAILED).exists()


def test_the_inline_executor_trains_here_resumes_and_refuses_workers(tmp_path):
    out = tmp_path / "runs"
    specs = specs_of(out, algos=["ppo"], timesteps=256)
    with pytest.raises(ValueError, match="workers=2"):
        run_sweep(specs, workers=2, executor="inline", show_progress=False)
    first = run_sweep(specs, executor="inline", show_progress=False)
    assert first.ok and len(first.complete) == 2 and not (out / "quick" / ".logs").exists()  # no worker, no worker files
    assert all((s.run_dir / COMPLETE).is_file() for s in specs)
    again = run_sweep(specs, executor="inline", show_progress=False)
    assert not again.complete and len(again.skipped) == 2
    with pytest.raises(ValueError, match="'thread'.*local, inline, ray"):
        run_sweep(specs, executor="thread", show_progress=False)


def test_dry_run_names_the_engine_and_bad_workers_fail_first(tmp_path):
    def dry(*extra: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--dry-run", "--list-runs", "--out", str(tmp_path), "--device", "cpu", *extra]
        return cli_here(cmd, env=ENV)

    default = dry()
    assert default.returncode == 0, default.stderr
    assert "cost estimate (population engine)" in default.stderr and "CPU-core-minutes" in default.stderr  # under an hour
    process = dry("--engine", "process")
    assert process.returncode == 0 and "cost estimate (process engine)" in process.stderr and "population engine" not in process.stderr
    assert default.stdout == process.stdout and len(default.stdout.split()) == 40  # the same runs
    atari = dry("--suite", "atari")
    assert atari.returncode == 0 and "225,000,000 agent steps" in atari.stderr, atari.stderr
    assert "on one GPU machine with 16 cores" in atari.stderr and "`make gpu-check` measures it" in atari.stderr
    assert "measured where: ALE steps/s per core" in atari.stderr and "cost estimate (population engine)" not in atari.stderr
    smoke = dry("--suite", "atari-smoke")  # what `make bench-atari` runs without a GPU
    assert smoke.returncode == 0 and "Phoenix-v5: 4 runs" in smoke.stderr and "4,096 steps each" in smoke.stderr, smoke.stderr

    for workers in ("0", "-3"):
        bad = dry("--workers", workers)
        assert bad.returncode == 2 and f"--workers must be >= 1, got {workers}" in bad.stderr, bad.stderr
        assert not bad.stdout
    engine = dry("--engine", "threads")
    assert engine.returncode == 2 and "'threads'" in engine.stderr
    assert not any(tmp_path.iterdir())


def test_the_estimate_uses_each_engines_measured_speed_per_environment(monkeypatch):
    from adaptive_po.bench.estimate import POPULATION_SECONDS_PER_MILLION, PROCESS_SECONDS_PER_MILLION, describe_grid, population_speed
    from adaptive_po.bench.grid import Grid, expand_grid
    specs = expand_grid(Grid(suite="quick", envs=["CartPole-v1"], algos=["esspo"], seeds=[0, 1], conditions=[DataDials()], timesteps=1_000_000, device="cpu"))
    for engine in ("population", "process"):
        text = describe_grid(specs, engine)
        speed = population_speed(POPULATION_SECONDS_PER_MILLION["CartPole-v1"], 2) if engine == "population" else PROCESS_SECONDS_PER_MILLION["CartPole-v1"]
        minutes = 2 * speed / 60  # under an hour: in minutes
        assert minutes < 60 and f"~ {minutes:.0f} CPU-core-minutes" in text and "not measured" not in text
    long = expand_grid(Grid(suite="quick", envs=["CartPole-v1"], algos=["esspo"], seeds=list(range(40)), conditions=[DataDials()], timesteps=1_000_000, device="cpu"))
    hours = 40 * PROCESS_SECONDS_PER_MILLION["CartPole-v1"] / 3600
    assert hours >= 1 and f"~ {hours:.1f} CPU-core-hours" in describe_grid(long, "process")
    # an environment that neither engine has measured is priced at the mean, and the dry run says so
    # (the tables are trimmed here, so that measuring one more environment does not change the test)
    from adaptive_po.bench import estimate

    monkeypatch.setattr(estimate, "POPULATION_SECONDS_PER_MILLION", {e: v for e, v in POPULATION_SECONDS_PER_MILLION.items() if e != "Acrobot-v1"})
    monkeypatch.setattr(estimate, "PROCESS_SECONDS_PER_MILLION", {e: v for e, v in PROCESS_SECONDS_PER_MILLION.items() if e != "Acrobot-v1"})
    other = expand_grid(Grid(suite="quick", envs=["Acrobot-v1"], algos=["esspo"], seeds=[0], conditions=[DataDials()], timesteps=100_000, device="cpu"))
    for engine in ("population", "process"):
        assert "not measured, estimated at the mean measured speed: Acrobot-v1" in describe_grid(other, engine)
    monkeypatch.undo()
    mountain = expand_grid(Grid(suite="quick", envs=["MountainCar-v0"], algos=["esspo"], seeds=[0], conditions=[DataDials()], device="cpu"))
    assert "not measured" not in describe_grid(mountain, "population")  # measured on 2026-12-02
    # each engine has its own table: an environment measured for populations only is priced at the
    # process engine's mean when it runs as processes
    pendulum = expand_grid(Grid(suite="quick", envs=["Pendulum-v1"], algos=["esspo"], seeds=[0], conditions=[DataDials()], device="cpu"))
    monkeypatch.setattr(estimate, "PROCESS_SECONDS_PER_MILLION", {e: v for e, v in PROCESS_SECONDS_PER_MILLION.items() if e != "Pendulum-v1"})
    assert "not measured" not in describe_grid(pendulum, "population")
    assert "not measured, estimated at the mean measured speed: Pendulum-v1" in describe_grid(pendulum, "process")


def test_a_population_run_is_priced_at_the_size_of_its_population(monkeypatch):
    from adaptive_po.bench import estimate
    from adaptive_po.bench.estimate import population_speed

    # linear in 1/size between measured sizes; above the largest at the largest; below the smallest
    # along the line of the two smallest, never cheaper than the smallest
    speeds = {10: 46.0, 50: 30.0}
    assert population_speed(speeds, 10) == 46.0 and population_speed(speeds, 50) == 30.0
    assert population_speed(speeds, 30) == pytest.approx(30.0 + 16.0 * (1 / 30 - 1 / 50) / (1 / 10 - 1 / 50))
    assert population_speed(speeds, 64) == 30.0 and population_speed(speeds, 500) == 30.0
    assert population_speed(speeds, 5) == pytest.approx(30.0 + 16.0 * (1 / 5 - 1 / 50) / (1 / 10 - 1 / 50))
    assert population_speed({10: 30.0, 50: 40.0}, 2) == 30.0  # a noisy slope is not extrapolated below the smallest
    assert population_speed({50: 76.0}, 3) == 76.0 and population_speed({50: 76.0}, 64) == 76.0
    three = {5: 60.0, 10: 46.0, 50: 30.0}
    assert population_speed(three, 7) == pytest.approx(46.0 + 14.0 * (1 / 7 - 1 / 10) / (1 / 5 - 1 / 10))
    for bad in ({}, {0: 3.0}, {10: -1.0}):
        with pytest.raises(ValueError, match="measured speeds"):
            population_speed(bad, 10)
    with pytest.raises(ValueError, match="at least one member, got 0"):
        population_speed(speeds, 0)

    # the estimate prices each run at the population the sweep plans for it: 50 runs of one
    # configuration train as one population of 50, 5 runs as one of 5
    table = {**estimate.POPULATION_SECONDS_PER_MILLION, "CartPole-v1": speeds}
    wide = expand_grid(Grid(suite="quick", envs=["CartPole-v1"], algos=["esspo"], seeds=list(range(50)), conditions=[DataDials()], timesteps=1_000_000, device="cpu"))
    narrow = wide[:5]
    assert [len(g) for g in group_populations(wide)] == [50]
    monkeypatch.setattr(estimate, "POPULATION_SECONDS_PER_MILLION", table)
    assert estimate.estimate_cost(wide).seconds["population"] == pytest.approx(50 * 30.0)
    assert estimate.estimate_cost(narrow).seconds["population"] == pytest.approx(5 * population_speed(speeds, 5))
    # two configurations never share a population, whatever their count
    mixed = expand_grid(Grid(suite="quick", envs=["CartPole-v1"], algos=["esspo", "ppo"], seeds=list(range(25)), conditions=[DataDials()], timesteps=1_000_000, device="cpu"))
    assert estimate.estimate_cost(mixed).seconds["population"] == pytest.approx(50 * population_speed(speeds, 25))
    assert estimate.estimate_cost(wide, "process").seconds["process"] == pytest.approx(50 * estimate.PROCESS_SECONDS_PER_MILLION["CartPole-v1"])
