"""adaptive-po: policy optimization under stale and mismatched data.

Layers, each a part of the tree, every import pointing down (``tests/test_architecture.py``):

* :mod:`adaptive_po.dials` (the data dials) and :mod:`adaptive_po.contract` (the run-folder
  format): torch-free, the bottom;
* the library: the objectives, distributions, the update (:mod:`adaptive_po.update`, the one
  training step and its loop), the collector and sampler, the rollout buffers, the
  Stable-Baselines3 algorithms a user imports (``from adaptive_po import ESSPO``, ``PQN``), the population
  learner, and :mod:`adaptive_po.environments` (envpool, gymnasium, MinAtar behind SB3's ``VecEnv``);
* :mod:`adaptive_po.bench`: configs, suites, grids, executors, run folders, tuning, tracing;
* :mod:`adaptive_po.analysis`: reads run folders through the contract only; reports;
* :mod:`adaptive_po.zoo`: the RL Baselines3 Zoo's entry point for our algorithms;
* :mod:`adaptive_po.cli`: the ``adaptive-po`` command, the top.

The exports below are lazy: ``import adaptive_po`` (or the contract module) loads no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    "ESSPO": "adaptive_po.algorithms",
    "PPO": "adaptive_po.algorithms",
    "DecoupledPPO": "adaptive_po.algorithms",
    "BatchPolicyOptimization": "adaptive_po.algorithms",
    "PQN": "adaptive_po.pqn",
    "AfterABS": "adaptive_po.batch_scaling",
    "Collector": "adaptive_po.collector",
    "effective_sample_size": "adaptive_po.objectives",
}

__all__ = [*_EXPORTS, "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from adaptive_po.algorithms import ESSPO, PPO, BatchPolicyOptimization, DecoupledPPO
    from adaptive_po.batch_scaling import AfterABS
    from adaptive_po.pqn import PQN
    from adaptive_po.collector import Collector
    from adaptive_po.objectives import effective_sample_size


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'adaptive_po' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
