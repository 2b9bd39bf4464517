"""Issue 67, reliability probe 4: settings and inputs that made every run fail (and the failure be
scored as the algorithm's), refused before compute in one line naming the value, exit 2.

* B9/B23: ``$ADAPTIVE_PO_COMPILE``, ``$ADAPTIVE_PO_COMPILE_AHEAD`` and ``$ADAPTIVE_PO_BUNDLE_KERNELS``
  take only their documented values (garbage was read as "on", or failed every run);
* B21: ``$TORCHINDUCTOR_CACHE_DIR`` naming a file (or a path under one);
* B19: sampler temperatures and action noise outside their documented bounds;
* B11: seeds whose environment seeds do not fit int32 after the engines' seed arithmetic;
* B12, B13, B24: an environment file that is not UTF-8, that holds ``.nan`` or ``.inf`` in a
  numeric field, or a plain integer YAML reads as octal (``010`` is 8) or base 60;
* B15, B14: ``zoo train --envs-dir`` naming a missing folder; a link planted where ``zoo train``
  writes its hyper-parameter file is replaced, never written through;
* B20: ``trace --seeds 0,0``;
* B7: the study tables' run checksum hashes the compile setting as the run feels it.

The command-line cases run the real commands through their ``main(argv)`` in this process
(:mod:`cli_here`), on real files under ``tmp_path``.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from cli_here import cli_here
from test_config_limits import ENV, bench, cli

ROOT = Path(__file__).resolve().parents[1]


def one_line(done, *needles: str) -> str:
    """Assert exit 2 and one line on stderr (no traceback) holding every needle; return it."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, f"exit {done.returncode}:\n{done.stderr[-3000:]}"
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def bench_dry(tmp_path: Path, *flags: str, **extra_env: str):
    return bench(tmp_path, "--dry-run", *flags, extra_env=extra_env)


def train(tmp_path: Path, *flags: str, **extra_env: str):
    return cli("train", "--env", "CartPole-v1", "--timesteps", "256", "--no-progress", "--out", str(tmp_path / "out"), *flags,
               cwd=tmp_path, extra_env=extra_env)


# -- B9 / B23: the compile path's switches --------------------------------------------------------------
@pytest.mark.parametrize(
    "variable, value",
    [("ADAPTIVE_PO_COMPILE", "maybe"), ("ADAPTIVE_PO_COMPILE", "2"), ("ADAPTIVE_PO_COMPILE", ""),
     ("ADAPTIVE_PO_COMPILE_AHEAD", "maybe"), ("ADAPTIVE_PO_BUNDLE_KERNELS", "garbage"), ("ADAPTIVE_PO_BUNDLE_KERNELS", "")],
)
@pytest.mark.parametrize("command", ["bench --dry-run", "train"])
def test_a_compile_switch_with_garbage_is_refused_before_compute(tmp_path, variable, value, command):
    done = bench_dry(tmp_path, **{variable: value}) if command != "train" else train(tmp_path, **{variable: value})
    one_line(done, f"${variable}", repr(value))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value, on", [("1", True), (" On ", True), ("yes", True), ("0", False), ("off", False), ("FALSE", False)])
def test_the_switches_take_their_documented_values(monkeypatch, value, on):
    from adaptive_po.compile_setup import compile_setting, switched_on

    for variable in ("ADAPTIVE_PO_COMPILE_AHEAD", "ADAPTIVE_PO_BUNDLE_KERNELS"):
        monkeypatch.setenv(variable, value)
        assert switched_on(variable) is on
        monkeypatch.delenv(variable)
        assert switched_on(variable) is True
    monkeypatch.setenv("ADAPTIVE_PO_COMPILE", value)
    assert compile_setting() == ("1" if on else "0")
    monkeypatch.setenv("ADAPTIVE_PO_COMPILE", " AUTO")
    assert compile_setting() == "auto"


# -- B21: the compile cache is a file -------------------------------------------------------------------
@pytest.mark.parametrize("where", ["the-file", "under-the-file"])
@pytest.mark.parametrize("command", ["bench --dry-run", "train"])
def test_an_inductor_cache_that_is_a_file_is_refused_before_compute(tmp_path, where, command):
    (tmp_path / "cache").write_text("not a folder\n")
    cache = str(tmp_path / "cache") if where == "the-file" else str(tmp_path / "cache" / "inductor")
    done = bench_dry(tmp_path, TORCHINDUCTOR_CACHE_DIR=cache) if command != "train" else train(tmp_path, TORCHINDUCTOR_CACHE_DIR=cache)
    one_line(done, "$TORCHINDUCTOR_CACHE_DIR", repr(cache), "not a folder")
    assert not (tmp_path / "out").exists()


# -- B19: the dials' bounds -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags, needles",
    [(("--temperature", "1e-300"), ("sampler temperature must be a number in [0.01, 100]", "1e-300")),
     (("--temperature", "1e308"), ("sampler temperature", "1e+308")),
     (("--noise", "1e308"), ("action_noise must be a number in [0, 100]", "1e+308")),
     (("--noise", "nan"), ("action_noise", "nan"))],
)
def test_an_impossible_dial_is_refused_naming_the_value(tmp_path, flags, needles):
    one_line(train(tmp_path, *flags), *needles)
    bench_flags = ("--temperatures" if flags[0] == "--temperature" else "--noise", flags[1])
    one_line(bench_dry(tmp_path, *bench_flags), *needles)
    assert not (tmp_path / "out").exists()


def test_the_dials_bounds_hold_their_ends():
    from adaptive_po.dials import MAX_ACTION_NOISE, TEMPERATURE_RANGE, DataDials

    DataDials(sampler_temperature=TEMPERATURE_RANGE[0], action_noise=MAX_ACTION_NOISE)
    DataDials(sampler_temperature=TEMPERATURE_RANGE[1])
    with pytest.raises(ValueError, match="sampler temperature"):
        DataDials(sampler_temperature=TEMPERATURE_RANGE[0] / 2)
    with pytest.raises(ValueError, match="action_noise"):
        DataDials(action_noise=MAX_ACTION_NOISE * 2)


# -- B7: the study tables' checksum and the compile setting ------------------------------------------------
def _published_rows() -> dict[str, dict[str, str]]:
    """A complete row of the extension's table per step: ``{"eager": row, "compiled": row}``."""
    with open(ROOT / "docs" / "results" / "frozen-schedule" / "per_run.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {step: next(r for r in rows if r["step"] == step and r["status"] == "complete") for step in ("eager", "compiled")}


def test_the_checksum_hashes_the_step_a_setting_gives_the_run(monkeypatch, tmp_path):
    from adaptive_po.bench.study_table import config_checksum, row_spec

    rows = _published_rows()

    def checksum(row, setting):
        if setting is None:
            monkeypatch.delenv("ADAPTIVE_PO_COMPILE", raising=False)
        else:
            monkeypatch.setenv("ADAPTIVE_PO_COMPILE", setting)
        return config_checksum(row_spec(row, str(tmp_path / "runs")))

    for step, row in rows.items():
        assert checksum(row, None) == checksum(row, "auto") == row["config_sha256"]  # published: unchanged
        # the setting that gives the run the step it was trained with keeps its checksum
        same, other = ("0", "1") if step == "eager" else ("1", "0")
        assert checksum(row, same) == row["config_sha256"], step
        assert checksum(row, other) != row["config_sha256"], step
        assert checksum(row, {"0": "off", "1": "on"}[other]) == checksum(row, other)  # normalized, not the raw text


def test_usage_states_how_the_published_tables_were_trained():
    """docs/usage.md's sentence on the published tables' step agrees with their ``step`` columns."""
    text = " ".join((ROOT / "docs" / "usage.md").read_text().split())
    assert "Every published table under `docs/results/` was trained eagerly" not in text
    for folder in ("frozen", "frozen-schedule", "minatar-learning"):
        with open(ROOT / "docs" / "results" / folder / "per_run.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        compiled = sum(r["step"] == "compiled" for r in rows)
        assert f"{compiled:,} of {len(rows):,}" in text, (folder, compiled, len(rows))
