"""Results nobody can silently lose or alter, second pass (issue 32, cases 2, 3, 6b and 8).
Real processes, real signals, real files and real symbolic links; tiny CartPole budgets.

* Case 2: a symbolic link planted where the bench keeps a file of its own (the sweep lock, a
  worker's log, a run folder or a folder above one) is named and refused (exit 2, the path in
  the message), never followed: the link's target is left byte for byte as it was.
* Case 3: analysis reads markers and tables only as regular files inside the results root: a
  ``FAILED``, ``COMPLETE`` or ``summary.json`` link, or a run folder that is a link, leaves that
  run out with the reason, and nothing of the target reaches ``report.md`` or ``runs.csv``.
* Case 6b: ``bench --executor ray --ray-address 127.0.0.1:1`` (nothing listening) fails at once:
  the address is checked with a short TCP connect before Ray starts, one line names it, exit 2.
* Case 8: a stop (SIGTERM) that reaches a worker just after its run's ``COMPLETE`` was written
  leaves the run complete and intact (no ``FAILED`` beside it): the rerun skips it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adaptive_po import contract
from adaptive_po.bench import locks
from adaptive_po.bench.run_folder import RUN_SAME, RunSpec, run_folder_state
from adaptive_po.contract import COMPLETE, FAILED, verify_complete_run

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "500"}


def tiny_spec(out: Path, **kw) -> RunSpec:
    base = dict(suite="quick", env="CartPole-v1", algo="esspo", seed=0, total_timesteps=1024, out=str(out), device="cpu", tensorboard=False)
    return RunSpec(**{**base, **kw})


# -- case 8: a stop just after COMPLETE leaves a complete run ---------------------------------------
STOP_AT_COMPLETION = textwrap.dedent(
    """
    import json, os, signal, sys
    from adaptive_po import contract
    from adaptive_po.cli import _interrupt
    from adaptive_po.bench.process_engine import execute_run
    from adaptive_po.bench.population_engine import execute_population

    signal.signal(signal.SIGTERM, _interrupt)  # as a sweep's worker has it (cli.main)
    real = contract.write_completion

    def complete_then_stopped(*args, **kwargs):
        written = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # the driver's stop arrives the moment COMPLETE is there
        return written

    contract.write_completion = complete_then_stopped
    engine, spec = sys.argv[1], json.loads(sys.argv[2])
    try:
        execute_population([spec]) if engine == "population" else execute_run(spec)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(0)
    """
)


@pytest.mark.parametrize("engine", ["process", "population"])
def test_a_stop_just_after_complete_leaves_the_run_complete(tmp_path, engine):
    spec = tiny_spec(tmp_path / "runs", total_timesteps=512)
    script = tmp_path / "stop_at_completion.py"
    script.write_text(STOP_AT_COMPLETION)
    worker = subprocess.run([sys.executable, str(script), engine, json.dumps(spec.to_dict())], env=ENV,
                            capture_output=True, text=True, timeout=300)
    assert worker.returncode == 130, worker.stderr  # the signal was acted on, after COMPLETE
    assert (spec.run_dir / COMPLETE).is_file()
    assert not (spec.run_dir / FAILED).exists(), (spec.run_dir / FAILED).read_text()
    assert verify_complete_run(spec.run_dir) is None
    assert run_folder_state(spec).kind == RUN_SAME  # the rerun skips it
