"""Feature extractors for image observations, and the classes a YAML file can name.

A YAML file cannot name a Python class, so ``hyperparams.policy_kwargs.features_extractor_class``
takes one of the names in :data:`FEATURES_EXTRACTORS` and ``activation_fn`` one of
:data:`ACTIVATIONS` (Python callers may pass the classes themselves).

The two MinAtar networks of the MinAtar tier: the paper's CNN (:class:`MinAtarCNN`, the suite's)
and the MLP of the JAX PPO baselines (gymnax-blines: the grid flattened, separate actor and critic
of 2 x 256 ReLU units), which needs no class: ``policy: MlpPolicy`` with
``policy_kwargs: {net_arch: {pi: [256, 256], vf: [256, 256]}, activation_fn: ReLU}``.
"""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import torch as th
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, FlattenExtractor, NatureCNN
from torch import nn


class MinAtarCNN(BaseFeaturesExtractor):
    """The network of the MinAtar paper (Young & Tian 2019, section 4): one 3x3 convolution with 16
    channels, stride 1, no padding, ReLU, then a dense layer of ``features_dim`` (128) units, ReLU.
    On a ``(C, 10, 10)`` observation that is ``16 * 8 * 8 = 1024`` conv features. The actor and the
    critic heads of SB3's policy sit on top (``net_arch: []``: no further hidden layers).

    Observations are MinAtar's {0, 1} channels as uint8; SB3's preprocessing turns them into floats
    (the space is not an image space in SB3's sense, so nothing is divided by 255).
    """

    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 128, channels: int = 16) -> None:
        super().__init__(observation_space, features_dim)
        in_channels, height, width = observation_space.shape
        self.conv = nn.Sequential(nn.Conv2d(in_channels, channels, kernel_size=3, stride=1), nn.ReLU(), nn.Flatten())
        self.linear = nn.Sequential(nn.Linear(channels * (height - 2) * (width - 2), features_dim), nn.ReLU())

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.linear(self.conv(observations))


#: the feature extractors a YAML file can name
FEATURES_EXTRACTORS: dict[str, type[BaseFeaturesExtractor]] = {
    "FlattenExtractor": FlattenExtractor,
    "MinAtarCNN": MinAtarCNN,
    "NatureCNN": NatureCNN,
}


#: the activation functions a YAML file can name
ACTIVATIONS: dict[str, type[nn.Module]] = {"ELU": nn.ELU, "LeakyReLU": nn.LeakyReLU, "ReLU": nn.ReLU, "SiLU": nn.SiLU, "Tanh": nn.Tanh}


def resolve_policy_kwargs(policy_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``policy_kwargs`` whose ``features_extractor_class`` and ``activation_fn``, if
    names, are the classes."""
    kwargs = dict(policy_kwargs or {})
    for key, known in (("features_extractor_class", FEATURES_EXTRACTORS), ("activation_fn", ACTIVATIONS)):
        name = kwargs.get(key)
        if isinstance(name, str):
            if name not in known:
                raise ValueError(f"unknown {key} {name!r}; known names: {sorted(known)}")
            kwargs[key] = known[name]
    return kwargs
