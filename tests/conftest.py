"""Shared test settings: one torch thread (small MLPs run faster that way on 2 cores)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)
