"""adaptive-po: policy optimization under stale and mismatched data.

Three layers, each a part of the tree:

* the library (this package's modules): the objectives, the collector, the rollout buffers and the
  Stable-Baselines3 algorithms a user imports (``from adaptive_po import ESSPO``);
* :mod:`adaptive_po.environments`: envpool and gymnasium behind SB3's ``VecEnv``;
* :mod:`adaptive_po.bench`: the benchmark (env configs, suites, registry, runner, sweep, CLI)
  and :mod:`adaptive_po.contract`, the torch-free run-folder contract.

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
    "Collector": "adaptive_po.collector",
    "effective_sample_size": "adaptive_po.objectives",
}

__all__ = [*_EXPORTS, "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from adaptive_po.algorithms import ESSPO, PPO, BatchPolicyOptimization, DecoupledPPO
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
