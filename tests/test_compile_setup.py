"""adaptive_po.compile_setup: a compiled graph's kernels built as one library give the same results,
bit for bit, as inductor's one library per kernel; the CPU's flags are trusted without probe builds,
with the same compiler flags; what the bundle cannot bind goes inductor's way; each change
``prepare()`` makes to torch's internals is in place on this torch (adaptive_po.compiled's text lists
them, with the test that fails for each)."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from adaptive_po import compile_setup as C
from conftest import compiled_or_skip

pytestmark = pytest.mark.xdist_group("compiled-steps")

#: a graph whose pointwise work the products split into several kernels; run with the bundling on,
#: then (inductor's caches emptied, the generated module loaded again) with it off
SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch
    torch.set_num_threads(1)
    from torch._inductor import cpu_vec_isa
    from torch._inductor import codecache
    from adaptive_po import compile_setup as C
    C.prepare()
    headers, precompile = [], getattr(codecache, "_precompile_header", None)

    def counted(*args, **kwargs):  # inductor's precompiled headers, each time one is asked for
        headers.append(args[0])
        return precompile(*args, **kwargs)

    if precompile is not None:
        codecache._precompile_header = counted

    def f(x, w1, w2, n):
        h = torch.tanh(torch.bmm(x, w1) + 0.5)
        g = torch.sigmoid(torch.bmm(h, w2)) * h.sum(-1, keepdim=True)
        return g.exp().mean(1) / (1.0 + h.square().mean()), torch.softmax(g[:, :n.shape[0]], -1)

    torch.manual_seed(0)
    args = (torch.randn(5, 33, 7), torch.randn(5, 7, 19), torch.randn(5, 19, 19), torch.zeros(3))
    outs, libraries = {}, {}
    for label in ("bundled", "single"):
        os.environ["ADAPTIVE_PO_BUNDLE_KERNELS"] = "1" if label == "bundled" else "0"
        torch._dynamo.reset()
        from torch._inductor.codecache import PyCodeCache, CppPythonBindingsCodeCache
        PyCodeCache.cache_clear(purge=True)
        CppPythonBindingsCodeCache.cache_clear()
        outs[label] = torch.compile(f, dynamic=False)(*args)
        libraries[label] = sum(name.endswith(".so") for _, _, names in os.walk(os.environ["TORCHINDUCTOR_CACHE_DIR"]) for name in names)
    same = all(torch.equal(a, b) for a, b in zip(outs["bundled"], outs["single"]))
    eager = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(outs["bundled"], f(*args)))
    isa = cpu_vec_isa.pick_vec_isa()
    print(json.dumps({"libraries": libraries, "same": same, "eager": eager, "built": C.BUILT, "isa": str(isa), "flags": isa.build_arch_flags() if isa else "",
                      "headers": None if precompile is None else len(headers)}))
""")


def _run(tmp_path, **env):
    """SCRIPT's JSON line, in a child with its own compile cache under ``tmp_path``."""
    child = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    for variable in ("TORCHINDUCTOR_VEC_ISA_OK", "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS"):  # the engine's defaults
        child.pop(variable, None)
    child.update(env)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=child, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def trusted(tmp_path_factory):
    """SCRIPT as the engine runs it: the CPU's flags trusted, kernels bundled."""
    return _run(tmp_path_factory.mktemp("trusted"))


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """SCRIPT as inductor runs it: probe builds (``TORCHINDUCTOR_VEC_ISA_OK`` set, to an empty
    value: the probes decide), kernels built one by one, inductor's precompiled header."""
    return _run(tmp_path_factory.mktemp("probed"), TORCHINDUCTOR_VEC_ISA_OK="", ADAPTIVE_PO_BUNDLE_KERNELS="0")


def test_a_graphs_kernels_built_as_one_library_are_inductors_kernels_bit_for_bit(trusted):
    result = trusted
    assert result["built"]["bundles"] >= 1 and result["built"]["kernels_in_bundles"] >= 2, result
    # the second compile, inductor's way: one more library per kernel
    assert result["libraries"]["single"] - result["libraries"]["bundled"] == result["built"]["kernels_in_bundles"], result
    assert result["same"], "bundled kernels differ from inductor's own"
    assert result["eager"]


def test_trusting_the_cpu_flags_picks_what_the_probes_pick(trusted, probed):
    """The instruction set and compiler flags that trusting the CPU's flags gives are what inductor's
    probe builds give (``TORCHINDUCTOR_VEC_ISA_OK`` set, to an empty value: the probes decide)."""
    assert (trusted["isa"], trusted["flags"]) == (probed["isa"], probed["flags"])


def test_no_header_is_precompiled_where_kernels_are_bundled(trusted, probed):
    """Where a graph's kernels are bundled, inductor is asked for no precompiled header (its build,
    3.0 s and 155 MB, pays only from about a process's fourth g++ run); with inductor's defaults
    the same graph asks for one."""
    compiled_or_skip(probed["headers"] is None, "inductor's header precompilation is not where this test counts it")
    assert trusted["headers"] == 0, trusted
    assert probed["headers"] >= 1, probed


def test_prepare_installs_its_changes_on_this_torch():
    """Each change :func:`adaptive_po.compile_setup.prepare` makes to torch's internals is in place
    after it, and acts as its text says: inductor compiles in this process, without size asserts
    or (kernels bundled) a precompiled header; the CPU's flags answer the probes without a build;
    the bundling wraps inductor's kernel requests; the dtype rules are set once (a second
    construction of the handler keeps the first's); vector indices skip simplify. Two of these
    are skipped without a word where a torch lacks what they patch, and a missing setting or
    attribute among the others makes the engine run eagerly: this test names which one stopped."""
    import torch
    import torch._inductor.lowering  # registers the dtype rules the handler sets
    from torch._inductor import async_compile, cpu_vec_isa, sizevars
    from torch._inductor.dtype_propagation import DtypePropagationOpsHandler

    inductor = torch._inductor.config
    C.prepare()
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        assert inductor.compile_threads == 1
    if "TORCHINDUCTOR_SIZE_ASSERTS" not in os.environ:
        assert inductor.size_asserts is False
    if C.bundling_enabled():
        assert getattr(async_compile.AsyncCompile.cpp_pybinding, "_adaptive_po", False)
        if "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS" not in os.environ:
            assert inductor.cpp_cache_precompile_headers is False
    if "TORCHINDUCTOR_VEC_ISA_OK" not in os.environ:
        assert inductor.cpp.vec_isa_ok is True
        assert getattr(cpu_vec_isa.VecISA.check_build, "_adaptive_po", False)
        assert cpu_vec_isa.VecISA.check_build(cpu_vec_isa.VecAVX2(), "not C++: a probe build of it would fail")
    assert getattr(sizevars.simplify_index_in_vec_range, "_adaptive_po", False)
    assert getattr(DtypePropagationOpsHandler.__init__, "_adaptive_po", False)
    handler = DtypePropagationOpsHandler()
    rules = {name: rule for name, rule in vars(handler).items() if callable(rule)}
    assert rules
    DtypePropagationOpsHandler()
    assert all(getattr(handler, name) is rule for name, rule in rules.items())


def test_the_generated_wrappers_check_no_sizes():
    """After :func:`adaptive_po.compile_setup.prepare` (``$TORCHINDUCTOR_SIZE_ASSERTS`` unset) the
    wrapper inductor generates checks no input's sizes and strides at a call; under inductor's own
    setting the same graph's wrapper checks each input."""
    import torch
    from torch._inductor.utils import run_and_get_code

    if "TORCHINDUCTOR_SIZE_ASSERTS" in os.environ:
        pytest.skip("$TORCHINDUCTOR_SIZE_ASSERTS decides here")
    C.prepare()

    def engines(x):  # two functions, two codes: dynamo keeps one compilation per code and guards
        return torch.sin(x * 2.0 + 1.0)

    def inductors(x):
        return torch.sin(x * 2.0 + 1.0)

    x = torch.randn(3, 5)
    with torch._inductor.config.patch(fx_graph_cache=False):  # generated here, not loaded from a cache
        try:
            _, plain = run_and_get_code(torch.compile(engines, dynamic=False), x)
            with torch._inductor.config.patch(size_asserts=True):
                _, checked = run_and_get_code(torch.compile(inductors, dynamic=False), x)
        except Exception as err:  # noqa: BLE001 - no compiler, or another torch
            compiled_or_skip(True, f"{type(err).__name__}: {err}")
            raise
    call = re.compile(r"\bassert_size_stride\(")
    assert plain and not any(call.search(code) for code in plain), plain
    assert any(call.search(code) for code in checked), checked


def test_the_bundle_binds_every_kernel_and_refuses_what_it_cannot_bind():
    a = "\n#include <torch/csrc/inductor/cpp_prefix.h>\nextern \"C\" void kernel(float* out, const int64_t ks0)\n{ out[0] = ks0; }\n"
    b = "\n#include <torch/csrc/inductor/cpp_prefix.h>\nextern \"C\" void kernel(const double* x, float* y, float s)\n{ y[0] = x[0] * s; }\n"
    source = C.bundle_source([(["float*", "const int64_t"], a), (["const double*", "float*", "float"], b)])
    assert source.count("#include <torch/csrc/inductor/cpp_prefix.h>") == 1
    assert source.index("cpp_prefix.h") < source.index("#define kernel kernel_0") < source.index("#define kernel kernel_1")
    for i, n in ((0, 2), (1, 3)):
        assert f'{{"kernel_{i}", kernel_{i}_py, METH_VARARGS, ""}}' in source
        assert f"!= {n}) throw" in source
    assert "PyInit_kernel" in source
    with pytest.raises(ValueError, match="uintptr_t"):
        C.bundle_source([(["uintptr_t"], a), (["float*"], b)])


#: a toy population learner's act and two updates, its forward pass and step compiled ahead or not
#: (``ADAPTIVE_PO_COMPILE_AHEAD``): a digest of what they computed, the libraries built, the misses
AHEAD = textwrap.dedent("""
    import hashlib, json
    import gymnasium as gym, numpy as np, torch
    torch.set_num_threads(1)
    from adaptive_po import compile_setup as C, compiled as CP
    from adaptive_po.population import Member, PopulationLearner, StackedRollout

    space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    members = [Member(3, policy_lag=1, action_noise=0.3), Member(4)]
    learner = PopulationLearner(space, gym.spaces.Discrete(2), members, objective="ppo", compile_step=True,
                                n_steps=4, batch_size=8, n_epochs=2, learning_rate=3e-3, policy_kwargs={"net_arch": [16]})
    learner.compile_ahead(torch.zeros(2, 2, 4))
    g, digest, k, t, e = torch.Generator().manual_seed(0), hashlib.sha256(), 2, 4, 2
    for update in range(2):
        obs = torch.randn(k, t, e, 4, generator=g)
        actions, blp, params = learner.act(obs.reshape(k, t * e, 4))
        shape = (k, t, e)
        rollout = StackedRollout(obs, actions.reshape(shape), torch.randn(shape, generator=g), torch.zeros(shape), blp.reshape(shape),
                                 params.reshape(*shape, -1), torch.zeros(shape, dtype=torch.bool), torch.zeros(*shape, 4),
                                 torch.randn(k, e, 4, generator=g), torch.zeros(k, e))
        stats = learner.update(rollout, 0.7)
        for tensor in (actions, blp, params, *stats.values(), *learner.params.values()):
            digest.update(tensor.detach().numpy().tobytes())
    print(json.dumps({"digest": digest.hexdigest(), "built": C.BUILT, "misses": CP.PRIME_MISSES, "eager": CP.compile_fell_back()}))
""")


def test_compiling_ahead_builds_a_populations_kernels_once_and_computes_the_same_bits(tmp_path):
    """The first update's forward pass and step compiled before the first act (their kernels built
    with the act's, one library) compute what they compute compiled at the first update, bit for
    bit: actions, log-probs, statistics and parameters over two updates."""
    results = {}
    for ahead in ("1", "0"):
        child = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / ahead), "ADAPTIVE_PO_COMPILE_AHEAD": ahead}
        out = subprocess.run([sys.executable, "-c", AHEAD], env=child, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        results[ahead] = json.loads(out.stdout.strip().splitlines()[-1])
    compiled_or_skip(results["1"]["eager"], "the engine runs eagerly")
    assert results["1"]["digest"] == results["0"]["digest"]
    assert results["1"]["misses"] == []
    assert results["1"]["built"]["bundles"] == 1 and results["0"]["built"]["bundles"] == 3, results


def test_a_vector_loops_plain_index_gets_the_stride_that_simplify_gives_it(monkeypatch):
    """Every index of a compiled graph whose stride along a vector loop inductor asks (a graph of
    symbolic sizes, so that its indices have them), without divisions or modulos, gets from the
    index as it is the stride it gets from inductor's whole rewrite with ``sympy.simplify``."""
    import torch
    from torch._inductor import sizevars
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    C.prepare()
    patched = sizevars.simplify_index_in_vec_range
    assert getattr(patched, "_adaptive_po", False)
    asked = []

    def recording(index, var, vec_length):
        asked.append((index, var, vec_length))
        return patched(index, var, vec_length)

    monkeypatch.setattr(sizevars, "simplify_index_in_vec_range", recording)

    def f(x, w):  # sizes met nowhere else in the tests: the strides' caches have not seen these indices
        h = torch.sigmoid(torch.bmm(x, w) * 1.5 - 0.25)
        return (h * x[..., :1]).sum(1), torch.log_softmax(h.transpose(1, 2) + h.mean(1, keepdim=True).transpose(1, 2), -1)

    torch.manual_seed(0)
    args = (torch.randn(3, 41, 29), torch.randn(3, 29, 37))
    sizevars.stride_at_vec_range.cache_clear()  # every index asked again, whatever this process compiled before
    with torch._inductor.config.patch(fx_graph_cache=False):  # generated, not loaded from an earlier run's cache
        out = torch.compile(f, dynamic=True)(*args)
    for a, b in zip(out, f(*args)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    plain = [(i, v, n) for i, v, n in asked if not i.has(FloorDiv, ModularIndexing)]
    assert len(plain) >= 5 and any(i.free_symbols - {v} for i, v, _ in plain), asked  # symbolic sizes among them
    original = patched._adaptive_po_original
    monkeypatch.setattr(sizevars, "simplify_index_in_vec_range", original)  # inductor's own, recursion included
    for index, var, vec_length in plain:
        assert sizevars.stride_at(index, var) == sizevars.stride_at(original.__wrapped__(index, var, vec_length), var), index
