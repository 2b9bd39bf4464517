"""Action distributions as flat parameter tensors: pure functions, vmap-friendly.

A distribution over the actions of one state is given by a flat float vector, the layout the
rollout buffers store as the behaviour distribution:

* ``"categorical"`` (Discrete actions): ``(..., n)`` unnormalized logits;
* ``"gaussian"`` (Box actions): ``(..., 2 d)`` = ``[mean, log_std]`` of a diagonal Gaussian.

The ``kind`` argument is a static string (chosen once from the action space), never a data-dependent
branch, so every function here can run under :func:`torch.func.vmap`. The formulas are those of
``torch.distributions`` (which SB3's distributions wrap), so the population engine and the SB3
classes agree to float32 rounding; the tests check it. The noise dial (:func:`perturb`) is the
collector's, shared by both engines.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from adaptive_po.objectives import categorical_kl, diag_gaussian_kl

Kind = Literal["categorical", "gaussian"]
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def kind_of_space(action_space: object) -> Kind:
    """The distribution kind of a gymnasium action space (Discrete or Box)."""
    from gymnasium import spaces

    if isinstance(action_space, spaces.Discrete):
        return "categorical"
    if isinstance(action_space, spaces.Box):
        return "gaussian"
    raise ValueError(f"supported action spaces are Discrete and Box, got {action_space}")


def _split(params: Tensor) -> tuple[Tensor, Tensor]:
    d = params.shape[-1] // 2
    return params[..., :d], params[..., d:]


def log_prob(kind: Kind, params: Tensor, actions: Tensor) -> Tensor:
    """``(...,)`` log-probability of ``actions`` (``(...,)`` integer indices, or ``(..., d)``)."""
    if kind == "categorical":
        log_p = torch.log_softmax(params, dim=-1)
        return torch.gather(log_p, -1, actions.long().unsqueeze(-1)).squeeze(-1)
    mean, log_std = _split(params)
    var = torch.exp(2.0 * log_std)
    return (-((actions - mean) ** 2) / (2.0 * var) - log_std - _HALF_LOG_2PI).sum(-1)


def entropy(kind: Kind, params: Tensor) -> Tensor:
    """``(...,)`` entropy in nats."""
    if kind == "categorical":
        log_p = torch.log_softmax(params, dim=-1)
        return -(log_p.exp() * log_p).sum(-1)
    _, log_std = _split(params)
    return (0.5 + _HALF_LOG_2PI + log_std).sum(-1)


def kl(kind: Kind, p: Tensor, q: Tensor) -> Tensor:
    """``(...,)`` analytic KL(p || q) between two distributions of the same kind."""
    if kind == "categorical":
        return categorical_kl(p, q)
    mean_p, log_std_p = _split(p)
    mean_q, log_std_q = _split(q)
    return diag_gaussian_kl(mean_p, log_std_p, mean_q, log_std_q)


def mode(kind: Kind, params: Tensor) -> Tensor:
    """The deterministic action: the most likely index, or the mean."""
    if kind == "categorical":
        return params.argmax(-1)
    return _split(params)[0]


def sample(kind: Kind, params: Tensor, noise: Tensor) -> Tensor:
    """An action from ``params`` given the noise that makes it random (reparameterized):
    ``noise`` is uniform in (0, 1) of the logits' shape (Gumbel-max) for ``categorical``, standard
    normal of the action's shape for ``gaussian``. The caller owns the random stream."""
    if kind == "categorical":
        gumbel = -torch.log(-torch.log(noise.clamp(min=torch.finfo(noise.dtype).tiny)))
        return (params + gumbel).argmax(-1)
    mean, log_std = _split(params)
    return mean + torch.exp(log_std) * noise


def sampling_noise_shape(kind: Kind, params_shape: torch.Size) -> torch.Size:
    """The shape of the ``noise`` :func:`sample` needs for parameters of ``params_shape``."""
    if kind == "categorical":
        return params_shape
    return torch.Size((*params_shape[:-1], params_shape[-1] // 2))


def perturb(kind: Kind, params: Tensor, sigma: Tensor | float, standard_normal: Tensor) -> Tensor:
    """The action-noise dial: ``sigma`` times standard normal noise added to the logits
    (categorical) or to the mean (gaussian; the std is kept). ``standard_normal`` has the shape of
    the logits, or of the mean."""
    if kind == "categorical":
        return params + sigma * standard_normal
    mean, log_std = _split(params)
    return torch.cat([mean + sigma * standard_normal, log_std], dim=-1)
