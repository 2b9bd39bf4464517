"""The compiled stacked step (``torch.compile``, inductor) is the eager step: for every registered
objective and both action kinds, one update from identical state gives the same parameters and
statistics to the tolerances the engine-vs-SB3 tests use (tests/test_population.py), at toy sizes.

Each objective and action kind is one compilation (a few seconds at these sizes), so the whole file
compiles 2 x len(OBJECTIVES) steps; where this machine cannot compile, the engine falls back to the
eager step with one line, and the test fails on the pinned torch with a compiler present (the
compiled path must work there) and skips elsewhere, saying so, instead of comparing eager with eager
(``conftest.compiled_or_skip``).
"""

import gymnasium as gym
import numpy as np
import pytest
import torch

from adaptive_po import compiled as CP
from adaptive_po import population as P
from adaptive_po.compile_setup import COMPILE_ENV
from adaptive_po.objectives import OBJECTIVES
from adaptive_po.population import Member, PopulationLearner, StackedRollout
from conftest import compiled_or_skip

#: every compiled test on one xdist worker (with test_learner_precision's compiled bf16 step): the
#: compiler's start (its precompiled header, its worker pool) is paid once, and the kernels that
#: objectives share (the network, Adam) are compiled once; on 2 cores, cold, 291 CPU-s against 337
#: for the same tests spread over both workers
COMPILE_GROUP = "compiled-steps"
pytestmark = pytest.mark.xdist_group(COMPILE_GROUP)

#: a hidden layer of 16: the compiled learner's first layer and heads are its narrow products
TOY = dict(n_steps=4, batch_size=8, n_epochs=2, learning_rate=3e-3, policy_kwargs={"net_arch": [16]})
SPACES = {
    "discrete": (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2)),
    "continuous": (gym.spaces.Box(-np.inf, np.inf, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,), np.float32)),
}
MEMBERS = [Member(3, policy_lag=1, action_noise=0.3), Member(4, action_noise=0.5, behaviour_log_prob="policy")]


def _learner(kind, algo, compiled):
    observation_space, action_space = SPACES[kind]
    kwargs = {"clip_range": 0.2} if "clip_range" in OBJECTIVES[algo].tuned else None
    return PopulationLearner(observation_space, action_space, MEMBERS, objective=algo, objective_kwargs=kwargs, compile_step=compiled, **TOY)


def _rollout(learner, seed, n_envs=2):
    k, t = learner.k, learner.n_steps
    dim = learner.observation_space.shape[0]
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(k, t, n_envs, dim, generator=g)
    actions, blp, params = learner.act(obs.reshape(k, t * n_envs, dim))
    shape = (k, t, n_envs)
    return StackedRollout(
        obs, actions.reshape(*shape, *actions.shape[2:]), torch.randn(shape, generator=g), torch.zeros(shape), blp.reshape(shape),
        params.reshape(*shape, -1), torch.zeros(shape, dtype=torch.bool), torch.zeros(*shape, dim),
        torch.randn(k, n_envs, dim, generator=g), torch.zeros(k, n_envs),
    )


def test_the_narrow_products_are_the_linear_layers_they_replace():
    """A compiled learner's narrow layers (few inputs: an einsum; few outputs: ``(W x^T)^T``) are
    ``nn.Linear`` to float32 rounding, values and per-member gradients under ``vmap(grad(...))``;
    an eager learner keeps ``nn.Linear``; the stacked parameters keep their names."""
    from torch.func import functional_call, grad, vmap

    compiled, eager = _learner("discrete", "esspo", True), _learner("discrete", "esspo", False)
    classes = lambda learner: {type(m).__name__ for m in learner._module.modules() if isinstance(m, torch.nn.Linear)}  # noqa: E731
    assert classes(compiled) == {"_NarrowInputLinear", "_NarrowOutputLinear"} and classes(eager) == {"Linear"}
    assert compiled.params.keys() == eager.params.keys()

    g = torch.Generator().manual_seed(0)
    for narrow, (n_in, n_out) in ((P._NarrowInputLinear, (4, 64)), (P._NarrowOutputLinear, (64, 2)), (P._NarrowOutputLinear, (64, 1))):
        plain = torch.nn.Linear(n_in, n_out)
        params = {"weight": torch.randn(5, n_out, n_in, generator=g), "bias": torch.randn(5, n_out, generator=g)}
        x, target = torch.randn(5, 32, n_in, generator=g), torch.randn(5, 32, n_out, generator=g)

        def gradients(module):  # noqa: ANN001
            loss = lambda p, xi, ti: (functional_call(module, p, (xi,)) - ti).pow(2).mean()  # noqa: E731
            return vmap(grad(loss))(params, x, target)

        other = torch.nn.Linear(n_in, n_out)
        other.__class__ = narrow
        torch.testing.assert_close(vmap(lambda p, xi: functional_call(other, p, (xi,)))(params, x),
                                   vmap(lambda p, xi: functional_call(plain, p, (xi,)))(params, x), atol=1e-5, rtol=1e-6)
        got = gradients(other)
        for name, value in gradients(plain).items():
            torch.testing.assert_close(got[name], value, atol=1e-5, rtol=1e-6, msg=name)


def test_an_mlp_on_uint8_observations_compiles_without_a_graph_break():
    """SB3's preprocessing asks is_image_space(observation_space) at every pass, comparing the
    space's numpy bounds, which the compiler cannot trace: for an MLP on uint8 observations that
    are no image (MinAtar's 0/1 planes) the engine's passes and acting broke out of the compiled
    graph and ran eagerly (the acting too). The engine decides it once; the passes compile whole,
    to the same values."""
    from torch._dynamo.utils import counters

    space = gym.spaces.Box(0, 1, (3, 2, 2), np.uint8)
    learners = [PopulationLearner(space, gym.spaces.Discrete(3), MEMBERS, objective="ppo", objective_kwargs={"clip_range": 0.2},
                                  compile_step=compiled, **TOY) for compiled in (False, True)]
    obs = torch.randint(0, 2, (2, 5, 3, 2, 2), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    breaks = sum(counters["graph_break"].values())
    eager, compiled = (learner.forward(learner.params, obs) for learner in learners)
    compiled_or_skip(CP._COMPILED.get(learners[1]._forward_key) is None, "the engine's passes run eagerly")
    assert sum(counters["graph_break"].values()) == breaks
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=1e-5)


def test_one_compiled_forward_pass_serves_every_row_count():
    """The compiled forward pass takes its rows as a symbolic size: evaluation's passes and an
    update's (10 and 264 rows at CartPole's) share one compilation, and each gives what the eager
    pass gives, to float32 rounding."""
    from torch._dynamo.utils import counters

    learner = _learner("discrete", "esspo", True)
    obs = torch.randn(learner.k, 40, 4, generator=torch.Generator().manual_seed(1)) * 3
    graphs = counters["stats"]["unique_graphs"]
    passes = [learner.forward(learner.params, obs[:, :rows]) for rows in (32, 25, 10)]
    compiled_or_skip(CP._COMPILED.get(learner._forward_key) is None, "the engine's passes run eagerly")
    assert counters["stats"]["unique_graphs"] - graphs == 1
    for rows, compiled in zip((32, 25, 10), passes):
        for a, b in zip(compiled, learner.forward(learner.params, obs[:, :rows], eager=True)):
            torch.testing.assert_close(a, b, atol=2e-6, rtol=1e-5)


def test_the_policy_alone_rides_the_compiled_act_for_every_row_count():
    """policy_params (evaluation's and an update's passes after its steps) is the act's compilation
    with zero draws and the clean policy recorded: acting and three other row counts compile once,
    and each gives the forward pass's distribution parameters to float32 rounding."""
    from torch._dynamo.utils import counters

    learner = _learner("discrete", "esspo", True)
    obs = torch.randn(learner.k, 40, 4, generator=torch.Generator().manual_seed(2)) * 3
    learner.act(obs[:, :8])
    graphs = counters["stats"]["unique_graphs"]
    alone = [learner.policy_params(learner.params, obs[:, :rows]) for rows in (32, 25, 10)]
    learner.act(obs[:, :8])
    compiled_or_skip(CP._COMPILED.get(learner._act_key) is None, "the engine's passes run eagerly")
    assert counters["stats"]["unique_graphs"] == graphs  # no compilation beside the act's
    for rows, params in zip((32, 25, 10), alone):
        torch.testing.assert_close(params, learner.forward(learner.params, obs[:, :rows], eager=True)[0], atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("algo", sorted(OBJECTIVES))
@pytest.mark.parametrize("kind", sorted(SPACES))
def test_the_compiled_step_equals_the_eager_step(kind, algo):
    eager, compiled = _learner(kind, algo, False), _learner(kind, algo, True)
    obs = torch.randn(eager.k, TOY["n_steps"] * 2, SPACES[kind][0].shape[0])  # the rollouts' shape: one compilation
    acted = [(learner.act(obs), learner.act(obs))[1] for learner in (eager, compiled)]  # acting is compiled too (from its second call)
    for a, b in zip(*acted):
        torch.testing.assert_close(b, a, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(compiled.deterministic_actions(obs), eager.deterministic_actions(obs), atol=2e-6, rtol=1e-5)
    for update in range(2):  # the second update: Adam's state, the lag's history, the objective's state carried
        stats = [learner.update(_rollout(learner, seed=update), 0.7 - 0.1 * update) for learner in (eager, compiled)]
        compiled_or_skip(CP._COMPILED.get(compiled._step_key, "missing") is None, "the engine runs the eager step (said in one line)")
        for name, value in eager.params.items():
            torch.testing.assert_close(compiled.params[name], value, atol=2e-6, rtol=1e-5, msg=name)
        for name, value in stats[0].items():
            np.testing.assert_allclose(stats[1][name].numpy(), value.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
        for name, value in eager.objective_state.items():
            np.testing.assert_allclose(compiled.objective_state[name].numpy(), value.numpy(), rtol=1e-6, err_msg=name)
    assert any(key == compiled._step_key for key, _ in CP.COMPILE_SECONDS)  # it ran compiled


def test_a_failing_compiler_falls_back_to_the_eager_step_with_one_line(monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(torch, "compile", broken)
    monkeypatch.setattr(CP, "_COMPILED", {})
    monkeypatch.setattr(CP, "_FALLBACK_SAID", False)
    monkeypatch.setattr(CP, "_FALLBACK_REASON", None)  # restored after: later runs in this process are not tagged as fallen back
    eager, fallback = _learner("discrete", "ppo", False), _learner("discrete", "ppo", True)
    for learner in (eager, fallback):
        learner.update(_rollout(learner, seed=0), 1.0)
        learner.update(_rollout(learner, seed=1), 0.9)
    for name, value in eager.params.items():
        assert torch.equal(fallback.params[name], value), name
    lines = [line for line in capsys.readouterr().err.splitlines() if "eagerly" in line]
    assert len(lines) == 1 and "no C++ compiler" in lines[0]


@pytest.mark.parametrize("setting, planned, wanted", [("1", None, True), ("0", 10**9, False), ("auto", 10**9, True), ("auto", 100, False), ("auto", None, False)])
def test_the_compile_switch(monkeypatch, setting, planned, wanted):
    monkeypatch.setenv(COMPILE_ENV, setting)
    assert CP.compile_wanted(planned) is wanted
    # auto never compiles a CNN's step (measured no faster); an explicit 1 still does
    assert CP.compile_wanted(planned, "CnnPolicy") is (wanted and setting == "1")


def test_a_call_like_one_that_ran_runs_its_compiled_code_directly_and_a_new_one_is_guarded(monkeypatch):
    """A compiled call whose arguments have the signature of one that ran (shapes, strides, dtypes,
    constants, grad mode) runs the compiled code dynamo chose for that one, directly: neither
    dynamo's guards nor its unguarded way (its stance) is asked. A new signature is guarded and
    compiles where it must (one row: its own graph beside the symbolic one), and each signature
    keeps its own graph. Each pass gives, directly, what it gave guarded, bit for bit, and the
    eager pass to float32 rounding."""
    import types

    from torch._dynamo.utils import counters

    # an observation width of its own: compiled callables are shared by the learners of a process
    space = gym.spaces.Box(-np.inf, np.inf, (7,), np.float32)
    learner = PopulationLearner(space, gym.spaces.Discrete(3), MEMBERS, objective="esspo", compile_step=True, **TOY)
    obs = torch.randn(learner.k, 12, 7, generator=torch.Generator().manual_seed(3)) * 3
    graphs = counters["stats"]["unique_graphs"]
    first = learner.forward(learner.params, obs[:, :10])  # guarded (a new signature), compiled
    compiled_or_skip(CP._COMPILED.get(learner._forward_key) is None, "the engine's passes run eagerly")
    seen = CP._RAN[learner._forward_key][1]
    assert len(seen) == 1
    again = learner.forward(learner.params, obs[:, :10])  # unguarded
    one = learner.forward(learner.params, obs[:, :1])  # a new signature: guarded, its own graph
    assert len(seen) == 2 and counters["stats"]["unique_graphs"] - graphs == 2
    direct = list(seen.values())
    assert all(isinstance(f, types.FunctionType) for f in direct) and direct[0].__code__ is not direct[1].__code__

    def stance(*args, **kwargs):  # dynamo's unguarded way: not taken by a call that runs directly
        raise AssertionError("a call with a known signature went through dynamo")

    monkeypatch.setattr(torch.compiler, "set_stance", stance)
    # each signature its own graph, between two cache entries
    for rows, before in ((10, first), (1, one), (10, first)):
        out = learner.forward(learner.params, obs[:, :rows])
        for a, b, c in zip(out, before, learner.forward(learner.params, obs[:, :rows], eager=True)):
            assert torch.equal(a, b)
            torch.testing.assert_close(a, c, atol=2e-6, rtol=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(again, first))
    assert counters["stats"]["unique_graphs"] - graphs == 2 and len(seen) == 2
    assert CP._COMPILED[learner._forward_key] is not None  # no call fell back to the eager pass
    # a second learner of the process shares the compiled callable (made from the first's function):
    # its new signature (another row count, the symbolic graph) runs directly too
    monkeypatch.undo()
    other = PopulationLearner(space, gym.spaces.Discrete(3), MEMBERS, objective="esspo", compile_step=True, **TOY)
    guarded = other.forward(other.params, obs[:, :5])
    assert len(seen) == 3 and isinstance(list(seen.values())[-1], types.FunctionType)
    monkeypatch.setattr(torch.compiler, "set_stance", stance)
    assert all(torch.equal(a, b) for a, b in zip(other.forward(other.params, obs[:, :5]), guarded))
    assert counters["stats"]["unique_graphs"] - graphs == 2


def test_code_that_resumes_after_a_graph_break_runs_through_dynamo():
    """Compiled code with a graph break resumes in a function that dynamo's frame evaluation
    compiles: it gets no direct function, and its repeated calls (through dynamo, unguarded) give
    what the first gave."""

    def broken(x):
        y = torch.sin(x) * 2
        torch._dynamo.graph_break()
        return torch.cos(y) + 1

    x = torch.linspace(-2, 2, 11)
    key = ("test-graph-break",)
    first = CP.call_compiled(key, broken, (x,))
    compiled_or_skip(first is None)
    again = CP.call_compiled(key, broken, (x,))
    assert list(CP._RAN[key][1].values()) == [None]
    assert torch.equal(first, again)
    torch.testing.assert_close(first, broken(x))


def test_a_compiled_callable_is_made_once_from_its_function_with_room_to_recompile():
    """A key's compiled callable is made once per process, and keeps the function it was made from
    where :func:`adaptive_po.compiled.call_compiled` reads it (so that another learner of the
    process runs the first one's compiled code directly); and dynamo may compile the same code
    for every objective and shape (its recompile limit, 8 in torch's defaults, past which it would
    run the code eagerly). Nothing is compiled here: ``torch.compile`` compiles at the first call."""

    def double(x):
        return x * 2

    key = ("test-made-once",)
    made = CP._compiled(key, double)
    compiled_or_skip(made is None, "torch.compile is unavailable")
    assert CP._compiled(key, lambda x: x) is made
    assert made._torchdynamo_orig_callable is double
    assert torch._dynamo.config.recompile_limit >= 64


def test_the_signature_of_a_call():
    """Calls share a signature only where their compiled code is the same: tensors by shape, strides
    and dtype; constants by type and value; dictionaries by keys; anything unhashable never."""
    sig = CP._signature
    x = torch.zeros(3, 4)
    assert sig((x, {"a": x, "b": None}, 1.0)) == sig((torch.ones(3, 4), {"a": torch.ones(3, 4), "b": None}, 1.0))
    for other in ((x.t().contiguous().t(), {"a": x, "b": None}, 1.0), (x, {"a": x.double(), "b": None}, 1.0),
                  (x, {"c": x, "b": None}, 1.0), (x, {"a": x, "b": True}, 1.0), (x, {"a": x, "b": None}, 1),
                  (x[:2], {"a": x, "b": None}, 1.0)):
        assert sig(other) != sig((x, {"a": x, "b": None}, 1.0))
    assert sig((True,)) != sig((1,)) and sig(([1],)) == sig(([1],))
    assert sig((object(),)) != sig((object(),))


@pytest.mark.parametrize("kind, algo, width", [("continuous", "esspo-batch-ess", 6), ("discrete", "kl-ppo", 7), ("continuous", "quatro", 9)])
def test_compiling_ahead_gives_the_first_updates_own_graphs_built_with_the_first_act(kind, algo, width):
    """:meth:`PopulationLearner.compile_ahead` compiles the forward pass and the step for exactly the
    signatures the first update calls them with (no graph compiled after it but the act's; its
    first call builds every kernel in one library), and changes nothing of the learner's. The
    cases: a categorical and a Gaussian policy, an objective with the whole batch's ESS among its
    minibatch's fields, one with a state of its own (kl-ppo's coefficient), one with a per-sample
    column of its own (after QUATRO's per-query multiplier); PPO's in the next test."""
    from torch._dynamo.utils import counters

    from adaptive_po import compile_setup as C

    # an observation width of its own: compiled callables are shared by the learners of a process
    observation_space, action_space = gym.spaces.Box(-np.inf, np.inf, (width,), np.float32), SPACES[kind][1]
    kwargs = {"clip_range": 0.2} if "clip_range" in OBJECTIVES[algo].tuned else None
    learner = PopulationLearner(observation_space, action_space, MEMBERS, objective=algo, objective_kwargs=kwargs, compile_step=True, **TOY)
    before = {name: v.clone() for name, v in learner.params.items()}
    misses, graphs = list(CP.PRIME_MISSES), counters["stats"]["unique_graphs"]
    learner.compile_ahead(torch.zeros(learner.k, 2, width))
    compiled_or_skip(CP._COMPILED.get(learner._step_key) is None, "the engine runs eagerly")
    assert learner._forward_key in CP._PRIMED and learner._step_key in CP._PRIMED
    assert counters["stats"]["unique_graphs"] - graphs == 2
    assert all(torch.equal(learner.params[name], v) for name, v in before.items()) and learner._adam_count == 0
    bundles = C.BUILT["bundles"]
    learner.update(_rollout(learner, seed=0), 0.7)  # the act (its first call builds), then the update
    assert CP.PRIME_MISSES == misses and learner._forward_key not in CP._PRIMED and learner._step_key not in CP._PRIMED
    assert counters["stats"]["unique_graphs"] - graphs == 3  # the act's, and nothing recompiled
    if C.bundling_enabled():
        assert C.BUILT["bundles"] - bundles == 1
    assert CP._COMPILED[learner._step_key] is not None and CP._COMPILED[learner._forward_key] is not None


def test_a_second_population_of_a_process_compiles_ahead_what_it_has_not_compiled():
    """PPO's population compiles its first update's graphs ahead, for the signatures the update
    calls them with. In a process that ran a population already (the bench's inline runs), the
    next one's forward pass has run with its signature and is not compiled again; its own step
    (another objective) is still compiled ahead, for its first update's signature."""
    observation_space, action_space = gym.spaces.Box(-np.inf, np.inf, (8,), np.float32), SPACES["discrete"][1]
    misses = list(CP.PRIME_MISSES)
    first = PopulationLearner(observation_space, action_space, MEMBERS, objective="ppo", objective_kwargs={"clip_range": 0.2}, compile_step=True, **TOY)
    first.compile_ahead(torch.zeros(first.k, 2, 8))
    compiled_or_skip(CP._COMPILED.get(first._step_key) is None, "the engine runs eagerly")
    assert first._forward_key in CP._PRIMED and first._step_key in CP._PRIMED
    first.update(_rollout(first, seed=0), 0.7)
    assert CP.PRIME_MISSES == misses and first._forward_key not in CP._PRIMED and first._step_key not in CP._PRIMED
    second = PopulationLearner(observation_space, action_space, MEMBERS, objective="spo", compile_step=True, **TOY)
    assert second._forward_key == first._forward_key and second._step_key != first._step_key
    second.compile_ahead(torch.zeros(second.k, 2, 8))
    assert second._forward_key not in CP._PRIMED and second._step_key in CP._PRIMED
    second.update(_rollout(second, seed=1), 0.7)
    assert CP.PRIME_MISSES == misses and second._step_key not in CP._PRIMED
