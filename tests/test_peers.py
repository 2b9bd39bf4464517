"""``make perf``'s comparison with pure-JAX PPO (benchmarks/peers.py): its clock, its section of
docs/results/perf.md, and its behaviour where rejax is not installed (``make perf`` runs it anyway)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import peer_clock  # noqa: E402
import peers  # noqa: E402


def test_the_clock_counts_the_cpu_of_the_children_a_process_waited_for():
    """Our side's compiler spends its CPU in g++ processes: a clock of the process alone missed it."""
    before = peer_clock.cpu()
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"], check=True)
    assert peer_clock.cpu() - before >= 0.4


def test_the_section_is_replaced_in_place_and_the_rest_of_the_file_kept(tmp_path):
    path = tmp_path / "perf.md"
    path.write_text("# head\n\nkept above\n")
    peers.write_section(path, ["first"])
    path.write_text(path.read_text() + "\nkept below\n")
    peers.write_section(path, ["second", "", "table"])
    text = path.read_text()
    assert text.startswith("# head\n\nkept above\n") and text.rstrip().endswith("kept below")
    assert f"{peers.BEGIN}\nsecond\n\ntable\n{peers.END}" in text and "first" not in text


def test_without_rejax_it_says_so_and_succeeds():
    probe = subprocess.run([sys.executable, "-c", "import rejax"], capture_output=True)
    if probe.returncode == 0:
        import pytest

        pytest.skip("rejax is installed in this interpreter")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/peers.py"), "--cells", "cartpole"], capture_output=True, text=True, check=True)
    assert "rejax is not installed here" in out.stdout and "skipped" in out.stdout


def test_bad_cells_are_named_before_anything_runs():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/peers.py"), "--cells", "cartpole,pong"], capture_output=True, text=True)
    assert out.returncode != 0 and "pong" in out.stderr


def test_make_perf_prints_the_in_process_environments_beside_what_they_replace():
    """throughput.py's population-scale table: one row per in-process environment (CartPole's
    pool, Breakout's games, where the minatar extra is installed), both timings and their ratio."""
    import throughput

    lines = throughput.bench_in_process(rounds=1, steps=3, seed=0)
    rows = {line.split(" | ")[0].strip("| "): line for line in lines[2:]}
    assert "CartPole-v1" in rows and len(rows) == len(lines) - 2 >= 1
    for line in rows.values():
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[3]) > 0 and float(cells[5]) > 0 and cells[6].endswith("x")


def test_our_side_says_where_its_cold_run_went(tmp_path):
    """peer_ours.py reports, besides its cold and warm clocks, what the cold run spent before the
    first population and in the compiled callables' first calls (the act, the forward pass, the
    step), with the g++ processes' CPU; the peer table prints that line under the ratios."""
    import json

    envs = peers.our_envs_dir(peers.CARTPOLE, tmp_path)
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/peer_ours.py"), "--members", "2", "--steps", "64", "--envs-dir", str(envs),
         "--out", str(tmp_path / "runs")], capture_output=True, text=True, check=True, env={**os.environ, "ADAPTIVE_PO_COMPILE": "1"},
    )
    ours = json.loads(out.stdout.strip().splitlines()[-1])
    parts = ours["cold"]["parts"]
    assert 0 < parts["before_population"]["cpu_s"] < ours["cold"]["cpu_s"]
    assert set(parts["first_calls_wall_s"]) == {"act", "forward", "step"} and all(s > 0 for s in parts["first_calls_wall_s"].values())
    assert 0 <= parts["children_cpu_s"] <= ours["cold"]["cpu_s"]
    theirs = {**ours, "jax": "x", "cold": {"cpu_s": 1.0, "wall_s": 1.0}}
    for row in (ours, theirs):
        row["member_steps"] = 128
    lines = peers.table(peers.CARTPOLE, [("rejax", theirs), ("adaptive-po", ours)])
    assert any(line.startswith("\nWhat our cold run paid that the warm one did not") and "act " in line and "step " in line for line in lines)
