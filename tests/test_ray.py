"""The sweep on Ray: same results as the local executor, loopback only, a killed worker retried
(a population's or a single run's).

Real Ray, on local instances bound to 127.0.0.1 that the tests start and always stop.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

# Ray's token authentication, which a new local instance turns on by default, is used by a driver
# that connects with an explicit address only if RAY_AUTH_MODE=token is set before Ray is
# imported (Ray reads it once); the token itself is ~/.ray/auth_token, made by the first instance.
_AUTH_MODE_BEFORE = os.environ.get("RAY_AUTH_MODE")


def _restore_auth_mode_env() -> None:
    if _AUTH_MODE_BEFORE is None:
        os.environ.pop("RAY_AUTH_MODE", None)
    else:
        os.environ["RAY_AUTH_MODE"] = _AUTH_MODE_BEFORE


os.environ.setdefault("RAY_AUTH_MODE", "token")
try:
    import ray
except ImportError:
    _restore_auth_mode_env()
    pytest.skip("Ray is not installed: pip install 'adaptive-po[distributed]'", allow_module_level=True)

from adaptive_po.dials import DataDials, dial_product
from adaptive_po.bench import ray_executor  # noqa: E402
from adaptive_po.bench.jobs import Job, plan_jobs  # noqa: E402
from adaptive_po.bench.grid import Grid, expand_grid
from adaptive_po.bench.sweep import run_sweep  # noqa: E402
from adaptive_po.bench.ray_executor import ATTEMPT_LOG_ENV, check_ray_available, land, run_ray  # noqa: E402
from adaptive_po.contract import COMPLETE, FAILED, atomic_write_text  # noqa: E402
from adaptive_po.bench.run_folder import RunSpec  # noqa: E402

# one xdist worker runs this whole module (`make test`: --dist loadgroup): its tests share the
# module's Ray head and never start two local Ray instances (ports, ~/.ray, CPUs) at once
pytestmark = pytest.mark.xdist_group("ray")

TIME_COLUMNS = {"time_elapsed"}
GRID = dict(suite="quick", envs=["CartPole-v1"], algos=["esspo", "ppo"], seeds=[0, 1], conditions=dial_product(policy_lag=[0, 2]))
TIMESTEPS = 1024  # 4 updates: a killer still finds a worker mid-run (after its first update, before its summary)


def grid_specs(out: Path, **overrides) -> list[RunSpec]:
    return expand_grid(Grid(**{**GRID, **overrides}, timesteps=TIMESTEPS, device="cpu", out=str(out)))


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return [{k: v for k, v in row.items() if k not in TIME_COLUMNS} for row in csv.DictReader(fh)]


def run_record(run_dir: Path) -> dict:
    """What must not depend on the executor: configuration (minus versions), curves, final return."""
    config = json.loads((run_dir / "config.json").read_text())
    config.pop("versions")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "config": config,
        "progress": read_csv(run_dir / "progress.csv"),
        "eval": read_csv(run_dir / "eval.csv"),
        "final": (summary["final_eval_return_mean"], summary["final_eval_return_std"], summary["timesteps"], summary["updates"]),
    }


def assert_clean_tree(out: Path, specs: list[RunSpec]) -> None:
    """Exactly the expected run folders, each complete; no hidden staging or old folders."""
    seeds = {p for p in out.rglob("seed-*") if p.is_dir()}
    assert seeds == {s.run_dir for s in specs}
    for spec in specs:
        assert (spec.run_dir / COMPLETE).is_file() and not (spec.run_dir / FAILED).exists()
    hidden = [p for p in out.rglob(".*") if p.name not in (".logs",) and ".logs" not in p.parts]
    assert hidden == [], hidden


# -- fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def _restore_auth_mode():
    """Undo the RAY_AUTH_MODE set above once this module is done (ray has read it by then)."""
    yield
    _restore_auth_mode_env()


HEAD_SCRIPT = """
import sys
from adaptive_po.bench.ray_executor import start_local_ray
print(start_local_ray(num_cpus=2), flush=True)
sys.stdin.read()  # until the test closes the pipe
import ray
ray.shutdown()
"""


@pytest.fixture(scope="module")
def attempt_log(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("attempts")


@contextlib.contextmanager
def local_head(attempt_log: Path):
    """A local Ray instance (2 CPUs, loopback) in a child process, stopped on leaving; yields
    (address, the process). Its workers record each attempt in ``attempt_log``
    (``ADAPTIVE_PO_RAY_ATTEMPT_LOG``)."""
    env = {**os.environ, ATTEMPT_LOG_ENV: str(attempt_log), "OMP_NUM_THREADS": "1"}
    head = subprocess.Popen([sys.executable, "-c", HEAD_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        address = head.stdout.readline().strip()
        assert address.startswith("127.0.0.1:"), f"the Ray head did not start (got {address!r})"
        yield address, head
    finally:
        head.stdin.close()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()


@pytest.fixture(scope="module")
def ray_head(attempt_log):
    """The module's local Ray instance (:func:`local_head`); yields (address, pid)."""
    with local_head(attempt_log) as (address, head):
        yield address, head.pid


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory) -> dict[str, dict]:
    """The grid through the inline executor (what the local executor's workers compute, bit for bit:
    tests/test_sweep_population.py): the results the Ray executor must reproduce."""
    out = tmp_path_factory.mktemp("local")
    specs = grid_specs(out)
    result = run_sweep(specs, workers=1, executor="inline", show_progress=False)  # the same jobs as the local workers', bit for bit
    assert len(result.complete) == len(specs), result.failed
    return {str(s.relative_dir): run_record(s.run_dir) for s in specs}


class Killer(threading.Thread):
    """SIGKILLs the first worker seen mid-run (after its first update, before its summary)."""

    def __init__(self, attempt_log: Path) -> None:
        super().__init__(daemon=True)
        self.attempt_log = attempt_log
        self.killed: dict | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and self.killed is None:
            for path in sorted(self.attempt_log.glob("*.json")):
                record = json.loads(path.read_text())
                run_dir = Path(record["workdir"]) / record["relative_dir"]
                if (run_dir / "progress.csv").exists() and not (run_dir / "summary.json").exists():
                    os.kill(record["pid"], signal.SIGKILL)
                    self.killed = record
                    return
            time.sleep(0.01)


def attempts(attempt_log: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in attempt_log.glob("*.json")]


# -- tests ----------------------------------------------------------------------------------------
def test_check_ray_available_names_the_extra(monkeypatch):
    check_ray_available()
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    with pytest.raises(ValueError, match=r"pip install 'adaptive-po\[distributed\]'"):
        check_ray_available()


def test_the_seconds_a_head_may_go_unanswered_are_a_setting_and_a_bad_one_is_named(monkeypatch):
    from adaptive_po.bench.ray_executor import CLUSTER_CHECK_S, CLUSTER_GONE_ENV, CLUSTER_GONE_S, cluster_gone_s

    monkeypatch.delenv(CLUSTER_GONE_ENV, raising=False)
    assert cluster_gone_s() == CLUSTER_GONE_S == 20.0
    monkeypatch.setenv(CLUSTER_GONE_ENV, "45")
    assert cluster_gone_s() == 45.0
    for bad in ("soon", "1", "-5", "nan", "inf"):
        monkeypatch.setenv(CLUSTER_GONE_ENV, bad)
        with pytest.raises(ValueError, match=rf"{CLUSTER_GONE_ENV}='{bad}'.*at least {CLUSTER_CHECK_S:g}"):
            cluster_gone_s()


def test_resource_request_and_loopback_addresses():
    spec = RunSpec(suite="s", env="CartPole-v1", algo="ppo", seed=0, total_timesteps=256)
    assert ray_executor._num_gpus(spec, None) == 0 and ray_executor._num_gpus(spec, 0.5) == 0
    cuda = RunSpec(suite="s", env="CartPole-v1", algo="ppo", seed=0, total_timesteps=256, device="cuda")
    assert ray_executor._num_gpus(cuda, None) == 0.25 and ray_executor._num_gpus(cuda, 1) == 1
    loopback = ["127.0.0.1:6379", "ray://127.0.0.1:10001", "localhost:6379", "[::1]:6379"]
    assert all(ray_executor._is_loopback(a) for a in loopback)
    assert not any(ray_executor._is_loopback(a) for a in ["auto", "10.0.0.5:6379", "ray://head:10001"])
    with pytest.raises(ValueError, match="max_concurrent"):
        run_ray([Job((spec,))], max_concurrent=0)
    with pytest.raises(ValueError, match="max_retries"):
        run_ray([Job((spec,))], max_retries=-1)
    with pytest.raises(TypeError, match="plan_jobs"):  # the executors take planned jobs, not run specs
        run_ray([spec])
    with pytest.raises(ValueError, match="share a run folder"):
        run_ray([Job((spec,)), Job((spec,))])


def test_land_replaces_an_incomplete_folder_atomically(tmp_path):
    spec = RunSpec(suite="s", env="CartPole-v1", algo="ppo", seed=0, total_timesteps=256, out=str(tmp_path / "out"))
    spec.run_dir.mkdir(parents=True)
    atomic_write_text(spec.run_dir / FAILED, "an earlier attempt")
    (spec.run_dir / "stale.csv").write_text("x\n")
    source = tmp_path / "src"
    (source / "tb").mkdir(parents=True)
    (source / "tb" / "events").write_text("e")
    (source / COMPLETE).write_text("{}")
    land(spec, ray_executor._pack(source))
    assert sorted(p.name for p in spec.run_dir.iterdir()) == [COMPLETE, "tb"]
    assert (spec.run_dir / "tb" / "events").read_text() == "e"
    assert oct(spec.run_dir.stat().st_mode & 0o777) == oct(0o755)
    assert [p.name for p in spec.run_dir.parent.iterdir()] == ["seed-0"]  # no staging or old folder left


@pytest.mark.slow
def test_ray_sweep_matches_the_local_executor(tmp_path, local_reference):
    """The CLI's path: run_sweep(executor="ray") with no address starts (and stops) a local instance."""
    specs = grid_specs(tmp_path)
    result = run_sweep(specs, workers=2, executor="ray", show_progress=False)
    assert not ray.is_initialized()  # the instance it started is gone
    assert len(result.complete) == len(specs) and not result.failed and not result.skipped
    assert {o["run_dir"] for o in result.complete} == {str(s.run_dir) for s in specs}
    for spec in specs:
        assert run_record(spec.run_dir) == local_reference[str(spec.relative_dir)], spec.relative_dir
    assert_clean_tree(tmp_path, specs)
    # resumable like the local sweep: everything is complete now
    again = run_sweep(specs, workers=2, executor="ray", show_progress=False)
    assert len(again.skipped) == len(specs) and not again.complete


KILLED_DRIVER_SCRIPT = """
import json, os, sys
import ray
from adaptive_po.bench.ray_executor import local_session_name, start_local_ray
start_local_ray(num_cpus=1)
assert ray.get(ray.remote(lambda: os.getpid()).remote()) != os.getpid()  # a worker too
print(json.dumps({"session": local_session_name()}), flush=True)
sys.stdin.read()  # until killed
"""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a live, non-zombie process: with the pid, its identity."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[19])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc to list processes")
def test_kill_9_of_a_driver_leaves_no_ray_process_behind():
    """Issue 22, case 7: Ray's dashboard and runtime-env agents outlived a killed driver by over a
    minute (about 170 MB); the executor's reaper stops every process of the instance within seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    driver = subprocess.Popen([sys.executable, "-c", KILLED_DRIVER_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env, start_new_session=True)
    started: dict[int, int] = {}
    try:
        line = driver.stdout.readline()
        assert line, "the driver did not start its Ray instance"
        assert json.loads(line)["session"].startswith("session_")
        # everything the driver started: GCS, raylet, the agents, a worker, the reaper
        started = {pid: t for pid in _ray_processes(driver.pid) - {driver.pid} if (t := _start_time(pid)) is not None}
        commands = {pid: _cmdline(pid) for pid in started}
        titles = " | ".join(commands.values())
        for what in ("ray::DashboardAgent", "ray::RuntimeEnvAgent", "raylet", "gcs_server", "adaptive_po.bench.ray_reaper"):
            assert what in titles, f"{what} not among the driver's processes: {titles}"

        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        killed = time.time()
        left = dict(started)
        while left and time.time() < killed + 10:
            left = {pid: start for pid, start in left.items() if _start_time(pid) == start}
            time.sleep(0.1)
        assert not left, f"outlived the killed driver by 10 s: {[commands[pid] for pid in left]}"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid, start in started.items():  # never leave a test's Ray processes behind, whatever failed
            if _start_time(pid) == start:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _ray_processes(root_pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root_pid]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children.get(pid, []))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc to list processes")
def test_a_head_killed_mid_sweep_ends_the_driver_in_one_line_and_leaves_no_lock(tmp_path):
    """Issue 42, item 6: the cluster's head (its GCS) killed while a run trains ended the driver 60 s
    later with exit 1, Ray's message only and the sweep's lock file left; now one line of ours
    within seconds of :func:`~adaptive_po.bench.ray_executor.cluster_gone_s` (set to 4 s here through
    ``$ADAPTIVE_PO_RAY_GONE_S``; 20 s by default), exit 2, no lock."""
    from adaptive_po.bench.locks import LOCK_FILE, sweep_lock
    from adaptive_po.bench.ray_executor import CLUSTER_GONE_ENV

    gone_s = 4.0

    attempts_dir, out = tmp_path / "attempts", tmp_path / "runs"
    attempts_dir.mkdir()
    with local_head(attempts_dir) as (address, head):
        driver = subprocess.Popen(
            [sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--envs", "CartPole-v1", "--algos", "esspo",
             "--seeds", "1", "--lags", "0", "--timesteps", "2000000", "--engine", "process", "--device", "cpu", "--executor", "ray",
             "--ray-address", address, "--no-report", "--no-progress", "--out", str(out)],
            env={**os.environ, "OMP_NUM_THREADS": "1", CLUSTER_GONE_ENV: str(gone_s)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 180
            while not list(attempts_dir.glob("*.json")):  # the run trains on the cluster
                assert driver.poll() is None and time.monotonic() < deadline, "the run never started on the cluster"
                time.sleep(0.2)
            gcs = [pid for pid in _ray_processes(head.pid) if _cmdline(pid).split(" ")[0].endswith("/gcs_server")]
            assert len(gcs) == 1, [_cmdline(pid) for pid in _ray_processes(head.pid)]
            os.kill(gcs[0], signal.SIGKILL)
            killed = time.monotonic()
            _, stderr = driver.communicate(timeout=120)
            took = time.monotonic() - killed
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait()
    assert driver.returncode == 2, stderr
    assert gone_s - 1 <= took < gone_s + 30, f"the driver took {took:.0f} s to end (its limit {gone_s:g} s; Ray's own: 60 s)"
    silent = re.search(r"has not answered for (\d+) s", stderr)
    assert silent and gone_s <= int(silent.group(1)) <= gone_s + 5, stderr  # checked every 2 s
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "the Ray cluster went away" in errors[0] and address in errors[0], stderr
    assert "rerun the same command to resume" in errors[0] and "Traceback" not in stderr
    assert not (out / "quick" / LOCK_FILE).exists()
    with sweep_lock([out / "quick"]):  # free for the rerun
        pass


def _listening(pids: set[int]) -> list[tuple[str, str]]:
    """(protocol, local address hex) of every listening TCP / bound UDP socket of ``pids``."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/net/{proto}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if inode in inodes and (proto.startswith("udp") or state == "0A"):
                found.append((proto, local.rsplit(":", 1)[0]))
    return found


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc to list sockets")
def test_local_instance_listens_on_loopback_only(ray_head):
    _, head_pid = ray_head
    sockets = _listening(_ray_processes(head_pid))
    assert len(sockets) >= 3  # GCS, raylet, ... (the check would be empty otherwise)
    assert [s for s in sockets if s[1] not in LOOPBACK] == []


@pytest.mark.slow
def test_killed_worker_is_retried_and_lands_once(tmp_path, tmp_path_factory, ray_head, attempt_log):
    """On the population engine: the esspo and the ppo population (lags 0 and 2) are two tasks.

    A member's environments are seeded by its place in its population, so the reference is the
    same populations run locally."""
    address, _ = ray_head
    for old in attempt_log.glob("*.json"):
        old.unlink()
    local_specs = grid_specs(tmp_path_factory.mktemp("local-seed0"), seeds=[0])
    local = run_sweep(local_specs, workers=1, executor="inline", show_progress=False)
    assert len(local.complete) == len(local_specs), local.failed
    local_reference = {str(s.relative_dir): run_record(s.run_dir) for s in local_specs}
    specs = grid_specs(tmp_path, seeds=[0])
    results: list[tuple[RunSpec, dict]] = []
    ticks: list[list[RunSpec]] = []
    killer = Killer(attempt_log)
    killer.start()
    try:
        run_ray(plan_jobs(specs), ray_address=address, on_result=lambda s, o: results.append((s, o)), on_tick=ticks.append, max_concurrent=2)
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed is not None, "no worker was caught mid-run"
    assert sorted(str(s.relative_dir) for s, _ in results) == sorted(str(s.relative_dir) for s in specs)  # once each
    assert all(o["status"] == "complete" and o["run_dir"] == str(s.run_dir) for s, o in results), results
    assert ticks and all(len(t) <= 4 for t in ticks)  # two tasks of two runs at most
    killed = [a for a in attempts(attempt_log) if a["workdir"] == killer.killed["workdir"]]
    assert len(killed) == 2 and len({a["relative_dir"] for a in killed}) == 2  # the whole population was killed ...
    for member in killed:  # ... and tried again
        tries = [a for a in attempts(attempt_log) if a["relative_dir"] == member["relative_dir"]]
        assert len(tries) == 2 and killer.killed["pid"] in {a["pid"] for a in tries}
    for spec in specs:  # the retried run is the same run, and every run landed once
        assert run_record(spec.run_dir) == local_reference[str(spec.relative_dir)], spec.relative_dir
    assert_clean_tree(tmp_path, specs)
    leftover = [a["workdir"] for a in attempts(attempt_log) if Path(a["workdir"]).exists()]
    assert leftover == []  # the killed attempt's folder was removed by the next task on the node


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["process", "population"])
def test_retries_exhausted_records_failed_and_goes_on(tmp_path, ray_head, attempt_log, engine):
    """process: one task per run, the first run is the victim; population: the ppo population
    (lags 0 and 2) is the first task and the victim, the esspo one survives."""
    address, _ = ray_head
    for old in attempt_log.glob("*.json"):
        old.unlink()
    ppo = grid_specs(tmp_path, seeds=[0], algos=["ppo"])
    victims, survivors = (ppo[:1], ppo[1:]) if engine == "process" else (ppo, grid_specs(tmp_path, seeds=[0], algos=["esspo"]))
    results: list[tuple[RunSpec, dict]] = []
    killer = Killer(attempt_log)
    killer.start()
    try:  # one task at a time, so the killer's victim is the first task
        run_ray(
            plan_jobs(victims + survivors, engine), ray_address=address, on_result=lambda s, o: results.append((s, o)), max_concurrent=1, max_retries=0
        )
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed is not None and killer.killed["relative_dir"] in {str(v.relative_dir) for v in victims}
    assert [(s, o["status"]) for s, o in results] == [(v, "failed") for v in victims] + [(s, "complete") for s in survivors]
    for victim, outcome in results[: len(victims)]:
        assert outcome["error"].startswith("Ray task lost its worker on every attempt (1 in all)") and outcome["run_dir"] == str(victim.run_dir)
        assert (victim.run_dir / FAILED).is_file() and not (victim.run_dir / COMPLETE).exists()
        assert "Ray task lost its worker" in (victim.run_dir / FAILED).read_text()
    for survivor in survivors:
        assert (survivor.run_dir / COMPLETE).is_file()
