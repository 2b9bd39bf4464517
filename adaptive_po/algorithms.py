"""SB3 on-policy algorithms fed by the :class:`~adaptive_po.collector.Collector`.

:class:`BatchPolicyOptimization` is SB3's :class:`OnPolicyAlgorithm` (its policies, rollout buffer,
logger, callbacks and save format) with two changes:

1. ``collect_rollouts`` lets the collector choose which parameters act and with what noise, and
   stores the behaviour distribution of every transition;
2. ``train`` evaluates a policy objective from :mod:`adaptive_po.objectives`, the same training
   loop for every algorithm, so that a comparison differs in the objective function only.

Values and GAE advantages are recomputed at the start of every update with the learner's *current*
critic, for the fresh batch and for replayed ones, the same way for every algorithm: a critic that
is ``k`` updates old would otherwise bias the advantages of stale data in a way that has nothing to
do with the policy objective under test. On fresh on-policy data this equals SB3's own GAE (the
critic has not changed since collection).

Concrete algorithms: :class:`ESSPO` (the batch-adaptive ESS objective), :class:`PPO` (clipped
surrogate against the behaviour policy), :class:`DecoupledPPO` and :class:`TruncatedISPG`.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from typing import Any, Callable, ClassVar, Iterable, Iterator, Sequence, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from adaptive_po import distributions as D
from adaptive_po.batch_scaling import AfterABS, after_abs
from adaptive_po.buffers import BehaviourRolloutBuffer, DictBehaviourRolloutBuffer, behaviour_param_dim
from adaptive_po.collector import (
    BehaviourRecording,
    Collector,
    env_actions,
    truncations,
    validate_policy_settings,
)
from adaptive_po.dials import DIAL_DEFAULTS, DataDials, dials_from_arguments
from adaptive_po.hyperparams import SB3_DEFAULTS as _D
from adaptive_po.hyperparams import HyperparameterError, check_hyperparams
from adaptive_po.objectives import check_arguments, get_objective, initial_state
from adaptive_po.policy import POLICY_ALIASES, objective_arguments, objective_schedules, policy_heads, with_fused_adam
from adaptive_po.update import (
    StoredRollout, advantages_and_returns, check_update_settings, map_observations, minibatch_columns, minibatch_loss, run_update,
)

SelfAlgo = TypeVar("SelfAlgo", bound="BatchPolicyOptimization")

#: forward passes over stored data are chunked to bound memory (CNN observations are large)
_FORWARD_CHUNK = 4096

#: the action spaces every algorithm here accepts: SB3 PPO's (Box of any shape, Discrete,
#: MultiDiscrete and MultiBinary), each with a flat behaviour distribution (adaptive_po.distributions)
SUPPORTED_ACTION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def _chunked(fn: Callable[[Any], th.Tensor], observations: Any, device: th.device) -> th.Tensor:
    """``fn`` of ``(N, ...)`` observations (arrays or tensors, or a dict of them) as tensors, in chunks."""
    n = len(next(iter(observations.values())) if isinstance(observations, dict) else observations)
    chunk = lambda i: map_observations(lambda x: th.as_tensor(x[i : i + _FORWARD_CHUNK], device=device), observations)  # noqa: E731
    return th.cat([fn(chunk(i)) for i in range(0, n, _FORWARD_CHUNK)])


class KnobSchedule(FloatSchedule):
    """SB3's :class:`FloatSchedule`, the type SB3's PPO holds in ``clip_range`` and
    ``clip_range_vf`` after construction and after ``load``, that also compares equal to the
    constant it wraps (``model.clip_range == 0.2``), as the plain number did."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FloatSchedule):
            other = other.value_schedule
        if isinstance(other, ConstantSchedule):
            other = other.val
        if isinstance(self.value_schedule, ConstantSchedule) and isinstance(other, (int, float)):
            return self.value_schedule.val == other
        return self.value_schedule == other

    __hash__ = FloatSchedule.__hash__


class CollectorRollouts:
    """SB3's ``collect_rollouts`` with the :class:`~adaptive_po.collector.Collector` acting: the one
    rollout loop of the SB3 classes here (the policy-gradient ones and :class:`~adaptive_po.pqn.PQN`).
    A class mixes it in before SB3's :class:`OnPolicyAlgorithm` and holds ``self.collector``."""

    collector: Collector

    def _act(self, obs_tensor: th.Tensor) -> Any:
        """One vectorized step's :class:`~adaptive_po.collector.ActorStep` for ``obs_tensor``."""
        return self.collector.act(obs_tensor)

    def _new_buffer(self, n_steps: int) -> BehaviourRolloutBuffer:
        """A rollout buffer of ``n_steps`` steps per environment for this algorithm's spaces."""
        buffer_class = DictBehaviourRolloutBuffer if isinstance(self.observation_space, spaces.Dict) else BehaviourRolloutBuffer
        return buffer_class(
            n_steps, self.observation_space, self.action_space, device=self.device, gamma=self.gamma,  # type: ignore[attr-defined]
            gae_lambda=self.gae_lambda, n_envs=self.n_envs, behaviour_param_dim=behaviour_param_dim(self.action_space),  # type: ignore[attr-defined]
        )

    def _scale_next_rollout(self, divergence: float) -> None:
        """After ABS (:mod:`adaptive_po.batch_scaling`): the next rollout's length from this update's
        behavioural divergence, in a new buffer where the length changes."""
        n_steps = self.batch_scaling.next_rollout_steps(divergence)  # type: ignore[attr-defined]
        if n_steps != self.n_steps:  # type: ignore[has-type]
            self.n_steps = n_steps
            self.rollout_buffer = self._new_buffer(n_steps)

    def _update_current_progress_remaining(self, num_timesteps: int, total_timesteps: int) -> None:
        # SB3 lets this go below 0 when the last rollout overshoots the budget, which turns
        # linearly decayed learning rates and clip ranges negative; stop at 0 instead.
        super()._update_current_progress_remaining(num_timesteps, total_timesteps)
        self._current_progress_remaining = max(0.0, self._current_progress_remaining)

    # -- collection -------------------------------------------------------------------------------
    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: BehaviourRolloutBuffer,  # type: ignore[override]
        n_rollout_steps: int,
    ) -> bool:
        """Fill ``rollout_buffer`` with ``n_rollout_steps`` steps of the collector's actor."""
        assert self._last_obs is not None, "No previous observation was provided"
        self.policy.set_training_mode(False)
        n_steps = 0
        rollout_buffer.reset()
        if self.use_sde:  # gSDE: new exploration matrices, where SB3's collect_rollouts draws them
            self.collector.reset_noise(env.num_envs)
        callback.on_rollout_start()
        new_obs, dones = self._last_obs, self._last_episode_starts
        while n_steps < n_rollout_steps:
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self.collector.reset_noise(env.num_envs)
            with th.no_grad():
                obs_tensor = obs_as_tensor(self._last_obs, self.device)  # type: ignore[arg-type]
                step = self._act(obs_tensor)
            actions = step.actions.cpu().numpy()
            # flat actions are stored; the environment gets the space's shape (Box bounds clipped)
            new_obs, rewards, dones, infos = env.step(env_actions(actions, self.action_space))
            self.num_timesteps += env.num_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            n_steps += 1

            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.reshape(-1, 1)
            rollout_buffer.add_transition(
                self._last_obs,  # type: ignore[arg-type]
                actions,
                rewards,
                self._last_episode_starts,  # type: ignore[arg-type]
                step.behaviour_log_prob,
                step.behaviour_params,
            )
            for idx, terminal_observation in truncations(dones, infos):
                rollout_buffer.add_timeout(idx, terminal_observation)
            self._last_obs = new_obs  # type: ignore[assignment]
            self._last_episode_starts = dones

        rollout_buffer.set_last(new_obs, dones)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True


class BatchPolicyOptimization(CollectorRollouts, OnPolicyAlgorithm):
    """An on-policy actor-critic whose policy loss is a pluggable objective, on controllable data.

    Constructor arguments follow SB3's PPO (units and defaults as there), plus:

    :param objective: an algorithm name in :data:`adaptive_po.objectives.OBJECTIVES`; its entry
        declares what the loss needs (analytic KL with gradient, proximal log-probs).
    :param objective_kwargs: keyword arguments of the objective, over the entry's fixed ones;
        values may be schedules (callables of the remaining progress, 1 -> 0), evaluated once
        per update.
    :param policy_lag: the actor acts with the parameters from this many updates ago.
    :param replay: each update also trains on this many previous rollout batches.
    :param action_noise: std of the Gaussian noise added to the actor's logits / means.
    :param behaviour_log_prob: ``"actual"`` (record the distribution sampled from) or ``"policy"``.
    :param sampler_temperature: the sampler's temperature T (logits / T, or std x T).
    :param sampler_precision: the sampler's number format, one of
        :data:`adaptive_po.sampler.PRECISIONS` (``"fp32"``: the learner's own).
    :param dials: the six data dials above as one :class:`~adaptive_po.dials.DataDials` (what the
        bench passes); give either ``dials`` or the keywords, not both. ``model.dials`` holds them.
    :param advantage_estimator: ``"gae"`` or ``"vtrace"`` (V-trace targets and policy-gradient
        advantages, rho_bar = c_bar = 1); ``None``: the objective's registry entry decides.
    :param use_sde: generalized state-dependent exploration (gSDE), as in SB3: the actor's noise is
        ``latent_sde @ W`` with an exploration matrix ``W`` per environment; the behaviour
        distribution stored per transition is the diagonal Gaussian with the state-dependent std
        that SB3 evaluates the action under, so the analytic KL stays exact.
    :param sde_sample_freq: with gSDE, draw a new ``W`` every this many steps (-1: only at the
        start of each rollout), for the learner and for a lagged actor alike.
    :param clip_range_vf: value clipping with SB3 PPO's meaning (``None``: off; a number or a
        schedule): the new value is kept within ``clip_range_vf`` of the value at the start of
        the update. Here that start value is the one recomputed by the current critic at the
        start of the update (advantages are recomputed there too); on fresh data it is SB3's
        ``old_values`` (same critic), on lagged and replayed data it is the learner's, not the
        stale actor's.
    :param target_kl: SB3 PPO's early stopping (``None``: off): the epochs of an update stop, before
        the gradient step, at the first minibatch whose ``approx_kl`` between the learner at the
        start of the update and now exceeds ``1.5 * target_kl``.
    :param batch_scaling: the after-ABS dial (:class:`~adaptive_po.batch_scaling.AfterABS`, or its
        knobs as a mapping; ``None``: off): each next rollout's length from the mean total variation
        between the policies before and after the last update on its fresh states (Discrete actions;
        the process engine only).

    Observations may be any space SB3's PPO accepts (Box of any dtype and shape, Discrete,
    MultiDiscrete, MultiBinary, and Dict with ``MultiInputPolicy``), preprocessed by the policy as
    SB3 does; actions any of :data:`SUPPORTED_ACTION_SPACES`.
    """

    policy_aliases: ClassVar[dict[str, type[ActorCriticPolicy]]] = dict(POLICY_ALIASES)
    default_objective: ClassVar[str] = "esspo"
    rollout_buffer: BehaviourRolloutBuffer

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = _D.learning_rate,
        n_steps: int = _D.n_steps,
        batch_size: int = _D.batch_size,
        n_epochs: int = _D.n_epochs,
        gamma: float = _D.gamma,
        gae_lambda: float = _D.gae_lambda,
        normalize_advantage: bool = _D.normalize_advantage,
        ent_coef: float = _D.ent_coef,
        vf_coef: float = _D.vf_coef,
        max_grad_norm: float = _D.max_grad_norm,
        objective: str | None = None,
        objective_kwargs: dict[str, Any] | None = None,
        policy_lag: int = DIAL_DEFAULTS["policy_lag"],
        replay: int = DIAL_DEFAULTS["replay"],
        action_noise: float = DIAL_DEFAULTS["action_noise"],
        behaviour_log_prob: BehaviourRecording = DIAL_DEFAULTS["behaviour_log_prob"],
        sampler_temperature: float = DIAL_DEFAULTS["sampler_temperature"],
        sampler_precision: str = DIAL_DEFAULTS["sampler_precision"],
        dials: DataDials | None = None,
        advantage_estimator: str | None = None,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        clip_range_vf: float | Schedule | None = None,
        target_kl: float | None = None,
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
            learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size, n_epochs=n_epochs, gamma=gamma,
            gae_lambda=gae_lambda, normalize_advantage=normalize_advantage, ent_coef=ent_coef, vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
        )
        self.objective_name = objective or self.default_objective
        self.objective_spec = get_objective(self.objective_name)
        self.objective_kwargs = {**self.objective_spec.kwargs, **(objective_kwargs or {})}
        self.advantage_estimator = check_update_settings(
            self.objective_spec, batch_size=batch_size, normalize_advantage=normalize_advantage,
            advantage_estimator=advantage_estimator, clip_range_vf=clip_range_vf, target_kl=target_kl,
        )
        # the dials are saved with the model; the collector is built from them in _setup_model
        dials = dials_from_arguments(
            dials, policy_lag=policy_lag, replay=replay, action_noise=action_noise, behaviour_log_prob=behaviour_log_prob,
            sampler_temperature=sampler_temperature, sampler_precision=sampler_precision,
        )
        check_hyperparams(use_sde=use_sde, sde_sample_freq=sde_sample_freq)
        validate_policy_settings(use_sde, dials.sampler_precision, policy_kwargs)
        self.clip_range_vf = clip_range_vf
        self.target_kl = target_kl
        scaling = after_abs(batch_scaling)
        self.batch_scaling = None if scaling is None else scaling.resolve(n_steps)
        # an algorithm that replays by design (P3O) does so unless the run sets its own depth
        self.dials = dataclasses.replace(dials, replay=dials.replay or self.objective_spec.replay)
        self.objective_state = {k: th.tensor(v) for k, v in initial_state(self.objective_spec, self.objective_kwargs).items()}
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            gamma=gamma,
            gae_lambda=gae_lambda,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=with_fused_adam(policy_kwargs),
            verbose=verbose,
            device=device,
            seed=seed,
            _init_setup_model=False,
            supported_action_spaces=SUPPORTED_ACTION_SPACES,
        )
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.normalize_advantage = normalize_advantage
        self._update_listeners: list[Callable[[dict[str, float]], None]] = []
        self._epoch_listeners: list[Callable[[int, list[dict[str, th.Tensor]], dict[str, Any]], None]] = []
        self.last_update_stats: dict[str, float] = {}
        if self.env is not None:
            self._check_batch_size(self.env.num_envs)
        if _init_setup_model:
            self._setup_model()

    def _check_batch_size(self, n_envs: int) -> None:
        rollout_size = self.n_steps * n_envs
        # SB3's order: a one-transition rollout is reported first, whatever the batch size
        if self.normalize_advantage and rollout_size < 2:
            raise HyperparameterError(
                f"n_steps * n_envs must be > 1 with normalize_advantage (advantages of one transition "
                f"normalize to NaN), got n_steps * n_envs = {self.n_steps} * {n_envs} = {rollout_size}"
            )
        if self.batch_size > rollout_size:
            raise HyperparameterError(
                f"batch_size={self.batch_size} is larger than the rollout "
                f"(n_steps * n_envs = {self.n_steps} * {n_envs} = {rollout_size})"
            )
        if rollout_size % self.batch_size:
            warnings.warn(  # SB3's wording, which code and tests written against SB3 match
                f"batch_size={self.batch_size} does not divide the rollout size n_steps * n_envs = "
                f"{self.n_steps} * {n_envs} = {rollout_size}: after every {rollout_size // self.batch_size} "
                f"untruncated mini-batches, there will be a truncated mini-batch of size {rollout_size % self.batch_size}",
                stacklevel=3,
            )

    def _setup_model(self) -> None:
        self.kind = D.kind_of_space(self.action_space)
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        self.rollout_buffer = self._new_buffer(self.n_steps)
        if self.batch_scaling is not None and self.kind != "categorical":
            raise ValueError(
                f"batch_scaling (after ABS) measures each update's divergence as the total variation between Discrete "
                f"policies; the action space {self.action_space} is not Discrete"
            )
        self.policy = self.policy_class(  # type: ignore[assignment]
            self.observation_space, self.action_space, self.lr_schedule, use_sde=self.use_sde, **self.policy_kwargs
        )
        self.policy = self.policy.to(self.device)
        if self.clip_range_vf is not None:  # SB3's type, after construction and after load
            self.clip_range_vf = KnobSchedule(self.clip_range_vf)
        self._objective_schedules = objective_schedules(self.objective_kwargs)
        check_arguments(self.objective_spec, objective_arguments(self._objective_schedules, 1.0))
        self.collector = Collector(self.dials, seed=self.seed)
        self.collector.attach(self.policy)

    def _excluded_save_params(self) -> list[str]:
        # Snapshots and replayed batches are training-time state, not part of the model.
        return [*super()._excluded_save_params(), "collector", "_update_listeners", "_epoch_listeners", "_objective_schedules"]

    def add_update_listener(self, listener: Callable[[dict[str, float]], None]) -> None:
        """Call ``listener(stats)`` after every update, with that update's statistics."""
        self._update_listeners.append(listener)

    def add_epoch_listener(self, listener: Callable[[int, list[dict[str, th.Tensor]], dict[str, Any]], None]) -> None:
        """Call ``listener(epoch, rows, data)`` after every epoch of an update: the epoch's index, its
        minibatch statistics (:func:`adaptive_po.update.minibatch_loss`'s, in order) and the update's
        data (``observations``, ``actions``, ``behaviour_log_prob``, ``behaviour_params``,
        ``proximal_log_prob``, ``advantages`` ...). For diagnostics (:mod:`adaptive_po.bench.trace`);
        it must not change the parameters."""
        self._epoch_listeners.append(listener)

    # -- training ---------------------------------------------------------------------------------
    def _flat_actions(self, actions: np.ndarray) -> np.ndarray:
        """Stored actions as the distributions take them, float32: ``(N,)`` for Discrete, ``(N, d)`` otherwise."""
        actions = actions.astype(np.float32, copy=False)
        return actions.reshape(-1) if isinstance(self.action_space, spaces.Discrete) else actions

    @th.no_grad()
    def _stored_log_prob(self, batch: StoredRollout) -> np.ndarray:
        """``(n_steps, n_envs)`` log pi_theta of a stored batch's actions under the current policy."""
        n_steps, n_envs = batch.rewards.shape
        data = {
            "observations": map_observations(
                lambda o: th.as_tensor(o.reshape(n_steps * n_envs, *o.shape[2:]), device=self.device), batch.observations
            ),
            "actions": th.as_tensor(self._flat_actions(batch.actions.reshape(n_steps * n_envs, *batch.actions.shape[2:])), device=self.device),
        }
        return self._log_prob(data).cpu().numpy().reshape(n_steps, n_envs)

    @th.no_grad()
    def _dist_params(self, data: dict[str, Any]) -> th.Tensor:
        """``(N, P)`` distribution parameters of stored transitions under the current parameters."""
        return _chunked(lambda obs: policy_heads(self.policy, self.kind, obs)[0], data["observations"], self.device)

    def _log_prob(self, data: dict[str, Any]) -> th.Tensor:
        """log pi_theta(a|s) of every stored transition under the current parameters."""
        return D.log_prob(self.kind, self._dist_params(data), data["actions"])

    def _update_objective_state(self, reverse_kl: th.Tensor, ratio_variance: th.Tensor, schedule_values: dict[str, Any]) -> None:
        """KL-PPO's coefficient, R2VPO's multiplier after an update (:func:`adaptive_po.update.update_objective_state`)."""
        self.objective_state = self.objective_spec.update_state(
            self.objective_state, reverse_kl, ratio_variance=ratio_variance, **schedule_values, **self.objective_state
        )

    def _kl_too_far(self, approx_kl: th.Tensor) -> bool:
        """SB3's ``target_kl`` early stopping, before the gradient step: ``approx_kl > 1.5 target_kl``."""
        if float(approx_kl) <= 1.5 * self.target_kl:  # type: ignore[operator]
            return False
        if self.verbose >= 1:
            print(f"Early stopping due to reaching max kl: {float(approx_kl):.2f}")
        return True

    def _objective_arguments(self) -> dict[str, Any]:
        return objective_arguments(self._objective_schedules, self._current_progress_remaining)

    def train(self) -> None:
        """One update: :func:`adaptive_po.update.run_update` through this class's face (:class:`_SB3Face`), then the logger."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        schedule_values = self._objective_arguments()
        current = self.rollout_buffer.freeze(copy=self.dials.replay > 0)
        if self.batch_scaling is not None:  # the policy on the fresh states before the update, for its divergence
            n_fresh = current.rewards.size
            fresh = {"observations": map_observations(lambda o: o.reshape(n_fresh, *o.shape[2:]), current.observations)}
            before = self._dist_params(fresh)
        clip_range_vf = None if self.clip_range_vf is None else FloatSchedule(self.clip_range_vf)(self._current_progress_remaining)
        stats, data = run_update(
            _SB3Face(self), self.objective_spec, self.kind, self.collector.training_batches(current),
            n_fresh=self.rollout_buffer.buffer_size * self.rollout_buffer.n_envs, n_epochs=self.n_epochs,
            schedule_values=schedule_values, objective_state=self.objective_state,
            learning_rate=self.policy.optimizer.param_groups[0]["lr"], clip_range_vf=clip_range_vf,
            epoch_listeners=self._epoch_listeners,
        )
        self.collector.after_update(self.policy, current)
        stats = {name: float(value) for name, value in stats.items()}
        if self.batch_scaling is not None:
            stats["behaviour_divergence"] = float(D.total_variation(self.kind, before, self._dist_params(fresh)).mean())
            stats["rollout_steps"] = self.rollout_buffer.buffer_size
            self._scale_next_rollout(stats["behaviour_divergence"])
        self._record_update(stats, schedule_values, len(data["advantages"]))

    def _record_update(self, stats: dict[str, float], objective_arguments: dict[str, Any], n_samples: int) -> None:
        """Log the update's statistics as ``train/<name>`` (the run-folder contract's progress columns'
        names) and the objective's state, and tell the listeners."""
        for key, value in stats.items():
            self.logger.record(f"train/{key}", value)
        for key, value in self.objective_state.items() if self.objective_spec.update_state is not None else ():
            self.logger.record(f"train/{key}", float(value))
        if "clip_range" in objective_arguments:
            self.logger.record("train/clip_range", objective_arguments["clip_range"])
        if self.clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", FloatSchedule(self.clip_range_vf)(self._current_progress_remaining))
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/policy_lag", self.dials.policy_lag)
        stats["n_samples"] = int(n_samples)
        stats["acting_update"] = self.collector.acting_snapshot_update
        self.logger.record("train/acting_update", stats["acting_update"])
        self.last_update_stats = stats
        for listener in self._update_listeners:
            listener(stats)

    def learn(
        self: SelfAlgo,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str | None = None,
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfAlgo:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name or type(self).__name__,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )


class _SB3Face:
    """The SB3 class's side of :func:`adaptive_po.update.run_update`: one run, NumPy batches, SB3's
    minibatch order (NumPy's global stream), optimizer, gradient clipping and ``target_kl``."""

    def __init__(self, model: BatchPolicyOptimization) -> None:
        self.model, self.dist_params, self.update_objective_state = model, model._dist_params, model._update_objective_state

    @th.no_grad()
    def advantages(self, batch: StoredRollout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(values, advantages, returns)`` under the current critic, valued in one pass with the last
        observations and the true last ones where a time limit cut an episode (bootstrapped there)."""
        model, (n_steps, n_envs) = self.model, batch.rewards.shape
        n = n_steps * n_envs
        flat = map_observations(lambda o: o.reshape(n, *o.shape[2:]), batch.observations)
        observations = map_observations(lambda *parts: np.concatenate(parts), flat, batch.last_observation, batch.timeout_observations)
        all_values = _chunked(model.policy.predict_values, observations, model.device).flatten().cpu().numpy()
        truncation_values = np.zeros_like(batch.rewards)
        np.add.at(truncation_values, tuple(batch.timeout_index.T), all_values[n + n_envs :])
        log_rhos = model._stored_log_prob(batch) - batch.behaviour_log_prob if model.advantage_estimator == "vtrace" else None
        values = all_values[:n].reshape(n_steps, n_envs)
        advantages, returns = advantages_and_returns(
            model.advantage_estimator, batch.rewards, values, batch.episode_starts, all_values[n : n + n_envs], batch.last_dones,
            gamma=model.gamma, gae_lambda=model.gae_lambda, truncation_values=truncation_values, log_rhos=log_rhos,
        )
        return values, advantages, returns

    def flatten(self, column: str, values: Any) -> Any:
        flat = map_observations(RolloutBuffer.swap_and_flatten, values)
        if column == "actions":
            return self.model._flat_actions(flat)
        return flat if column in ("observations", "behaviour_params") else flat.reshape(-1)

    def concatenate(self, parts: list[Any]) -> Any:
        return map_observations(lambda *p: th.as_tensor(np.concatenate(p), device=self.model.device), *parts)

    def epoch(self, data: dict[str, Any], n_samples: int) -> Iterator[dict[str, Any]]:
        self.model._n_updates += 1  # SB3 counts gradient epochs as its n_updates
        permutation = th.as_tensor(np.random.permutation(n_samples), device=self.model.device)
        for start in range(0, n_samples, self.model.batch_size):
            index = permutation[start : start + self.model.batch_size]
            yield {name: map_observations(lambda x: x[index], data[name]) for name in minibatch_columns(self.model.objective_spec)}

    def step(self, minibatch: dict[str, Any], arguments: dict[str, Any], clip_range_vf: float | None) -> tuple[dict[str, th.Tensor], bool]:
        model = self.model
        dist_params, values = policy_heads(model.policy, model.kind, minibatch["observations"])
        loss, stats = minibatch_loss(
            model.objective_spec, model.kind, dist_params, values, minibatch, arguments,
            normalize_advantage=model.normalize_advantage, ent_coef=model.ent_coef, vf_coef=model.vf_coef, clip_range_vf=clip_range_vf,
        )
        if model.target_kl is not None and model._kl_too_far(stats["approx_kl"]):
            return stats, True
        model.policy.optimizer.zero_grad()
        loss.backward()
        th.nn.utils.clip_grad_norm_(model.policy.parameters(), model.max_grad_norm)
        model.policy.optimizer.step()
        return stats, False


#: SB3 PPO's trust-region arguments, and why ESSPO has none of them
_PPO_ONLY_ARGUMENTS = {
    "clip_range": "the ESS objective has no clip: the weight is capped at the batch's normalized ESS e_B instead",
    "clip_range_vf": "the ESS objective clips nothing, its critic included",
    "target_kl": "the ESS objective sets its own step through e_B and its (1 - e_B) KL pull, with no KL target",
}


class ESSPO(BatchPolicyOptimization):
    """ESS policy optimization (arXiv 2605.12380): the score-function weight capped at the minibatch's
    normalized effective sample size e_B and a ``(1 - e_B)`` KL pull toward the behaviour policy,
    instead of PPO's clip. Drop-in for SB3's ``PPO`` (its arguments, positional up to ``max_grad_norm``,
    and the data dials) but for its trust-region knobs ``clip_range``, ``clip_range_vf`` and ``target_kl``
    (``TypeError``: they would act on nothing here, and ignoring one would mislead). Plus:

    :param kl: ``"analytic"`` (exact, from the stored behaviour distribution), ``"sampled"`` (the
        reference code's estimator) or ``"forward"`` (KL(pi_b || pi_theta), ``esspo-forward-kl``).
    :param ess_cap: cap the weight at e_B (``False``: the uncapped importance weight).
    :param ess_regularizer: add the ``(1 - e_B) * KL`` term.
    """

    def __init__(
        self, policy: str | type[ActorCriticPolicy], env: GymEnv | str, *args: Any, kl: str = "analytic",
        ess_cap: bool = True, ess_regularizer: bool = True, **kwargs: Any,
    ) -> None:
        refused = next((name for name in kwargs if name in _PPO_ONLY_ARGUMENTS), None)
        if refused is not None:
            raise TypeError(
                f"ESSPO does not take {refused!r} (SB3 PPO's argument): {_PPO_ONLY_ARGUMENTS[refused]}. "
                "Drop it, or use adaptive_po.PPO for PPO's clipped objective on the same data"
            )
        for name, flag in (("ess_cap", ess_cap), ("ess_regularizer", ess_regularizer)):
            if not isinstance(flag, bool):
                raise ValueError(f"{name} must be True or False, got {flag!r}")
        self.kl, self.ess_cap, self.ess_regularizer = kl, ess_cap, ess_regularizer
        objective = "esspo-forward-kl" if kl == "forward" else "esspo"  # the entry that declares KL(pi_b || pi_theta)
        objective_kwargs = {"kl": kl, "cap": ess_cap, "regularizer": ess_regularizer}
        super().__init__(policy, env, *args, objective=objective, objective_kwargs=objective_kwargs, **kwargs)


def _shown_signature(cls: type, own: Sequence[str], dropped: Iterable[str]) -> inspect.Signature:
    """The signature ``help()`` and editors show for ``cls``, whose ``__init__`` forwards
    ``*args, **kwargs`` to :class:`BatchPolicyOptimization`: the base's parameters (positional up
    to ``max_grad_norm``, as forwarded; the rest by keyword) without ``dropped``, then ``cls``'s
    own keyword-only ones."""
    base = list(inspect.signature(BatchPolicyOptimization.__init__).parameters.values())
    cut = [p.name for p in base].index("max_grad_norm") + 1
    shown = base[:cut] + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in base[cut:]]
    mine = inspect.signature(cls.__init__).parameters
    return inspect.Signature([p for p in shown if p.name not in set(dropped)] + [mine[name] for name in own])


ESSPO.__init__.__signature__ = _shown_signature(  # type: ignore[attr-defined]
    ESSPO, ("kl", "ess_cap", "ess_regularizer"), ("objective", "objective_kwargs", *_PPO_ONLY_ARGUMENTS)
)


class _ClippedBase(BatchPolicyOptimization):
    """Shared constructor of the clipped baselines (``clip_range`` may be a schedule)."""

    def __init__(self, policy, env, *, clip_range: float | Schedule = _D.clip_range, objective: str, extra: dict[str, Any] | None = None, **kwargs) -> None:  # type: ignore[no-untyped-def]
        check_hyperparams(clip_range=clip_range)
        self.clip_range = clip_range
        super().__init__(policy, env, objective=objective, objective_kwargs={"clip_range": clip_range, **(extra or {})}, **kwargs)

    def _setup_model(self) -> None:
        # As SB3's PPO: ``clip_range`` is a FloatSchedule after construction and after ``load``,
        # and the objective reads this attribute, so ``load(..., custom_objects={"clip_range": x})``
        # takes effect (the saved objective_kwargs would otherwise keep the old value).
        self.clip_range = KnobSchedule(self.clip_range)
        self.objective_kwargs = {**self.objective_kwargs, "clip_range": self.clip_range}
        super()._setup_model()


class PPO(_ClippedBase):
    """PPO's clipped surrogate on the same collector (the behaviour policy is the "old" policy).

    SB3's PPO arguments, in SB3's order and with SB3's meaning (``clip_range_vf``: value clipping
    around the values recomputed at the start of the update, which on fresh data are SB3's
    ``old_values``; ``target_kl``: early stopping of the epochs once the minibatch's ``approx_kl``
    to the learner at the start of the update exceeds ``1.5 * target_kl``; ``use_sde``,
    ``sde_sample_freq``: gSDE), plus the collector's. SB3's ``rollout_buffer_class`` and
    ``rollout_buffer_kwargs`` are not taken: the buffer must store behaviour distributions.
    """

    def __init__(self, policy, env, learning_rate=_D.learning_rate, n_steps=_D.n_steps, batch_size=_D.batch_size, n_epochs=_D.n_epochs, gamma=_D.gamma, gae_lambda=_D.gae_lambda, clip_range=_D.clip_range, clip_range_vf=None, normalize_advantage=_D.normalize_advantage, ent_coef=_D.ent_coef, vf_coef=_D.vf_coef, max_grad_norm=_D.max_grad_norm, use_sde=False, sde_sample_freq=-1, target_kl=None, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(
            policy, env, clip_range=clip_range, objective="ppo", learning_rate=learning_rate, n_steps=n_steps,
            batch_size=batch_size, n_epochs=n_epochs, gamma=gamma, gae_lambda=gae_lambda,
            normalize_advantage=normalize_advantage, ent_coef=ent_coef, vf_coef=vf_coef,
            max_grad_norm=max_grad_norm, clip_range_vf=clip_range_vf, use_sde=use_sde,
            sde_sample_freq=sde_sample_freq, target_kl=target_kl, **kwargs,
        )


class DecoupledPPO(_ClippedBase):
    """Decoupled PPO (Hilton et al. 2021): clip against the proximal policy (the learner at the
    start of the update), correct for the behaviour policy with a truncated importance weight.

    :param is_truncation: the importance weight pi_prox/pi_b is truncated at this value.
    """

    def __init__(self, policy, env, learning_rate=_D.learning_rate, n_steps=_D.n_steps, batch_size=_D.batch_size, n_epochs=_D.n_epochs, gamma=_D.gamma, gae_lambda=_D.gae_lambda, clip_range=_D.clip_range, is_truncation: float = 1.0, normalize_advantage=_D.normalize_advantage, ent_coef=_D.ent_coef, vf_coef=_D.vf_coef, max_grad_norm=_D.max_grad_norm, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(
            policy, env, clip_range=clip_range, objective="decoupled-ppo", extra={"is_truncation": is_truncation},
            learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size, n_epochs=n_epochs, gamma=gamma,
            gae_lambda=gae_lambda, normalize_advantage=normalize_advantage, ent_coef=ent_coef, vf_coef=vf_coef,
            max_grad_norm=max_grad_norm, **kwargs,
        )
