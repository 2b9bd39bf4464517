"""Action distributions as flat parameter tensors: pure functions, vmap-friendly.

A distribution over the actions of one state is given by a flat float vector, the layout the
rollout buffers store as the behaviour distribution:

* ``"categorical"`` (Discrete actions): ``(..., n)`` unnormalized logits;
* :class:`MultiCategorical` (MultiDiscrete actions): ``(..., n_1 + ... + n_c)``, the logits of
  each component concatenated (SB3's ``MultiCategoricalDistribution`` layout); an action is one
  index per component, ``(..., c)``; log-prob, entropy and KL are sums over the components;
* ``"bernoulli"`` (MultiBinary actions): ``(..., n)``, one logit per bit; an action is ``(..., n)``
  zeros and ones; log-prob, entropy and KL are sums over the bits;
* ``"gaussian"`` (Box actions of any shape, flattened to ``d`` dimensions; gSDE too, whose
  per-state std is stored as it is): ``(..., 2 d)`` = ``[mean, log_std]`` of a diagonal Gaussian.

The ``kind`` argument is static (chosen once from the action space: a string, or a
:class:`MultiCategorical` that carries its component sizes), never a data-dependent branch, so
every function here can run under :func:`torch.func.vmap`. The formulas are those of
``torch.distributions`` (which SB3's distributions wrap), so the population engine and the SB3
classes agree to float32 rounding; the tests check it. The noise dial (:func:`perturb`) is the
collector's, shared by both engines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Union

import torch
from torch import Tensor
from torch.nn import functional as F



@dataclass(frozen=True)
class MultiCategorical:
    """The kind of MultiDiscrete actions: independent categoricals with ``sizes`` choices each."""

    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        sizes = tuple(int(n) for n in self.sizes)
        if not sizes or min(sizes) < 1:
            raise ValueError(f"a multicategorical needs component sizes >= 1, got {self.sizes!r}")
        object.__setattr__(self, "sizes", sizes)


Kind = Union[Literal["categorical", "bernoulli", "gaussian"], MultiCategorical]
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def kind_of_space(action_space: object) -> Kind:
    """The distribution kind of a gymnasium action space: Discrete, MultiDiscrete (one
    dimension of components), MultiBinary (one dimension of bits) or Box (any shape)."""
    from gymnasium import spaces

    if isinstance(action_space, spaces.Discrete):
        return "categorical"
    if isinstance(action_space, spaces.MultiDiscrete) and action_space.nvec.ndim == 1:
        return MultiCategorical(tuple(int(n) for n in action_space.nvec))
    if isinstance(action_space, spaces.MultiBinary) and len(action_space.shape) == 1:
        return "bernoulli"
    if isinstance(action_space, spaces.Box):
        return "gaussian"
    raise ValueError(
        "supported action spaces are Discrete, Box, MultiDiscrete and MultiBinary (the last two with "
        f"one dimension, as SB3's PPO), got {action_space}"
    )


def _logit_components(kind: MultiCategorical, params: Tensor) -> tuple[Tensor, ...]:
    return torch.split(params, kind.sizes, dim=-1)


def categorical_kl(logits_p: Tensor, logits_q: Tensor) -> Tensor:
    """``(B,)`` KL(p || q) in nats of categorical distributions from their ``(B, n_actions)`` logits
    (unnormalized): p the policy being trained, q the behaviour policy."""
    log_p = torch.log_softmax(logits_p, dim=-1)
    log_q = torch.log_softmax(logits_q, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def diag_gaussian_kl(mean_p: Tensor, log_std_p: Tensor, mean_q: Tensor, log_std_q: Tensor) -> Tensor:
    """KL(p || q) per row for diagonal Gaussians, summed over action dimensions.

    :param mean_p, log_std_p: ``(B, d)`` parameters of p (the policy being trained).
    :param mean_q, log_std_q: ``(B, d)`` parameters of q (the behaviour policy).
    :return: ``(B,)`` KL in nats.
    """
    var_ratio = torch.exp(2.0 * (log_std_p - log_std_q))
    mean_term = ((mean_p - mean_q) * torch.exp(-log_std_q)) ** 2
    return (0.5 * (var_ratio + mean_term - 1.0) - (log_std_p - log_std_q)).sum(-1)


def bernoulli_kl(logits_p: Tensor, logits_q: Tensor) -> Tensor:
    """KL(p || q) per row for independent Bernoulli bits given their logits, summed over the bits:
    ``sigma(l_p) (log sigma(l_p) - log sigma(l_q)) + sigma(-l_p) (log sigma(-l_p) - log sigma(-l_q))``."""
    p = torch.sigmoid(logits_p)
    on = p * (F.logsigmoid(logits_p) - F.logsigmoid(logits_q))
    off = (1.0 - p) * (F.logsigmoid(-logits_p) - F.logsigmoid(-logits_q))
    return (on + off).sum(-1)


def _split(params: Tensor) -> tuple[Tensor, Tensor]:
    d = params.shape[-1] // 2
    return params[..., :d], params[..., d:]


def log_prob(kind: Kind, params: Tensor, actions: Tensor) -> Tensor:
    """``(...,)`` log-probability of ``actions`` (``(...,)`` integer indices, or ``(..., d)``)."""
    if kind == "categorical":
        log_p = torch.log_softmax(params, dim=-1)
        return torch.gather(log_p, -1, actions.long().unsqueeze(-1)).squeeze(-1)
    if isinstance(kind, MultiCategorical):
        return sum(
            torch.gather(torch.log_softmax(logits, dim=-1), -1, actions[..., i : i + 1].long()).squeeze(-1)
            for i, logits in enumerate(_logit_components(kind, params))
        )
    if kind == "bernoulli":  # torch.distributions.Bernoulli's formula
        return -F.binary_cross_entropy_with_logits(params, actions.to(params.dtype), reduction="none").sum(-1)
    mean, log_std = _split(params)
    var = torch.exp(2.0 * log_std)
    return (-((actions - mean) ** 2) / (2.0 * var) - log_std - _HALF_LOG_2PI).sum(-1)


def entropy(kind: Kind, params: Tensor) -> Tensor:
    """``(...,)`` entropy in nats."""
    if kind == "categorical":
        log_p = torch.log_softmax(params, dim=-1)
        return -(log_p.exp() * log_p).sum(-1)
    if isinstance(kind, MultiCategorical):
        return sum(entropy("categorical", logits) for logits in _logit_components(kind, params))
    if kind == "bernoulli":
        return F.binary_cross_entropy_with_logits(params, torch.sigmoid(params), reduction="none").sum(-1)
    _, log_std = _split(params)
    return (0.5 + _HALF_LOG_2PI + log_std).sum(-1)


def total_variation(kind: Kind, p: Tensor, q: Tensor) -> Tensor:
    """``(...,)`` total variation ``0.5 sum_a |p(a) - q(a)|`` between two categorical distributions
    (flat logits); ``ValueError`` for another kind (a Gaussian's has no closed form)."""
    if kind != "categorical":
        raise ValueError(f"the total variation is computed for categorical distributions only, got {kind!r}")
    return 0.5 * (torch.softmax(p, dim=-1) - torch.softmax(q, dim=-1)).abs().sum(-1)


def kl(kind: Kind, p: Tensor, q: Tensor) -> Tensor:
    """``(...,)`` analytic KL(p || q) between two distributions of the same kind."""
    if kind == "categorical":
        return categorical_kl(p, q)
    if isinstance(kind, MultiCategorical):
        return sum(categorical_kl(a, b) for a, b in zip(_logit_components(kind, p), _logit_components(kind, q)))
    if kind == "bernoulli":
        return bernoulli_kl(p, q)
    mean_p, log_std_p = _split(p)
    mean_q, log_std_q = _split(q)
    return diag_gaussian_kl(mean_p, log_std_p, mean_q, log_std_q)


def mode(kind: Kind, params: Tensor) -> Tensor:
    """The deterministic action: the most likely index (of each component), the likelier value of
    each bit (0 on a tie, as SB3's ``round(p)``), or the mean."""
    if kind == "categorical":
        return params.argmax(-1)
    if isinstance(kind, MultiCategorical):
        return torch.stack([logits.argmax(-1) for logits in _logit_components(kind, params)], dim=-1)
    if kind == "bernoulli":
        return (params > 0).to(params.dtype)
    return _split(params)[0]


def sample(kind: Kind, params: Tensor, noise: Tensor) -> Tensor:
    """An action from ``params`` given the noise that makes it random (reparameterized):
    ``noise`` is uniform in (0, 1) of the logits' shape for the logit kinds (Gumbel-max for the
    categoricals, ``u < sigmoid(logit)`` for the bits), standard normal of the action's shape for
    ``gaussian``. The caller owns the random stream."""
    if kind == "categorical":
        gumbel = -torch.log(-torch.log(noise.clamp(min=torch.finfo(noise.dtype).tiny)))
        return (params + gumbel).argmax(-1)
    if isinstance(kind, MultiCategorical):
        return torch.stack(
            [sample("categorical", logits, u) for logits, u in zip(_logit_components(kind, params), _logit_components(kind, noise))],
            dim=-1,
        )
    if kind == "bernoulli":
        return (noise < torch.sigmoid(params)).to(params.dtype)
    mean, log_std = _split(params)
    return mean + torch.exp(log_std) * noise


def sampling_noise_shape(kind: Kind, params_shape: torch.Size) -> torch.Size:
    """The shape of the ``noise`` :func:`sample` needs for parameters of ``params_shape``."""
    if kind != "gaussian":
        return params_shape
    return torch.Size((*params_shape[:-1], params_shape[-1] // 2))


def perturb(kind: Kind, params: Tensor, sigma: Tensor | float, standard_normal: Tensor) -> Tensor:
    """The action-noise dial: ``sigma`` times standard normal noise added to the logits
    (categorical, multicategorical, bernoulli) or to the mean (gaussian; the std is kept).
    ``standard_normal`` has the shape of the logits, or of the mean."""
    if kind != "gaussian":
        return params + sigma * standard_normal
    mean, log_std = _split(params)
    return torch.cat([mean + sigma * standard_normal, log_std], dim=-1)
