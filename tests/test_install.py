"""A non-editable install finds its suite from any folder.

A wheel is built from a copy of the sources (a build writes ``build/`` and ``*.egg-info`` beside
them, which must not land in the checkout) with the set-up's setuptools, and installed, not ``-e``,
into a fresh virtualenv without the system's site-packages. Its dependencies are the
ones this checkout's set-up installed (a ``.pth`` line makes them visible, after the venv's own
site-packages), so the test reads no package index: ``pip check`` then proves that the wheel's
declared requirements are met by them, the way the set-up's fresh install resolves them. From a
folder outside the checkout, ``adaptive-po list`` lists the shipped suite and ``adaptive-po train``
trains one of its environments; ``--envs-dir`` still reads a user's own suite. Marked ``slow``,
which plain ``pytest`` (and so ``make test``) still runs.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, timeout: int = 1200) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ADAPTIVE_PO_ENVS", "VIRTUAL_ENV", "PYTHONHOME")}
    env["OMP_NUM_THREADS"] = "1"
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{cmd} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.mark.slow
def test_a_wheel_install_runs_the_shipped_suite_from_any_folder(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "adaptive_po", source / "adaptive_po", ignore=ignore)

    environment = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(environment)  # the set-up's pip installs into it
    python = environment / "bin" / "python"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the set-up's packages, behind the venv's own site-packages (a plain path line: the checkout's
    # editable finder in there is not activated, so the package can only come from the install)
    own_site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=elsewhere).stdout.strip())
    (own_site / "setup-packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    offline = ["--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    _run([sys.executable, "-m", "pip", "wheel", *offline, "--wheel-dir", str(tmp_path / "wheels"), str(source)], cwd=elsewhere)
    (wheel,) = (tmp_path / "wheels").glob("adaptive_po-*.whl")
    into = [sys.executable, "-m", "pip", "--python", str(python)]
    _run([*into, "install", *offline, "--no-compile", str(wheel)], cwd=elsewhere)
    _run([*into, "check"], cwd=elsewhere)

    # the installed copy, not the checkout, and its suite inside it
    where = _run([str(python), "-c", "import adaptive_po, pathlib; print(pathlib.Path(adaptive_po.__file__).parent)"], cwd=elsewhere)
    installed = Path(where.stdout.strip())
    assert installed.is_relative_to(environment), installed
    shipped = sorted(p.name for p in (installed / "env_configs").glob("*.yaml"))
    assert shipped == sorted(p.name for p in (ROOT / "adaptive_po" / "env_configs").glob("*.yaml"))

    cli = str(environment / "bin" / "adaptive-po")
    listing = _run([cli, "list"], cwd=elsewhere).stdout
    assert str(installed / "env_configs") in listing and "CartPole-v1" in listing and "Pendulum-v1" in listing

    _run([cli, "train", "--env", "CartPole-v1", "--algo", "esspo", "--timesteps", "1024", "--engine", "process",
          "--device", "cpu", "--out", str(tmp_path / "runs")], cwd=elsewhere)
    assert (tmp_path / "runs" / "train" / "CartPole-v1" / "esspo" / "lag0_noise0_replay0" / "seed-0" / "COMPLETE").is_file()

    # a user's own suite, through --envs-dir
    own = tmp_path / "my-suite"
    own.mkdir()
    config = yaml.safe_load((ROOT / "adaptive_po" / "env_configs" / "CartPole-v1.yaml").read_text())
    config["name"] = "MyCartPole"
    (own / "MyCartPole.yaml").write_text(yaml.safe_dump(config))
    listing = _run([cli, "list", "--envs-dir", str(own)], cwd=elsewhere).stdout
    assert "MyCartPole" in listing and "Pendulum-v1" not in listing
    _run([cli, "train", "--env", "MyCartPole", "--envs-dir", str(own), "--algo", "ppo", "--timesteps", "512",
          "--engine", "process", "--device", "cpu", "--out", str(tmp_path / "runs")], cwd=elsewhere)
    assert (tmp_path / "runs" / "train" / "MyCartPole" / "ppo" / "lag0_noise0_replay0" / "seed-0" / "COMPLETE").is_file()


def test_the_suite_is_package_data():
    """What the wheel test proves in minutes, checked in milliseconds on every run: the suite lives
    inside the package, pyproject ships it, and the default folder is the packaged one."""
    import tomllib

    from adaptive_po.bench.config import DEFAULT_ENVS_DIR, PACKAGED_ENVS_DIR, available_envs

    assert PACKAGED_ENVS_DIR == ROOT / "adaptive_po" / "env_configs"
    if "ADAPTIVE_PO_ENVS" not in os.environ:
        assert DEFAULT_ENVS_DIR == PACKAGED_ENVS_DIR
    assert {"CartPole-v1", "Pendulum-v1"} <= set(available_envs(PACKAGED_ENVS_DIR))
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["adaptive_po"]
    assert "env_configs/*.yaml" in package_data
