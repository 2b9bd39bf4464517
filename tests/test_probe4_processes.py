"""Issue 67, reliability probe 4, the cases about real processes:

* B10: Ctrl-C or SIGTERM leaves the interrupted runs incomplete, never ``FAILED``: the analysis
  leaves them out (it scores a FAILED run at the random score) and the rerun trains them;
* B8: a compile fall-back in a local worker is said on the sweep's console, not only in the
  worker's log;
* B22: a damaged kernel library in inductor's cache is removed and built again, as one library.

Each starts the real commands (or a Python child) and looks at what they leave on disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from adaptive_po.contract import COMPLETE, FAILED
from cli_here import cli_here

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "500", "PYTHONPATH": str(ROOT)}
for _variable in ("ADAPTIVE_PO_COMPILE", "ADAPTIVE_PO_COMPILE_AHEAD", "ADAPTIVE_PO_BUNDLE_KERNELS"):
    ENV.pop(_variable, None)


def bench_cmd(out: Path, algos: str, *extra: str, timesteps: int = 8192) -> list[str]:
    return [sys.executable, "-m", "adaptive_po", "bench", "--suite", "quick", "--envs", "CartPole-v1", "--algos", algos,
            "--seeds", "1", "--lags", "0", "--timesteps", str(timesteps), "--workers", "1", "--device", "cpu",
            "--no-report", "--no-progress", "--out", str(out), *extra]


# -- B10: an interrupted run is not a failed one ---------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("stop_signal, executor, engine", [(signal.SIGINT, "inline", "process"), (signal.SIGTERM, "local", "population")])
def test_an_interrupted_run_is_left_incomplete_not_scored_and_the_rerun_trains_it(tmp_path, stop_signal, executor, engine):
    from adaptive_po.analysis.load import load_runs

    out = tmp_path / "runs"
    env = {**ENV, "ADAPTIVE_PO_COMPILE": "0"}  # the step's compilation is not the subject: eager, for time
    flags = ("--executor", executor, "--engine", engine)
    first = cli_here(bench_cmd(out, "ppo", *flags), env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    process = subprocess.Popen(bench_cmd(out, "ppo,esspo", *flags), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    running = out / "quick" / "CartPole-v1" / "esspo"
    deadline = time.time() + 180
    while time.time() < deadline and not list(running.rglob("progress.csv")):
        time.sleep(0.05)
    assert list(running.rglob("progress.csv")), "the second run never started"
    os.kill(process.pid, stop_signal)  # the driver only: it stops its own workers
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-3000:]
    assert not list(out.rglob(FAILED)), [p.read_text()[:300] for p in out.rglob(FAILED)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = load_runs(out / "quick")
    assert loaded.failed == [] and len(loaded.incomplete) == 1 and len(loaded.finals) == 1  # left out, not scored
    rerun = cli_here(bench_cmd(out, "ppo,esspo", *flags), env=env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "1 complete, 1 skipped" in rerun.stderr and len(list(out.rglob(COMPLETE))) == 2


# -- B8: a worker's compile fall-back on the console ----------------------------------------------------------
@pytest.mark.slow
def test_a_compile_fall_back_in_a_local_worker_is_said_on_the_console(tmp_path):
    out = tmp_path / "runs"
    env = {**ENV, "ADAPTIVE_PO_COMPILE": "1", "CXX": "/bin/false", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    done = cli_here(bench_cmd(out, "ppo", "--executor", "local", "--engine", "population", timesteps=512), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if "ran eagerly" in line]
    assert len(said) == 1, done.stderr[-3000:]
    assert "CartPole-v1/ppo" in said[0] and "compilation failed" in said[0] and ".logs" in said[0], said[0]
    (summary,) = out.rglob("summary.json")
    assert json.loads(summary.read_text())["step"] == "eager"


# -- B22: a damaged library in the compile cache -------------------------------------------------------------
BUNDLED = textwrap.dedent("""
    import json, torch
    torch.set_num_threads(1)
    from adaptive_po import compile_setup as C
    C.prepare()

    def f(x, w1, w2):
        h = torch.tanh(torch.bmm(x, w1) + 0.5)
        g = torch.sigmoid(torch.bmm(h, w2)) * h.sum(-1, keepdim=True)
        return g.exp().mean(1) / (1.0 + h.square().mean()), torch.softmax(g, -1)

    torch.manual_seed(0)
    args = (torch.randn(5, 33, 7), torch.randn(5, 7, 19), torch.randn(5, 19, 19))
    outs = torch.compile(f, dynamic=False)(*args)
    print(json.dumps({"built": C.BUILT, "sums": [float(o.double().sum()) for o in outs]}))
""")


@pytest.mark.slow
def test_a_damaged_bundle_in_the_cache_is_built_again_as_one_library(tmp_path):
    env = {**ENV, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", BUNDLED], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = run()
    assert first["built"]["bundles"] == 1 and first["built"]["single"] == 0 and first["built"].get("rebuilt", 0) == 0, first
    libraries = [p for p in (tmp_path / "inductor").rglob("*.so")]
    assert libraries
    for library in libraries:  # truncated, as a full disk or a killed build leaves it
        library.write_bytes(library.read_bytes()[:100])
    again = run()
    # one library again, not a build per kernel
    assert {k: again["built"][k] for k in ("bundles", "kernels_in_bundles", "single")} == {
        k: first["built"][k] for k in ("bundles", "kernels_in_bundles", "single")}, again
    assert again["sums"] == first["sums"]
    assert all(p.stat().st_size > 100 for p in libraries if p.exists())
