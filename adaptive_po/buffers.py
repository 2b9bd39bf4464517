"""Rollout storage that keeps what off-policy corrections need.

:class:`BehaviourRolloutBuffer` is SB3's :class:`RolloutBuffer` plus, per transition, the
parameters of the behaviour distribution that really produced the action (the flat layouts of
:mod:`adaptive_po.distributions`: logits, or diagonal-Gaussian mean and log-std) and the terminal
observations of time-limit truncations. :class:`DictBehaviourRolloutBuffer` is the same over SB3's
:class:`DictRolloutBuffer`, for Dict observations (``MultiInputPolicy``). With those, the learner
can (re)compute values and GAE advantages with its *current* critic at train time, for fresh,
lagged and replayed batches alike (see :func:`compute_gae`).

Observations and actions are stored as SB3's buffers store them: in the space's dtype, shaped
by :func:`stable_baselines3.common.preprocessing.get_obs_shape` and ``get_action_dim`` (a
Discrete observation is one number, a Dict observation a dict of such arrays, actions are flat);
the policy's own preprocessing (one-hot, image scaling) runs at every forward pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Union

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

from adaptive_po import distributions as D

#: an observation batch: one array, or one array per key of a Dict observation space
Observations = Union[np.ndarray, dict[str, np.ndarray]]


def map_observations(fn: Callable[..., Any], *observations: Any) -> Any:
    """``fn`` applied to an observation array, or to each part of Dict observations (the parts of
    all arguments with the same key together); the result has the same structure."""
    if isinstance(observations[0], dict):
        return {key: fn(*(o[key] for o in observations)) for key in observations[0]}
    return fn(*observations)


@dataclass
class StoredRollout:
    """One collected batch, frozen: everything needed to train on it again later.

    Arrays are ``(n_steps, n_envs, ...)``; ``log_probs`` is the behaviour log-probability
    recorded at sampling time. Observations (``observations``, ``last_observation``,
    ``timeout_observations``) are dicts of such arrays for Dict observation spaces.
    """

    observations: Observations
    actions: np.ndarray
    rewards: np.ndarray
    episode_starts: np.ndarray
    behaviour_log_prob: np.ndarray
    behaviour_params: np.ndarray
    last_observation: Observations
    last_dones: np.ndarray
    #: (step, env) of each time-limit truncation, and the true last observation there
    timeout_index: np.ndarray
    timeout_observations: Observations

    @property
    def size(self) -> int:
        return int(self.rewards.size)


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


#: how the training loops turn rewards and values into advantages and the critic's targets
ADVANTAGE_ESTIMATORS: tuple[str, ...] = ("gae", "vtrace")


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    episode_starts: np.ndarray,
    last_values: np.ndarray,
    last_dones: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation over ``(n_steps, n_envs)`` arrays, SB3's convention.

    ``episode_starts[t]`` marks that the observation at step ``t`` began an episode, so the
    transition at ``t - 1`` ended one; ``last_dones`` plays that role after the last step.
    Truncation bootstrapping must already be folded into ``rewards``.

    :return: ``(advantages, returns)``, both ``(n_steps, n_envs)`` float32, ``returns = A + V``.
    """
    n_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    last_gae = np.zeros(rewards.shape[1:], dtype=np.float32)
    for step in reversed(range(n_steps)):
        if step == n_steps - 1:
            next_non_terminal = 1.0 - last_dones.astype(np.float32)
            next_values = last_values
        else:
            next_non_terminal = 1.0 - episode_starts[step + 1]
            next_values = values[step + 1]
        delta = rewards[step] + gamma * next_values * next_non_terminal - values[step]
        last_gae = delta + gamma * gae_lambda * next_non_terminal * last_gae
        advantages[step] = last_gae
    return advantages, (advantages + values).astype(np.float32)


def compute_vtrace(
    rewards: np.ndarray,
    values: np.ndarray,
    episode_starts: np.ndarray,
    last_values: np.ndarray,
    last_dones: np.ndarray,
    log_rhos: np.ndarray,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """V-trace targets and policy-gradient advantages over ``(n_steps, n_envs)`` arrays.

    IMPALA (Espeholt et al. 2018, arXiv 1802.01561, section 4.1; google-deepmind/scalable_agent
    ``vtrace.py``), in :func:`compute_gae`'s convention (``episode_starts``, ``last_dones``,
    truncation bootstrapping folded into ``rewards``). With ``rho_t = exp(log_rhos[t])`` =
    pi_current / pi_b at the stored action, ``n_t`` the non-terminal flag of the next state:

    * ``delta_t = min(rho_bar, rho_t) * (r_t + gamma * n_t * V(s_{t+1}) - V(s_t))``
    * ``v_t - V(s_t) = delta_t + gamma * n_t * min(c_bar, rho_t) * (v_{t+1} - V(s_{t+1}))``, with
      ``v_n = V(s_n)`` = ``last_values`` after the last step;
    * advantage ``r_t + gamma * n_t * v_{t+1} - V(s_t)``.

    The advantage is *not* multiplied by ``min(rho_bar, rho_t)`` as in ``scalable_agent``: the
    policy loss applies that truncated weight itself (:func:`adaptive_po.objectives.truncated_is_loss`).
    With ``rho = 1`` everywhere (and ``rho_bar, c_bar >= 1``) this is :func:`compute_gae` at
    ``gae_lambda = 1``.

    :return: ``(advantages, returns)``, both ``(n_steps, n_envs)`` float32; ``returns`` are the
        V-trace targets ``v_t`` the critic regresses on.
    """
    if not rho_bar > 0 or not c_bar > 0:
        raise ValueError(f"rho_bar and c_bar must be > 0, got {rho_bar!r}, {c_bar!r}")
    rewards64 = np.asarray(rewards, dtype=np.float64)
    values64 = np.asarray(values, dtype=np.float64)
    starts64 = np.asarray(episode_starts, dtype=np.float64)
    log_rhos64 = np.asarray(log_rhos, dtype=np.float64)
    # clip in log space first, so that a huge log-ratio cannot overflow exp
    clipped_rhos = np.exp(np.minimum(log_rhos64, math.log(rho_bar)))
    cs = np.exp(np.minimum(log_rhos64, math.log(c_bar)))
    n_steps = rewards64.shape[0]
    vs = np.zeros_like(rewards64)
    advantages = np.zeros_like(rewards64)
    next_vs_minus_v = np.zeros(rewards64.shape[1:], dtype=np.float64)
    next_vs = np.asarray(last_values, dtype=np.float64).copy()
    for step in reversed(range(n_steps)):
        if step == n_steps - 1:
            next_non_terminal = 1.0 - np.asarray(last_dones, dtype=np.float64)
            next_values = np.asarray(last_values, dtype=np.float64)
        else:
            next_non_terminal = 1.0 - starts64[step + 1]
            next_values = values64[step + 1]
        delta = clipped_rhos[step] * (rewards64[step] + gamma * next_non_terminal * next_values - values64[step])
        vs_minus_v = delta + gamma * next_non_terminal * cs[step] * next_vs_minus_v
        vs[step] = values64[step] + vs_minus_v
        advantages[step] = rewards64[step] + gamma * next_non_terminal * next_vs - values64[step]
        next_vs_minus_v = vs_minus_v
        next_vs = vs[step]
    return advantages.astype(np.float32), vs.astype(np.float32)


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
