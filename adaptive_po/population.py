"""The population engine's learner: K runs of one algorithm stacked with :mod:`torch.func`.

The SB3 classes (:class:`~adaptive_po.algorithms.BatchPolicyOptimization` and its subclasses) are
the face a user imports; this is the same algorithm's second face, for sweeps. K *members* share
the observation and action spaces, the objective and the hyper-parameters; they differ in seed
and in the data dials (policy lag, action noise, behaviour recording). Stacked per member:

* parameters (built exactly as the SB3 class builds them from the member's seed, then stacked with
  :func:`torch.func.stack_module_state`) and Adam's state;
* random streams: one generator for the actions, one for the action noise, one NumPy stream for
  the minibatch order (``RandomState(seed)``, which is what the SB3 class's global NumPy stream
  is after ``set_random_seed(seed)``);
* the snapshot history behind the policy lag (each member acts with its own k-old parameters);
* gradient-norm clipping and GAE under the member's current critic.

What is shared with the SB3 classes, not copied: the training step itself
(:mod:`adaptive_po.update`: data preparation, the minibatch loss with advantage normalization, KL
gating, value loss (clipping included) and entropy, and the statistics reduction), the forward pass
(:func:`adaptive_po.policy.policy_heads`), the objectives and their registry, the analytic KLs,
the data dials (:class:`~adaptive_po.dials.DataDials`) and the action-noise dial
(:func:`adaptive_po.distributions.perturb`). This class is a thin driver: it stacks members, applies
:func:`adaptive_po.update.minibatch_loss` per member with ``vmap(grad(...))`` and steps a stacked
Adam. Knobs it does not run are refused in one place (:data:`adaptive_po.update.POPULATION_REFUSES`).
Tests check that one update equals the SB3 class's update member by member. Compiled, its step,
forward pass and act are called through :mod:`adaptive_po.compiled`, which holds what the learners
of a process share of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.utils import FloatSchedule, set_random_seed
from torch import Tensor, nn
from torch.func import functional_call, grad, stack_module_state, vmap

from adaptive_po import compiled
from adaptive_po import distributions as D
from adaptive_po import sampler as S
from adaptive_po.collector import SamplerActor
from adaptive_po.dials import DataDials
from adaptive_po.hyperparams import SB3_DEFAULTS, check_hyperparams
from adaptive_po.member_conv import with_member_convolutions
from adaptive_po.networks import resolve_policy_kwargs
from adaptive_po.objectives import check_arguments, get_objective, initial_state
from adaptive_po.policy import POLICY_ALIASES, objective_arguments, objective_schedules, policy_heads
from adaptive_po.staleness import StaleQueue
from adaptive_po.update import (
    EpochListener,
    advantages_and_returns,
    check_population_settings,
    check_update_settings,
    minibatch_columns,
    minibatch_loss,
    replay_information,
    run_update,
    whole_batch_ess,
)

#: Adam's constants as SB3's actor-critics use them (eps = 1e-5), see policy.with_fused_adam
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-5


def stacked_adam(
    params: dict[str, Tensor], grads: dict[str, Tensor], m: dict[str, Tensor], v: dict[str, Tensor], alive: Tensor,
    *, max_grad_norm: float, step_size: Tensor, bias2_sqrt: Tensor,
) -> tuple[dict[str, Tensor], dict[str, Tensor], dict[str, Tensor]]:
    """Per-member global-norm clipping, then Adam (torch.optim.Adam's update, eps 1e-5), pure:
    ``(params, m, v)`` after the step; retired members (``alive`` False) do not move.
    ``step_size`` is ``lr / (1 - beta1^t)``, ``bias2_sqrt`` is ``sqrt(1 - beta2^t)`` (0-dim float32 tensors)."""
    k = alive.shape[0]
    sq = sum(g.reshape(k, -1).pow(2).sum(1) for g in grads.values())
    coef = (max_grad_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    beta1, beta2 = ADAM_BETAS
    step = torch.where(alive, step_size, torch.zeros_like(coef))
    new_params, new_m, new_v = {}, {}, {}
    for name, g in grads.items():
        shape = (k, *([1] * (g.dim() - 1)))
        g = torch.where(alive.view(shape), g * coef.view(shape), torch.zeros_like(g))
        new_m[name] = m[name].mul(beta1).add_(g, alpha=1.0 - beta1)
        new_v[name] = v[name].mul(beta2).addcmul_(g, g, value=1.0 - beta2)
        denom = (new_v[name].sqrt() / bias2_sqrt).add_(ADAM_EPS)
        new_params[name] = params[name] - step.view(shape) * new_m[name] / denom
    return new_params, new_m, new_v


def _stacked_step(per_member_grad, max_grad_norm, params, buffers, m, v, minibatch, state, shared, clip_range_vf, alive, step_size, bias2_sqrt):  # type: ignore[no-untyped-def]
    """One minibatch step of every member, pure: ``vmap(grad(member loss))`` then
    :func:`stacked_adam`. Returns ``(params, m, v, statistics)``. The eager step and the compiled one
    run this same function."""
    grads, stats = per_member_grad(params, buffers, minibatch, state, shared, clip_range_vf)
    new_params, new_m, new_v = stacked_adam(params, grads, m, v, alive, max_grad_norm=max_grad_norm, step_size=step_size, bias2_sqrt=bias2_sqrt)
    return new_params, new_m, new_v, stats


def _member_loss(module: nn.Module, objective: Any, kind: D.Kind, **settings: Any) -> Callable[..., Any]:
    """One member's minibatch loss (:func:`adaptive_po.update.minibatch_loss`) as a function of its
    parameters, ``loss(params, buffers, minibatch, state, arguments, clip_range_vf)``, for
    ``vmap(grad(...))``; ``state`` is the member's objective state, ``settings`` the loss's fixed
    keyword arguments (``normalize_advantage``, ``ent_coef``, ``vf_coef``)."""

    def loss(params, buffers, mb, state, arguments, clip_range_vf):  # type: ignore[no-untyped-def]
        dist_params, values = functional_call(module, {**params, **buffers}, (mb["observations"],))
        return minibatch_loss(objective, kind, dist_params, values, mb, {**arguments, **state}, clip_range_vf=clip_range_vf, **settings)

    return loss


def _as_tensors(values: Any, device: torch.device) -> Any:
    """Python floats (not bools) in ``values`` (a number, ``None`` or a dict of them) as float64
    tensors of one element, ``(1,)``: what :func:`_unboxed` turns into the 0-dim float64 tensors
    that Python numbers become in the eager ops. Not 0-dim on the way in: the compiler gives a
    0-dim float64 input a symbolic float for its value, which its float pass then specializes and
    restarts the whole trace for (the compiled step's tracing twice over, about 2 s a population)."""
    if isinstance(values, dict):
        return {k: _as_tensors(v, device) for k, v in values.items()}
    if isinstance(values, float) or (isinstance(values, int) and not isinstance(values, bool)):
        return torch.tensor([float(values)], dtype=torch.float64, device=device)
    return values


def _unboxed(values: Any) -> Any:
    """:func:`_as_tensors`' ``(1,)`` tensors back as 0-dim ones (a view; traced, no copy)."""
    if isinstance(values, dict):
        return {k: _unboxed(v) for k, v in values.items()}
    return values.reshape(()) if isinstance(values, Tensor) else values


def _sampled(kind: D.Kind, clean: Tensor, sampler: Tensor, u: Tensor, record_actual: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Actions drawn from ``sampler`` with the draws ``u``, and what the collector records: the
    sampled distribution, or the clean policy's where ``record_actual`` is False, with its log-probs."""
    actions = D.sample(kind, sampler, u)
    recorded = torch.where(record_actual, sampler, clean)
    return actions, D.log_prob(kind, recorded, actions), recorded


def _act_core(forward: Callable[..., Any], kind: D.Kind) -> Callable[..., Any]:
    """The stacked ``act`` after the random draws, pure (what the compiled acting runs):
    ``core(params, buffers, obs, sigma, z, temperature, u, record_actual)`` -> ``(actions,
    behaviour_log_prob, behaviour_params)``; ``sigma``/``z`` and ``temperature`` ``None`` when unused."""

    def core(params, buffers, obs, sigma, z, temperature, u, record_actual):  # type: ignore[no-untyped-def]
        clean = forward(params, buffers, obs)[0]
        sampler = S.behaviour_params(kind, clean, sigma=sigma, standard_normal=z, temperature=temperature)
        return _sampled(kind, clean, sampler, u, record_actual)

    return core


#: the fewest rows a forward pass of the update's terminal observations takes (see ``_advantages``)
MIN_PASS_ROWS = 8
#: the acts whose uniform sampling draws each member's generator makes at once (:meth:`PopulationLearner._uniform_draw`)
DRAW_BLOCK = 64


@dataclass(frozen=True)
class Member(DataDials):
    """What tells one member from the others: its seed and its data dials
    (:class:`~adaptive_po.dials.DataDials`, keyword-only, validated on construction).
    ``replay`` changes the amount of data per update, so the members of one population share it."""

    seed: int


@dataclass
class StackedRollout:
    """One rollout of every member, ``(K, n_steps, n_envs, ...)`` tensors on the learner's device.

    ``timeout`` marks time-limit truncations; ``timeout_observations`` holds the true last
    observation there (zeros elsewhere), so truncations bootstrap with its value.
    """

    observations: Tensor
    actions: Tensor
    rewards: Tensor
    episode_starts: Tensor
    behaviour_log_prob: Tensor
    behaviour_params: Tensor
    timeout: Tensor
    timeout_observations: Tensor
    last_observation: Tensor
    last_dones: Tensor


class _FastTanh(nn.Module):
    """tanh as ``2 sigmoid(2x) - 1``: the same function to float32 rounding (absolute error below
    2e-7). On the CPU builds measured here ``torch.tanh`` costs 6-7x a sigmoid, and it was a fifth
    of the engine's time; this form makes a 50-member CartPole gradient step 10% faster
    (42.7 -> 38.5 ms, alternated A/B). Only the engine's copy of the network uses it; the
    equivalence tests bound the difference from the SB3 class."""

    def forward(self, x: Tensor) -> Tensor:
        return 2.0 * torch.sigmoid(2.0 * x) - 1.0


def _with_fast_tanh(module: nn.Module) -> None:
    for name, child in module.named_children():
        if type(child) is nn.Tanh:
            setattr(module, name, _FastTanh())
        else:
            _with_fast_tanh(child)


#: a linear layer with this many inputs or outputs, or fewer, is narrow (:func:`_with_narrow_products`)
NARROW_FEATURES = 8


class _NarrowInputLinear(nn.Linear):
    """``nn.Linear`` with few inputs (an MLP's first layer: 2-8 observation features), written as an
    einsum. The same function to float32 rounding; under ``vmap(grad(...))`` its weight gradient
    becomes the product ``x^T dy`` (``[in, B] x [B, out]``) instead of ``dy^T x`` (``[out, B] x
    [B, in]``). The batched matrix kernels measured here run a product with only 4 output columns
    about 6x slower than the same FLOPs with 4 rows (CartPole, 50 members, minibatch 256: 0.76
    against 0.12 ms)."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.einsum("...i,oi->...o", x, self.weight) + self.bias


class _NarrowOutputLinear(nn.Linear):
    """``nn.Linear`` with few outputs (an action or value head), computed as ``(W x^T)^T``: the
    forward product has the few outputs as its rows, not as its columns (see
    :class:`_NarrowInputLinear`)."""

    def forward(self, x: Tensor) -> Tensor:
        return (self.weight @ x.transpose(-1, -2)).transpose(-1, -2) + self.bias


def _with_narrow_products(module: nn.Module) -> None:
    """The narrow linear layers (:data:`NARROW_FEATURES`) of the engine's copy of an MLP whose step
    is compiled, as :class:`_NarrowInputLinear` or :class:`_NarrowOutputLinear`: the same
    parameters, so the stacked parameters' names do not change. Alternated A/B in one process,
    compiled: CartPole 50 members 1.13x a step, LunarLander 10 1.19x, Pendulum 10 1.08x; eager the
    einsum's permutes cost more than the products gain (0.88-0.96x), so an eager learner keeps
    ``nn.Linear``."""
    for child in module.modules():
        if type(child) is nn.Linear and child.bias is not None:
            if child.in_features <= NARROW_FEATURES:
                child.__class__ = _NarrowInputLinear
            elif child.out_features <= NARROW_FEATURES:
                child.__class__ = _NarrowOutputLinear


def _with_plain_products(module: nn.Module) -> None:
    """Undo :func:`_with_narrow_products`."""
    for child in module.modules():
        if type(child) in (_NarrowInputLinear, _NarrowOutputLinear):
            child.__class__ = nn.Linear


#: the learner precisions the population engine runs: the network's compute dtype under autocast
#: (``None``: float32, no autocast)
LEARNER_PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}


class _Heads(nn.Module):
    """An SB3 actor-critic's forward pass to the flat distribution parameters and the value,
    the same path as ``BatchPolicyOptimization._evaluate``.

    ``compute_dtype`` (bfloat16) runs the forward pass under autocast: the matrix products in that
    dtype, the outputs back in float32, so the parameters, the optimizer and everything after the
    network (log-probabilities, ratios, the objective) stay float32, as mixed-precision training does."""

    def __init__(self, policy: ActorCriticPolicy, kind: D.Kind, compute_dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.policy = policy
        self.kind = kind
        self.compute_dtype = compute_dtype

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        if self.compute_dtype is None:
            return policy_heads(self.policy, self.kind, obs)
        with torch.autocast(obs.device.type, dtype=self.compute_dtype):
            dist_params, values = policy_heads(self.policy, self.kind, obs)
        return dist_params.float(), values.float()

    def extra_repr(self) -> str:  # part of the compiled callables' keys
        return f"compute_dtype={self.compute_dtype}" if self.compute_dtype is not None else ""


def distribution_kind(action_space: spaces.Space) -> D.Kind:
    return D.kind_of_space(action_space)


def check_population_spaces(observation_space: spaces.Space, action_space: spaces.Space, use_sde: bool = False) -> None:
    """``ValueError`` for what the population engine does not run (the SB3 classes do): gSDE,
    observations other than Box, actions other than Discrete and one-dimensional Box."""
    if use_sde:
        raise ValueError("the population engine does not run gSDE (use_sde=True); use the process engine")
    if not isinstance(observation_space, spaces.Box):
        raise ValueError(f"the population engine runs Box observations only, got {observation_space}; use the process engine")
    if not (isinstance(action_space, spaces.Discrete) or (isinstance(action_space, spaces.Box) and len(action_space.shape) == 1)):
        raise ValueError(
            f"the population engine runs Discrete and one-dimensional Box actions only, got {action_space}; use the process engine"
        )


#: the hyper-parameters the population engine takes as keyword arguments, with the defaults of the
#: SB3 class's signature (SB3's PPO defaults, :data:`~adaptive_po.hyperparams.SB3_DEFAULTS`, and
#: the SB3 class's own ``None``/``False``/``-1``; a test holds the two signatures equal)
SHARED_DEFAULTS: dict[str, Any] = {
    **{name: getattr(SB3_DEFAULTS, name) for name in (
        "learning_rate", "n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "normalize_advantage", "ent_coef",
        "vf_coef", "max_grad_norm",
    )},
    "use_sde": False, "sde_sample_freq": -1, "clip_range_vf": None, "target_kl": None, "batch_scaling": None,
}
SHARED_HYPERPARAMETERS: tuple[str, ...] = tuple(SHARED_DEFAULTS)


def shared_hyperparameters(given: dict[str, Any]) -> dict[str, Any]:
    """``given`` over the SB3 class's defaults; ``TypeError`` for a name the SB3 class does not take."""
    unknown = sorted(set(given) - set(SHARED_HYPERPARAMETERS))
    if unknown:
        raise TypeError(f"PopulationLearner got unexpected keyword argument(s) {unknown}; it takes {list(SHARED_HYPERPARAMETERS)}")
    return {name: given.get(name, default) for name, default in SHARED_DEFAULTS.items()}


class PopulationLearner:
    """K members of one algorithm, stacked; acting, and one update at a time.

    Constructor arguments are those of :class:`~adaptive_po.algorithms.BatchPolicyOptimization`
    (same meaning, units and defaults: :data:`SHARED_HYPERPARAMETERS` as keyword arguments), except
    ``members`` (one :class:`Member` each) and the spaces given directly. ``policy`` is the SB3
    alias (``MlpPolicy`` or ``CnnPolicy``; ``policy_kwargs`` may name a features extractor, e.g.
    the MinAtar CNN). Box observations (image observations stay uint8 until the policy's own
    preprocessing) with Discrete or one-dimensional Box actions, without gSDE
    (:func:`check_population_spaces`); the SB3 classes run the rest. ``precision`` (``"fp32"`` or
    ``"bf16"``, :data:`LEARNER_PRECISIONS`) is the network's compute precision everywhere it runs
    (acting, evaluation, the update's forward and backward passes); ``bf16`` is for MLP policies.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        members: list[Member],
        *,
        objective: str = "esspo",
        objective_kwargs: dict[str, Any] | None = None,
        replay: int | None = None,
        advantage_estimator: str | None = None,
        policy: str = "MlpPolicy",
        policy_kwargs: dict[str, Any] | None = None,
        device: str | torch.device = "cpu",
        compile_step: bool | None = None,
        precision: str = "fp32",
        **hyperparameters: Any,
    ) -> None:
        if not members:
            raise ValueError("a population needs at least one member")
        if precision not in LEARNER_PRECISIONS:
            raise ValueError(f"unknown learner precision {precision!r}; the population engine runs {list(LEARNER_PRECISIONS)}")
        hp = shared_hyperparameters(hyperparameters)
        check_population_settings(
            use_sde=hp["use_sde"], target_kl=hp["target_kl"], batch_scaling=hp["batch_scaling"],
            **{k: v for k, v in (policy_kwargs or {}).items() if k in ("optimizer_class", "optimizer_kwargs")},
        )
        check_population_spaces(observation_space, action_space, hp["use_sde"])
        check_hyperparams(**{k: v for k, v in hp.items() if k not in ("clip_range_vf", "target_kl")})
        self.objective_spec = get_objective(objective)
        self.advantage_estimator = check_update_settings(
            self.objective_spec, batch_size=hp["batch_size"], normalize_advantage=hp["normalize_advantage"],
            advantage_estimator=advantage_estimator, clip_range_vf=hp["clip_range_vf"], target_kl=hp["target_kl"],
        )
        self.clip_range_vf = None if hp["clip_range_vf"] is None else FloatSchedule(hp["clip_range_vf"])
        replays = {m.replay for m in members}
        if len(replays) > 1 or (replay is not None and replays != {0} and replays != {replay}):
            raise ValueError(f"the members of a population share one replay depth, got members {sorted(replays)} and replay={replay!r}")
        replay = replay if replay is not None else replays.pop()
        DataDials(replay=replay)  # validated as a dial
        learning_rate, n_steps, batch_size, n_epochs = hp["learning_rate"], hp["n_steps"], hp["batch_size"], hp["n_epochs"]
        gamma, gae_lambda, normalize_advantage = hp["gamma"], hp["gae_lambda"], hp["normalize_advantage"]
        ent_coef, vf_coef, max_grad_norm = hp["ent_coef"], hp["vf_coef"], hp["max_grad_norm"]
        #: the low precisions present: the sampler's forward pass runs once per precision
        self.precisions = sorted({m.sampler_precision for m in members} - {"fp32"})
        self.members = list(members)
        self.k = len(members)
        self.device = torch.device(device)
        self.kind = distribution_kind(action_space)
        self.observation_space, self.action_space = observation_space, action_space
        self.objective_name = objective
        self.objective_kwargs = {**self.objective_spec.kwargs, **(objective_kwargs or {})}
        self._objective_schedules = objective_schedules(self.objective_kwargs)
        check_arguments(self.objective_spec, objective_arguments(self._objective_schedules, 1.0))
        self.lr_schedule = FloatSchedule(learning_rate)
        self.n_steps, self.batch_size, self.n_epochs = n_steps, batch_size, n_epochs
        self.gamma, self.gae_lambda = gamma, gae_lambda
        self.normalize_advantage = normalize_advantage
        self.ent_coef, self.vf_coef, self.max_grad_norm = ent_coef, vf_coef, max_grad_norm
        self.replay = replay or self.objective_spec.replay  # P3O replays by design unless the run sets a depth

        # Parameters as the SB3 class makes them: seed everything, then build the policy.
        if policy not in POLICY_ALIASES:
            raise ValueError(f"unknown policy {policy!r}; the population engine builds {sorted(POLICY_ALIASES)}")
        policy_class = POLICY_ALIASES[policy]
        policies = []
        for m in self.members:
            set_random_seed(m.seed)
            policies.append(
                policy_class(observation_space, action_space, self.lr_schedule, use_sde=False, **resolve_policy_kwargs(policy_kwargs)).to(self.device)
            )
        self.precision = precision
        if policies[0].normalize_images and not is_image_space(observation_space):
            # SB3 asks is_image_space at every forward pass, comparing the space's numpy bounds: the
            # compiler cannot trace that (a graph break: an MLP on uint8 observations, MinAtar's,
            # ran its passes and its acting eagerly). Its answer is fixed: given here, once; the
            # engine's copy preprocesses exactly as before (no image: float, no scaling)
            policies[0].normalize_images = False
        self._module = _Heads(policies[0], self.kind, LEARNER_PRECISIONS[precision])
        convolutional = any(isinstance(m, nn.Conv2d) for m in self._module.modules())
        if precision != "fp32" and convolutional:
            # oneDNN (the CPU build measured here) has no bf16 kernel for the per-member convolution
            raise ValueError(f"learner precision {precision!r} runs MLP policies only; {policy} with convolutions trains in fp32")
        _with_fast_tanh(self._module)
        with_member_convolutions(self._module)  # one plain convolution per member under vmap, not a grouped one
        self._sampler_modules = {p: SamplerActor(policies[0], self.kind, p) for p in self.precisions}
        self._precision_mask = {
            p: torch.tensor([m.sampler_precision == p for m in self.members], device=self.device) for p in self.precisions
        }
        params, buffers = stack_module_state(policies)
        self.params = {f"policy.{k}": v.detach().clone() for k, v in params.items()}
        self.buffers = {f"policy.{k}": v for k, v in buffers.items()}
        self._initial = {k: v.clone() for k, v in self.params.items()}
        self._adam_m = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self._adam_v = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self._adam_count = 0
        #: whether the minibatch step runs compiled (``None``: :func:`adaptive_po.compiled.compile_wanted` decides)
        self.compile_step = compiled.compile_wanted() if compile_step is None else bool(compile_step)
        if self.compile_step and not convolutional:
            _with_narrow_products(self._module)
        member_loss = _member_loss(
            self._module, self.objective_spec, self.kind, normalize_advantage=normalize_advantage, ent_coef=ent_coef, vf_coef=vf_coef,
        )
        per_member_grad = vmap(grad(member_loss, has_aux=True), in_dims=(0, 0, 0, 0, None, None))

        def step(*args: Any) -> Any:
            return _stacked_step(per_member_grad, max_grad_norm, *args)

        def boxed_step(*args: Any) -> Any:  # what is compiled: the numbers come boxed (_as_tensors)
            return step(*args[:6], _unboxed(args[6]), _unboxed(args[7]), *args[8:])

        self._eager_step, self._boxed_step = step, boxed_step
        self._stacked_forward = vmap(self._heads, in_dims=(0, 0, 0))
        self._act_core = _act_core(self._stacked_forward, self.kind)
        #: the width of the flat distribution parameters (from one row's eager pass: :meth:`_noise_shape`)
        self._dist_width: int | None = None
        self._checked: tuple[Any, ...] | None = None
        #: what the compiled step's code depends on besides its tensors' shapes (which its guards check)
        self._step_key = (
            objective, id(self.objective_spec), self.kind, repr(self._module), repr(observation_space), repr(action_space),
            normalize_advantage, ent_coef, vf_coef, max_grad_norm, str(self.device),
        )
        self._act_key = ("act", self.kind, repr(self._module), repr(observation_space), repr(action_space), str(self.device))
        self._forward_key = ("forward", self.kind, repr(self._module), repr(observation_space), repr(action_space), str(self.device))

        self.alive = torch.ones(self.k, dtype=torch.bool, device=self.device)
        #: updates done so far (SB3's ``_n_updates`` counts gradient epochs instead: not this)
        #: the policy lags' snapshots and the replayed rollouts (the SB3 class's collector keeps its
        #: own run's in the same class); at lag 0 the only snapshot is the learner's parameters
        self._stale: StaleQueue[dict[str, Tensor], StackedRollout] = StaleQueue([m.policy_lag for m in self.members], self.replay)
        self._stale.start(self._initial)
        self._acting = self._initial
        self.noise = torch.tensor([m.action_noise for m in self.members], device=self.device, dtype=torch.float32)
        self.temperature = torch.tensor([m.sampler_temperature for m in self.members], device=self.device, dtype=torch.float32)
        #: whether any member's acting is noisy, or tempered (asked at every act: once, here)
        self._noisy, self._tempered = bool((self.noise > 0).any()), bool((self.temperature != 1.0).any())
        self.objective_state = {
            k: torch.full((self.k,), v, device=self.device) for k, v in initial_state(self.objective_spec, self.objective_kwargs).items()
        }
        self.record_actual = torch.tensor([m.behaviour_log_prob == "actual" for m in self.members], device=self.device)
        self.action_generators = [self._generator(m.seed) for m in self.members]
        #: each member's uniform floats drawn ahead, ``(K, n)``, and how many of them are used (:meth:`_uniform_draw`)
        self._draw_stock: Tensor | None = None
        self._draws_used = 0
        self.noise_generators = [self._generator(m.seed + 7919) for m in self.members]  # the Collector's offset
        self.permutation_rngs = [np.random.RandomState(m.seed) for m in self.members]
        self._update_listeners: list[Callable[[StackedRollout, dict[str, Tensor]], None]] = []
        self._start_listeners: list[Callable[[StackedRollout], None]] = []
        self._epoch_listeners: list[EpochListener] = []
        self._refresh_sampler_params()

    def _generator(self, seed: int) -> torch.Generator:
        generator = torch.Generator(device=self.device)
        generator.manual_seed(int(seed))
        return generator

    def _run_compiled(self, key: tuple[Any, ...], fn: Callable[..., Any], args: tuple[Any, ...], shapes: tuple[Any, ...]) -> Any | None:
        """:func:`adaptive_po.compiled.call_compiled`; where it gives ``None`` (the caller then runs
        ``fn`` eagerly), the engine's copy of the network gets its plain ``nn.Linear`` layers back,
        so that a learner whose compilation fails computes what an eager learner does, bit for bit."""
        out = compiled.call_compiled(key, fn, args, shapes)
        if out is None:
            _with_plain_products(self._module)
        return out

    # -- forward passes ------------------------------------------------------------------------------
    def _heads(self, params: dict[str, Tensor], buffers: dict[str, Tensor], obs: Tensor) -> tuple[Tensor, Tensor]:
        return functional_call(self._module, {**params, **buffers}, (obs,))

    def forward(self, params: dict[str, Tensor], obs: Tensor, *, eager: bool = False) -> tuple[Tensor, Tensor]:
        """``(K, B, ...)`` observations -> ``(K, B, P)`` distribution parameters, ``(K, B)`` values.
        Compiled with the step (:attr:`compile_step`), eager otherwise or where ``eager``. One
        compilation serves every ``B`` (evaluation's 10 rows and an update's 264 at CartPole's;
        acting is compiled apart, :meth:`act`): ``B`` is a symbolic size in it (a pass of 0 or 1
        rows still compiles for itself)."""
        if self.compile_step and not eager:
            import torch._dynamo

            torch._dynamo.maybe_mark_dynamic(obs, 1)
            out = self._run_compiled(self._forward_key, self._stacked_forward, (params, self.buffers, obs), (obs.shape[0], *obs.shape[2:]))
            if out is not None:
                return out
        return self._stacked_forward(params, self.buffers, obs)

    @torch.no_grad()
    def values(self, obs: Tensor, *, eager: bool = False) -> Tensor:
        return self.forward(self.params, obs, eager=eager)[1]

    @torch.no_grad()
    def deterministic_actions(self, obs: Tensor) -> Tensor:
        """The clean current policy's actions (for evaluation), ``(K, B[, d])``."""
        # contiguous first: the compiled pass lays its (K, B, P) parameters out P-major, and an
        # argmax along a strided last dimension costs 10x (CartPole's evaluation, 50 x 10 x 2: 63 us
        # against 6.5); the same actions
        return D.mode(self.kind, self.policy_params(self.params, obs).contiguous())

    # -- acting -----------------------------------------------------------------------------------
    @property
    def acting_updates(self) -> list[int]:
        """For each member, the index of the update whose parameters act now (0 = initial)."""
        return self._stale.acting_updates

    @property
    def updates_done(self) -> int:
        """Updates done so far (SB3's ``_n_updates`` counts gradient epochs instead: not this)."""
        return self._stale.updates

    @property
    def lags(self) -> list[int]:
        """Each member's policy lag."""
        return list(self._stale.lags)

    def acting_parameters(self) -> dict[str, Tensor]:
        """Each member's acting parameters now (``policy_lag`` updates old), stacked ``(K, ...)``."""
        return self._acting

    def _refresh_acting_params(self) -> None:
        """Each member acts with the parameters of ``policy_lag`` updates ago (its own)."""
        history, slots = self._stale.snapshots, self._stale.acting_slots()
        if len(set(slots)) == 1:
            self._acting = history[slots[0]]
        else:
            # K small copies per tensor: cheap next to stacking the whole history
            self._acting = {
                name: torch.stack([history[slot][name][m] for m, slot in enumerate(slots)]) for name in self.params
            }
        self._refresh_sampler_params()

    def _refresh_sampler_params(self) -> None:
        """The acting parameters as each low-precision sampler holds them (per member and tensor
        scaling; members at another precision are quantized too, and ignored)."""
        self._sampler_params = {
            p: {name: S.quantize(v, p, batch_dims=1) for name, v in self._acting.items()} for p in self.precisions
        }

    def _sampler_forward(self, clean: Tensor, obs: Tensor) -> Tensor:
        """The distribution parameters each member's sampler computes: ``clean`` for fp32 members."""
        out = clean
        for precision in self.precisions:
            module = self._sampler_modules[precision]
            call = lambda p, b, o: functional_call(module, {**p, **b}, (o,))  # noqa: E731
            dtype = S.compute_dtype(precision)
            buffers = {k: v.to(dtype) if v.is_floating_point() else v for k, v in self.buffers.items()}
            low = vmap(call, in_dims=(0, 0, 0))(self._sampler_params[precision], buffers, obs)
            mask = self._precision_mask[precision].view(self.k, *([1] * (clean.dim() - 1)))
            out = torch.where(mask, low, out)
        return out

    @torch.no_grad()
    def act(self, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Sample actions for ``(K, n_envs, ...)`` observations with each member's acting parameters
        and dials. Returns ``(actions, behaviour_log_prob, behaviour_params)`` as the collector
        records them: the distribution actually sampled from, or the clean policy's for members
        that record ``behaviour_log_prob="policy"``."""
        if self.precisions or not self.compile_step:
            clean, _ = self.forward(self._acting, obs)
            return self._act_eagerly(clean, obs)
        # compiled: the draws first (each member's own generators, in the eager order), then the
        # forward pass, the dials, the sampling and the log-probs in one compiled call
        z, u = self._draws(self._noise_shape(self._acting, obs))
        return self._run_act_core(self._acting, obs, z, u, self.record_actual.view(self.k, 1, 1))

    def _noise_shape(self, params: dict[str, Tensor], obs: Tensor) -> torch.Size:
        """The shape of one member's sampling draws for ``obs``' rows, before any pass over them:
        the distribution's width comes from one row's eager pass, once (a compiled pass would
        compile for that shape alone)."""
        if self._dist_width is None:
            self._dist_width = self.forward(params, obs[:, :1], eager=True)[0].shape[-1]
        return D.sampling_noise_shape(self.kind, torch.Size((obs.shape[1], self._dist_width)))

    def _run_act_core(self, params: dict[str, Tensor], obs: Tensor, z: Tensor | None, u: Tensor, record_actual: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The compiled act (:func:`_act_core`) with the learner's dials; one compilation for every
        row count (acting's and :meth:`policy_params`'s: the rows are a symbolic size)."""
        import torch._dynamo

        shape = (self.k, 1, 1)  # the dials per member, over (K, B, P) distribution parameters
        args = (
            params, self.buffers, obs, self.noise.view(shape) if z is not None else None, z,
            self.temperature.view(shape) if self._tempered else None, u, record_actual,
        )
        for rows in (obs, z, u):
            if rows is not None:
                torch._dynamo.maybe_mark_dynamic(rows, 1)
        out = self._run_compiled(self._act_key, self._act_core, args, (obs.shape[0], *obs.shape[2:]))
        return out if out is not None else self._act_core(*args)

    @torch.no_grad()
    def policy_params(self, params: dict[str, Tensor], obs: Tensor) -> Tensor:
        """The clean policy's distribution parameters ``(K, B, P)`` under ``params``: the actor
        alone. Compiled, the act's compilation computes them (its draws zero, every member
        recording the clean policy: the same function to float32 rounding), so evaluation and an
        update's passes after its steps (approx_kl, the batch ESS) skip the critic that
        :meth:`forward` computes, without a compilation of their own."""
        if self.precisions or not self.compile_step:
            return self.forward(params, obs)[0]
        noise_shape = self._noise_shape(params, obs)

        def zeros() -> Tensor:  # a tensor per use: the compiled act guards against one passed twice
            return torch.zeros((self.k, *noise_shape), dtype=torch.float32, device=self.device)

        z = zeros() if self._noisy else None
        return self._run_act_core(params, obs, z, zeros(), torch.zeros((self.k, 1, 1), dtype=torch.bool, device=self.device))[2]

    def _draws(self, noise_shape: torch.Size) -> tuple[Tensor | None, Tensor]:
        """Each member's action-noise draw (``None`` when no member is noisy) and sampling draw."""
        z = None
        if self._noisy:
            z = torch.stack([torch.randn(noise_shape, generator=g, device=self.device) for g in self.noise_generators])
        if self.kind != "categorical":
            return z, torch.stack([torch.randn(noise_shape, generator=g, device=self.device) for g in self.action_generators])
        return z, self._uniform_draw(noise_shape)

    def _uniform_draw(self, noise_shape: torch.Size) -> Tensor:
        """``(K, *noise_shape)``: each member's next uniform floats from its own generator, taken
        from a stock drawn ahead (:data:`DRAW_BLOCK` acts' worth at a time). The CPU generator
        hands out uniform floats one after another whatever the size of each request (tested), so
        these are the floats a draw per act gives, for any sequence of shapes; one ``torch.rand``
        per member per block instead of per act (CartPole K=50: 50 calls of an act's 0.5 ms)."""
        need, stock = math.prod(noise_shape), self._draw_stock
        if stock is None or stock.shape[1] - self._draws_used < need:
            fresh = torch.stack([torch.rand(DRAW_BLOCK * need, generator=g, device=self.device) for g in self.action_generators])
            stock = fresh if stock is None else torch.cat([stock[:, self._draws_used :], fresh], dim=1)
            self._draw_stock, self._draws_used = stock, 0
        self._draws_used += need
        return stock[:, self._draws_used - need : self._draws_used].reshape(self.k, *noise_shape).contiguous()

    def _act_eagerly(self, clean: Tensor, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        noise_shape = D.sampling_noise_shape(self.kind, clean.shape[1:])
        shape = (self.k, *([1] * (clean.dim() - 1)))
        z, u = self._draws(noise_shape)
        tempered = self._tempered
        sampler = S.behaviour_params(
            self.kind, self._sampler_forward(clean, obs) if self.precisions else clean,
            sigma=self.noise.view(self.k, *([1] * (z.dim() - 1))) if z is not None else None, standard_normal=z,
            temperature=self.temperature.view(shape) if tempered else None,
        )
        return _sampled(self.kind, clean, sampler, u, self.record_actual.view(shape))

    # -- one update -------------------------------------------------------------------------------
    def _flat(self, x: Tensor) -> Tensor:
        """``(K, T, E, ...)`` -> ``(K, E * T, ...)``, env-major as SB3's buffer yields it."""
        k, t, e = x.shape[:3]
        return x.transpose(1, 2).reshape(k, e * t, *x.shape[3:])

    def _advantages(self, batch: StackedRollout) -> tuple[Tensor, Tensor, Tensor]:
        """Values, advantages and returns ``(K, T, E)`` under each member's current critic
        (:func:`adaptive_po.update.advantages_and_returns` on the ``(T, K * E)`` columns)."""
        return self._valued(batch)[:3]

    @torch.no_grad()
    def _valued(self, batch: StackedRollout) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """:meth:`_advantages`, and the distribution parameters ``(K, E * T, P)`` (env-major, as
        :meth:`_flat` lays out the update's data) that the same pass gave."""
        k, t, e = batch.rewards.shape
        shape = batch.observations.shape[3:]
        # a terminal observation's value is needed only where an episode was truncated: those
        # positions (in any member) only, in a pass of their own, eagerly: their number changes from
        # update to update, and a compiled pass would compile once per number (about 0.5 s each). A
        # row's value does not depend on the rows beside it once a pass has 7 rows or more (the
        # matrix kernels take another path below that): at least 8 are valued, the first repeated
        truncated = batch.timeout.reshape(k, t * e).any(0).nonzero().squeeze(1)
        if 0 < truncated.numel() < MIN_PASS_ROWS:
            truncated = torch.cat([truncated, truncated[:1].expand(MIN_PASS_ROWS - truncated.numel())])
        all_dist, all_values = self.forward(self.params, torch.cat([batch.observations.reshape(k, t * e, *shape), batch.last_observation], dim=1))
        dist_params = self._flat(all_dist[:, : t * e].reshape(k, t, e, -1))
        values = all_values[:, : t * e].reshape(k, t, e)
        last_values = all_values[:, t * e :]
        terminal_values = torch.zeros(k, t * e, dtype=all_values.dtype, device=all_values.device)
        if truncated.numel():
            terminal_values[:, truncated] = self.values(batch.timeout_observations.reshape(k, t * e, *shape)[:, truncated], eager=True)
        terminal_values = terminal_values.reshape(k, t, e)
        truncation_values = torch.where(batch.timeout, terminal_values, torch.zeros_like(terminal_values))
        to_np = lambda x: x.permute(1, 0, 2).reshape(t, k * e).cpu().numpy()  # noqa: E731
        log_rhos = None
        if self.advantage_estimator == "vtrace":
            log_prob = D.log_prob(self.kind, all_dist[:, : t * e], batch.actions.reshape(k, t * e, *batch.actions.shape[3:]))
            log_rhos = to_np(log_prob.reshape(k, t, e) - batch.behaviour_log_prob)
        advantages, returns = advantages_and_returns(
            self.advantage_estimator, to_np(batch.rewards), to_np(values), to_np(batch.episode_starts),
            last_values.reshape(k * e).cpu().numpy(), batch.last_dones.reshape(k * e).cpu().numpy(),
            gamma=self.gamma, gae_lambda=self.gae_lambda, truncation_values=to_np(truncation_values), log_rhos=log_rhos,
        )
        back = lambda a: torch.as_tensor(a, device=self.device).reshape(t, k, e).permute(1, 0, 2)  # noqa: E731
        return values, back(advantages), back(returns), dist_params

    @torch.no_grad()
    def _log_prob(self, params: dict[str, Tensor], obs: Tensor, actions: Tensor) -> Tensor:
        return D.log_prob(self.kind, self.forward(params, obs)[0], actions)

    def _scalar(self, value: float) -> Tensor:
        return torch.tensor(value, dtype=torch.float32, device=self.device)

    def _step(self, minibatch: dict[str, Tensor], state: dict[str, Tensor], shared: dict[str, Any], clip_range_vf: float | None, lr: float) -> dict[str, Tensor]:
        """One minibatch step of every member (:func:`_stacked_step`): compiled when
        :attr:`compile_step` is on and compilation works, eager otherwise. Returns its statistics."""
        self._adam_count += 1
        beta1, beta2 = ADAM_BETAS
        bias1 = 1.0 - beta1**self._adam_count
        args = (
            self.params, self.buffers, self._adam_m, self._adam_v, minibatch, state, shared, clip_range_vf, self.alive,
            # 0-dim tensors, not Python numbers: a compiled step would specialize on (and recompile for) each value
            self._scalar(lr / bias1), self._scalar(math.sqrt(1.0 - beta2**self._adam_count)),
        )
        out = None
        if self.compile_step:
            if (shared, clip_range_vf) != self._checked:
                check_arguments(self.objective_spec, shared, state)
                self._checked = (shared, clip_range_vf)
            out = self._run_compiled(self._step_key, self._boxed_step, self._boxed_arguments(args), tuple(minibatch["observations"].shape))
        params, m, v, stats = out if out is not None else self._eager_step(*args)
        for name in params:  # in place in the dictionaries (the acting parameters may be this one)
            self.params[name], self._adam_m[name], self._adam_v[name] = params[name], m[name], v[name]
        return stats

    def _boxed_arguments(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """:meth:`_step`'s arguments as the compiled step takes them (:attr:`_boxed_step`): the
        schedules' numbers (``shared``, ``clip_range_vf``) as float64 tensors, what Python numbers
        become in the eager ops; a compiled step would specialize on a number's value and recompile
        at every update."""
        return (*args[:6], _as_tensors(args[6], self.device), _as_tensors(args[7], self.device), *args[8:])

    def _state_and_shared(self, arguments: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """An update's objective ``arguments`` split into the objective's state (per member) and the
        rest (the schedules' values, shared by the members), as :meth:`_step` takes them."""
        state = {name: arguments[name] for name in self.objective_state}
        return state, {name: v for name, v in arguments.items() if name not in self.objective_state}

    def compile_ahead(self, obs: Tensor) -> None:
        """Compile the first update's forward pass and minibatch step now, before the first act,
        for the signatures the update will call them with (``obs``: a ``(K, n_envs, ...)``
        observation tensor as the collector stores them). Their kernels wait and are built with the
        act's at its first call (:func:`adaptive_po.compiled.prime_compiled`): one g++ run for the
        population instead of three, each of which parses the header the kernels include. Nothing
        of the learner's runs or changes: the calls take zeros and copies, and stop at their first
        kernel; the numbers are those a compilation at the first update gives. Only compiled
        learners without low-precision samplers (their acting runs eagerly), where
        ``ADAPTIVE_PO_COMPILE_AHEAD`` is not off.

        The arguments mirror :meth:`_valued`'s pass and :func:`adaptive_po.update.run_update`'s
        first minibatch (:meth:`_StackedFace.epoch`); where the first call's signature differs all
        the same, that call compiles as before and :data:`adaptive_po.compiled.PRIME_MISSES` names
        it."""
        if not self.compile_step or self.precisions or not compiled.compile_ahead_wanted():
            return
        import torch._dynamo

        k, e, shape = self.k, obs.shape[1], tuple(obs.shape[2:])
        n = self.n_steps * e  # the first update's transitions: its rollout, nothing replayed yet
        def copies(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
            return {name: v.clone() for name, v in tensors.items()}

        params, buffers = copies(self.params), copies(self.buffers)
        with torch.no_grad():
            rows = torch.zeros((k, n + e, *shape), dtype=obs.dtype, device=self.device)  # the rollout and its last observations
            torch._dynamo.maybe_mark_dynamic(rows, 1)
            if not compiled.prime_compiled(self._forward_key, self._stacked_forward, (params, buffers, rows), (k, *shape)):
                return
            # one row's eager pass gives each column's dtype and trailing shape
            dist = self._stacked_forward(params, buffers, torch.zeros((k, 1, *shape), dtype=obs.dtype, device=self.device))[0]
            actions = D.mode(self.kind, dist)
            log_prob = D.log_prob(self.kind, dist, actions)
        size = min(self.batch_size, n)

        def column(example: Tensor, count: int = size) -> Tensor:
            return torch.zeros((k, count, *example.shape[2:]), dtype=example.dtype, device=self.device)

        floats = column(log_prob)
        proximal, behaviour = column(log_prob, n), column(log_prob, n)
        fresh, replay_ess = replay_information(proximal, behaviour, n)
        examples = {
            "observations": column(obs), "actions": column(actions), "behaviour_log_prob": floats, "behaviour_params": column(dist),
            "advantages": floats, "returns": floats, "values": floats, "proximal_log_prob": floats, "fresh": column(fresh),
        }
        examples["query_dual"] = floats
        minibatch = {name: examples[name].clone() for name in minibatch_columns(self.objective_spec)}
        minibatch["replay_ess"] = replay_ess
        if self.objective_spec.needs_batch_ess:
            minibatch["batch_ess"] = whole_batch_ess(proximal, behaviour)
        state, shared = self._state_and_shared({**self.objective_arguments(1.0), **copies(self.objective_state)})
        clip_range_vf = None if self.clip_range_vf is None else self.clip_range_vf(1.0)
        # as :meth:`_step` passes them
        args = (
            params, buffers, copies(self._adam_m), copies(self._adam_v), minibatch, state, shared, clip_range_vf, self.alive.clone(),
            self._scalar(1.0), self._scalar(1.0),
        )
        with torch.enable_grad():
            compiled.prime_compiled(self._step_key, self._boxed_step, self._boxed_arguments(args), (k, size, *shape))

    def objective_arguments(self, progress_remaining: float) -> dict[str, Any]:
        return objective_arguments(self._objective_schedules, progress_remaining)

    def update(self, rollout: StackedRollout, progress_remaining: float) -> dict[str, Tensor]:
        """One update of every member on its rollout (plus its replayed ones):
        :func:`adaptive_po.update.run_update` with the stacked ``vmap(grad(...))`` step and Adam.

        ``progress_remaining`` (1 -> 0) drives the learning-rate and objective schedules, as SB3's
        ``_current_progress_remaining`` does. Returns the update's statistics, ``(K,)`` tensors
        keyed by the names of the run-folder contract's progress columns (plus ``loss``); the
        update listeners get them too.
        """
        for listener in self._start_listeners:
            listener(rollout)
        lr = self.lr_schedule(progress_remaining)
        schedule_values = self.objective_arguments(progress_remaining)
        stats, _ = run_update(
            _StackedFace(self, lr), self.objective_spec, self.kind,
            self._stale.batches(rollout),
            n_fresh=rollout.rewards.shape[1] * rollout.rewards.shape[2], n_epochs=self.n_epochs,
            schedule_values=schedule_values, objective_state=self.objective_state, learning_rate=lr,
            clip_range_vf=None if self.clip_range_vf is None else self.clip_range_vf(progress_remaining),
            epoch_listeners=self._epoch_listeners,
        )
        self._after_update(rollout)
        for listener in self._update_listeners:
            listener(rollout, stats)
        return stats

    def add_update_listener(
        self, listener: Callable[[StackedRollout, dict[str, Tensor]], None], *, at_start: Callable[[StackedRollout], None] | None = None
    ) -> None:
        """Call ``listener(rollout, statistics)`` after every update (diagnostics; the statistics
        are the ``(K,)`` tensors :meth:`update` returns), and ``at_start(rollout)`` before it,
        with the learner's parameters as they were when the rollout was collected."""
        self._update_listeners.append(listener)
        if at_start is not None:
            self._start_listeners.append(at_start)

    def add_epoch_listener(self, listener: EpochListener) -> None:
        """Call ``listener(epoch, rows, data)`` after every epoch of every update, as the SB3 class
        does: the epoch's minibatch statistics (``(K,)`` tensors) and the update's data."""
        self._epoch_listeners.append(listener)

    def _after_update(self, rollout: StackedRollout) -> None:
        # lagged: a copy of the parameters after the update; else the parameters themselves (the
        # queue of one keeps the newest)
        snapshot = {k: v.detach().clone() for k, v in self.params.items()} if self._stale.lagged else self.params
        self._stale.after_update(rollout, snapshot)
        self._refresh_acting_params()

    # -- failure isolation ------------------------------------------------------------------------
    def finite_members(self) -> Tensor:
        """``(K,)`` True where every parameter of the member is finite."""
        ok = torch.ones(self.k, dtype=torch.bool, device=self.device)
        for v in self.params.values():
            ok &= torch.isfinite(v.reshape(self.k, -1)).all(1)
        return ok

    def retire(self, member: int) -> None:
        """Stop training ``member``: its parameters go back to their finite initial values and it
        takes no more steps, so a diverged member cannot poison the population's computations."""
        self.alive[member] = False
        for store in (self.params, *self._stale.snapshots):
            for name in store:
                store[name][member] = self._initial[name][member]
        for state in (self._adam_m, self._adam_v):
            for name in state:
                state[name][member] = 0.0
        self._refresh_acting_params()


class _StackedFace:
    """The population engine's side of :func:`adaptive_po.update.run_update`: every member at
    once, each with its own minibatch order, gradient clipping and Adam."""

    def __init__(self, learner: PopulationLearner, lr: float) -> None:
        self.learner, self.lr = learner, lr
        self.members = torch.arange(learner.k, device=learner.device)[:, None]
        #: the distribution parameters the values' passes gave, per batch, and the parameters they
        #: were computed with (:meth:`dist_params` reuses them while no step has replaced those)
        self._valued_dist: list[Tensor] = []
        self._valued_with = dict(learner.params)

    def advantages(self, batch: StackedRollout) -> tuple[Tensor, Tensor, Tensor]:
        values, advantages, returns, dist_params = self.learner._valued(batch)
        self._valued_dist.append(dist_params)
        return values, advantages, returns

    def flatten(self, column: str, values: Tensor) -> Tensor:
        return self.learner._flat(values)

    def concatenate(self, parts: list[Tensor]) -> Tensor:
        return torch.cat(parts, dim=1)

    @torch.no_grad()
    def dist_params(self, data: dict[str, Tensor]) -> Tensor:
        """The current policy's distribution parameters on the update's data. Before the first
        step (pi_prox) the values' passes already computed them, with these parameters, on these
        observations: taken from there, one pass over the whole batch fewer per update (a
        Breakout-MinAtar MLP population: a tenth of its update)."""
        learner, parts, self._valued_dist = self.learner, self._valued_dist, []
        same = all(learner.params[name] is value for name, value in self._valued_with.items())
        if same and parts and sum(p.shape[1] for p in parts) == data["observations"].shape[1]:
            return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
        return learner.policy_params(learner.params, data["observations"])

    def _order(self, n_samples: int) -> Tensor:
        """``(K, n_samples)``: each member's order of the epoch's transitions (its own generator)."""
        # each row shuffled in place: what RandomState.permutation(n) does (shuffle a fresh arange),
        # without its 50 allocations and the stack (CartPole K=50: 0.14 against 0.21 ms an epoch)
        order = np.tile(np.arange(n_samples), (self.learner.k, 1))
        for rng, row in zip(self.learner.permutation_rngs, order):
            rng.shuffle(row)
        return torch.as_tensor(order, device=self.learner.device)

    def minibatches(self, n_samples: int) -> Iterator[Tensor]:
        order, size = self._order(n_samples), self.learner.batch_size
        for start in range(0, n_samples, size):
            yield order[:, start : start + size]

    def select(self, data: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
        return {name: data[name][self.members, index] for name in minibatch_columns(self.learner.objective_spec)}

    def epoch(self, data: dict[str, Tensor], n_samples: int) -> Iterator[dict[str, Tensor]]:
        """:meth:`select` at each of :meth:`minibatches`' indices, the same tensors, but gathered once
        per epoch: each column in the epoch's order, laid out ``(minibatch, K, batch_size, ...)`` so
        that every minibatch is a contiguous block (one indexing per column per epoch instead of per
        minibatch: at LunarLander's 256 minibatches an epoch, the per-minibatch gathers cost a third
        of the compiled steps' time). A short last minibatch is gathered on its own."""
        order, size, k = self._order(n_samples), self.learner.batch_size, self.learner.k
        full = n_samples // size
        # the rows of every member's column as one flat gather, already in (minibatch, K, row)
        # order: index_select on the flattened column, about 3x faster than indexing (K, N) twice
        rows = (self.members * n_samples + order[:, : full * size]).reshape(k, full, size).transpose(0, 1).reshape(-1)
        blocks = {}
        for name in minibatch_columns(self.learner.objective_spec):
            column = data[name]
            blocks[name] = column.reshape(k * n_samples, *column.shape[2:]).index_select(0, rows).reshape(full, k, size, *column.shape[2:])
        for i in range(full):
            yield {name: block[i] for name, block in blocks.items()}
        if full * size < n_samples:
            yield self.select(data, order[:, full * size :])

    def step(self, minibatch: dict[str, Tensor], arguments: dict[str, Any], clip_range_vf: float | None) -> tuple[dict[str, Tensor], bool]:
        learner = self.learner
        state, shared = learner._state_and_shared(arguments)
        return learner._step(minibatch, state, shared, clip_range_vf, self.lr), False

    def update_objective_state(self, reverse_kl: Tensor, ratio_variance: Tensor, schedule_values: dict[str, Any]) -> None:
        learner = self.learner
        update = vmap(lambda st, kl, rv: learner.objective_spec.update_state(st, kl, ratio_variance=rv, **schedule_values, **st))
        new_state = update(learner.objective_state, reverse_kl, ratio_variance)
        learner.objective_state = {k: torch.where(learner.alive, v, learner.objective_state[k]) for k, v in new_state.items()}
