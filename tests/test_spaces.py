"""Every space SB3's PPO accepts, gSDE, and SB3 PPO's own arguments (issue 12).

Small gymnasium environments with the spaces under test (as SB3's own tests use IdentityEnv-style
environments); every observation space x every action space trains with lag and noise on, saves,
loads and predicts; the flat distributions' log-probs, entropies and KLs equal
``torch.distributions``'; on fresh data every new space reproduces SB3's PPO.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.distributions import StateDependentNoiseDistribution
from stable_baselines3.common.env_util import make_vec_env
from torch.distributions import Bernoulli, Categorical, Normal, kl_divergence
from torch.func import vmap

from adaptive_po import ESSPO, PPO, BatchPolicyOptimization
from adaptive_po import distributions as D
from adaptive_po.buffers import behaviour_param_dim
from adaptive_po.collector import distribution_kind, distribution_params
from adaptive_po.population import Member, PopulationLearner
from test_collector import RecordRollouts


class SpaceEnv(gym.Env):
    """Random observations of ``observation_space``; the reward prefers small actions (so that
    there is a gradient); episodes are truncated after ``horizon`` steps (the time-limit path)."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, horizon: int = 12) -> None:
        self.observation_space, self.action_space, self.horizon = observation_space, action_space, horizon
        self.t = 0

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):  # type: ignore[no-untyped-def]
        assert self.action_space.contains(np.asarray(action, dtype=self.action_space.dtype)), action
        self.t += 1
        reward = -float(np.sum(np.square(spaces.flatten(self.action_space, action).astype(np.float64))))
        return self.observation_space.sample(), reward, False, self.t >= self.horizon, {}


OBSERVATION_SPACES = {
    "box-float32": spaces.Box(-1, 1, (4,), np.float32),
    "box-float64-2d": spaces.Box(-1, 1, (2, 3), np.float64),
    "box-uint8": spaces.Box(0, 255, (3, 4), np.uint8),
    "discrete": spaces.Discrete(5),
    "multidiscrete": spaces.MultiDiscrete([3, 4]),
    "multibinary": spaces.MultiBinary(3),
    "dict": spaces.Dict(
        {"pos": spaces.Box(-1, 1, (2,), np.float32), "vel": spaces.Box(-1, 1, (3,), np.float64), "id": spaces.Discrete(3)}
    ),
}
ACTION_SPACES = {
    "box": spaces.Box(-1, 1, (2,), np.float32),
    "box-2x2": spaces.Box(-1, 1, (2, 2), np.float32),
    "discrete": spaces.Discrete(3),
    "multidiscrete": spaces.MultiDiscrete([2, 3]),
    "multibinary": spaces.MultiBinary(3),
}


def _env(obs: str, act: str, n_envs: int = 2, seed: int = 0):  # type: ignore[no-untyped-def]
    o, a = OBSERVATION_SPACES[obs], ACTION_SPACES[act]
    return make_vec_env(lambda: SpaceEnv(o, a), n_envs=n_envs, seed=seed)


def _policy(obs: str) -> str:
    return "MultiInputPolicy" if obs == "dict" else "MlpPolicy"


@pytest.mark.parametrize("cls", [ESSPO, PPO])
@pytest.mark.parametrize("act", sorted(ACTION_SPACES))
@pytest.mark.parametrize("obs", sorted(OBSERVATION_SPACES))
def test_every_space_pair_learns_saves_loads_and_predicts(tmp_path, obs, act, cls):
    env = _env(obs, act)
    model = cls(_policy(obs), env, n_steps=16, batch_size=16, n_epochs=2, seed=0, device="cpu", policy_lag=1, action_noise=0.3)
    model.learn(320)  # 10 updates: the lagged actor acts with older parameters from the second on
    stats = model.last_update_stats
    assert model.collector.acting_snapshot_update == model.collector.updates_seen - 1
    assert np.isfinite([stats["kl_behaviour"], stats["ess"], stats["value_loss"]]).all()
    assert stats["kl_behaviour"] > 0  # the noise makes the behaviour policy differ

    model.save(tmp_path / "model.zip")
    loaded = cls.load(tmp_path / "model.zip", device="cpu")
    observations = env.reset()
    actions, _ = model.predict(observations, deterministic=True)
    np.testing.assert_array_equal(actions, loaded.predict(observations, deterministic=True)[0])
    action_space = ACTION_SPACES[act]
    assert actions.shape == (2, *action_space.shape)
    for action in actions:
        assert action_space.contains(np.asarray(action, dtype=action_space.dtype))


DIALS = {
    "temperature+policy-recording": dict(sampler_temperature=1.5, action_noise=0.2, behaviour_log_prob="policy"),
    "temperature+actual": dict(sampler_temperature=0.7, action_noise=0.2),
    "bf16-sampler": dict(sampler_precision="bf16"),
    "replay+lag": dict(replay=1, policy_lag=2),
}


@pytest.mark.parametrize("dials", sorted(DIALS))
@pytest.mark.parametrize("act", sorted(ACTION_SPACES))
def test_every_dial_on_every_action_kind_records_honestly(act, dials):
    """The recorded log-prob is the recorded distribution's at the taken action, and ``actual``
    records the distribution the actions were really drawn from (tempered, noisy, low precision);
    Dict observations with the bf16 sampler too."""
    obs = "dict" if dials == "bf16-sampler" else "box-float32"
    env = _env(obs, act)
    model = BatchPolicyOptimization(_policy(obs), env, n_steps=16, batch_size=16, n_epochs=1, seed=1, device="cpu", **DIALS[dials])
    model.learn(96)
    kind = D.kind_of_space(model.action_space)
    observations = {k: torch.as_tensor(v) for k, v in env.reset().items()} if obs == "dict" else torch.as_tensor(env.reset())
    step = model.collector.act(observations)
    torch.testing.assert_close(step.behaviour_log_prob, D.log_prob(kind, step.behaviour_params, step.actions))
    assert step.behaviour_params.shape == (2, behaviour_param_dim(model.action_space))
    clean = distribution_params(model.policy.get_distribution(observations))
    if DIALS[dials].get("behaviour_log_prob") == "policy" or dials == "replay+lag":
        expected = distribution_params(model.collector.acting_policy.get_distribution(observations))
        torch.testing.assert_close(step.behaviour_params, expected)
    else:
        assert not torch.allclose(step.behaviour_params, clean)  # the sampler's own distribution


def test_temperature_samples_from_the_tempered_distribution_for_every_logit_kind():
    """T scales the logits of categorical, multicategorical and Bernoulli alike (and the std of
    the Gaussian): the empirical action frequencies follow the tempered distribution."""
    from adaptive_po.sampler import temper

    torch.manual_seed(0)
    logits = torch.tensor([[1.0, -0.5, 0.3, 0.0, 2.0]])
    for kind, probabilities in (
        ("bernoulli", lambda p: torch.sigmoid(p)),
        (D.MultiCategorical((2, 3)), lambda p: torch.cat([torch.softmax(p[:, :2], -1), torch.softmax(p[:, 2:], -1)], -1)),
    ):
        hot = temper(kind, logits, 2.0)
        torch.testing.assert_close(hot, logits / 2.0)
        u = torch.rand(20000, 5)
        draws = D.sample(kind, hot.expand(20000, 5), u)
        if kind == "bernoulli":
            frequency = draws.mean(0)
        else:
            frequency = torch.cat([torch.nn.functional.one_hot(draws[:, 0], 2), torch.nn.functional.one_hot(draws[:, 1], 3)], -1).float().mean(0)
        torch.testing.assert_close(frequency, probabilities(hot)[0], atol=0.015, rtol=0)


# -- the flat distributions are exact ---------------------------------------------------------------
def _random_params(kind, batch=64, generator=None):  # type: ignore[no-untyped-def]
    size = {"bernoulli": 4, "gaussian": 6}.get(kind) if isinstance(kind, str) else sum(kind.sizes)
    return 2.0 * torch.randn(batch, size, dtype=torch.float64, generator=generator)


def _torch_distribution(kind, params):  # type: ignore[no-untyped-def]
    """``(log_prob(actions), entropy(), kl(other))`` of torch.distributions, summed over components."""
    if kind == "bernoulli":
        parts = [Bernoulli(logits=params)]
    elif kind == "gaussian":
        d = params.shape[-1] // 2
        parts = [Normal(params[:, :d], params[:, d:].exp())]
    else:
        parts = [Categorical(logits=x) for x in torch.split(params, kind.sizes, dim=-1)]
    return parts


@pytest.mark.parametrize("kind", ["bernoulli", "gaussian", D.MultiCategorical((2, 3, 5))], ids=str)
def test_log_prob_entropy_and_kl_equal_torch_distributions(kind):
    g = torch.Generator().manual_seed(0)
    p, q = _random_params(kind, generator=g), _random_params(kind, generator=g)
    dp, dq = _torch_distribution(kind, p), _torch_distribution(kind, q)
    if kind == "gaussian":
        actions = dp[0].sample()
        expected_log_prob = dp[0].log_prob(actions).sum(-1)
    elif kind == "bernoulli":
        actions = dp[0].sample()
        expected_log_prob = dp[0].log_prob(actions).sum(-1)
    else:
        actions = torch.stack([d.sample() for d in dp], dim=-1)
        expected_log_prob = sum(d.log_prob(a) for d, a in zip(dp, actions.unbind(-1)))
    sum_parts = lambda values: sum(v if v.dim() == 1 else v.sum(-1) for v in values)  # noqa: E731
    torch.testing.assert_close(D.log_prob(kind, p, actions), expected_log_prob)
    torch.testing.assert_close(D.entropy(kind, p), sum_parts([d.entropy() for d in dp]))
    torch.testing.assert_close(D.kl(kind, p, q), sum_parts([kl_divergence(a, b) for a, b in zip(dp, dq)]))
    torch.testing.assert_close(D.kl(kind, p, p), torch.zeros(len(p), dtype=p.dtype), atol=1e-12, rtol=0)
    # pure and vmap-friendly: the population engine applies them per member
    stacked_p, stacked_q = torch.stack([p, q]), torch.stack([q, p])
    torch.testing.assert_close(vmap(lambda a, b: D.kl(kind, a, b))(stacked_p, stacked_q)[0], D.kl(kind, p, q))
    torch.testing.assert_close(vmap(lambda a: D.entropy(kind, a))(stacked_p)[1], D.entropy(kind, q))


def test_the_flat_kinds_follow_sb3_distributions_of_every_action_space():
    """The kind and flat parameters read from SB3's distribution give SB3's own log-probs,
    entropies and modes, for every action space (Box of shape (2, 2) flattened)."""
    for name, action_space in ACTION_SPACES.items():
        model = BatchPolicyOptimization("MlpPolicy", _env("box-float32", name), n_steps=8, batch_size=8, seed=0, device="cpu")
        obs = torch.randn(16, 4)
        distribution = model.policy.get_distribution(obs)
        kind, params = distribution_kind(distribution), distribution_params(distribution)
        assert kind == D.kind_of_space(action_space)
        actions = distribution.get_actions()
        torch.testing.assert_close(D.log_prob(kind, params, actions), distribution.log_prob(actions))
        torch.testing.assert_close(D.entropy(kind, params), distribution.entropy())
        torch.testing.assert_close(D.mode(kind, params).to(actions.dtype), distribution.mode())
        u = torch.rand(D.sampling_noise_shape(kind, params.shape))
        assert D.sample(kind, params, u).shape == actions.shape


def test_unsupported_action_spaces_are_refused_when_the_model_is_built():
    with pytest.raises(ValueError, match="MultiDiscrete and MultiBinary"):
        BatchPolicyOptimization("MlpPolicy", make_vec_env(lambda: SpaceEnv(spaces.Box(-1, 1, (3,)), spaces.MultiDiscrete([[2, 3], [2, 2]])), n_envs=1))
    with pytest.raises(AssertionError, match="only supports"):  # SB3's own check, as SB3's PPO
        BatchPolicyOptimization("MlpPolicy", make_vec_env(lambda: SpaceEnv(spaces.Box(-1, 1, (3,)), spaces.Tuple([spaces.Discrete(2)])), n_envs=1))


# -- fresh data: the same data and updates as SB3's PPO ------------------------------------------------
@pytest.mark.parametrize(
    "obs,act,sb3_kwargs",
    [
        ("discrete", "multidiscrete", {}),
        ("multidiscrete", "multibinary", {}),
        ("dict", "box-2x2", {}),
        ("box-uint8", "discrete", {}),
        ("multibinary", "box", {"use_sde": True, "sde_sample_freq": 3}),
    ],
)
def test_fresh_data_reproduces_sb3_ppo_on_every_space(obs, act, sb3_kwargs):
    """lag 0, no noise: the same rollouts and, to float rounding, the same parameters as SB3's PPO
    (Dict observations, multi-dimensional Box actions and gSDE included)."""
    kwargs = dict(n_steps=16, batch_size=16, n_epochs=2, learning_rate=1e-3, seed=4, device="cpu", **sb3_kwargs)
    ours_rec, theirs_rec = RecordRollouts(), RecordRollouts()
    ours = PPO(_policy(obs), _env(obs, act, seed=4), policy_kwargs=dict(optimizer_kwargs={"eps": 1e-5}), **kwargs)
    ours.learn(16 * 2 * 3, callback=ours_rec)
    theirs = SB3PPO(_policy(obs), _env(obs, act, seed=4), **kwargs)
    theirs.learn(16 * 2 * 3, callback=theirs_rec)
    assert len(ours_rec.rollouts) == len(theirs_rec.rollouts) == 3
    for a, b in zip(ours_rec.rollouts, theirs_rec.rollouts):
        for key in ("obs", "episode_starts"):
            if isinstance(a[key], dict):
                for part in a[key]:
                    np.testing.assert_array_equal(a[key][part], b[key][part])
            else:
                np.testing.assert_array_equal(a[key], b[key])
        # Box actions move with the parameters' float rounding after the first update
        np.testing.assert_allclose(a["actions"], b["actions"], atol=1e-5 if act.startswith("box") else 0)
        # SB3 folds the bootstrap of a truncation into the stored reward; here it is added at train
        # time (the parameters below agree, so it is the same): the rewards differ only there
        steps, envs = np.nonzero(~np.isclose(a["rewards"], b["rewards"], rtol=0, atol=1e-5))
        assert all(t == len(a["rewards"]) - 1 or a["episode_starts"][t + 1, e] for t, e in zip(steps, envs))
        np.testing.assert_allclose(a["log_probs"], b["log_probs"], atol=1e-5)
    for p, q in zip(ours.policy.parameters(), theirs.policy.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), atol=1e-4)


# -- gSDE -----------------------------------------------------------------------------------------------
def test_gsde_stores_the_state_dependent_std_that_reproduces_sb3s_log_prob():
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = ESSPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu", use_sde=True, sde_sample_freq=4)
    recorder = RecordRollouts()
    model.learn(128, callback=recorder)  # two rollouts; the second is acted by the first update's parameters
    rollout = recorder.rollouts[1]
    obs = torch.as_tensor(rollout["obs"].reshape(-1, 3))
    actions = torch.as_tensor(rollout["actions"].reshape(-1, 1))
    params = torch.as_tensor(rollout["params"].reshape(-1, 2))
    # the stored [mean, log std] give the log-prob SB3's gSDE distribution recorded at sampling time
    torch.testing.assert_close(D.log_prob("gaussian", params, actions), torch.as_tensor(rollout["log_probs"].reshape(-1)))
    # ... and they are SB3's distribution under the acting parameters: the std is
    # sqrt(latent_sde^2 @ exp(log_std)^2 + epsilon), per state
    policy = model.policy
    policy.load_state_dict(recorder.learner_params_at_collection[1])
    with torch.no_grad():
        distribution = policy.get_distribution(obs)
        torch.testing.assert_close(distribution.log_prob(actions), torch.as_tensor(rollout["log_probs"].reshape(-1)))
        latent_sde, _ = policy.mlp_extractor(policy.extract_features(obs))
        variance = latent_sde**2 @ torch.exp(policy.log_std) ** 2
    torch.testing.assert_close(params[:, 1], 0.5 * torch.log(variance[:, 0] + policy.action_dist.epsilon))
    torch.testing.assert_close(params[:, 0], distribution.distribution.mean[:, 0])
    assert params[:, 1].std() > 0  # state-dependent: not one std for every state
    # the analytic KL of the learner to the stored distribution is exact: zero under the acting parameters
    torch.testing.assert_close(D.kl("gaussian", distribution_params(distribution), params), torch.zeros(len(params)), atol=1e-6, rtol=0)


class _NoiseResets:
    def __init__(self, policy):  # type: ignore[no-untyped-def]
        self.calls = 0
        original = policy.reset_noise

        def counted(n_envs=1):  # type: ignore[no-untyped-def]
            self.calls += 1
            original(n_envs)

        policy.reset_noise = counted


@pytest.mark.parametrize("lag", [0, 2])
def test_gsde_noise_is_resampled_every_sde_sample_freq_steps_for_the_acting_parameters(lag):
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = PPO("MlpPolicy", env, n_steps=12, batch_size=24, n_epochs=1, seed=0, device="cpu", use_sde=True, sde_sample_freq=4, policy_lag=lag)
    actor = model.collector.acting_policy
    assert (actor is model.policy) == (lag == 0)
    counter = _NoiseResets(actor)
    learner_noise = model.policy.action_dist.exploration_matrices.clone()
    model.learn(48)  # two rollouts of 12 steps: a new matrix at the start and at steps 0, 4, 8 (as SB3)
    assert counter.calls == 2 * (1 + 3)
    changed = not torch.equal(model.policy.action_dist.exploration_matrices, learner_noise)
    assert changed == (lag == 0)  # a lagged actor draws its own noise; the learner's is left alone
    # the lagged actor's matrices come from its own (old) exploration std
    if lag:
        assert model.collector.acting_snapshot_update == 0
        torch.testing.assert_close(actor.log_std, model.collector._stale.snapshots[0]["log_std"])


def test_gsde_with_every_dial_trains_and_records_the_sampled_gaussian():
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = ESSPO("MlpPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu", use_sde=True,
                  sde_sample_freq=4, policy_lag=1, action_noise=0.3, sampler_temperature=1.5, replay=1)
    model.learn(96)
    model.collector.reset_noise(2)
    obs = torch.as_tensor(env.reset())
    step = model.collector.act(obs)
    torch.testing.assert_close(step.behaviour_log_prob, D.log_prob("gaussian", step.behaviour_params, step.actions))
    clean = distribution_params(model.collector.acting_policy.get_distribution(obs))
    torch.testing.assert_close(step.behaviour_params[:, 1:], clean[:, 1:] + np.log(1.5))  # std x T
    assert np.isfinite(model.last_update_stats["kl_behaviour"])


def test_refused_combinations_fail_when_the_model_is_built():
    with pytest.raises(ValueError, match="sampler_precision='bf16' cannot be combined with use_sde"):
        ESSPO("MlpPolicy", "Pendulum-v1", use_sde=True, sampler_precision="bf16", device="cpu")
    with pytest.raises(ValueError, match="squash_output"):
        PPO("MlpPolicy", "Pendulum-v1", use_sde=True, policy_kwargs=dict(squash_output=True), device="cpu")
    with pytest.raises(ValueError, match="sde_sample_freq"):
        PPO("MlpPolicy", "Pendulum-v1", use_sde=True, sde_sample_freq=-2, device="cpu")
    with pytest.raises(ValueError, match="use_sde"):
        PPO("MlpPolicy", "Pendulum-v1", use_sde="yes", device="cpu")


def test_the_population_engine_refuses_what_it_does_not_run():
    box = spaces.Box(-1, 1, (3,), np.float32)
    for observation_space, action_space, kwargs in (
        (box, spaces.MultiDiscrete([2, 3]), {}),
        (box, spaces.MultiBinary(2), {}),
        (box, spaces.Box(-1, 1, (2, 2)), {}),
        (spaces.Discrete(4), spaces.Discrete(2), {}),
        (box, spaces.Box(-1, 1, (1,)), {"use_sde": True}),
    ):
        with pytest.raises(ValueError, match="process engine"):
            PopulationLearner(observation_space, action_space, [Member(0)], n_steps=8, batch_size=8, **kwargs)


def test_unsupported_runs_go_to_the_process_engine(tmp_path):
    from adaptive_po.bench.config import write_env_config_copy
    from adaptive_po.bench.jobs import supports_population
    from adaptive_po.bench.run_folder import RunSpec

    write_env_config_copy("Pendulum-v1", tmp_path)
    write_env_config_copy("Pendulum-v1", tmp_path, name="PendulumSDE", hyperparams__use_sde=True, hyperparams__sde_sample_freq=4)
    write_env_config_copy("Pendulum-v1", tmp_path, name="FrozenLake", ids={"gymnasium": "FrozenLake-v1"})
    spec = lambda env: RunSpec("quick", env, "esspo", 0, 1000, envs_dir=str(tmp_path))  # noqa: E731
    assert supports_population(spec("Pendulum-v1"))
    assert not supports_population(spec("PendulumSDE"))  # gSDE
    assert not supports_population(spec("FrozenLake"))  # Discrete observations


# -- SB3 PPO's arguments -----------------------------------------------------------------------------
def test_ppo_value_clipping_and_target_kl_match_sb3():
    """clip_range_vf and target_kl with SB3's meaning: on fresh data, the same updates as SB3's
    PPO, early stopping included (fewer epochs than asked)."""
    kwargs = dict(n_steps=32, batch_size=32, n_epochs=6, learning_rate=3e-3, seed=5, device="cpu", clip_range_vf=0.05, target_kl=0.003)
    ours = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=5), policy_kwargs=dict(optimizer_kwargs={"eps": 1e-5}), **kwargs)
    ours.learn(32 * 2 * 3)
    theirs = SB3PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=5), **kwargs)
    theirs.learn(32 * 2 * 3)
    assert ours._n_updates == theirs._n_updates < 3 * 6  # stopped early, at the same epochs
    for p, q in zip(ours.policy.parameters(), theirs.policy.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), atol=1e-4)
    # without value clipping the updates differ: the clip acted
    unclipped = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=5), **{**kwargs, "clip_range_vf": None})
    unclipped.learn(32 * 2 * 3)
    assert not torch.allclose(unclipped.policy.value_net.weight, ours.policy.value_net.weight)


def test_ppo_takes_sb3s_positional_order():
    env = make_vec_env("CartPole-v1", n_envs=1)
    model = PPO("MlpPolicy", env, 1e-3, 32, 16, 2, 0.98, 0.9, 0.1, 0.3, device="cpu")
    assert (model.clip_range, model.clip_range_vf, model.gae_lambda, model.batch_size) == (0.1, 0.3, 0.9, 16)


@pytest.mark.parametrize("argument,value", [("clip_range", 0.2), ("clip_range_vf", 0.2), ("target_kl", 0.01)])
def test_esspo_refuses_ppo_only_arguments_and_says_why(argument, value):
    with pytest.raises(TypeError, match=rf"ESSPO does not take '{argument}'.*ESS objective"):
        ESSPO("MlpPolicy", "CartPole-v1", device="cpu", **{argument: value})
    assert argument in ESSPO.__doc__


@pytest.mark.parametrize(
    "objective,kwargs,error,named",
    [
        ("esspo", {"kl": "bogus"}, ValueError, "bogus"),
        ("esspo", {"cap_ess": True}, TypeError, "cap_ess"),
        ("ppo", {"clip_range": -0.1}, ValueError, "clip_range"),
        ("cispo", {"eps_high": 0.0}, ValueError, "eps_high"),
        ("p3o", {"kl": "forward"}, ValueError, "forward"),
    ],
)
def test_bad_objective_arguments_are_named_before_the_first_rollout(objective, kwargs, error, named):
    """Both faces evaluate the loss once on a probe batch when they are built, so a bad keyword or
    value of ``objective_kwargs`` is named at construction, not after a rollout."""
    env = gym.make("CartPole-v1")
    with pytest.raises(error, match=named):
        BatchPolicyOptimization("MlpPolicy", "CartPole-v1", objective=objective, objective_kwargs=kwargs, device="cpu")
    with pytest.raises(error, match=named):
        PopulationLearner(env.observation_space, env.action_space, [Member(0)], n_steps=4, batch_size=4, n_epochs=1,
                          objective=objective, objective_kwargs=kwargs)


def test_bad_ppo_arguments_name_the_argument():
    with pytest.raises(ValueError, match="clip_range_vf"):
        PPO("MlpPolicy", "CartPole-v1", clip_range_vf=-0.1, device="cpu")
    with pytest.raises(ValueError, match="target_kl"):
        PPO("MlpPolicy", "CartPole-v1", target_kl=0.0, device="cpu")


@pytest.mark.parametrize("cls", [ESSPO, PPO])
def test_a_batch_size_that_does_not_divide_the_rollout_is_a_warning(cls):
    with pytest.warns(UserWarning, match="does not divide the rollout"):
        model = cls("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), n_steps=24, batch_size=20, n_epochs=1, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.learn(48)
