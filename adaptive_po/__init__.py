"""adaptive-po: policy optimization under stale and mismatched data.

The batch-adaptive ESS objective ("Trust the Batch, On- or Off-Policy", arXiv 2605.12380) as a
Stable-Baselines3 algorithm, a collector with controllable staleness and action-noise mismatch,
and the baselines it is measured against.
"""

from adaptive_po.algorithms import ESSPO, PPO, BatchPolicyOptimization, DecoupledPPO
from adaptive_po.collector import Collector
from adaptive_po.objectives import effective_sample_size

__version__ = "0.1.0"

__all__ = ["ESSPO", "PPO", "DecoupledPPO", "BatchPolicyOptimization", "Collector", "effective_sample_size", "__version__"]
