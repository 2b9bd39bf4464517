"""The population engine's compiled calls: whether to compile, each callable compiled once per
process, a repeated call run without dynamo, graphs compiled ahead of their first call, and the one
line a process prints where compiling fails.

:class:`~adaptive_po.population.PopulationLearner` names each compiled callable by a key (the step
per objective, network and settings; the forward pass and the act per network) and calls it through
:func:`call_compiled` (before its first act, :func:`prime_compiled`). What the learners of one
process share lives here: the compiled callables, the argument signatures each has run with and the
function that runs each one's compiled code directly, the signatures compiled ahead, the first
calls' seconds (:data:`COMPILE_SECONDS`), and whether and why compiling fell back to eager
(:func:`compile_fell_back`, :func:`compile_fallback_reason`). How inductor builds what is compiled
here (fewer g++ runs for the same kernels) is :mod:`adaptive_po.compile_setup`.

**Private torch on the compiled path.** Every place where this module, :mod:`adaptive_po.compile_setup`
or the learner's passes reach into torch's internals, with what it buys (as measured in the text
named; "not measured" where nothing is written down), its guard, and the test that *fails* when it
stops working on the pinned torch (the Makefile's ``TORCH_SPEC``) with a C++ compiler present. The
compiled-path tests call ``conftest.compiled_or_skip``, which fails there, and skips only on another
torch or without a compiler. "Eager fallback" below: the error is caught, the process prints one
line and runs eagerly from then on (:func:`compile_fell_back`), which those tests turn into a failure.

* ``torch._dynamo.eval_frame._debug_get_cache_entry_list``, a cache entry's ``guard_manager.check``
  and ``code`` (:func:`_direct_function`): a call whose signature has run runs that call's compiled
  code without dynamo's guards and frame evaluation. Buys about 75 us of a 225 us CartPole act
  (:func:`call_compiled`). Guard: any exception gives ``None``, and the call goes through dynamo.
  Fails: ``tests/test_compiled_step.py::test_a_call_like_one_that_ran_runs_its_compiled_code_directly_and_a_new_one_is_guarded``.
* ``_torchdynamo_orig_callable`` of ``torch.compile``'s wrapper (:func:`call_compiled`): the function
  the shared compiled callable was made from (its closure is the one dynamo traced), so that another
  learner of the process runs the same compiled code directly. Buys: part of the 75 us above, for
  every learner but a process's first (not measured apart). Guard: ``getattr``, the caller's own
  function where the attribute is missing. Fails:
  ``tests/test_compiled_step.py::test_a_compiled_callable_is_made_once_from_its_function_with_room_to_recompile``.
* ``torch.compiler.set_stance("default", skip_guard_eval_unsafe=True)`` (:func:`call_compiled`; a
  public function, in its unsafe mode): a known signature without a direct function (code that
  resumes after a graph break) runs through dynamo without the guards that tell its cache entries
  apart. Buys: not measured. Guard: none; an error in the call is an eager fallback for that
  callable. Fails: ``tests/test_compiled_step.py::test_code_that_resumes_after_a_graph_break_runs_through_dynamo``.
* ``torch._dynamo.config.recompile_limit``, raised to 64 at least (:func:`_compiled`): each objective
  and shape is one more compilation of the same code, and past the limit (8 in torch's defaults)
  dynamo runs a code eagerly. Buys: not measured. Guard: none; inside :func:`_compiled`'s ``try``,
  so a missing setting is an eager fallback for every callable. Fails:
  ``tests/test_compiled_step.py::test_a_compiled_callable_is_made_once_from_its_function_with_room_to_recompile``.
* ``torch._dynamo.maybe_mark_dynamic(rows, 1)`` (the learner's :meth:`~adaptive_po.population.PopulationLearner.forward`,
  its acting and :meth:`~adaptive_po.population.PopulationLearner.compile_ahead`): the row count is
  a symbolic size, so one compilation serves every row count (evaluation's 10 rows and an update's
  264 at CartPole's). Buys: one compilation instead of one per row count (seconds not measured).
  Guard: none; an error there ends the run (no eager fallback). Fails:
  ``tests/test_compiled_step.py::test_one_compiled_forward_pass_serves_every_row_count`` and
  ``::test_the_policy_alone_rides_the_compiled_act_for_every_row_count``.
* ``torch._inductor.config.compile_threads = 1`` (:func:`~adaptive_po.compile_setup.prepare`):
  inductor compiles in this process, without a pool of compiler processes (a sidecar and a worker
  per core, each importing torch); the bundled builds below need it. Buys: not measured. Guard:
  ``$TORCHINDUCTOR_COMPILE_THREADS`` decides where set; a missing setting fails ``prepare()``: an
  eager fallback. Fails: ``tests/test_compile_setup.py::test_prepare_installs_its_changes_on_this_torch``
  and, where more threads leave the kernels to inductor,
  ``::test_a_graphs_kernels_built_as_one_library_are_inductors_kernels_bit_for_bit``.
* ``torch._inductor.config.cpp.vec_isa_ok = True`` and ``torch._inductor.cpu_vec_isa.VecISA.check_build``
  replaced, ``VecAMX._amx_fp16_code`` keeping its probe (:func:`~adaptive_po.compile_setup.trust_the_cpu_flags`):
  no probe builds for the CPU's instruction sets and extensions. Buys about ten g++ runs, 8 s of one
  core in every process that starts with an empty compile cache. Guard: ``$TORCHINDUCTOR_VEC_ISA_OK``
  or a ``vec_isa_ok`` already set decides; a marker attribute keeps one wrapper; a missing attribute
  fails ``prepare()``: an eager fallback. Fails: ``tests/test_compile_setup.py::test_prepare_installs_its_changes_on_this_torch``
  (the wrapper answers without a build) and ``::test_trusting_the_cpu_flags_picks_what_the_probes_pick``
  (the instruction set and flags the probes give).
* ``torch._inductor.dtype_propagation.DtypePropagationOpsHandler.__init__`` replaced, reading
  ``torch._inductor.utils.op_dtype_propagation_rules`` (:func:`~adaptive_po.compile_setup.dtype_rules_once`):
  the singleton's rules set once. Buys 62 us a construction, about 4,900 constructions in the
  compilation of a CartPole population's step. Guard: ``ImportError``/``AttributeError`` skip it
  (compiled as inductor does, silently). Fails: ``tests/test_compile_setup.py::test_prepare_installs_its_changes_on_this_torch``.
* ``torch._inductor.sizevars.simplify_index_in_vec_range`` replaced (:func:`~adaptive_po.compile_setup.vector_strides_without_simplify`):
  a vector loop's index without divisions or modulos goes to its stride without ``sympy.simplify``.
  Buys 0.8 s of a CartPole population's compilations. Guard: ``ImportError``/``AttributeError`` skip
  it (silently). Fails: ``tests/test_compile_setup.py::test_a_vector_loops_plain_index_gets_the_stride_that_simplify_gives_it``
  (the wrapper installed, and asked about plain indices) and ``::test_prepare_installs_its_changes_on_this_torch``.
* ``torch._inductor.config.size_asserts = False`` (:func:`~adaptive_po.compile_setup.prepare`): no
  check of every input's sizes and strides at every call of a generated wrapper. Buys 8 us of a
  CartPole act and about 50 us of a step. Guard: ``$TORCHINDUCTOR_SIZE_ASSERTS`` decides where set;
  a missing setting fails ``prepare()``: an eager fallback. Fails:
  ``tests/test_compile_setup.py::test_the_generated_wrappers_check_no_sizes``.
* ``torch._inductor.config.cpp_cache_precompile_headers = False`` where kernels are bundled
  (:func:`~adaptive_po.compile_setup.prepare`): no precompiled header. Buys its build, 3.0 s and
  155 MB, which pays only from about the fourth g++ run of a process. Guard:
  ``$TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS`` decides where set; a missing setting fails
  ``prepare()``: an eager fallback. Fails: ``tests/test_compile_setup.py::test_no_header_is_precompiled_where_kernels_are_bundled``.
* ``torch._inductor.async_compile.AsyncCompile.cpp_pybinding`` and ``.wait`` replaced, and
  ``async_compile.get_compile_threads`` (:func:`~adaptive_po.compile_setup.bundle_kernels`): a
  graph's kernels built as one library, one g++ run per graph (each run parses the header the
  kernels include, about 1.3 s here). Guard: a marker attribute keeps one wrapper; more than one
  compile thread or ``ADAPTIVE_PO_BUNDLE_KERNELS=0`` go inductor's way; a missing attribute fails
  ``prepare()``: an eager fallback. Fails:
  ``tests/test_compile_setup.py::test_a_graphs_kernels_built_as_one_library_are_inductors_kernels_bit_for_bit``.
* Deferred builds (:func:`~adaptive_po.compile_setup.deferred_builds`, :func:`prime_compiled`): they
  rely on inductor's generated module asking for all its kernels and waiting for them
  (``AsyncCompile.wait``) before its call runs the first, so that this kernel's call can stop the
  call (:class:`~adaptive_po.compile_setup.Deferred`). Buys: a CartPole population's three graphs
  built in 3.8 s instead of 6.8 s of three g++ runs. Guard: none beyond the bundling's; where a call
  does not stop, it runs to its end and builds its own library. Fails:
  ``tests/test_compile_setup.py::test_compiling_ahead_builds_a_populations_kernels_once_and_computes_the_same_bits``
  (one library, not three) and ``tests/test_compiled_step.py::test_compiling_ahead_gives_the_first_updates_own_graphs_built_with_the_first_act``.
* ``torch._inductor.codecache.CppPythonBindingsCodeCache.load_async(source, "cpu")`` and
  ``.load_pybinding``, the loader's ``$_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR`` (the data pointer
  getter the bundle's module reads at its start), and the ``path`` of the loader's ``ImportError``
  (:func:`~adaptive_po.compile_setup._build_bundle`): the bundle built with inductor's flags and kept
  in its cache (a later process loads it without compiling); a damaged library in the cache removed
  and built again, once. Buys: not measured apart (the bundles' gain above). Guard: a bundle that
  fails to build goes inductor's way, kernel by kernel (``BUILT["single"]``). Fails:
  ``tests/test_compile_setup.py::test_a_graphs_kernels_built_as_one_library_are_inductors_kernels_bit_for_bit``
  and ``tests/test_probe4_processes.py::test_a_damaged_bundle_in_the_cache_is_built_again_as_one_library``.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

import torch
from torch import Tensor

from adaptive_po import compile_setup

# ``ADAPTIVE_PO_COMPILE`` (:data:`~adaptive_po.compile_setup.COMPILE_ENV`, read strictly by
# :func:`~adaptive_po.compile_setup.compile_setting`): ``1`` compiles the stacked minibatch step
# (``torch.compile``, inductor), ``0`` runs it eagerly, ``auto`` (or unset) compiles when the
# population's planned minibatch steps reach :data:`COMPILE_MIN_STEPS` (:func:`compile_wanted`)

#: the planned minibatch steps from which ``auto`` compiles: one compilation costs 10-20 s on one
#: core and saves 1.5-40 ms per step (benchmarks/roofline.py), so it pays from a few thousand steps
COMPILE_MIN_STEPS = 6000


def compile_wanted(planned_steps: int | None = None, policy: str = "MlpPolicy") -> bool:
    """Whether to compile the stacked step: ``$ADAPTIVE_PO_COMPILE`` (``1``/``0``) decides; unset or
    ``auto``, compile an MLP ``policy``'s step when ``planned_steps`` (the population's minibatch
    steps, if known) reaches :data:`COMPILE_MIN_STEPS`, and never a CNN's: its step is bound by the
    convolutions and the dense layer's matrix products, and compiled it measured no faster than eager
    (``make perf``'s MinAtar cell: 384 against 355 ms), so the compilation would be paid for nothing."""
    return wanted_under(compile_setup.compile_setting(), planned_steps, policy)


def wanted_under(setting: str, planned_steps: int | None = None, policy: str = "MlpPolicy") -> bool:
    """:func:`compile_wanted` under ``setting`` (``"1"``, ``"0"`` or ``"auto"``, as
    :func:`adaptive_po.compile_setup.compile_setting` gives it)."""
    if setting != "auto":
        return setting == "1"
    return policy != "CnnPolicy" and planned_steps is not None and planned_steps >= COMPILE_MIN_STEPS


#: compiled callables (the step per objective, network and settings; the forward pass and the act
#: per network) in this process; ``None`` where compiling failed (that one runs eagerly from then on)
_COMPILED: dict[tuple[Any, ...], Callable[..., Any] | None] = {}
#: seconds each compiled callable's first call per shape took (tracing and compiling included), by (key, shapes)
COMPILE_SECONDS: dict[tuple[Any, ...], float] = {}
_FALLBACK_SAID = False
#: why (the first line of the error that :func:`_say_fallback` printed)
_FALLBACK_REASON: str | None = None
#: per compiled callable's key: that callable, and each argument signature it has run with the
#: function that runs that signature's compiled code directly (``None`` where there is none:
#: :func:`_direct_function`)
_RAN: dict[tuple[Any, ...], tuple[Callable[..., Any], dict[Any, Callable[..., Any] | None]]] = {}
#: per compiled callable's key: the signature :func:`prime_compiled` compiled it for, until its first call
_PRIMED: dict[tuple[Any, ...], Any] = {}
#: the callables (their keys' first element) whose first call came with another signature than the
#: one compiled ahead for it (that compilation was spent for nothing; the tests keep this empty)
PRIME_MISSES: list[Any] = []


def _say_fallback(reason: str) -> None:
    """The one line a process prints when compilation is unavailable or fails."""
    global _FALLBACK_SAID, _FALLBACK_REASON
    if not _FALLBACK_SAID:
        _FALLBACK_SAID, _FALLBACK_REASON = True, reason
        print(f"adaptive-po: the population engine runs eagerly: compilation failed ({reason})", file=sys.stderr, flush=True)


def _compile_failed(key: tuple[Any, ...], err: Exception) -> None:
    """``key``'s compilation failed: eager from now on, said once (:func:`_say_fallback`)."""
    _COMPILED[key] = None
    _say_fallback(f"{type(err).__name__}: {err}".splitlines()[0][:200])


def compile_fell_back() -> bool:
    """Whether a compilation failed in this process (its steps ran eagerly from then on)."""
    return _FALLBACK_SAID


def compile_fallback_reason() -> str | None:
    """Why compiling failed in this process (the line :func:`_say_fallback` printed), or None."""
    return _FALLBACK_REASON


def _compiled(key: tuple[Any, ...], fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """``torch.compile(fn)``, built once per process and ``key``; ``None`` where unavailable."""
    if key not in _COMPILED:
        try:
            import torch._dynamo

            compile_setup.prepare()  # fewer g++ runs for the same kernels (its text says how)
            # every (objective, shape) is one more compilation of the same function
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
            _COMPILED[key] = torch.compile(fn, dynamic=False)
        except Exception as err:  # noqa: BLE001 - any failure means: run eagerly
            _say_fallback(f"{type(err).__name__}: {err}".splitlines()[0])
            _COMPILED[key] = None
    return _COMPILED[key]


def call_compiled(key: tuple[Any, ...], fn: Callable[..., Any], args: tuple[Any, ...], shapes: tuple[Any, ...] = ()) -> Any | None:
    """``fn(*args)`` compiled (once per process, ``key`` and ``shapes``: the first call's seconds go
    into :data:`COMPILE_SECONDS`), or ``None`` where compiling is unavailable or fails: the caller
    then runs ``fn`` eagerly, from then on (one line says so, once per process).

    A call whose arguments have the signature of one that ran (:func:`_signature`, and the grad
    mode) runs that call's compiled code itself, without dynamo (:func:`_direct_function`): no
    guards (hundreds of checks of the arguments and the network's modules), no frame evaluation,
    about 75 us of a 225 us CartPole act. Where that is not to be had, it runs through dynamo without
    its guards (among several cache entries dynamo still runs the guards that tell them apart,
    those that have failed before). A new signature is guarded as usual."""
    compiled = _compiled(key, fn)
    if compiled is None:
        return None
    ran, signature = _ran_signatures(key, compiled), (torch.is_grad_enabled(), _signature(args))
    direct = ran.get(signature)
    if direct is not None:
        try:
            return direct(*args)
        except Exception:  # noqa: BLE001 - its compiled code is gone (dynamo was reset): dynamo's way
            ran[signature] = None
    try:
        started = time.perf_counter()
        if signature in ran:
            with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
                out = compiled(*args)
        else:
            out = compiled(*args)
    except Exception as err:  # noqa: BLE001 - a compiler failure: eager from now on
        _compile_failed(key, err)
        return None
    if signature not in ran:
        primed = _PRIMED.pop(key, None)
        if primed is not None and primed != signature:
            PRIME_MISSES.append(key[0])
        # what ``compiled`` runs: the function it was made from (the first caller's, where the
        # learners of a process share a compiled callable), its closure the one dynamo traced
        ran[signature] = _direct_function(getattr(compiled, "_torchdynamo_orig_callable", fn), args)
    COMPILE_SECONDS.setdefault((key, shapes), time.perf_counter() - started)
    return out


def compile_ahead_wanted() -> bool:
    """``ADAPTIVE_PO_COMPILE_AHEAD`` (default on): the population engine compiles the first update's
    forward pass and step before the first act
    (:meth:`adaptive_po.population.PopulationLearner.compile_ahead`)."""
    return compile_setup.switched_on("ADAPTIVE_PO_COMPILE_AHEAD")


def prime_compiled(key: tuple[Any, ...], fn: Callable[..., Any], args: tuple[Any, ...], shapes: tuple[Any, ...] = ()) -> bool:
    """Compile ``fn`` for ``args``' signature now, without running it: under
    :func:`adaptive_po.compile_setup.deferred_builds` the call stops at its first kernel, and the
    kernels are built with those of the next compiled call that runs, in its compiler run. ``args``
    must be the caller's own (copies of what the later call passes: the call may run the products
    before its first kernel). The seconds go into :data:`COMPILE_SECONDS` under ``(key, shapes)``.
    Returns whether ``fn`` runs compiled: False where compiling is unavailable or fails (then the
    later call runs eagerly, as :func:`call_compiled` would have). A signature that has already run
    (another learner of the process) is not compiled again."""
    compiled = _compiled(key, fn)
    if compiled is None:
        return False
    signature = (torch.is_grad_enabled(), _signature(args))
    if signature in _ran_signatures(key, compiled):
        return True
    started = time.perf_counter()
    try:
        with compile_setup.deferred_builds():
            compiled(*args)
    except compile_setup.Deferred:
        pass
    except Exception as err:  # noqa: BLE001 - a compiler failure: eager from now on
        _compile_failed(key, err)
        return False
    _PRIMED[key] = signature
    COMPILE_SECONDS.setdefault((key, shapes), time.perf_counter() - started)
    return True


def _ran_signatures(key: tuple[Any, ...], compiled: Callable[..., Any]) -> dict[Any, Callable[..., Any] | None]:
    """The argument signatures (:func:`_signature`) that ``compiled`` (``key``'s) has run, each
    with its direct function (:func:`_direct_function`) or ``None``."""
    entry = _RAN.get(key)
    if entry is None or entry[0] is not compiled:
        entry = _RAN[key] = (compiled, {})
    return entry[1]


def _direct_function(fn: Callable[..., Any], args: tuple[Any, ...]) -> Callable[..., Any] | None:
    """A function that runs the compiled code dynamo chose for ``fn(*args)`` (just called): the
    code object of ``fn``'s cache entry whose guards ``args`` pass (the entries in dynamo's order,
    as its frame evaluation tries them), bound to ``fn``'s globals and closure, where dynamo
    installed the compiled graph. The same code dynamo runs for these arguments, without the guards
    and the frame evaluation around it. ``None`` where there is no such entry (``fn`` ran
    eagerly), where the code resumes after a graph break (the resumed part needs dynamo's frame
    evaluation), or where this torch has no such internals: its calls go through dynamo."""
    try:
        import inspect
        import types

        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        code = fn.__code__  # type: ignore[attr-defined]
        bound = inspect.signature(fn, follow_wrapped=False).bind(*args)
        bound.apply_defaults()
        frame_locals = dict(bound.arguments)
        closure = fn.__closure__ or ()  # type: ignore[attr-defined]
        frame_locals.update((name, cell.cell_contents) for name, cell in zip(code.co_freevars, closure))
        for entry in _debug_get_cache_entry_list(code):
            if entry.guard_manager.check(frame_locals):
                ready = entry.code.co_freevars == code.co_freevars and not any(n.startswith("__resume") for n in entry.code.co_names)
                return types.FunctionType(entry.code, fn.__globals__, fn.__name__, fn.__defaults__, closure) if ready else None  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - another torch's internals: dynamo's way
        pass
    return None


def _signature(values: Any) -> Any:
    """What the compiled code of a pure function depends on in its arguments (tuples and dicts of
    tensors and constants): each tensor's shape, strides, dtype and device, each other value, the
    structure. Two calls with one signature (and one grad mode) run the same compiled code. Any
    other kind of value gets a signature of its own, never met again (its calls stay guarded)."""
    if isinstance(values, Tensor):
        return (values.shape, values.stride(), values.dtype, values.device)
    if isinstance(values, dict):
        return (dict, *((k, _signature(v)) for k, v in values.items()))
    if isinstance(values, (tuple, list)):
        return (type(values), *map(_signature, values))
    if values is None or isinstance(values, (bool, int, float, str)):
        return (type(values), values)
    return object()
