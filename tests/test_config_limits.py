"""Issue 22, cases 4 and 5: names are names, not paths; a configuration is validated completely
before compute (policy_kwargs against the policy class, YAML size and alias expansion, string
lengths, budgets and evaluation counts), with exit 2 from the CLI and nothing written.

Every case uses real files (YAML written into a temporary ``--envs-dir``); the CLI cases run the
real ``python -m adaptive_po`` in a subprocess. The YAML bomb runs under a memory limit and a
timeout, so a broken protection fails the test instead of eating the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from adaptive_po.dials import DataDials
from adaptive_po.bench.config import (
    DEFAULT_ENVS_DIR,
    MAX_FILE_BYTES,
    ConfigError,
    get_env_config,
    load_env_config,
    read_yaml,
)
from adaptive_po.contract import check_name
from adaptive_po.bench.grid import Grid, expand_grid
from adaptive_po.hyperparams import Hyperparams, MAX_SOURCE_CHARS
from cli_here import cli_here  # noqa: E402 - tests/cli_here.py: a command line in this process

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "500"}
for _variable in ("ADAPTIVE_PO_MAX_TIMESTEPS", "ADAPTIVE_PO_MAX_EVAL_EPISODES", "ADAPTIVE_PO_MAX_EVALUATIONS"):
    ENV.pop(_variable, None)


@pytest.fixture(autouse=True)
def _default_limits(monkeypatch):
    for variable in ("ADAPTIVE_PO_MAX_TIMESTEPS", "ADAPTIVE_PO_MAX_EVAL_EPISODES", "ADAPTIVE_PO_MAX_EVALUATIONS"):
        monkeypatch.delenv(variable, raising=False)


def cli(*args: str, cwd: Path, extra_env: dict[str, str] | None = None, timeout: float = 180, **popen) -> subprocess.CompletedProcess:
    command, env = [sys.executable, "-m", "adaptive_po", *args], {**ENV, "PYTHONPATH": str(ROOT), **(extra_env or {})}
    if popen:  # a limit on the process itself (its memory): a process of its own
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, **popen)
    return cli_here(command, cwd=cwd, env=env)


def bench(sandbox: Path, *extra: str, envs: str = "CartPole-v1", **kw) -> subprocess.CompletedProcess:
    """``bench`` of one small cell with ``--out sandbox/out``, run from ``sandbox``."""
    return cli(
        "bench", "--suite", "quick", "--envs", envs, "--algos", "esspo", "--seeds", "1", "--lags", "0",
        "--workers", "1", "--device", "cpu", "--no-report", "--no-progress", "--out", str(sandbox / "out"), *extra,
        cwd=sandbox, **kw,
    )


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*"))


def grid(**kw) -> Grid:
    base = dict(suite="quick", envs=["CartPole-v1"], algos=["esspo"], seeds=[0], conditions=[DataDials()], device="cpu")
    return Grid(**{**base, **kw})


# -- case 4: names are names, not paths -----------------------------------------------------------
@pytest.mark.parametrize("name", ["CartPole-v1", "quick", "my_suite.2", "ppo@clip_range=0.3,n_epochs=x0.25", "a" * 100])
def test_a_name_is_accepted(name):
    assert check_name("suite name", name) == name


@pytest.mark.parametrize(
    "name,why",
    [
        ("", "non-empty"), (None, "non-empty"), (".", "a path"), ("..", "a path"), ("../escape", "a path"),
        ("/abs", "a path"), ("a/b", "a path"), ("a\\b", "a path"), (".logs", "not a valid name"),
        ("-x", "not a valid name"), ("a b", "not a valid name"), ("caf\u00e9", "not a valid name"),
        ("a\nb", "not a valid name"), ("a" * 101, "limit is 100"),
    ],
)
def test_a_path_or_an_odd_name_is_refused_and_named(name, why):
    with pytest.raises(ValueError) as err:
        check_name("suite name", name)
    assert why in str(err.value)
    if name:
        assert repr(name)[:50] in str(err.value) or repr(name[:100]) in str(err.value)


def test_the_grid_refuses_a_suite_name_that_is_a_path(tmp_path):
    for bad in ("../escape", str(tmp_path / "abs"), "", "."):
        with pytest.raises(ValueError, match="suite name"):
            expand_grid(grid(suite_name=bad, out=str(tmp_path / "out")))
    assert not any(tmp_path.iterdir())
    assert expand_grid(grid(suite_name="mine", out=str(tmp_path / "out")))[0].run_dir.parts[-5] == "mine"


def test_an_environment_named_dot_dot_is_refused(tmp_path, write_env):
    path = write_env(tmp_path, "..", file_name="..")  # the file `...yaml`, whose stem is ".."
    assert path.name == "...yaml"
    with pytest.raises(ConfigError) as err:
        load_env_config(path)
    assert str(path) in str(err.value) and "'name'" in str(err.value) and "'..'" in str(err.value)
    with pytest.raises(ValueError, match=r"environment name '\.\.' is a path"):
        get_env_config("..", tmp_path)
    with pytest.raises(ValueError, match=r"environment name '\.\.' is a path"):
        expand_grid(grid(envs=[".."], envs_dir=str(tmp_path), out=str(tmp_path / "out")))
    assert not (tmp_path / "out").exists()


def test_cli_refuses_suite_names_and_env_names_that_are_paths(tmp_path, write_env):
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    # the real run, not a dry run: it would have written runs, logs, the lock and the report
    escape = bench(sandbox, "--suite-name", "../escape", "--timesteps", "2048")
    assert escape.returncode == 2, escape.stderr
    assert "suite name '../escape' is a path" in escape.stderr
    absolute = sandbox / "abs"
    dry = bench(sandbox, "--suite-name", str(absolute), "--dry-run")
    assert dry.returncode == 2 and f"suite name '{absolute}' is a path" in dry.stderr
    envs = sandbox / "envs"
    write_env(envs, "..", file_name="..")
    dots = bench(sandbox, "--envs-dir", str(envs), "--dry-run", envs="..")
    assert dots.returncode == 2 and "environment name '..' is a path" in dots.stderr
    train = cli("train", "--env", "CartPole-v1", "--suite-name", "../escape", "--timesteps", "2048",
                "--device", "cpu", "--out", str(sandbox / "out"), cwd=sandbox)
    assert train.returncode == 2 and "suite name '../escape' is a path" in train.stderr
    assert "Traceback" not in escape.stderr + dry.stderr + dots.stderr + train.stderr
    # nothing was written anywhere: no out/, no escape/, no abs/, only the environment file
    assert files_under(sandbox) == [envs, envs / "...yaml"]
    assert not (tmp_path / "escape").exists()


# -- case 5: policy_kwargs checked against the policy class ---------------------------------------
@pytest.mark.parametrize(
    "policy_kwargs,needle",
    [
        ({"bogus_kw": 1}, "unknown keyword(s) ['bogus_kw'] for MlpPolicy"),
        ({"net_arch": -5}, "hyperparams.policy_kwargs.net_arch must be a list"),
        ({"net_arch": [64, -5]}, "hyperparams.policy_kwargs.net_arch[1] must be a positive integer"),
        ({"net_arch": {"pi": [64], "critic": [64]}}, "takes the keys pi and vf"),
        ({"net_arch": [100_000]}, "wider than the limit"),
        ({"net_arch": [8192] * 4}, "weights between hidden layers"),
        ({"net_arch": [8] * 40}, "at most 32 layer widths"),
        ({"activation_fn": "relu"}, "hyperparams.policy_kwargs.activation_fn: unknown activation 'relu'"),
        ({"activation_fn": 3}, "hyperparams.policy_kwargs.activation_fn must be a Python class"),
        ({"ortho_init": "yes"}, "hyperparams.policy_kwargs.ortho_init must be true or false"),
        ({"log_std_init": float("nan")}, "log_std_init must be a finite number"),
        ({"optimizer_kwargs": [1, 2]}, "optimizer_kwargs must be a mapping"),
        ({"use_sde": True}, "'use_sde' is set by the algorithm"),
        ({"lr_schedule": 1}, "'lr_schedule' is set by the algorithm"),
    ],
)
def test_bad_policy_kwargs_are_refused_when_the_file_is_read(tmp_path, policy_kwargs, needle, write_env):
    path = write_env(tmp_path, "Policy-v1", hyperparams__policy_kwargs=policy_kwargs)
    with pytest.raises(ConfigError) as err:
        load_env_config(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_good_policy_kwargs_build_the_policy_in_the_driver(tmp_path, write_env):
    write_env(tmp_path, "Policy-v1", hyperparams__policy_kwargs={"net_arch": {"pi": [32, 32], "vf": [64]}, "ortho_init": False,
                                                                    "optimizer_kwargs": {"eps": 1e-7}})
    specs = expand_grid(grid(envs=["Policy-v1"], envs_dir=str(tmp_path), out=str(tmp_path / "out")))
    assert len(specs) == 1
    # the keys are the SB3 class's own: a Python caller may still pass classes
    import torch

    hp = Hyperparams(source="test", policy="MlpPolicy", n_envs=1, n_steps=8, batch_size=8, learning_rate=1e-3,
                     policy_kwargs={"activation_fn": torch.nn.ReLU, "net_arch": [8]})
    assert hp.policy_kwargs["activation_fn"] is torch.nn.ReLU


@pytest.mark.parametrize(
    "policy_kwargs,needle",
    [
        ({"optimizer_kwargs": {"bogus": 1}}, "TypeError"),
        ({"features_extractor_kwargs": {"features_dim": 8}}, "TypeError"),  # FlattenExtractor takes none
        ({"squash_output": True}, "squash_output=True is not supported"),
    ],
)
def test_policy_kwargs_the_policy_refuses_are_named_before_compute(tmp_path, policy_kwargs, needle, write_env):
    path = write_env(tmp_path, "Policy-v1", hyperparams__policy_kwargs=policy_kwargs)
    load_env_config(path)  # well-formed: only building the policy finds the problem
    with pytest.raises(ConfigError) as err:
        expand_grid(grid(envs=["Policy-v1"], envs_dir=str(tmp_path), out=str(tmp_path / "out")))
    message = str(err.value)
    assert str(path) in message and "hyperparams.policy_kwargs" in message and needle in message
    assert not (tmp_path / "out").exists()


def test_cli_refuses_bad_policy_kwargs_with_exit_2_before_compute(tmp_path, write_env):
    envs = tmp_path / "envs"
    write_env(envs, "Bogus-v1", hyperparams__policy_kwargs={"bogus_kw": 1})
    write_env(envs, "Optim-v1", hyperparams__policy_kwargs={"optimizer_kwargs": {"bogus": 1}})
    bogus = bench(tmp_path, "--envs-dir", str(envs), "--dry-run", envs="Bogus-v1")
    assert bogus.returncode == 2 and "bogus_kw" in bogus.stderr and "Bogus-v1.yaml" in bogus.stderr, bogus.stderr
    optim = bench(tmp_path, "--envs-dir", str(envs), "--timesteps", "2048", envs="Optim-v1")  # a real run
    assert optim.returncode == 2 and "Optim-v1.yaml" in optim.stderr and "'bogus'" in optim.stderr, optim.stderr
    assert "Traceback" not in bogus.stderr + optim.stderr
    assert not (tmp_path / "out").exists()


# -- case 5: YAML size, aliases, nesting and strings ----------------------------------------------
def bomb_text(name: str, levels: int = 9) -> str:
    """CartPole's file with a billion-node alias bomb (10 x 10 x ... x 10) in policy_kwargs."""
    text = (DEFAULT_ENVS_DIR / "CartPole-v1.yaml").read_text().replace("name: CartPole-v1", f"name: {name}")
    lines = ["  policy_kwargs:", "    a0: &a0 [" + ", ".join(["64"] * 10) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"    a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
    return text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def _limit_memory() -> None:
    limit = 3 * 1024**3  # enough for python, torch and the CLI; far from what an expanded bomb needs
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_a_yaml_alias_bomb_is_refused_by_the_loader_and_the_cli(tmp_path):
    envs = tmp_path / "envs"
    envs.mkdir()
    path = envs / "Bomb-v1.yaml"
    path.write_text(bomb_text("Bomb-v1"))
    assert len(path.read_bytes()) < 2000
    script = (
        "import sys\n"
        "from adaptive_po.bench.config import ConfigError, load_env_config\n"
        "try:\n    load_env_config(sys.argv[1])\nexcept ConfigError as err:\n    print(err); sys.exit(2)\n"
        "import json; json.dumps(load_env_config(sys.argv[1]).hyperparams.to_json())\n"  # what a worker did
    )
    loaded = subprocess.run([sys.executable, "-c", script, str(path)], env={**ENV, "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory)
    assert loaded.returncode == 2, loaded.stdout + loaded.stderr
    assert str(path) in loaded.stdout and "aliases are expanded" in loaded.stdout
    dry = bench(tmp_path, "--envs-dir", str(envs), "--dry-run", envs="Bomb-v1", timeout=120, preexec_fn=_limit_memory)
    assert dry.returncode == 2 and "Bomb-v1.yaml" in dry.stderr and "alias bomb" in dry.stderr, dry.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "text,needle",
    [
        ("a: &a [1, *a]\n", "recursive"),
        ("a: &a {b: *a}\n", "recursive"),
        ("a: " + "[" * 40 + "1" + "]" * 40 + "\n", "nested more than 32 levels"),
        ("a: " + "[" * 3000 + "1" + "]" * 3000 + "\n", "nested"),
        ("a: &a [[[[[[[[[[[[1]]]]]]]]]]]]\nb: &b [[[[[[[[[[[[*a]]]]]]]]]]]]\nc: [[[[[[[[[[*b]]]]]]]]]]\n", "nested more than 32 levels"),
        ("a: " + "x" * 5000 + "\n", "5,000 characters at line 1"),
        ("a: 1\n---\nb: 2\n", "not valid YAML"),
    ],
)
def test_yaml_structure_bounds_are_named(tmp_path, text, needle):
    path = tmp_path / "Odd-v1.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_yaml(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_a_plain_file_and_merge_keys_still_load(tmp_path):
    path = tmp_path / "Merge-v1.yaml"
    path.write_text("base: &base {x: 1, y: 2}\nderived:\n  <<: *base\n  y: 3\n")
    assert read_yaml(path) == {"base": {"x": 1, "y": 2}, "derived": {"x": 1, "y": 3}}
    for name in ("CartPole-v1", "Pong-v5"):
        assert read_yaml(DEFAULT_ENVS_DIR / f"{name}.yaml")["name"] == name


def test_a_huge_source_is_refused_not_copied_into_every_run(tmp_path, write_env):
    huge = write_env(tmp_path, "Huge-v1", hyperparams__source="x" * 10_000_000)
    with pytest.raises(ConfigError) as err:
        load_env_config(huge)
    assert str(huge) in str(err.value) and f"at most {MAX_FILE_BYTES:,} bytes" in str(err.value)
    long = write_env(tmp_path, "Long-v1", hyperparams__source="y" * 3000)
    with pytest.raises(ConfigError) as err:
        load_env_config(long)
    assert str(long) in str(err.value) and f"hyperparams.source must be at most {MAX_SOURCE_CHARS} characters" in str(err.value)
    assert load_env_config(write_env(tmp_path, "Fine-v1", hyperparams__source="z" * MAX_SOURCE_CHARS))


# -- case 5: budgets and evaluation counts --------------------------------------------------------
def test_budget_and_evaluation_limits_name_the_value_and_the_override(tmp_path, monkeypatch, write_env):
    write_env(tmp_path, "Episodes-v1", evaluation__episodes=1_000_000_000)
    write_env(tmp_path, "Budget-v1", budget__quick=1e15, evaluation__every=10**12)  # 1,000 evaluations
    write_env(tmp_path, "Often-v1", evaluation__every=1)
    cases = {
        "Episodes-v1": ("key 'evaluation.episodes' is 1,000,000,000", "ADAPTIVE_PO_MAX_EVAL_EPISODES"),
        "Budget-v1": ("key 'budget.quick' is 1,000,000,000,000,000", "ADAPTIVE_PO_MAX_TIMESTEPS"),
        "Often-v1": ("the number of evaluations is 100,000", "ADAPTIVE_PO_MAX_EVALUATIONS"),
    }
    for env, (needle, variable) in cases.items():
        with pytest.raises(ConfigError) as err:
            expand_grid(grid(envs=[env], envs_dir=str(tmp_path), out=str(tmp_path / "out")))
        message = str(err.value)
        assert f"{env}.yaml" in message and needle in message and f"set {variable}" in message, message
        monkeypatch.setenv(variable, "1e16")  # a user who means it
        assert expand_grid(grid(envs=[env], envs_dir=str(tmp_path), out=str(tmp_path / "out")))
    monkeypatch.setenv("ADAPTIVE_PO_MAX_TIMESTEPS", "lots")
    with pytest.raises(ValueError, match="ADAPTIVE_PO_MAX_TIMESTEPS='lots' must be a positive integer"):
        expand_grid(grid(out=str(tmp_path / "out")))
    assert not (tmp_path / "out").exists()


def test_timesteps_flag_above_the_limit_is_refused(tmp_path):
    with pytest.raises(ConfigError) as err:
        expand_grid(grid(timesteps=10**15, out=str(tmp_path / "out")))
    assert "--timesteps is 1,000,000,000,000,000, above the limit of 1,000,000,000" in str(err.value)
    assert "ADAPTIVE_PO_MAX_TIMESTEPS" in str(err.value)


def test_cli_refuses_an_absurd_evaluation_count_with_exit_2(tmp_path, write_env):
    envs = tmp_path / "envs"
    write_env(envs, "Episodes-v1", evaluation__episodes=1_000_000_000)
    dry = bench(tmp_path, "--envs-dir", str(envs), "--dry-run", envs="Episodes-v1")
    assert dry.returncode == 2 and "evaluation.episodes" in dry.stderr and "ADAPTIVE_PO_MAX_EVAL_EPISODES" in dry.stderr, dry.stderr
    assert not (tmp_path / "out").exists()
    # a user who means it raises the limit; the dry run then lists the run
    allowed = bench(tmp_path, "--envs-dir", str(envs), "--dry-run", "--list-runs", envs="Episodes-v1",
                    extra_env={"ADAPTIVE_PO_MAX_EVAL_EPISODES": "2000000000"})
    assert allowed.returncode == 0 and "quick/Episodes-v1/esspo/lag0_noise0_replay0/seed-0" in allowed.stdout, allowed.stderr
