"""PQN: parallelised Q-learning (Gallici et al., "Simplifying Deep Temporal Difference Learning",
arXiv 2407.04811), an SB3-style class fed by the project's :class:`~adaptive_po.collector.Collector`.

The authors' design, each piece named where it lives:

* vectorized environments and no replay buffer, no target network, no double-Q: the network is
  regularized by LayerNorm after every hidden layer, before its activation (:class:`QNetwork`);
* Q(lambda) targets, computed once per update and held fixed over its epochs
  (:func:`q_lambda_returns`): ``G_t = r_t + gamma (1 - d_t) [lambda G_{t+1} + (1 - lambda) max_a Q(s_{t+1}, a)]``,
  the last step ``G_T = r_T + gamma (1 - d_T) max_a Q(s_{T+1}, a)``;
* the loss ``0.5 * mean((Q(s_t, a_t) - G_t)^2)``, RAdam, the gradient norm clipped at 10, the learning
  rate linearly decayed to 0, and epsilon-greedy acting with epsilon decayed linearly from
  ``epsilon_start`` to ``epsilon_final`` over the first ``exploration_fraction`` of training
  (:func:`linear_epsilon`).

What the project adds is the data dials (:class:`~adaptive_po.dials.DataDials`), through the same
collector and staleness queue as every other algorithm: ``policy_lag = k`` acts with the Q-network
of ``k`` updates ago, ``replay = m`` also trains on the ``m`` previous rollouts, ``action_noise = sigma``
adds Gaussian noise of std sigma to the acting Q-values before the epsilon-greedy argmax
(:class:`EpsilonGreedyCollector`). The behaviour distribution recorded per transition is the
epsilon-greedy one, ``(1 - eps) [a = argmax] + eps / n_actions``, as log-probabilities. The sampler's
temperature and precision dials are refused (epsilon-greedy acting has no temperature; the
low-precision sampler computes an actor-critic's logits).

Like the project's advantages, the targets are computed under the learner's *current* network at
the start of each update, for fresh, lagged and replayed batches alike: on fresh data (lag 0) that
is the network that acted, the authors' targets; under lag, a stale acting network would otherwise
act as a target network ``k`` updates old, which changes the algorithm, not only its data.
Time-limit truncations bootstrap from the true last observation, ``r + gamma max_a Q(s_final, a)``,
as the project's GAE bootstraps with ``V(s_final)``.

:param batch_scaling: the after-ABS dial (:class:`~adaptive_po.batch_scaling.AfterABS`): each next
    rollout's length from the share of the last update's fresh states whose greedy action changed.
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.preprocessing import get_flattened_obs_dim, preprocess_obs
from stable_baselines3.common.type_aliases import GymEnv, Schedule
from torch import nn
from torch.distributions import Categorical

from adaptive_po import distributions as D
from adaptive_po.algorithms import CollectorRollouts, _chunked
from adaptive_po.batch_scaling import AfterABS, after_abs
from adaptive_po.buffers import BehaviourRolloutBuffer
from adaptive_po.collector import ActorStep, Collector
from adaptive_po.dials import DIAL_DEFAULTS, DataDials, dials_from_arguments
from adaptive_po.hyperparams import PQN_NET_ARCH, HyperparameterError, PQNHyperparams, check_hyperparams, open_unit_interval, unit_interval
from adaptive_po.objectives import PolicyBatch, batch_statistics
from adaptive_po.update import StoredRollout, approx_kl, explained_variance, map_observations

#: the network bodies :class:`QNetwork` builds (``policy_kwargs={"network": ...}``)
NETWORKS: tuple[str, ...] = ("mlp", "minatar", "nature")
#: hidden widths of each body's dense layers when ``net_arch`` is not given (one home: hyperparams)
DEFAULT_NET_ARCH: dict[str, tuple[int, ...]] = PQN_NET_ARCH


# -- the maths -------------------------------------------------------------------------------------
def q_lambda_returns(
    rewards: np.ndarray, next_max_q: np.ndarray, episode_starts: np.ndarray, last_dones: np.ndarray, *, gamma: float, q_lambda: float,
) -> np.ndarray:
    """Q(lambda) targets ``(n_steps, n_envs)`` float32, backwards from the last step.

    :param rewards: ``(n_steps, n_envs)``, time-limit bootstraps ``gamma max_a Q(s_final, a)`` folded in.
    :param next_max_q: ``(n_steps, n_envs)``: ``max_a Q(s_{t+1}, a)``, the next stored observation's
        (the observation after the last step for ``t = n_steps - 1``).
    :param episode_starts: SB3's convention: ``episode_starts[t]`` says step ``t - 1`` ended an episode.
    :param last_dones: ``(n_envs,)``: the last step ended an episode.

    ``d_t`` (done after step ``t``) is ``episode_starts[t + 1]``, or ``last_dones`` at the last step; the
    done mask covers the whole bracket, so no return crosses an episode's end.
    """
    n_steps = rewards.shape[0]
    returns = np.zeros(rewards.shape, dtype=np.float64)
    for t in reversed(range(n_steps)):
        if t == n_steps - 1:
            not_done = 1.0 - np.asarray(last_dones, dtype=np.float64)
            returns[t] = rewards[t] + gamma * not_done * next_max_q[t]
        else:
            not_done = 1.0 - np.asarray(episode_starts[t + 1], dtype=np.float64)
            returns[t] = rewards[t] + gamma * not_done * (q_lambda * returns[t + 1] + (1.0 - q_lambda) * next_max_q[t])
    return returns.astype(np.float32)


def linear_epsilon(timesteps: int, total_timesteps: int, *, start: float, final: float, fraction: float) -> float:
    """Epsilon after ``timesteps`` environment steps: linear from ``start`` to ``final`` over the first
    ``fraction * total_timesteps`` steps, then ``final`` (CleanRL's ``linear_schedule``)."""
    duration = fraction * total_timesteps
    if duration <= 0:
        return final
    return max(start + (final - start) * timesteps / duration, final)


def epsilon_greedy_log_probs(q_values: th.Tensor, epsilon: float) -> th.Tensor:
    """``(B, n)`` log-probabilities of epsilon-greedy over ``(B, n)`` Q-values: ``(1 - eps) [a = argmax] + eps / n``."""
    n_actions = q_values.shape[-1]
    greedy = th.nn.functional.one_hot(q_values.argmax(-1), n_actions).to(q_values.dtype)
    return th.log((1.0 - epsilon) * greedy + epsilon / n_actions)


# -- the network -----------------------------------------------------------------------------------
class ChannelLayerNorm(nn.LayerNorm):
    """LayerNorm over the channels of each position of a ``(B, C, H, W)`` feature map (Flax's
    ``LayerNorm`` on NHWC maps, as in purejaxql's CNNs)."""

    def forward(self, x: th.Tensor) -> th.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class QNetwork(nn.Module):
    """Observation -> ``(B, n_actions)`` Q-values, LayerNorm after every hidden layer, before its ReLU.

    ``network``: ``"mlp"`` (flattened observation, dense layers of ``net_arch``), ``"minatar"``
    (purejaxql's MinAtar CNN: conv 16 3x3 valid -> LN -> ReLU -> flatten -> dense ``net_arch``), or
    ``"nature"`` (the Nature DQN CNN, conv 32 8x8/4, 64 4x4/2, 64 3x3/1, each -> LN -> ReLU, then dense).
    ``width`` multiplies every hidden layer's width, the convolutions' channels and the dense units
    alike (each rounded, at least 1): ``width=4`` on ``"minatar"`` is conv 64 -> dense 512.
    Weights orthogonal with gain sqrt(2), biases 0.
    """

    def __init__(
        self, observation_space: spaces.Space, n_actions: int, network: str = "mlp", net_arch: Sequence[int] | None = None, width: float = 1.0,
    ) -> None:
        super().__init__()
        if network not in NETWORKS:
            raise ValueError(f"PQN network must be one of {NETWORKS}, got {network!r}")
        widths = tuple(DEFAULT_NET_ARCH[network] if net_arch is None else net_arch)
        if any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in widths):
            raise ValueError(f"PQN net_arch must be a list of positive integers, got {list(widths)!r}")
        if isinstance(width, bool) or not isinstance(width, (int, float)) or not 0.0 < width < math.inf:
            raise ValueError(f"PQN width must be a finite number > 0, got {width!r}")
        scaled = lambda units: max(1, round(units * width))  # noqa: E731
        widths = tuple(scaled(w) for w in widths)
        layers: list[nn.Module] = []
        if network == "mlp":
            layers.append(nn.Flatten())
            width = get_flattened_obs_dim(observation_space)
        else:
            shape = observation_space.shape
            if shape is None or len(shape) != 3:
                raise ValueError(f"PQN network {network!r} takes (C, H, W) observations, got shape {shape}")
            convs = [(16, 3, 1)] if network == "minatar" else [(32, 8, 4), (64, 4, 2), (64, 3, 1)]
            channels = shape[0]
            for out, kernel, stride in convs:
                layers += [nn.Conv2d(channels, scaled(out), kernel, stride), ChannelLayerNorm(scaled(out)), nn.ReLU()]
                channels = scaled(out)
            layers.append(nn.Flatten())
            with th.no_grad():
                width = nn.Sequential(*layers)(th.zeros(1, *shape)).shape[1]
        for hidden in widths:
            layers += [nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, n_actions))
        self.layers = nn.Sequential(*layers)
        for layer in self.layers:  # orthogonal weights of gain sqrt(2), zero biases (CleanRL's PQN)
            if isinstance(layer, (nn.Linear, nn.Conv2d)):
                nn.init.orthogonal_(layer.weight, math.sqrt(2))
                nn.init.zeros_(layer.bias)

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.layers(observations)


class QPolicy(BasePolicy):
    """SB3's policy face of a :class:`QNetwork`: ``predict`` is the greedy action, ``q_values`` the
    Q-values of raw observations (SB3's preprocessing: one-hot, image scaling), ``optimizer`` RAdam.

    :param network: ``"mlp"``, ``"minatar"`` or ``"nature"`` (:data:`NETWORKS`).
    :param net_arch: the dense hidden widths (:data:`DEFAULT_NET_ARCH` when ``None``).
    :param width: factor of every hidden layer's width (:class:`QNetwork`).
    """

    def __init__(
        self, observation_space: spaces.Space, action_space: spaces.Discrete, lr_schedule: Schedule, network: str = "mlp",
        net_arch: Sequence[int] | None = None, optimizer_class: type[th.optim.Optimizer] = th.optim.RAdam,
        optimizer_kwargs: dict[str, Any] | None = None, normalize_images: bool = True, width: float = 1.0,
    ) -> None:
        super().__init__(
            observation_space, action_space, normalize_images=normalize_images, optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs or {},
        )
        self.network, self.net_arch, self.width = network, None if net_arch is None else list(net_arch), width
        self.q_net = QNetwork(observation_space, int(action_space.n), network, net_arch, width)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def q_values(self, observations: th.Tensor) -> th.Tensor:
        """``(B, n_actions)`` Q-values of ``(B, ...)`` raw observations."""
        return self.q_net(preprocess_obs(observations, self.observation_space, normalize_images=self.normalize_images).float())

    def _predict(self, observation: th.Tensor, deterministic: bool = True) -> th.Tensor:
        return self.q_values(observation).argmax(dim=-1)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {
            **super()._get_constructor_parameters(), "network": self.network, "net_arch": self.net_arch, "width": self.width,
            "optimizer_class": self.optimizer_class, "optimizer_kwargs": self.optimizer_kwargs,
        }


# -- acting ----------------------------------------------------------------------------------------
class EpsilonGreedyCollector(Collector):
    """The :class:`~adaptive_po.collector.Collector` (its lag snapshots, replay queue and noise
    generator) acting epsilon-greedily with a :class:`QPolicy`: the acting network's Q-values, plus
    ``action_noise`` std Gaussian noise, then the epsilon-greedy draw. Recorded: the distribution
    drawn from (``"actual"``), or the acting network's noise-free epsilon-greedy one (``"policy"``).
    ``epsilon`` is set by the algorithm before each step."""

    epsilon: float = 1.0

    @th.no_grad()
    def act(self, obs: th.Tensor) -> ActorStep:
        q_values = self.acting_policy.q_values(obs)  # type: ignore[attr-defined]
        clean = epsilon_greedy_log_probs(q_values, self.epsilon)
        acting = clean
        if self.dials.action_noise > 0.0:
            noise = th.randn(q_values.shape, generator=self._noise_generator, device=q_values.device)
            acting = epsilon_greedy_log_probs(q_values + self.dials.action_noise * noise, self.epsilon)
        actions = Categorical(logits=acting).sample()
        recorded = acting if self.dials.behaviour_log_prob == "actual" else clean
        return ActorStep(actions, D.log_prob("categorical", recorded, actions), recorded)


# -- the algorithm ---------------------------------------------------------------------------------
#: the class's defaults: CleanRL's classic-control settings (one home: hyperparams.PQN_PRESETS)
_P = PQNHyperparams.from_preset("classic")


class PQN(CollectorRollouts, OnPolicyAlgorithm):
    """PQN on the project's collector (module docstring). Defaults: CleanRL's classic control
    (``cleanrl/pqn.py``), with 4 environments: 128 steps per rollout, minibatches of 128 (4 per
    epoch), 4 epochs, lr 2.5e-4 decayed to 0, gamma 0.99, lambda 0.65, epsilon 1 -> 0.05 over the
    first half of training, gradient norm clip 10.

    :param learning_rate: RAdam's step size, a number or a schedule of the remaining progress (1 -> 0).
    :param n_steps: steps per environment per rollout (the first rollout's, with ``batch_scaling``).
    :param batch_size: transitions per minibatch.
    :param n_epochs: passes over each update's data.
    :param q_lambda: lambda of the Q(lambda) targets, in [0, 1] (0: one-step Q-learning targets).
    :param epsilon_start, epsilon_final: epsilon-greedy's start and end, in (0, 1] (``epsilon_final``
        above 0: every action keeps probability, so importance ratios stay finite).
    :param exploration_fraction: share of ``total_timesteps`` over which epsilon decays, in [0, 1].
    :param max_grad_norm: global gradient-norm clip.
    :param batch_scaling: ``None``, an :class:`~adaptive_po.batch_scaling.AfterABS` or its knobs as a mapping.

    The data dials as in :class:`~adaptive_po.algorithms.BatchPolicyOptimization`; ``sampler_temperature``
    other than 1 and ``sampler_precision`` other than ``fp32`` are refused. Actions must be Discrete.
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": QPolicy, "CnnPolicy": QPolicy}
    policy: QPolicy
    rollout_buffer: BehaviourRolloutBuffer

    def __init__(
        self,
        policy: str | type[QPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = _P.learning_rate,
        n_steps: int = _P.n_steps,
        batch_size: int = _P.batch_size,
        n_epochs: int = _P.n_epochs,
        gamma: float = _P.gamma,
        q_lambda: float = _P.q_lambda,
        epsilon_start: float = _P.epsilon_start,
        epsilon_final: float = _P.epsilon_final,
        exploration_fraction: float = _P.exploration_fraction,
        max_grad_norm: float = _P.max_grad_norm,
        policy_lag: int = DIAL_DEFAULTS["policy_lag"],
        replay: int = DIAL_DEFAULTS["replay"],
        action_noise: float = DIAL_DEFAULTS["action_noise"],
        behaviour_log_prob: str = DIAL_DEFAULTS["behaviour_log_prob"],
        sampler_temperature: float = DIAL_DEFAULTS["sampler_temperature"],
        sampler_precision: str = DIAL_DEFAULTS["sampler_precision"],
        dials: DataDials | None = None,
        batch_scaling: AfterABS | dict[str, Any] | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
    ) -> None:
        check_hyperparams(
            learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size, n_epochs=n_epochs, gamma=gamma, max_grad_norm=max_grad_norm,
        )
        self.q_lambda = unit_interval("q_lambda", q_lambda)
        self.epsilon_start = open_unit_interval("epsilon_start", epsilon_start)
        self.epsilon_final = open_unit_interval("epsilon_final", epsilon_final)
        if self.epsilon_final > self.epsilon_start:
            raise HyperparameterError(f"epsilon_final={epsilon_final!r} is above epsilon_start={epsilon_start!r}; epsilon decays")
        self.exploration_fraction = unit_interval("exploration_fraction", exploration_fraction)
        self.dials = dials_from_arguments(
            dials, policy_lag=policy_lag, replay=replay, action_noise=action_noise, behaviour_log_prob=behaviour_log_prob,
            sampler_temperature=sampler_temperature, sampler_precision=sampler_precision,
        )
        if self.dials.sampler_temperature != 1.0:
            raise ValueError(
                f"PQN acts epsilon-greedily, which has no temperature: sampler_temperature={self.dials.sampler_temperature!r} "
                "is refused (use action_noise, Gaussian noise on the acting Q-values)"
            )
        if self.dials.sampler_precision != "fp32":
            raise ValueError(f"PQN's actor runs in fp32 only: sampler_precision={self.dials.sampler_precision!r} is refused")
        scaling = after_abs(batch_scaling)
        self.batch_scaling = None if scaling is None else scaling.resolve(n_steps)
        super().__init__(
            policy, env, learning_rate=learning_rate, n_steps=n_steps, gamma=gamma, gae_lambda=self.q_lambda, ent_coef=0.0, vf_coef=0.0,
            max_grad_norm=max_grad_norm, use_sde=False, sde_sample_freq=-1, stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log, policy_kwargs=policy_kwargs, verbose=verbose, device=device, seed=seed,
            _init_setup_model=False,
        )
        if not isinstance(self.action_space, spaces.Discrete):
            raise ValueError(f"PQN needs a Discrete action space (one Q-value per action), got {self.action_space}")
        if isinstance(self.observation_space, spaces.Dict):
            raise ValueError(f"PQN takes Box or Discrete observations, got the Dict space {self.observation_space}")
        self.batch_size, self.n_epochs = batch_size, n_epochs
        self._update_listeners: list[Callable[[dict[str, float]], None]] = []
        self.last_update_stats: dict[str, float] = {}
        if _init_setup_model:
            self._setup_model()

    def _setup_model(self) -> None:
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        self.rollout_buffer = self._new_buffer(self.n_steps)
        self.policy = self.policy_class(self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs)  # type: ignore[assignment]
        self.policy = self.policy.to(self.device)
        self.collector = EpsilonGreedyCollector(self.dials, seed=self.seed)
        self.collector.attach(self.policy)  # type: ignore[arg-type]

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "collector", "_update_listeners"]

    def add_update_listener(self, listener: Callable[[dict[str, float]], None]) -> None:
        """Call ``listener(stats)`` after every update, with that update's statistics."""
        self._update_listeners.append(listener)

    # -- acting -------------------------------------------------------------------------------------
    def exploration_rate(self) -> float:
        """Epsilon now, from the environment steps taken (:func:`linear_epsilon`)."""
        return linear_epsilon(
            self.num_timesteps, self._total_timesteps, start=self.epsilon_start, final=self.epsilon_final, fraction=self.exploration_fraction,
        )

    def _act(self, obs_tensor: th.Tensor) -> ActorStep:
        self.collector.epsilon = self.exploration_rate()
        return self.collector.act(obs_tensor)

    # -- training -----------------------------------------------------------------------------------
    @th.no_grad()
    def _targets(self, batch: StoredRollout) -> tuple[th.Tensor, np.ndarray]:
        """A stored batch's ``(n_steps * n_envs, n_actions)`` Q-values (time-major) and its Q(lambda)
        targets ``(n_steps, n_envs)``, under the current network, in one pass over its observations,
        the observation after its last step and the true last ones of time-limit cuts."""
        n_steps, n_envs = batch.rewards.shape
        n = n_steps * n_envs
        flat = map_observations(lambda o: o.reshape(n, *o.shape[2:]), batch.observations)
        observations = map_observations(lambda *parts: np.concatenate(parts), flat, batch.last_observation, batch.timeout_observations)
        q_all = _chunked(self.policy.q_values, observations, self.device)
        max_q = q_all.max(dim=-1).values.cpu().numpy().astype(np.float64)
        next_max_q = np.concatenate([max_q[n_envs:n], max_q[n : n + n_envs]]).reshape(n_steps, n_envs)
        truncation_values = np.zeros((n_steps, n_envs))
        np.add.at(truncation_values, tuple(batch.timeout_index.T), max_q[n + n_envs :])
        targets = q_lambda_returns(
            batch.rewards + self.gamma * truncation_values, next_max_q, batch.episode_starts, batch.last_dones,
            gamma=self.gamma, q_lambda=self.q_lambda,
        )
        return q_all[:n], targets

    def _training_data(self, batches: Sequence[StoredRollout]) -> dict[str, th.Tensor]:
        """The update's columns over every batch (the fresh one first), one row per transition."""
        columns: dict[str, list[th.Tensor]] = {name: [] for name in ("observations", "actions", "targets", "q_start", "behaviour_log_prob", "behaviour_params")}
        for batch in batches:
            q_start, targets = self._targets(batch)
            n = targets.size
            as_tensor = lambda a: th.as_tensor(a, device=self.device)  # noqa: E731
            columns["observations"].append(as_tensor(batch.observations.reshape(n, *batch.observations.shape[2:])))  # type: ignore[union-attr]
            columns["actions"].append(as_tensor(batch.actions.reshape(n)).long())
            columns["targets"].append(as_tensor(targets.reshape(n)))
            columns["q_start"].append(q_start)
            columns["behaviour_log_prob"].append(as_tensor(batch.behaviour_log_prob.reshape(n)))
            columns["behaviour_params"].append(as_tensor(batch.behaviour_params.reshape(n, -1)))
        return {name: th.cat(parts) for name, parts in columns.items()}

    def train(self) -> None:
        """One update: Q(lambda) targets under the network at the update's start, then ``n_epochs``
        passes of minibatch steps on ``0.5 * MSE(Q(s, a), G)``, RAdam, gradient norm clipped."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        current = self.rollout_buffer.freeze(copy=self.dials.replay > 0)
        data = self._training_data(self.collector.training_batches(current))
        n_samples, n_fresh = len(data["targets"]), current.rewards.size
        losses = []
        for _ in range(self.n_epochs):
            self._n_updates += 1
            permutation = th.as_tensor(np.random.permutation(n_samples), device=self.device)
            for start in range(0, n_samples, self.batch_size):
                index = permutation[start : start + self.batch_size]
                q_taken = self.policy.q_values(data["observations"][index]).gather(1, data["actions"][index, None]).squeeze(1)
                loss = 0.5 * ((q_taken - data["targets"][index]) ** 2).mean()
                self.policy.optimizer.zero_grad()
                loss.backward()
                th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
                losses.append(loss.detach())
        self.policy.set_training_mode(False)
        stats = self._update_statistics(data, th.stack(losses), n_fresh)
        self.collector.after_update(self.policy, current)  # type: ignore[arg-type]
        if self.batch_scaling is not None:
            self._scale_next_rollout(stats["behaviour_divergence"])
        self._record_update(stats)

    @th.no_grad()
    def _update_statistics(self, data: dict[str, th.Tensor], losses: th.Tensor, n_fresh: int) -> dict[str, float]:
        """The run-folder contract's per-update statistics, for the learner's epsilon-greedy policy
        at the current epsilon against the recorded behaviour (``ess``, ratios, both KLs), between
        the update's start and end (``approx_kl``, ``behaviour_divergence``: the share of the fresh
        states whose greedy action changed), and of the regression (``value_loss``: the mean
        minibatch loss, ``loss`` the last one's; ``explained_variance`` of the fresh targets by Q(s, a) at the start)."""
        epsilon = self.exploration_rate()
        q_end = _chunked(self.policy.q_values, data["observations"], self.device)
        start_params, end_params = epsilon_greedy_log_probs(data["q_start"], epsilon), epsilon_greedy_log_probs(q_end, epsilon)
        log_prob = D.log_prob("categorical", end_params, data["actions"])
        batch = PolicyBatch(
            log_prob=log_prob, behaviour_log_prob=data["behaviour_log_prob"], advantages=th.zeros_like(log_prob),
            kl_behaviour=D.kl("categorical", end_params, data["behaviour_params"]),
        )
        q_taken = data["q_start"].gather(1, data["actions"][:, None]).squeeze(1)
        changed = data["q_start"][:n_fresh].argmax(-1) != q_end[:n_fresh].argmax(-1)
        stats = {
            **batch_statistics(batch),
            "ess_min": batch.ess, "cap_fraction": 0.0, "kl_weight": 0.0, "policy_loss": 0.0,
            "approx_kl": approx_kl(log_prob - D.log_prob("categorical", start_params, data["actions"])),
            "value_loss": losses.mean(), "loss": losses[-1], "entropy": D.entropy("categorical", end_params).mean(),
            "explained_variance": explained_variance(q_taken[:n_fresh], data["targets"][:n_fresh]),
            "learning_rate": self.policy.optimizer.param_groups[0]["lr"], "epsilon": epsilon,
            "behaviour_divergence": changed.double().mean(), "rollout_steps": self.rollout_buffer.buffer_size,
        }
        return {name: float(value) for name, value in stats.items()}

    def _record_update(self, stats: dict[str, float]) -> None:
        for key, value in stats.items():
            self.logger.record(f"train/{key}", value)
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/policy_lag", self.dials.policy_lag)
        stats["acting_update"] = self.collector.acting_snapshot_update
        self.logger.record("train/acting_update", stats["acting_update"])
        self.last_update_stats = stats
        for listener in self._update_listeners:
            listener(stats)

    def learn(self, total_timesteps: int, callback: Any = None, log_interval: int = 1, tb_log_name: str = "PQN",
              reset_num_timesteps: bool = True, progress_bar: bool = False) -> "PQN":
        return super().learn(total_timesteps, callback=callback, log_interval=log_interval, tb_log_name=tb_log_name,
                             reset_num_timesteps=reset_num_timesteps, progress_bar=progress_bar)


__all__ = ["AfterABS", "EpsilonGreedyCollector", "PQN", "QNetwork", "QPolicy", "epsilon_greedy_log_probs", "linear_epsilon", "q_lambda_returns"]
