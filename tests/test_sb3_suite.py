"""SB3's own tests, run against our classes: the proof that they are drop-ins for SB3's PPO.

At test time the test files of the *installed* SB3 version's source distribution are fetched from
the package index (``pip download --no-deps --no-binary :all: stable-baselines3==<version>``) into
``.cache/sb3-tests/<version>/`` (ignored by git through ``.cache/.gitignore``, which this module
writes; nothing of SB3's is committed here). The PPO-named cases (``-k ppo``) of SB3's
algorithm-generic test files then run in a pytest subprocess whose plugin replaces
``stable_baselines3.PPO`` (and ``stable_baselines3.ppo.PPO``) before SB3's test modules import it:

* face ``ppo``: :class:`adaptive_po.PPO`; every case must pass;
* face ``esspo``: a subclass of :class:`adaptive_po.ESSPO` that drops PPO's trust-region knobs
  (``clip_range``, ``clip_range_vf``, ``target_kl``) from the constructor call, as a user
  switching from PPO drops them; every case must pass except those in :data:`ESSPO_EXCLUSIONS`,
  which must fail (so the list stays exact), and those in :data:`ESSPO_UNSEEDED`, whose outcome hangs
  on an unseeded draw (checked directly, seeded, at the end of this module). The subclass is named ``PPO``, as the class it stands
  in for: two cases assert that name (the TensorBoard run folder ``PPO_1`` in
  ``test_tensorboard[ppo]``, the text of SB3's GPU warning in ``test_ppo_warnings``); ESSPO under
  its own name logs to ``ESSPO_1`` and says "ESSPO" there. The ``test_ppo[0.2-...]`` cases pass
  with the value clip dropped: they check that training runs, which it does.

Where the index cannot be reached (or the download fails) the test is skipped with pip's message,
never passed. Each face takes about 35-60 s on one core; both are marked ``slow``. The five gaps
those cases found are also checked directly, offline, at the end of this module.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "sb3-tests"

#: SB3's algorithm-generic test files whose PPO-named cases are run
SB3_TEST_FILES: tuple[str, ...] = (
    "test_run.py", "test_save_load.py", "test_predict.py", "test_callbacks.py", "test_train_eval_mode.py",
    "test_deterministic.py", "test_tensorboard.py", "test_cnn.py", "test_spaces.py", "test_dict_env.py",
)

#: the ESSPO face's expected failures (node ids relative to SB3's tests folder), and why: each
#: exercises one of PPO's clip knobs, which the ESS objective does not have
ESSPO_EXCLUSIONS: dict[str, str] = {
    "test_run.py::test_ppo[-0.2-CartPole-v1]": (
        "expects an AssertionError for a negative clip_range_vf; ESSPO has no value clip (the face "
        "drops the knob; ESSPO itself refuses any clip_range_vf with a TypeError)"
    ),
    "test_run.py::test_ppo[-0.2-Pendulum-v1]": "as the CartPole case: a negative clip_range_vf, a knob ESSPO does not take",
    "test_save_load.py::test_save_load_backward_compatible[PPO]": (
        "builds the model with clip_range=lambda _: 0.3 and asserts model.clip_range is a FloatSchedule "
        "after load; ESSPO has no clip range"
    ),
    "test_save_load.py::test_save_load_clip_range_portable[PPO]": (
        "asserts model.clip_range holds SB3's ConstantSchedule(0.2) before and after load; ESSPO has no clip range"
    ),
}

#: the ESSPO face's cases whose outcome hangs on an unseeded draw, and why; they may pass or fail, and
#: what they check apart from that draw is checked here directly, seeded
#: (:func:`test_esspo_meets_sb3s_ppo_warnings_case_but_the_sign_of_its_loss`)
ESSPO_UNSEEDED: dict[str, str] = {
    "test_run.py::test_ppo_warnings": (
        "asserts train/loss > 0 on one unseeded run, where train/loss is the last minibatch's loss and that "
        "minibatch holds one sample; ESSPO's surrogate is -w log pi(a|s) A, whose value takes the sign of a log "
        "density (Pendulum's Gaussian), so about 1 run in 40 logs a negative loss (seed 78 does, below)"
    ),
}

#: fewer passing cases than this means the selection went wrong (SB3 2.9.2 has 71 PPO cases here,
#: 5 of them skipped on a machine without CUDA)
MIN_CASES = 60

#: the pytest plugin of the subprocess: it swaps the class in before SB3's test modules import it
FACE_PLUGIN = '''
"""Replace SB3's PPO by adaptive_po's class of the face in $ADAPTIVE_PO_SB3_FACE."""
import os

import stable_baselines3
import stable_baselines3.ppo

if os.environ["ADAPTIVE_PO_SB3_FACE"] == "ppo":
    from adaptive_po import PPO as Face
else:
    from adaptive_po import ESSPO

    class Face(ESSPO):
        """ESSPO called as SB3's PPO is (its name included), PPO's trust-region knobs dropped."""

        def __init__(self, *args, **kwargs):
            for name in ("clip_range", "clip_range_vf", "target_kl"):
                kwargs.pop(name, None)
            super().__init__(*args, **kwargs)

    Face.__name__ = Face.__qualname__ = "PPO"

stable_baselines3.PPO = Face
stable_baselines3.ppo.PPO = Face
'''

PYTEST_INI = """[pytest]
markers =
    expensive: SB3's marker for expensive tests
"""


def _sb3_tests() -> Path:
    """SB3's tests folder for the installed version (fetched once into the cache)."""
    version = metadata.version("stable-baselines3")
    target = CACHE / version
    if (target / "tests" / "test_run.py").is_file():
        return target / "tests"
    CACHE.mkdir(parents=True, exist_ok=True)
    ignore = CACHE.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# fetched at test time (tests/test_sb3_suite.py), never committed\n*\n")
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   "--disable-pip-version-check", "-d", tmp, f"stable-baselines3=={version}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip(f"SB3's test files not checked: `pip download stable-baselines3=={version}` timed out (index unreachable?)")
        archives = list(Path(tmp).glob("*.tar.gz"))
        if done.returncode != 0 or not archives:
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            pytest.skip(
                f"SB3's test files not checked: could not fetch the source distribution of stable-baselines3=={version} "
                f"from the package index: {' | '.join(tail)}"
            )
        staging = Path(tmp) / "extracted"
        with tarfile.open(archives[0]) as archive:
            members = [m for m in archive.getmembers() if m.isfile() and "/tests/" in m.name and m.name.endswith(".py")]
            archive.extractall(staging, members=members, filter="data")
        (root,) = {m.name.split("/tests/")[0] for m in members}  # stable_baselines3-<version>
        try:
            os.replace(staging / root, target)  # atomic: a parallel worker may have done the same
        except OSError:
            if not (target / "tests" / "test_run.py").is_file():
                raise
    return target / "tests"


def _outcomes(junit: Path) -> dict[str, str]:
    """Node id (``test_file.py::name[params]``) -> passed, failed, error or skipped."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        node = f"{module}.py::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[node] = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        out[node] = {"failure": "failed"}.get(out[node], out[node])
    return out


def run_face(face: str, tests: Path, work: Path) -> tuple[dict[str, str], str]:
    """Run SB3's PPO-named cases of :data:`SB3_TEST_FILES` against one face; the outcomes and the
    output's tail."""
    plugin_dir = work / "plugin"
    plugin_dir.mkdir(parents=True, exist_ok=True)
    (plugin_dir / "adaptive_po_sb3_face.py").write_text(FACE_PLUGIN)
    ini = work / "pytest.ini"
    ini.write_text(PYTEST_INI)
    junit = work / f"{face}.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(
        ADAPTIVE_PO_SB3_FACE=face, OMP_NUM_THREADS="1", MPLBACKEND="Agg",
        PYTHONPATH=os.pathsep.join(filter(None, [str(plugin_dir), str(REPO), env.get("PYTHONPATH")])),
    )
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "adaptive_po_sb3_face", "-p", "no:cacheprovider", "-p", "no:xdist",
        "-c", str(ini), "--rootdir", str(tests), "-k", "ppo", f"--junitxml={junit}", "-W", "ignore::DeprecationWarning",
        *[str(tests / name) for name in SB3_TEST_FILES],
    ]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    if not junit.is_file():
        pytest.fail(f"SB3's tests did not run (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return _outcomes(junit), done.stdout[-3000:]


@pytest.fixture(scope="module")
def sb3_tests() -> Path:
    return _sb3_tests()


def _counts(outcomes: dict[str, str]) -> str:
    kinds = ("passed", "failed", "error", "skipped")
    return ", ".join(f"{sum(v == k for v in outcomes.values())} {k}" for k in kinds)


@pytest.mark.slow
def test_sb3_ppo_cases_pass_with_adaptive_po_ppo(sb3_tests: Path, tmp_path: Path) -> None:
    outcomes, tail = run_face("ppo", sb3_tests, tmp_path)
    print(f"SB3's PPO cases against adaptive_po.PPO: {_counts(outcomes)}")
    bad = sorted(node for node, outcome in outcomes.items() if outcome in ("failed", "error"))
    assert not bad, f"SB3's PPO cases failing with adaptive_po.PPO: {bad}\n{tail}"
    assert sum(v == "passed" for v in outcomes.values()) >= MIN_CASES, tail


@pytest.mark.slow
def test_sb3_ppo_cases_pass_with_esspo_except_the_clip_knobs(sb3_tests: Path, tmp_path: Path) -> None:
    outcomes, tail = run_face("esspo", sb3_tests, tmp_path)
    print(f"SB3's PPO cases against adaptive_po.ESSPO: {_counts(outcomes)}; excluded: {sorted(ESSPO_EXCLUSIONS)}")
    bad = {node for node, outcome in outcomes.items() if outcome in ("failed", "error")}
    unexpected = bad - set(ESSPO_EXCLUSIONS) - set(ESSPO_UNSEEDED)
    assert not unexpected, f"SB3's PPO cases failing with ESSPO: {sorted(unexpected)}\n{tail}"
    assert set(ESSPO_UNSEEDED) <= set(outcomes), f"unseeded cases not found in SB3's tests: {sorted(set(ESSPO_UNSEEDED) - set(outcomes))}"
    assert set(ESSPO_EXCLUSIONS) <= bad, (
        f"listed as ESSPO exclusions but not failing (update ESSPO_EXCLUSIONS): {sorted(set(ESSPO_EXCLUSIONS) - bad)}"
    )
    assert sum(v == "passed" for v in outcomes.values()) >= MIN_CASES - len(ESSPO_EXCLUSIONS) - len(ESSPO_UNSEEDED), tail


def test_esspo_meets_sb3s_ppo_warnings_case_but_the_sign_of_its_loss() -> None:
    """SB3's ``test_ppo_warnings`` against ESSPO, seeded: the refusal, the truncated-minibatch warning,
    a finite loss, the GPU advice; and a seed at which the loss is negative, which the ESS objective allows."""
    from adaptive_po import ESSPO

    with pytest.raises(AssertionError):
        ESSPO("MlpPolicy", "Pendulum-v1", n_steps=1)
    ESSPO("MlpPolicy", "Pendulum-v1", n_steps=1, batch_size=1, normalize_advantage=False, seed=0).learn(4)
    losses = {}
    for seed in (0, 78):
        with pytest.warns(UserWarning, match=r"there will be a truncated mini-batch of size 1"):
            model = ESSPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=63, seed=seed, device="cpu")
            model.learn(64)
        losses[seed] = model.logger.name_to_value["train/loss"]
        assert np.isfinite(losses[seed])
    assert losses[0] > 0 > losses[78], losses
    with pytest.warns(UserWarning, match=r"You are trying to run ESSPO on the GPU"):
        model = ESSPO("MlpPolicy", "Pendulum-v1", device="cpu")
        model.device = torch.device("cuda")  # as SB3's case: pretend, and ask for the advice
        model._maybe_recommend_cpu()


# -- the five gaps, offline ----------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, names", [
    (dict(clip_range_vf=-0.2), "clip_range_vf must be > 0, got -0.2"),
    (dict(n_steps=1), "n_steps * n_envs must be > 1"),
])
def test_bad_settings_raise_what_sb3_callers_and_ours_both_catch(kwargs: dict, names: str) -> None:
    from adaptive_po import PPO
    from adaptive_po.hyperparams import HyperparameterError

    for caught in (AssertionError, ValueError):  # SB3's type, and ours
        with pytest.raises(caught) as info:
            PPO("MlpPolicy", "Pendulum-v1", device="cpu", **kwargs)
        assert isinstance(info.value, HyperparameterError) and names in str(info.value)


@pytest.mark.parametrize("clip_range, value", [(0.2, 0.2), (lambda _: 0.3, 0.3)])
def test_clip_range_is_sb3s_float_schedule_after_construction_and_load(tmp_path: Path, clip_range, value) -> None:
    from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule

    from adaptive_po import PPO

    model = PPO("MlpPolicy", "CartPole-v1", n_steps=64, n_epochs=1, clip_range=clip_range, clip_range_vf=0.5, device="cpu")
    model.learn(64)
    model.save(tmp_path / "ppo")
    for m in (model, PPO.load(tmp_path / "ppo", device="cpu")):
        assert isinstance(m.clip_range, FloatSchedule) and m.clip_range.value_schedule(0) == value
        assert isinstance(m.clip_range_vf, FloatSchedule) and m.clip_range_vf(1.0) == 0.5
        if clip_range == 0.2:
            assert isinstance(m.clip_range.value_schedule, ConstantSchedule) and m.clip_range == 0.2
    # SB3's way of changing a knob on load reaches the objective
    loaded = PPO.load(tmp_path / "ppo", device="cpu", custom_objects={"clip_range": 0.1})
    assert loaded.clip_range == 0.1 and loaded._objective_schedules["clip_range"](1.0) == 0.1
