"""Rollout storage that keeps what off-policy corrections need.

:class:`BehaviourRolloutBuffer` is SB3's :class:`RolloutBuffer` plus, per transition, the
parameters of the behaviour distribution that really produced the action (the flat layouts of
:mod:`adaptive_po.distributions`: logits, or diagonal-Gaussian mean and log-std) and the terminal
observations of time-limit truncations. :class:`DictBehaviourRolloutBuffer` is the same over SB3's
:class:`DictRolloutBuffer`, for Dict observations (``MultiInputPolicy``). With those, the learner
can (re)compute values and GAE advantages with its *current* critic at train time, for fresh,
lagged and replayed batches alike: :meth:`BehaviourRolloutBuffer.freeze` hands the filled buffer to
the update as a :class:`~adaptive_po.update.StoredRollout` (:func:`adaptive_po.update.compute_gae`).

Observations and actions are stored as SB3's buffers store them: in the space's dtype, shaped
by :func:`stable_baselines3.common.preprocessing.get_obs_shape` and ``get_action_dim`` (a
Discrete observation is one number, a Dict observation a dict of such arrays, actions are flat);
the policy's own preprocessing (one-hot, image scaling) runs at every forward pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

from adaptive_po import distributions as D
from adaptive_po.update import Observations, StoredRollout, map_observations


class BehaviourRolloutBuffer(RolloutBuffer):
    """SB3's rollout buffer plus behaviour-distribution parameters and truncation observations.

    :param behaviour_param_dim: number of floats that describe the behaviour distribution of one
        transition (:func:`behaviour_param_dim`: ``n_actions`` logits for Discrete, ``2 * action_dim``
        for Box, ...).
    """

    def __init__(self, *args, behaviour_param_dim: int, **kwargs) -> None:
        self.behaviour_param_dim = behaviour_param_dim
        super().__init__(*args, **kwargs)

    def reset(self) -> None:
        super().reset()
        self.behaviour_params = np.zeros((self.buffer_size, self.n_envs, self.behaviour_param_dim), dtype=np.float32)
        self.timeouts: list[tuple[int, int, Observations]] = []
        self.last_observation: Observations | None = None
        self.last_dones: np.ndarray | None = None

    def _as_stored(self, observation: Any, leading: tuple[int, ...]) -> Observations:
        """``observation`` as the buffer stores observations: their dtype, ``(*leading, *obs_shape)``."""
        return map_observations(
            lambda o, stored: np.asarray(o, dtype=stored.dtype).reshape(*leading, *stored.shape[2:]), observation, self.observations
        )

    def add_transition(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        episode_start: np.ndarray,
        behaviour_log_prob: th.Tensor,
        behaviour_params: th.Tensor,
    ) -> None:
        """Store one vectorized step; values are left at zero (the learner recomputes them)."""
        self.behaviour_params[self.pos] = behaviour_params.detach().cpu().numpy()
        self.add(obs, action, reward, episode_start, th.zeros(self.n_envs), behaviour_log_prob)

    def add_timeout(self, env_index: int, terminal_observation: np.ndarray) -> None:
        """Record that env ``env_index`` was truncated at the step just added."""
        self.timeouts.append((self.pos - 1, env_index, self._as_stored(terminal_observation, ())))

    def set_last(self, observation: Any, dones: np.ndarray) -> None:
        """The observation after the last step (``(n_envs, ...)``) and whether it began an episode."""
        self.last_observation = self._as_stored(observation, (self.n_envs,))
        self.last_dones = np.array(dones, dtype=np.float32)

    def freeze(self, copy: bool) -> StoredRollout:
        """The filled buffer as a :class:`StoredRollout` (copied when it must outlive the buffer)."""
        if not self.full or self.last_observation is None:
            raise RuntimeError("freeze() needs a full buffer with its last observation")
        take = (lambda a: a.copy()) if copy else (lambda a: a)
        if self.timeouts:
            index = np.array([(s, e) for s, e, _ in self.timeouts], dtype=np.int64)
            terminal = map_observations(lambda *parts: np.stack(parts), *(o for _, _, o in self.timeouts))
        else:
            index = np.zeros((0, 2), dtype=np.int64)
            terminal = map_observations(lambda stored: np.zeros((0, *stored.shape[2:]), dtype=stored.dtype), self.observations)
        return StoredRollout(
            observations=map_observations(take, self.observations),
            actions=take(self.actions),
            rewards=take(self.rewards),
            episode_starts=take(self.episode_starts),
            behaviour_log_prob=take(self.log_probs),
            behaviour_params=take(self.behaviour_params),
            last_observation=map_observations(np.array, self.last_observation),
            last_dones=np.array(self.last_dones, dtype=np.float32),
            timeout_index=index,
            timeout_observations=terminal,
        )


class DictBehaviourRolloutBuffer(BehaviourRolloutBuffer, DictRolloutBuffer):
    """:class:`BehaviourRolloutBuffer` for Dict observation spaces (SB3's ``DictRolloutBuffer``
    storage: one float32 array per key)."""


def behaviour_param_dim(action_space: spaces.Space) -> int:
    """Floats per transition needed to store the behaviour distribution for ``action_space``:
    the logits of Discrete (``n``), MultiDiscrete (``sum(nvec)``) and MultiBinary (``n``), or the
    mean and log-std of each flattened Box dimension. Other spaces: ``ValueError``."""
    kind = D.kind_of_space(action_space)
    if kind == "categorical":
        return int(action_space.n)  # type: ignore[attr-defined]
    if isinstance(kind, D.MultiCategorical):
        return sum(kind.sizes)
    if kind == "bernoulli":
        return int(action_space.shape[0])  # type: ignore[index]
    return 2 * int(np.prod(action_space.shape))  # type: ignore[arg-type]
