"""The reaper of a local Ray instance (issue 22, case 7), without Ray: stand-in processes whose
command line names a session, and their children, die when the driver that started the reaper
is killed; a process of another session is left alone. (tests/test_ray.py has the real thing.)"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

#: a stand-in for a Ray server: names the session, ignores SIGTERM, and starts a child that does
#: not name it (as Ray's agents and workers, which retitle themselves)
SERVER = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print(child.pid, flush=True)
time.sleep(300)
"""

DRIVER = """
import json, os, subprocess, sys
from adaptive_po.bench.ray_executor import _start_reaper
session, other = os.environ["TEST_SESSION"], os.environ["TEST_OTHER"]  # not on its command line, as Ray's
servers = [subprocess.Popen([sys.executable, "-c", {server!r}, name], stdout=subprocess.PIPE, text=True) for name in (session, other)]
children = [int(s.stdout.readline()) for s in servers]
reaper = _start_reaper(session)
print(json.dumps({{"servers": [s.pid for s in servers], "children": children, "reaper": reaper.pid}}), flush=True)
sys.stdin.read()
""".format(server=SERVER)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_killed_driver_takes_the_session_tree_with_it():
    session, other = f"session_test_{uuid.uuid4().hex}", f"session_other_{uuid.uuid4().hex}"
    env = {**os.environ, "TEST_SESSION": session, "TEST_OTHER": other}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env, start_new_session=True)
    pids: dict = {}
    try:
        pids = json.loads(driver.stdout.readline())
        mine = [pids["servers"][0], pids["children"][0]]
        theirs = [pids["servers"][1], pids["children"][1]]
        assert all(_alive(p) for p in mine + theirs + [pids["reaper"]])
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        deadline = time.time() + 10  # SIGTERM, 3 s of grace, SIGKILL
        while time.time() < deadline and any(_alive(p) for p in mine + [pids["reaper"]]):
            time.sleep(0.05)
        assert not any(_alive(p) for p in mine), "the session's processes outlived the killed driver"
        assert not _alive(pids["reaper"]), "the reaper did not exit"
        assert all(_alive(p) for p in theirs), "a process of another session was stopped"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid in pids.get("servers", []) + pids.get("children", []):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
