"""The sweep on a Ray cluster (``adaptive-po bench --executor ray``).

Each job of the sweep (:func:`adaptive_po.bench.jobs.plan_jobs`) is one Ray task: a
population (:func:`adaptive_po.bench.population_engine.execute_population`, the default engine) or
one run (:func:`adaptive_po.bench.process_engine.execute_run`: the process engine, and runs the
population engine does not support). The task trains copies of its specs whose results root is
a fresh temporary folder on the worker, packs each finished run folder (a tar.gz: a few kB for a
classic-control run) and returns them with the outcomes. The driver unpacks each into a hidden
sibling of the run folder in its own ``--out`` and swaps it into place, so the results arrive
whether or not the workers share a filesystem with the driver, and a run folder is only ever
absent, the previous incomplete one, or the finished one.

A worker lost mid-job (process killed, node gone) is a system failure: Ray runs the task again,
at most ``max_retries`` times, each attempt in its own temporary folder, and only the attempt
that returns lands. A run that raises or diverges is not retried: the engines turn it into a
``failed`` outcome whose ``FAILED`` file lands like any other result. When the retries are spent
the driver writes ``FAILED`` (with Ray's error) into the folder of each of the job's runs and
goes on. A cluster whose head stops answering (:func:`cluster_gone_s`) ends the sweep with
:class:`ClusterGone`: one line and exit code 2 at the command line, the runs that landed kept,
the sweep's lock released; a rerun resumes.

Without an address a local Ray instance is started for the sweep, bound to 127.0.0.1 only, and
shut down at the end, with a reaper (:mod:`adaptive_po.bench.ray_reaper`) that stops every
process of the instance, Ray's agents included, once the driver ends, even by ``kill -9``; with
an address (``auto``, ``ray://head:10001``, ``host:6379``) the driver connects to that cluster,
whose workers need the same ``adaptive-po`` installed (and the environment YAML files: the suite
shipped inside the package, or ``$ADAPTIVE_PO_ENVS``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import math
import os
import shutil
import select
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any, Iterator, Sequence

from adaptive_po.contract import FAILED, atomic_write_text, is_complete, pid_alive
from adaptive_po.bench.jobs import Job, ResultCallback, TickCallback, check_jobs, job_specs
from adaptive_po.bench.run_folder import RunSpec

RAY_MISSING = "Ray is not installed: pip install 'adaptive-po[distributed]'"
#: GPU share of one task (a run or a population) when its device is CUDA and ``gpus_per_run`` is not given
DEFAULT_GPU_FRACTION = 0.25
#: worker-side temporary folders are named ``<prefix><pid>-<random>`` (stale ones are removed)
ATTEMPT_PREFIX = "adaptive-po-ray-"
#: if set in the workers' environment: a folder where each attempt leaves a small JSON record
#: (pid, run, temporary folder), one per run of the task. Tests use it to kill a worker mid-run;
#: it is off otherwise.
ATTEMPT_LOG_ENV = "ADAPTIVE_PO_RAY_ATTEMPT_LOG"
#: seconds between ``on_tick`` calls (and the ``ray.wait`` timeout)
TICK_S = 0.5


def check_ray_available() -> None:
    """Raise ``ValueError`` with the install command if Ray cannot be imported."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ValueError(RAY_MISSING) from None


#: seconds the driver waits for a TCP connection to a cluster's address (``--ray-address``) before
#: Ray is initialised: an address where nothing listens is one error line at once, not minutes of
#: Ray's "Failed to get cluster ID" warnings
RAY_CONNECT_TIMEOUT_S = 5.0


def _address_host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a Ray address (``host:port``, ``ray://host:port``, ``[::1]:port``), or
    None for ``auto`` / ``local`` without ``$RAY_ADDRESS`` (Ray finds those itself)."""
    if address in ("auto", "local"):
        address = os.environ.get("RAY_ADDRESS", "") if address == "auto" else ""
        if not address or address in ("auto", "local"):
            return None
    rest = address.split("://", 1)[-1].rstrip("/")
    if rest.startswith("["):
        host, _, port = rest[1:].partition("]")
        port = port[1:] if port.startswith(":") else ""
    else:
        host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--ray-address {address!r} is not host:port, ray://host:port or auto")
    return host, int(port)


def check_ray_address(address: str | None, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """A ``ValueError`` (one line, naming the address) unless a TCP connection to ``address`` opens
    within ``timeout`` seconds; nothing to check without an address (a local instance) or for
    ``auto`` without ``$RAY_ADDRESS``."""
    where = _address_host_port(address) if address is not None else None
    if where is None:
        return
    host, port = where
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        why = f"no answer within {timeout:g} s" if isinstance(err, socket.timeout) else (err.strerror or str(err))
        raise ValueError(
            f"--ray-address {address}: cannot reach a Ray cluster at {host}:{port} ({why}; checked with a TCP "
            f"connect, timeout {timeout:g} s); start it (ray start --head), give the address of a running one, "
            f"or leave --ray-address out to start a local instance"
        ) from None


@contextlib.contextmanager
def _stop_at_once_on_sigterm() -> Iterator[None]:
    """While Ray connects (``ray.init`` waits inside C code, where Python's signal handlers do not
    run), SIGTERM ends the process at once (its default action) instead of tens of seconds later;
    nothing of the sweep runs yet (the lock is an flock the kernel releases). The handler is
    restored afterwards. Only in the main thread (where signal handlers live)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # ray.init installs its own SIGTERM handler (sys.exit) before it connects, and a Python handler
    # runs only when the C call returns (about 35 s later at an address that accepts and never
    # answers): keep it from replacing the default action while it connects
    try:
        import ray._private.utils as ray_utils
    except ImportError:  # another Ray layout: its handler then stands, as before
        ray_utils = None
    setter = getattr(ray_utils, "set_sigterm_handler", None)
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if setter is not None:
        ray_utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        if setter is not None:
            ray_utils.set_sigterm_handler = setter
        signal.signal(signal.SIGTERM, previous)


# -- the worker side ------------------------------------------------------------------------------
def _remove_stale_attempts(root: Path) -> None:
    """Remove attempt folders left by worker processes that died (a killed attempt's)."""
    try:
        entries = list(root.iterdir())
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(ATTEMPT_PREFIX):
            continue
        pid_text = entry.name[len(ATTEMPT_PREFIX) :].split("-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not pid_alive(int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)


def _note_attempt(spec: RunSpec, workdir: Path) -> None:
    folder = os.environ.get(ATTEMPT_LOG_ENV)
    if not folder:
        return
    record = {"pid": os.getpid(), "relative_dir": str(spec.relative_dir), "workdir": str(workdir), "started": time.time()}
    atomic_write_text(Path(folder) / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json", json.dumps(record))


def _pack(folder: Path) -> bytes:
    """The contents of ``folder`` as tar.gz bytes (paths relative to it)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for child in sorted(folder.iterdir()):
            tar.add(child, arcname=child.name)
    return buffer.getvalue()


def run_attempt(specs_data: list[dict[str, Any]], population: bool = False) -> dict[str, Any]:
    """One attempt at one job on a worker: train into a private temporary folder, return it packed.

    ``specs_data``: the job's runs (one unless ``population``). Returns ``{"members": [{"outcome":
    the engine's record, "archive": tar.gz bytes of the run folder or None}, ...] (one per run, in
    order), "host", "pid"}``. Only what escapes the engines (they never raise) or packing can raise.
    """
    from adaptive_po.bench.process_engine import execute_run

    root = Path(tempfile.gettempdir())
    _remove_stale_attempts(root)
    specs = [RunSpec.from_dict(data) for data in specs_data]
    workdir = Path(tempfile.mkdtemp(prefix=f"{ATTEMPT_PREFIX}{os.getpid()}-", dir=root))
    try:
        local = [dataclasses.replace(spec, out=str(workdir)) for spec in specs]
        for spec in specs:
            _note_attempt(spec, workdir)
        if population:
            from adaptive_po.bench.population_engine import execute_population

            outcomes = execute_population(local)
        else:
            outcomes = [execute_run(spec) for spec in local]
        members = [
            {"outcome": outcome, "archive": _pack(spec.run_dir) if spec.run_dir.is_dir() else None}
            for spec, outcome in zip(local, outcomes)
        ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"members": members, "host": socket.gethostname(), "pid": os.getpid()}


# -- the driver side ------------------------------------------------------------------------------
def _extract(archive: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python < 3.11.4: refuse anything that would leave dest
            for member in tar.getmembers():
                target = (dest / member.name).resolve()
                if not (member.isfile() or member.isdir()) or dest.resolve() not in (target, *target.parents):
                    raise ValueError(f"refusing archive member {member.name!r}")
            tar.extractall(dest)


def land(spec: RunSpec, archive: bytes) -> Path:
    """Unpack a run folder archive into ``spec.run_dir``, replacing what was there, atomically.

    The archive is unpacked into a hidden sibling (``.seed-N.incoming-*``) which is then renamed
    into place; the previous folder is first renamed away (``.seed-N.old-*``) and then removed.
    Hidden folders are ignored by the bench and by analysis, so an interruption never leaves a
    half-written folder under the run's name.
    """
    final = spec.run_dir
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.incoming-", dir=final.parent))
    try:
        os.chmod(staging, 0o755)  # mkdtemp makes it private; results are meant to be shared
        _extract(archive, staging)
        if final.exists() or final.is_symlink():
            old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(final, old)
            os.replace(staging, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def _record_failure(spec: RunSpec, error: str, detail: str) -> dict[str, Any]:
    """Mark the driver's run folder failed (unless a complete run is there) and make the outcome."""
    run_dir = spec.run_dir
    if not is_complete(run_dir):
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(run_dir / FAILED, f"{error}\n{detail}\n")
        except OSError:
            pass
    return {
        "run_dir": str(run_dir),
        "relative_dir": str(spec.relative_dir),
        "status": "failed",
        "error": error,
        "traceback": detail,
    }


def _land_member(spec: RunSpec, member: dict[str, Any], host: str | None) -> dict[str, Any]:
    """The driver's outcome for one run of a returned task: its folder landed, or the failure recorded."""
    outcome = dict(member["outcome"])
    outcome.update(run_dir=str(spec.run_dir), relative_dir=str(spec.relative_dir), host=host)
    if member.get("archive") is None:  # the engine could not even create its folder
        error = str(outcome.get("error") or "the worker produced no run folder")
        return {**outcome, **_record_failure(spec, error, str(outcome.get("traceback", "")))}
    try:
        land(spec, member["archive"])
    except Exception as err:  # noqa: BLE001 - e.g. the driver's disk is full
        return _record_failure(spec, f"could not unpack the run folder from {host}: {err!r}", "")
    return outcome


def _finish(job: Job, ref: Any, max_retries: int) -> list[dict[str, Any]]:
    """The driver's outcomes for a finished task, one per run of its job, in order."""
    import ray

    try:
        reply = ray.get(ref)
    except Exception as err:  # noqa: BLE001 - worker/node lost after the retries, or a bug in packing
        lost = tuple(
            getattr(ray.exceptions, name)
            for name in ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError", "ObjectLostError", "OutOfMemoryError")
            if hasattr(ray.exceptions, name)
        )
        what = f"lost its worker on every attempt ({max_retries + 1} in all)" if isinstance(err, lost) else "failed"
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return [_record_failure(spec, f"Ray task {what}: {type(err).__name__}: {first}", str(err)) for spec in job.specs]
    members = reply.get("members") or []
    if len(members) != len(job.specs):
        error = f"the task returned {len(members)} results for {len(job.specs)} runs"
        return [_record_failure(spec, error, "") for spec in job.specs]
    return [_land_member(spec, member, reply.get("host")) for spec, member in zip(job.specs, members)]


_LOOPBACK_ENV = {
    # Ray "resolves" 127.0.0.1 to the machine's routable address unless clusters are disabled;
    # with the node address 127.0.0.1 every Ray server (GCS, raylet, workers, agents) binds to
    # loopback only.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    # ray.init of a new instance also sets RAY_AUTH_MODE=token in os.environ (its processes
    # inherit it); restored afterwards so it does not leak into this process's later children
    saved = {k: os.environ.get(k) for k in (*_LOOPBACK_ENV, "RAY_AUTH_MODE")}
    os.environ.update(_LOOPBACK_ENV)
    constants = None
    try:
        from ray._private import ray_constants as constants  # read at import; ray may be imported already
    except ImportError:
        pass
    previous = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if constants is not None and previous is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if constants is not None and previous is not None:
            constants.ENABLE_RAY_CLUSTER = previous
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _is_loopback(address: str) -> bool:
    """Whether a Ray address (``host:port``, ``ray://host:port``) names this machine's loopback."""
    rest = address.split("://", 1)[-1]
    host = rest[1:].split("]", 1)[0] if rest.startswith("[") else rest.rsplit(":", 1)[0]
    return host in ("localhost", "::1") or host.startswith("127.")


#: seconds :func:`start_local_ray` waits for its reaper to have seen the instance's processes
REAPER_START_S = 30.0
#: the reaper of the local instance this process started (:func:`start_local_ray`), if any
_reaper: subprocess.Popen | None = None


def local_session_name() -> str | None:
    """The session name (``session_<date>_<pid>``) of the Ray instance this process is connected
    to, or None. Its GCS server and raylet carry it on their command lines."""
    try:
        from ray._private import worker
    except ImportError:
        return None
    node = getattr(worker, "_global_node", None)
    name = getattr(node, "session_name", None)
    return name if isinstance(name, str) and name.startswith("session_") else None


def _start_reaper(session: str) -> subprocess.Popen | None:
    """Start :mod:`adaptive_po.bench.ray_reaper` for ``session``: it stops the session's processes
    when this process closes the reaper's stdin or ends. None (with a warning) if it cannot start."""
    from adaptive_po.bench import ray_reaper

    package_root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {
        **os.environ,
        ray_reaper.SESSION_ENV: session,
        ray_reaper.DRIVER_ENV: str(os.getpid()),
        "PYTHONPATH": package_root + (os.pathsep + path if path else ""),
    }
    try:
        reaper = subprocess.Popen(
            [sys.executable, "-m", "adaptive_po.bench.ray_reaper"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True, start_new_session=True,
        )
    except OSError as err:
        logging.getLogger(__name__).warning("no reaper for the local Ray instance (%s): its agents may outlive a killed driver", err)
        return None
    # until it has seen the instance's processes once, a kill of this process would orphan them
    ready, _, _ = select.select([reaper.stdout], [], [], REAPER_START_S)
    line = reaper.stdout.readline() if ready else b""  # type: ignore[union-attr]
    reaper.stdout.close()  # type: ignore[union-attr]
    if line.strip() != ray_reaper.READY.encode():
        logging.getLogger(__name__).warning("the reaper of the local Ray instance did not start: its agents may outlive a killed driver")
    return reaper


def start_local_ray(num_cpus: int | None = None) -> str:
    """Start a local Ray instance in this process, bound to 127.0.0.1 only; return its address.

    :func:`stop_local_ray` stops it. Its processes die with this one however it ends (a reaper,
    :mod:`adaptive_po.bench.ray_reaper`, stops Ray's agents and workers that would outlive a
    ``kill -9`` of this process by a minute). Fails (after stopping it) if Ray did not take the
    loopback address.
    """
    import ray

    global _reaper
    with _loopback_only():
        ray.init(
            address="local",
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
            _node_ip_address="127.0.0.1",
        )
    session = local_session_name()
    if session is not None and _reaper is None:
        _reaper = _start_reaper(session)
    node_ip = ray.util.get_node_ip_address()
    address = ray.get_runtime_context().gcs_address
    if node_ip != "127.0.0.1" or not address.startswith("127.0.0.1:"):
        stop_local_ray()
        raise RuntimeError(f"the local Ray instance did not bind to loopback (node {node_ip}, GCS {address})")
    return address


def stop_local_ray(timeout: float = 30.0) -> None:
    """``ray.shutdown()``, then let the reaper stop whatever of the instance is left (agents,
    workers) and wait for it, at most ``timeout`` seconds."""
    import ray

    global _reaper
    try:
        ray.shutdown()
    finally:
        reaper, _reaper = _reaper, None
        if reaper is not None:
            with contextlib.suppress(OSError):
                reaper.stdin.close()  # type: ignore[union-attr]
            try:
                reaper.wait(timeout)
            except subprocess.TimeoutExpired:
                reaper.kill()
                reaper.wait()


#: seconds the driver lets its cluster's head (the GCS) go unanswered before it ends the sweep with
#: :class:`ClusterGone`: a GCS restarted within them (Ray's fault tolerance) goes unnoticed, and they
#: end well before Ray's own 60 s, after which Ray ends the driver's process with exit 1, a message
#: of Ray's and no cleanup (the sweep's lock file left behind)
CLUSTER_GONE_S = 20.0
#: the environment variable that sets those seconds instead (a slow network may want more)
CLUSTER_GONE_ENV = "ADAPTIVE_PO_RAY_GONE_S"
#: seconds between two checks of the head: a TCP connect to the GCS, at most this long too
CLUSTER_CHECK_S = 2.0


class ClusterGone(ValueError):
    """The Ray cluster's head stopped answering mid-sweep (a ``ValueError``: the command line's one
    line and exit code 2; the runs that landed are kept and a rerun resumes)."""


def cluster_gone_s() -> float:
    """:data:`CLUSTER_GONE_S`, or ``$ADAPTIVE_PO_RAY_GONE_S`` where set (a ``ValueError`` naming a
    value that is not a number of seconds of at least :data:`CLUSTER_CHECK_S`)."""
    text = os.environ.get(CLUSTER_GONE_ENV, "").strip()
    if not text:
        return CLUSTER_GONE_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= CLUSTER_CHECK_S):
        raise ValueError(f"{CLUSTER_GONE_ENV}={text!r}: give the seconds without an answer from the Ray head before the sweep ends, "
                         f"a number of at least {CLUSTER_CHECK_S:g}")
    return seconds


class _HeadWatch:
    """Checks, every :data:`CLUSTER_CHECK_S`, that the connected cluster's GCS accepts a TCP
    connection, as this driver's own connection to it does; :meth:`check` raises
    :class:`ClusterGone` once it has not for :func:`cluster_gone_s`. Nothing is checked for a
    ``ray://`` client connection (``ray_address``: the client talks to a proxy, and the GCS's own
    address may be one only the cluster's machines reach) or where Ray gives no GCS address."""

    def __init__(self, ray_address: str | None, gone_s: float = CLUSTER_GONE_S) -> None:
        import ray

        self.gone_s = gone_s
        self.address, self.where = "", None
        try:
            from ray.util.client import ray as client

            if not (ray_address or "").startswith("ray://") and not client.is_connected():
                self.address = str(ray.get_runtime_context().gcs_address)
                self.where = _address_host_port(self.address)
        except Exception:  # noqa: BLE001 - another Ray layout: the sweep goes on unwatched
            self.address, self.where = "", None
        self.answered = self.next_check = time.monotonic()

    def check(self) -> None:
        now = time.monotonic()
        if self.where is None or now < self.next_check:
            return
        self.next_check = now + CLUSTER_CHECK_S
        try:
            with socket.create_connection(self.where, timeout=CLUSTER_CHECK_S):
                self.answered = now
        except OSError:
            if now - self.answered >= self.gone_s:
                raise ClusterGone(
                    f"the Ray cluster went away: its head (GCS at {self.address}) has not answered for {now - self.answered:.0f} s "
                    f"(stopped, killed or unreachable); the runs that finished are kept, those in flight are not recorded; "
                    f"start the cluster again and rerun the same command to resume"
                ) from None


def _num_gpus(spec: RunSpec, gpus_per_run: float | None) -> float:
    if not (spec.device == "cuda" or spec.device.startswith("cuda:")):
        return 0
    return DEFAULT_GPU_FRACTION if gpus_per_run is None else gpus_per_run


def run_ray(
    jobs: Sequence[Job],
    ray_address: str | None = None,
    on_result: ResultCallback | None = None,
    on_tick: TickCallback | None = None,
    max_concurrent: int | None = None,
    max_retries: int = 2,
    cpus_per_run: float = 1,
    gpus_per_run: float | None = None,
) -> None:
    """Run ``jobs`` as Ray tasks, one task per job; their run folders land in each spec's ``out``
    on this machine.

    ``jobs``: planned by :func:`~adaptive_po.bench.jobs.plan_jobs` (the engine is chosen
    there: a population per task, or one run per task), the same input as the local executor's
    :func:`~adaptive_po.bench.local_executor.run_local`.

    ``ray_address``: None starts a local instance (loopback only) for the sweep and stops it at
    the end; an address (``auto``, ``ray://host:10001``) connects to that cluster and disconnects
    at the end. If Ray is already initialized in this process, that connection is used and kept.
    ``on_result(spec, outcome)`` is called exactly once per run, in this thread, after the run
    folder has landed; ``outcome`` is ``execute_run``'s record with ``run_dir`` pointing here.
    ``on_tick(running_specs)`` is called about every half second with the runs in flight.
    ``max_concurrent`` caps the tasks in flight (None: all at once, Ray queues them).
    ``max_retries``: attempts after a lost worker or node (not after a failed run); a retried
    population trains all its runs again.
    ``cpus_per_run`` / ``gpus_per_run``: each task's resource request, a population's as a single
    run's; GPUs only for CUDA runs (default share 0.25 of a GPU).
    """
    check_ray_available()
    import ray

    check_jobs(jobs)
    if max_concurrent is not None and max_concurrent < 1:
        raise ValueError(f"max_concurrent must be >= 1 or None, got {max_concurrent!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
    if not cpus_per_run > 0:
        raise ValueError(f"cpus_per_run must be > 0, got {cpus_per_run!r}")
    if gpus_per_run is not None and not gpus_per_run >= 0:
        raise ValueError(f"gpus_per_run must be >= 0, got {gpus_per_run!r}")
    gone_s = cluster_gone_s()  # its environment variable checked before the cluster starts
    if not jobs:
        return
    on_result = on_result or (lambda spec, outcome: None)
    on_tick = on_tick or (lambda active: None)

    owned = local = False
    if not ray.is_initialized():
        if ray_address is None:
            start_local_ray()
            local = True
        else:
            check_ray_address(ray_address)  # a short TCP connect before Ray waits minutes for it
            # Ray rewrites a loopback address to the machine's routable one unless told not to
            try:
                with _loopback_only() if _is_loopback(ray_address) else contextlib.nullcontext(), _stop_at_once_on_sigterm():
                    ray.init(address=ray_address, log_to_driver=False, logging_level=logging.WARNING)
            except ConnectionError as err:  # the CLI reports a ValueError as a plain error line
                cause = f" ({err.__cause__})" if err.__cause__ else ""  # e.g. the token-auth hint
                raise ValueError(f"could not connect to the Ray cluster at {ray_address!r}: {err}{cause}") from err
        owned = True
    remote = ray.remote(run_attempt)
    pending = deque(jobs)
    in_flight: dict[Any, Job] = {}
    head = _HeadWatch(ray_address, gone_s)
    try:
        while pending or in_flight:
            head.check()
            while pending and (max_concurrent is None or len(in_flight) < max_concurrent):
                job = pending.popleft()
                ref = remote.options(
                    name=f"adaptive-po {job.name}",
                    num_cpus=cpus_per_run,
                    num_gpus=_num_gpus(job.specs[0], gpus_per_run),
                    max_retries=max_retries,
                    retry_exceptions=False,
                ).remote([spec.to_dict() for spec in job.specs], job.population)
                in_flight[ref] = job
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=TICK_S)
            for ref in ready:
                job = in_flight.pop(ref)
                for spec, outcome in zip(job.specs, _finish(job, ref, max_retries)):
                    on_result(spec, outcome)
            on_tick(job_specs(list(in_flight.values())))
    except BaseException:
        for ref in in_flight:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise
    finally:
        if local:
            stop_local_ray()
        elif owned:
            ray.shutdown()
        if local:  # attempts cut short (interrupt, lost worker) leave their folders on this machine
            _remove_stale_attempts(Path(tempfile.gettempdir()))
