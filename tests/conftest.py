"""Shared test settings: one torch thread (small MLPs run faster that way on 2 cores), under
pytest-xdist (`make test`) the slow tests handed out first, and the shared fixtures."""

import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture
def write_env():
    """``write_env(folder, name, base="CartPole-v1", file_name=None, **changes) -> Path``: a copy of
    environment ``base``'s YAML file renamed ``name``, with ``changes`` (``hyperparams__n_steps=8``;
    None removes a key), written into ``folder``; see
    :func:`adaptive_po.bench.config.write_env_config_copy`."""
    from adaptive_po.bench.config import write_env_config_copy

    def write(folder: Path, name: str, base: str = "CartPole-v1", *, file_name: str | None = None, **changes) -> Path:
        return write_env_config_copy(base, folder, name=name, file_name=file_name, **changes)

    return write


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """On an xdist worker, the tests marked ``slow`` first (otherwise in collection order).

    xdist hands tests out in the order the workers collected them, as workers become free; a
    minutes-long test handed out last would run alone at the end while the other workers idle.
    A plain (serial) run keeps the collection order.
    """
    if not hasattr(config, "workerinput"):
        return
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable sort


def pinned_torch() -> str:
    """The torch version the project pins (the Makefile's ``TORCH_SPEC``), e.g. ``2.13.0``."""
    text = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    for line in text.splitlines():
        if line.startswith("TORCH_SPEC ?= torch=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError("the Makefile pins no torch (TORCH_SPEC ?= torch==...)")


def compiled_or_skip(fell_back: bool, why: str = "the engine runs eagerly") -> None:
    """Where a compiled callable fell back to eager: **fail** on the pinned torch with a C++
    compiler here (the project's compiled path must work there: a private torch internal it
    relies on may have changed), else skip, saying why (another torch, or no compiler)."""
    if not fell_back:
        return
    import shutil

    version = torch.__version__.split("+", 1)[0]
    compiler = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if version == pinned_torch() and compiler:
        pytest.fail(f"the compiled path fell back to eager on the pinned torch {version} with a compiler here ({compiler}): {why}")
    pytest.skip(f"torch.compile is unavailable here (torch {version}, compiler {compiler or 'none'}): {why}")

