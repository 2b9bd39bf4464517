"""Shared test settings: one torch thread (small MLPs run faster that way on 2 cores), and under
pytest-xdist (`make test`) the slow tests handed out first."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """On an xdist worker, the tests marked ``slow`` first (otherwise in collection order).

    xdist hands tests out in the order the workers collected them, as workers become free; a
    minutes-long test handed out last would run alone at the end while the other workers idle.
    A plain (serial) run keeps the collection order.
    """
    if not hasattr(config, "workerinput"):
        return
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable sort
