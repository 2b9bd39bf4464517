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


# -- B12 / B13 / B24: environment files -------------------------------------------------------------------
def _edited(write_env, tmp_path: Path, old: bytes, new: bytes) -> tuple[Path, Path]:
    envs = tmp_path / "envs"
    path = write_env(envs, "Edited-v1")
    raw = path.read_bytes()
    assert old in raw, raw
    path.write_bytes(raw.replace(old, new, 1))
    return envs, path


ENV_FILE_DAMAGE = {
    "not-utf8": (b"name: Edited-v1", b"name: Edited-v1 # caf\xe9", ("not UTF-8 text", "byte 0xe9", "line")),
    "nan-random-score": (b"random_score: 22.0", b"random_score: .nan", ("key 'random_score' must be a finite number", "nan")),
    "inf-threshold": (b"solved_threshold: 475.0", b"solved_threshold: -.inf", ("key 'solved_threshold' must be a finite number", "-inf")),
    "octal-n-envs": (b"n_envs: 8", b"n_envs: 010", ("key 'n_envs': 010 is an octal number in YAML (it reads as 8)", "10 without the leading zero")),
    "base-60": (b"n_steps: 32", b"n_steps: 1:30", ("key 'n_steps': 1:30 is a base-60 number in YAML (it reads as 90)",)),
}


@pytest.mark.parametrize("damage", list(ENV_FILE_DAMAGE))
@pytest.mark.parametrize("command", ["bench --dry-run", "train", "list", "zoo train"])
def test_a_damaged_environment_file_is_one_line_naming_it(tmp_path, write_env, damage, command):
    old, new, needles = ENV_FILE_DAMAGE[damage]
    envs, path = _edited(write_env, tmp_path, old, new)
    if command == "bench --dry-run":
        done = bench_dry(tmp_path, "--envs-dir", str(envs), "--envs", "Edited-v1")
    elif command == "train":
        done = cli("train", "--env", "Edited-v1", "--envs-dir", str(envs), "--timesteps", "256", "--no-progress",
                   "--out", str(tmp_path / "out"), cwd=tmp_path)
    elif command == "list":
        done = cli("list", "--envs-dir", str(envs), cwd=tmp_path)
    else:
        pytest.importorskip("rl_zoo3")
        done = cli("zoo", "train", "--algo", "esspo", "--env", "CartPole-v1", "-n", "256", "-f", str(tmp_path / "logs"),
                   "--envs-dir", str(envs), cwd=tmp_path)
    one_line(done, str(path), *needles)
    assert not (tmp_path / "out").exists()


def test_every_shipped_environment_file_reads_as_written():
    from adaptive_po.bench.config import PACKAGED_ENVS_DIR, load_env_config

    for path in sorted(PACKAGED_ENVS_DIR.glob("*.yaml")):
        load_env_config(path)


def test_quoted_and_plain_numbers_still_read():
    from adaptive_po.bench.config import ConfigError, _parse_yaml

    assert _parse_yaml(b"a: 10\nb: '010'\nc: 0\nd: 0.5\ne: [1, 2]\nf: 0x10\n", Path("x.yaml")) == {
        "a": 10, "b": "010", "c": 0, "d": 0.5, "e": [1, 2], "f": 16}
    with pytest.raises(ConfigError, match=r"x.yaml: line 1: 007 is an octal number"):
        _parse_yaml(b"[007]\n", Path("x.yaml"))
    assert _parse_yaml(b"\xef\xbb\xbfa: 1\n", Path("x.yaml")) == {"a": 1}  # an editor's byte-order mark


# -- B15 / B14: the Zoo's hyper-parameter file --------------------------------------------------------------
def test_zoo_train_with_a_missing_envs_dir_is_one_line(tmp_path):
    pytest.importorskip("rl_zoo3")
    missing = tmp_path / "no-such-folder"
    done = cli("zoo", "train", "--algo", "esspo", "--env", "CartPole-v1", "-n", "256", "-f", str(tmp_path / "logs"),
               "--envs-dir", str(missing), cwd=tmp_path)
    one_line(done, str(missing), "does not exist")
    assert not list((tmp_path / "logs").rglob("*.zip")) if (tmp_path / "logs").exists() else True


def test_zoo_train_replaces_a_planted_link_and_leaves_its_target_alone(tmp_path):
    pytest.importorskip("rl_zoo3")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    folder = tmp_path / "logs" / "adaptive-po-hyperparams"
    folder.mkdir(parents=True)
    link = folder / "esspo.yml"
    link.symlink_to(victim)
    from adaptive_po.zoo.cli import train_arguments

    argv = train_arguments(["--algo", "esspo", "--env", "CartPole-v1", "-n", "256", "-f", str(tmp_path / "logs")])
    assert argv[-2:] == ["-conf", str(link)]
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink() and "CartPole-v1" in link.read_text()
    assert sorted(p.name for p in folder.iterdir()) == ["esspo.yml"]  # no temporary file left


# -- B20: trace refuses a duplicate seed ---------------------------------------------------------------
@pytest.mark.parametrize("flags, needle", [(("--seeds", "0,0"), "seed 0 is listed twice"), (("--lags", "16,16"), "lag 16 is listed twice"),
                                           (("--algos", "ppo,ppo"), "algorithm 'ppo' is listed twice"), (("--seeds", "-1"), "seed must be")])
def test_trace_refuses_a_value_listed_twice(tmp_path, flags, needle):
    done = cli("trace", "--timesteps", "2048", "--out", str(tmp_path / "trace"), *flags, cwd=tmp_path)
    one_line(done, needle)
    assert not (tmp_path / "trace").exists()


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


# -- B11: seeds that fit the engines' seed arithmetic ----------------------------------------------------
def test_seeds_beyond_int32_after_the_population_arithmetic_are_refused_before_compute(tmp_path):
    line = one_line(bench_dry(tmp_path, "--seeds", "200000000,200000001"), "seed 200,000,000 is too large",
                    "above int32's 2,147,483,647", "a population of 2 x 8 environments")
    largest = int(line.rsplit("use seeds up to ", 1)[1].split()[0].replace(",", ""))
    done = bench(tmp_path, "--seeds", "200000000,200000001", "--executor", "inline")  # the sweep itself, not only its dry run
    assert one_line(done) == line
    assert not list((tmp_path / "out").rglob("seed-*"))
    from adaptive_po.bench.jobs import check_seeds, plan_jobs
    from adaptive_po.bench.grid import Grid, expand_grid
    from adaptive_po.dials import DataDials

    def jobs(seeds):
        return plan_jobs(expand_grid(Grid(suite="quick", envs=["CartPole-v1"], algos=["esspo"], seeds=seeds, conditions=[DataDials()],
                                          out=str(tmp_path / "out"))))

    check_seeds(jobs([largest, largest + 1]))  # the largest seed the message names is taken
    with pytest.raises(ValueError, match="is too large"):
        jobs([largest + 1, largest + 2])


@pytest.mark.parametrize("engine", ["process", "population"])
def test_a_train_seed_beyond_int32_is_one_line(tmp_path, engine):
    one_line(train(tmp_path, "--seed", "4294967296", "--engine", engine), "seed 4,294,967,296 is too large", "use seeds up to")
    assert not list((tmp_path / "out").rglob("seed-*"))
