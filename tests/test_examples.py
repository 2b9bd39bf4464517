"""The examples under examples/ run as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_esspo_on_a_user_environment_with_policy_lag_trains_saves_loads_and_evaluates(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "esspo_custom_env.py"), "--timesteps", "8000", "--out", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "esspo_corridor.zip").is_file()
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("ESSPO with policy_lag=4 after 8000 steps: return"), line
    trained = float(line.split("return ")[1].split()[0])
    assert trained > 0.0, line  # the goal is reached (an untrained policy scores about -1.4)
