"""The sampler dials: a sampling temperature and a sampler that computes at lower precision.

Large-scale RL samples with an inference engine whose numerics differ from the trainer's: a
sampling temperature other than 1, and weights held in bf16, fp16 or fp8. The paper's headline
experiments ("Trust the Batch", arXiv 2605.12380) use a temperature of 1.2 and an fp8 sampler
with a bf16 learner. These dials reproduce both on the benchmark's small policies, for every
algorithm and both engines (the :class:`~adaptive_po.collector.Collector` and the population
engine share the functions here):

* **temperature** ``T``: sample from ``logits / T`` (categorical, multicategorical, Bernoulli) or
  with the std scaled by ``T`` (Gaussian: ``log_std + log T``);
* **precision**: the actor's weights are cast to the sampler's format and the actor's forward
  pass runs at that precision, while the learner stays float32.

  - ``bf16`` / ``fp16``: weights and activations in that dtype; the distribution parameters
    come back as float32.
  - ``fp8-e4m3`` / ``fp8-e5m2``: per-tensor scaling as inference engines quantize weights
    (``scale = amax / max_representable``; ``q = cast(w / scale)``), then dequantized to float32
    (``q * scale``) because CPUs have no float8 matmul. The weights carry the fp8 rounding
    error, the mismatch that matters; activations stay float32.

The recorded behaviour distribution is the sampler's own (the ``actual`` recording: the
sampler's log-probs, as FeynRL's fp8 rollouts store them) or the learner's clean float32
distribution at T = 1 (the ``policy`` recording: trusting the trainer's probabilities).
"""

from __future__ import annotations


import torch
from torch import Tensor

from adaptive_po import distributions as D
from adaptive_po.distributions import Kind
from adaptive_po.dials import SAMPLER_PRECISIONS, DataDials

#: the sampler's number formats; ``fp32`` is the learner's own (no mismatch); owned by the data dials
PRECISIONS: tuple[str, ...] = SAMPLER_PRECISIONS

_CAST_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp8-e4m3": torch.float8_e4m3fn,
    "fp8-e5m2": torch.float8_e5m2,
}


def validate_sampler_settings(temperature: float, precision: str) -> None:
    """Raise ``ValueError`` naming the bad setting (the data dials' own validation)."""
    DataDials(sampler_temperature=temperature, sampler_precision=precision)


def compute_dtype(precision: str) -> torch.dtype:
    """The dtype the sampler's forward pass runs in: bf16/fp16 natively, fp8 dequantized to float32."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)


def quantize(weights: Tensor, precision: str, batch_dims: int = 0) -> Tensor:
    """``weights`` as the sampler holds them, in :func:`compute_dtype`.

    :param batch_dims: leading dimensions that index separate tensors (the population engine's
        member axis): fp8 scales are per tensor, so one scale per index of these dimensions.
    """
    if precision == "fp32":
        return weights
    dtype = _CAST_DTYPES[precision]
    if precision in ("bf16", "fp16"):
        return weights.to(dtype)
    w = weights.to(torch.float32)
    finfo_max = torch.finfo(dtype).max
    reduce_dims = tuple(range(batch_dims, w.dim()))
    amax = w.abs().amax(dim=reduce_dims, keepdim=True) if reduce_dims else w.abs()
    # an all-zero tensor keeps scale 1 (nothing to round)
    scale = torch.where(amax > 0, amax / finfo_max, torch.ones_like(amax))
    q = (w / scale).clamp(-finfo_max, finfo_max).to(dtype)
    return q.to(torch.float32) * scale


def temper(kind: Kind, params: Tensor, temperature: Tensor | float) -> Tensor:
    """Sampling temperature on flat distribution parameters: ``logits / T`` (every logit kind:
    categorical, multicategorical, the bits of a Bernoulli), or the Gaussian's ``log_std + log T``
    (its std times T)."""
    if kind != "gaussian":
        return params / temperature
    d = params.shape[-1] // 2
    t = torch.as_tensor(temperature, dtype=params.dtype, device=params.device)
    return torch.cat([params[..., :d], params[..., d:] + torch.log(t)], dim=-1)


def behaviour_params(
    kind: Kind,
    sampler_params: Tensor,
    *,
    sigma: Tensor | float | None = None,
    standard_normal: Tensor | None = None,
    temperature: Tensor | float | None = None,
) -> Tensor:
    """The distribution the actor samples from, as flat parameters: the dials applied in their one
    order (the collector and the population engine both call this). ``sampler_params`` are the
    sampler's own parameters: the learner's (fp32) or its low-precision copy's (the precision dial
    comes first); then the action noise ``sigma * standard_normal`` on the logits / mean (skipped
    when ``sigma`` is None); then the temperature (skipped when None). ``sigma`` and
    ``temperature`` may be per-member tensors broadcast against the parameters."""
    params = sampler_params
    if sigma is not None:
        params = D.perturb(kind, params, sigma, standard_normal)
    if temperature is not None:
        params = temper(kind, params, temperature)
    return params
