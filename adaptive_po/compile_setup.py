"""How the population engine sets up inductor's C++ compilation on CPU: fewer compiler runs for the
same machine code.

A population compiles three graphs (the act, the forward pass, the minibatch step). With inductor's
defaults on CPU, a process that starts with an empty compile cache runs g++ about twenty times:

* **probe builds** of small programs, one per instruction set and extension, to learn whether the
  compiler can build for what the CPU's flags (``/proc/cpuinfo``) list, each followed by a child
  Python that loads the probe;
* **one build per kernel**, each of which loads torch's precompiled header (about 150 MB, a quarter
  of a second) and links on its own.

:func:`prepare` (called once, before the first compilation) changes these things, none of which
changes a kernel's source, its compiler flags or its machine code:

1. **Inductor compiles in this process** (one compile thread, where ``$TORCHINDUCTOR_COMPILE_THREADS``
   does not say otherwise). On more than one core, inductor would start a pool of compiler
   processes (a sidecar and a worker per core, each importing torch) to build kernels in parallel;
   with a graph's kernels in one library (3 below) there is little left to build in parallel, and
   the pool's start is CPU time of its own.
2. **The CPU's flags are trusted** (inductor's ``cpp.vec_isa_ok``, and the same for the AVX-512
   BF16/VNNI and AMX extensions that the CPU reports at run time): no probe builds. Where
   ``$TORCHINDUCTOR_VEC_ISA_OK`` or ``cpp.vec_isa_ok`` is set, that decides and the probes are
   inductor's. AMX-FP16 (which needs a newer compiler than the rest) keeps its probe.
3. **The kernels of one compiled graph are built as one library** (:func:`bundle_kernels`): the
   generated module asks for its kernels one by one and then waits for them; they are built
   together at that wait, one g++ run per graph, each kernel renamed, with Python bindings for all
   of them. Built through inductor's own code cache (its flags, its file cache: a later process
   loads the library without compiling). A graph with one kernel, or a bundle that fails to build,
   goes inductor's way, kernel by kernel; a library in the cache that does not load (truncated
   by a full disk or a killed build, garbled) is removed and built again, once.
   ``ADAPTIVE_PO_BUNDLE_KERNELS=0`` turns this off.
   **Graphs compiled ahead share that library** (:func:`deferred_builds`): the population engine
   compiles its first update's graphs before its first act, and the act's first call builds them
   all in one g++ run. Each g++ run parses the header the kernels include (about 1.3 s here), so
   a CartPole population's three graphs build in 3.8 s instead of 6.8 s of three runs.
4. **No precompiled header** where kernels are bundled (``$TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS``
   decides where set): inductor would first build it (3.0 s, 155 MB), which pays only from about
   the fourth g++ run of a process.
5. **No size asserts** in the generated wrappers (inductor's ``size_asserts``; ``$TORCHINDUCTOR_SIZE_ASSERTS``
   decides where set): the engine's calls of a graph have the shapes and strides it was guarded
   for, and the checks of every input at every call are 8 us of a CartPole act and about 50 us
   of a step (the kernels are the same).
6. **Inductor's dtype rules are set once** (:func:`dtype_rules_once`), not at each of the thousands
   of times its handler is constructed during a compilation; and **a vector loop's plain indices
   skip sympy's simplify** on their way to their stride (:func:`vector_strides_without_simplify`).

Measured on one core, a cold CartPole population's compilation: see ``docs/results/perf.md``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from typing import Any, Callable, Iterator

#: the scalar argument types the bundle's bindings parse (pointers are tensors' data)
_SCALARS = {"int64_t": "PyLong_AsSsize_t", "long": "PyLong_AsSsize_t", "float": "PyFloat_AsDouble", "double": "PyFloat_AsDouble"}
_PREPARED = False
#: while :func:`deferred_builds` is on: compiled modules' kernels wait, and calling one raises :class:`Deferred`
_DEFERRING = False
#: the generated modules (their ``AsyncCompile``) compiled under :func:`deferred_builds` whose kernels wait
_WAITING: list[Any] = []
#: in this process: libraries built by :func:`_build_bundle`, the kernels in them, and the kernels of
#: deferred modules built one by one after all (one kernel in the module, or a bundle that failed),
#: and the damaged libraries found in the cache and built again (:func:`_build_bundle`)
BUILT = {"bundles": 0, "kernels_in_bundles": 0, "single": 0, "rebuilt": 0}


#: what an on/off environment variable may say (case and surrounding blanks aside)
ON_WORDS = ("1", "true", "yes", "on")
OFF_WORDS = ("0", "false", "no", "off")
#: ``1`` compiles the population engine's stacked step, ``0`` runs it eagerly, ``auto`` (or unset)
#: decides by the planned steps (:func:`adaptive_po.compiled.compile_wanted`)
COMPILE_ENV = "ADAPTIVE_PO_COMPILE"
#: the on/off switches of the compiled path that are on by default
SWITCHES = ("ADAPTIVE_PO_COMPILE_AHEAD", "ADAPTIVE_PO_BUNDLE_KERNELS")


def switched_on(variable: str) -> bool:
    """An on/off environment variable that is on by default (unset): on for ``1``, ``true``,
    ``yes`` or ``on``, off for ``0``, ``false``, ``no`` or ``off``; anything else (an empty value
    included) is a ``ValueError`` naming the variable and the value, never read as on."""
    text = os.environ.get(variable)
    if text is None:
        return True
    value = text.strip().lower()
    if value in ON_WORDS:
        return True
    if value in OFF_WORDS:
        return False
    raise ValueError(f"${variable} must be 1 or 0, got {text!r} (true/false, yes/no and on/off are read too)")


def compile_setting() -> str:
    """``$ADAPTIVE_PO_COMPILE`` normalized: ``"1"`` (also ``true``, ``yes``, ``on``), ``"0"``
    (``false``, ``no``, ``off``) or ``"auto"`` (unset or ``auto``); anything else (an empty value
    included) is a ``ValueError`` naming the value."""
    text = os.environ.get(COMPILE_ENV)
    if text is None:
        return "auto"
    value = text.strip().lower()
    if value in ON_WORDS:
        return "1"
    if value in OFF_WORDS:
        return "0"
    if value == "auto":
        return "auto"
    raise ValueError(f"${COMPILE_ENV} must be 1, 0 or auto, got {text!r} (true/false, yes/no and on/off are read too)")


def check_settings() -> None:
    """The environment variables of the compiled path, checked before any run starts (the bench
    and its dry run, ``train``, ``tune``, ``trace``): ``$ADAPTIVE_PO_COMPILE``, the switches of
    :data:`SWITCHES`, and ``$TORCHINDUCTOR_CACHE_DIR`` where set, which must be a folder or a
    path one can be made at (a file there, or in place of a folder above it, would fail every
    compiled run). A ``ValueError`` in one line naming the variable and its value."""
    compile_setting()
    for variable in SWITCHES:
        switched_on(variable)
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache:
        from pathlib import Path

        path = Path(cache).expanduser()
        for folder in (path, *path.parents):
            if folder.exists() or folder.is_symlink():
                if not folder.is_dir():
                    what = "is" if folder == path else f"lies under {folder}, which is"
                    raise ValueError(f"$TORCHINDUCTOR_CACHE_DIR {cache!r} {what} not a folder (inductor's compile cache): "
                                     "point it at a folder, or unset it")
                break


def bundling_enabled() -> bool:
    """``ADAPTIVE_PO_BUNDLE_KERNELS`` (default on): build a graph's kernels as one library."""
    return switched_on("ADAPTIVE_PO_BUNDLE_KERNELS")


def prepare() -> None:
    """Compile in this process, trust the CPU's flags and bundle kernels (see the module's text); once
    per process."""
    global _PREPARED
    if _PREPARED:
        return
    _PREPARED = True
    import torch._inductor.config as inductor_config

    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        inductor_config.compile_threads = 1
    trust_the_cpu_flags()
    if "TORCHINDUCTOR_SIZE_ASSERTS" not in os.environ:
        # the engine calls a graph only with the shapes and strides it was compiled and guarded for
        # (compiled.call_compiled: a known signature, or dynamo's guards): the generated wrapper's
        # checks of every input's sizes and strides at every call are redundant (about 1 us an input)
        inductor_config.size_asserts = False
    for speed_up in (dtype_rules_once, vector_strides_without_simplify):
        try:
            speed_up()
        except (ImportError, AttributeError):  # another torch's internals: compiled as inductor does
            pass
    if bundling_enabled():
        bundle_kernels()
        if "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS" not in os.environ:
            # with a population's kernels in one or two g++ runs, the header's precompiled form
            # (3 s to build, 155 MB) costs more than the parses it saves (about 1 s a run)
            inductor_config.cpp_cache_precompile_headers = False


def trust_the_cpu_flags() -> None:
    """Let the compiler take the vector instruction sets and extensions that the CPU reports without
    first building, and loading in a child Python, a probe program for each (inductor's
    ``cpp.vec_isa_ok``; ``$TORCHINDUCTOR_VEC_ISA_OK`` decides where set). The probes are about ten
    g++ runs, 8 s of one core in every process that starts with an empty compile cache. Where the
    C++ compiler cannot build for an instruction set that the CPU has, the kernels fail to compile
    and the engine runs eagerly, saying so (:func:`adaptive_po.compiled.call_compiled`)."""
    import torch._inductor.config as inductor_config
    from torch._inductor import cpu_vec_isa

    if os.environ.get("TORCHINDUCTOR_VEC_ISA_OK") is not None or inductor_config.cpp.vec_isa_ok is not None:
        return
    inductor_config.cpp.vec_isa_ok = True
    probe = cpu_vec_isa.VecISA.check_build
    if getattr(probe, "_adaptive_po", False):
        return
    # the extensions' probes run only where torch's run-time check finds the extension on the CPU
    # (AVX-512 BF16, VNNI, AMX); AMX-FP16 needs g++ 13, so it keeps its probe
    keep = (cpu_vec_isa.VecAMX._amx_fp16_code,)

    def check_build(self: Any, code: str) -> bool:
        if inductor_config.cpp.vec_isa_ok is True and code not in keep:
            return True
        return probe(self, code)

    check_build._adaptive_po = True  # type: ignore[attr-defined]
    cpu_vec_isa.VecISA.check_build = check_build  # type: ignore[method-assign]


def dtype_rules_once() -> None:
    """Inductor's dtype propagation handler is a singleton whose ``__init__`` sets its few hundred
    rules again at every construction (``DtypePropagationOpsHandler()``: 62 us, about 4,900 times
    in the compilation of a CartPole population's step alone). Set them once, and again only where
    the rules registered since have changed in number; the same rules."""
    from torch._inductor import utils as inductor_utils
    from torch._inductor.dtype_propagation import DtypePropagationOpsHandler

    original = DtypePropagationOpsHandler.__init__
    if getattr(original, "_adaptive_po", False):
        return

    def __init__(self: Any) -> None:
        rules = len(inductor_utils.op_dtype_propagation_rules)
        if self.__dict__.get("_adaptive_po_rules") != rules:
            original(self)
            self._adaptive_po_rules = rules

    __init__._adaptive_po = True  # type: ignore[attr-defined]
    DtypePropagationOpsHandler.__init__ = __init__  # type: ignore[method-assign]


def vector_strides_without_simplify() -> None:
    """Inductor's C++ code generation asks, of each index in a vectorized loop, its stride along the
    vector's variable (``sizevars.stride_at_vec_range``). It first rewrites the index for the
    vector's range, putting free symbols for the divisions and modulos that are constant over it,
    and then runs ``sympy.simplify`` on the index, with or without such terms: 0.8 s of a CartPole
    population's compilations, on indices that it nearly always leaves as they were. Here an index
    without divisions or modulos goes to the stride (``stride_at``: the simplified difference of
    the index at the variable plus one and at the variable) as it is. The stride is the same
    expression (tests/test_compile_setup.py checks every index a compiled graph asks about) and
    the generated code the same text (checked on the engine's CartPole, Pendulum, LunarLander and
    gymnax-Breakout graphs)."""
    from torch._inductor import sizevars
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    original = sizevars.simplify_index_in_vec_range
    if getattr(original, "_adaptive_po", False):
        return

    @functools.lru_cache
    def simplify_index_in_vec_range(index: Any, var: Any, vec_length: int) -> Any:
        if not index.has(FloorDiv, ModularIndexing):
            return index
        return original(index, var, vec_length)

    simplify_index_in_vec_range._adaptive_po = True  # type: ignore[attr-defined]
    simplify_index_in_vec_range._adaptive_po_original = original  # type: ignore[attr-defined]
    sizevars.simplify_index_in_vec_range = simplify_index_in_vec_range


class _Kernel:
    """Stands where inductor's compiled kernel would, until its module's wait builds the bundle."""

    def __init__(self, owner: Any, argtypes: list[str], source: str) -> None:
        self.owner, self.argtypes, self.source = owner, list(argtypes), source
        self.fn: Callable[..., Any] | None = None

    def result(self) -> Callable[..., Any]:
        if self.fn is None:
            if _DEFERRING:
                raise Deferred("a kernel was called while builds are deferred")
            _build_pending(self.owner)
        assert self.fn is not None
        return self.fn

    def __call__(self, *args: Any) -> Any:
        return self.result()(*args)


class Deferred(Exception):
    """A kernel was called under :func:`deferred_builds`: its graph is compiled, its kernels wait."""


@contextlib.contextmanager
def deferred_builds() -> Iterator[None]:
    """Compile without building: the modules inductor generates meanwhile keep their kernels
    waiting, and a call of one raises :class:`Deferred` (so a compiled function called here to be
    compiled stops at its first kernel: what runs before it, the batched products left to the BLAS,
    writes only the call's own new buffers). The next kernel called outside builds every waiting
    kernel with its own module's, in one compiler run: one parse of the header they all include
    (about 1.3 s of a g++ run here) instead of one per graph. Only where the kernels are bundled
    (:func:`bundle_kernels`); elsewhere inductor builds as it compiles and the call runs to its end."""
    global _DEFERRING
    previous, _DEFERRING = _DEFERRING, True
    try:
        yield
    finally:
        _DEFERRING = previous


def bundle_kernels() -> None:
    """Build the kernels of each inductor-generated module as one library (see the module's text):
    ``AsyncCompile.cpp_pybinding`` defers, ``AsyncCompile.wait`` builds. Only where inductor
    compiles in this process (one compile thread), as the engine sets it."""
    from torch._inductor import async_compile as ac

    cls = ac.AsyncCompile
    if getattr(cls.cpp_pybinding, "_adaptive_po", False):
        return
    original_pybinding, original_wait = cls.cpp_pybinding, cls.wait

    def cpp_pybinding(self: Any, argtypes: list[str], source_code: str) -> Any:
        if ac.get_compile_threads() > 1 or not bundling_enabled():
            return original_pybinding(self, argtypes, source_code)
        kernel = _Kernel(self, argtypes, source_code)
        self.__dict__.setdefault("_adaptive_po_pending", []).append(kernel)
        return kernel

    def wait(self: Any, scope: dict[str, Any]) -> None:
        original_wait(self, scope)
        if _DEFERRING and self.__dict__.get("_adaptive_po_pending"):
            # built with the next kernels a call needs, and put in the module's scope then
            self._adaptive_po_scope = scope
            _WAITING.append(self)
            return
        for name, value in list(scope.items()):
            if isinstance(value, _Kernel):
                scope[name] = value.result()

    cpp_pybinding._adaptive_po = True  # type: ignore[attr-defined]
    cls.cpp_pybinding, cls.wait = cpp_pybinding, wait  # type: ignore[method-assign]


def _build_pending(owner: Any) -> None:
    """Build every kernel ``owner`` (one generated module's ``AsyncCompile``) has deferred, with
    those of the modules compiled under :func:`deferred_builds` that wait: one library."""
    owners = [o for o in _WAITING if o is not owner] + [owner]
    _WAITING.clear()
    pending = [k for o in owners for k in o.__dict__.pop("_adaptive_po_pending", []) if k.fn is None]
    try:
        _build_kernels(pending)
    finally:
        for o in owners:  # the waiting modules' scopes get their kernels (not a stand-in per call)
            scope = o.__dict__.pop("_adaptive_po_scope", None) or {}
            for name, value in list(scope.items()):
                if isinstance(value, _Kernel) and value.fn is not None:
                    scope[name] = value.fn


def _build_kernels(pending: list[_Kernel]) -> None:
    from torch._inductor.codecache import CppPythonBindingsCodeCache

    if len(pending) > 1:
        try:
            library = _build_bundle(pending)
            for i, kernel in enumerate(pending):
                kernel.fn = getattr(library, f"kernel_{i}")
            BUILT["bundles"] += 1
            BUILT["kernels_in_bundles"] += len(pending)
            return
        except Exception:  # noqa: BLE001 - inductor's way below builds (or reports) each kernel
            pass
    for kernel in pending:
        kernel.fn = CppPythonBindingsCodeCache.load_pybinding(kernel.argtypes, kernel.source)
        BUILT["single"] += 1


_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"][^>\"]+[>\"]\s*$", re.M)
#: what the bindings need, after the kernels' own includes and before the kernels: Python's API, the
#: tensor data pointer getter (set by the module's init) and the scalar arguments' parser
_BINDING_PREAMBLE = [
    "#define PY_SSIZE_T_CLEAN", "#include <Python.h>", "#include <stdexcept>", "#include <cstdlib>", "#include <cerrno>",
    "#include <cstdint>",
    "static void* (*adaptive_po_data_ptr)(PyObject*);",
    "template <typename T, typename R> static inline T adaptive_po_scalar(PyObject* args, Py_ssize_t n, R (*parse)(PyObject*)) {\n"
    "  R value = parse(PyTuple_GET_ITEM(args, n));\n"
    "  if (value == static_cast<R>(-1) && PyErr_Occurred()) throw std::runtime_error(\"a scalar argument did not parse\");\n"
    "  return static_cast<T>(value);\n"
    "}",
]


def bundle_source(kernels: list[tuple[list[str], str]]) -> str:
    """One C++ source with every kernel of ``kernels`` (argument types, inductor's source with its
    ``kernel`` function), the i-th renamed ``kernel_i``, and a Python module ``kernel`` with a
    binding for each. Raises ``ValueError`` for an argument type it does not bind."""
    includes: list[str] = []
    for _, source in kernels:
        for line in _INCLUDE.findall(source):
            if line.strip() not in includes:
                includes.append(line.strip())
    parts = ["// kernels built together by adaptive_po.compile_setup", *includes, *_BINDING_PREAMBLE]
    for i, (_, source) in enumerate(kernels):
        parts += [f"#define kernel kernel_{i}", _INCLUDE.sub("", source), "#undef kernel"]
    methods = []
    for i, (argtypes, _) in enumerate(kernels):
        parsed = []
        for n, argtype in enumerate(argtypes):
            kind = argtype.replace("const ", "").strip()
            if kind.endswith("*"):
                parsed.append(f"static_cast<{kind}>(adaptive_po_data_ptr(PyTuple_GET_ITEM(args, {n})))")
            elif kind in _SCALARS:
                parsed.append(f"adaptive_po_scalar<{kind}>(args, {n}, {_SCALARS[kind]})")
            else:
                raise ValueError(f"no binding for argument type {argtype!r}")
        call = ", ".join(parsed)
        parts.append(
            f"static PyObject* kernel_{i}_py(PyObject*, PyObject* args) {{\n"
            f"  try {{\n"
            f"    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != {len(argtypes)}) throw std::runtime_error(\"kernel_{i}: {len(argtypes)} arguments required\");\n"
            f"    kernel_{i}({call});\n"
            f"    Py_RETURN_NONE;\n"
            f"  }} catch (std::exception const& e) {{ PyErr_SetString(PyExc_RuntimeError, e.what()); return nullptr; }}\n"
            f"}}")
        methods.append(f'  {{"kernel_{i}", kernel_{i}_py, METH_VARARGS, ""}},')
    parts += [
        "static PyMethodDef adaptive_po_methods[] = {", *methods, "  {nullptr, nullptr, 0, nullptr}};",
        'static struct PyModuleDef adaptive_po_module = {PyModuleDef_HEAD_INIT, "kernel", nullptr, -1, adaptive_po_methods};',
        # inductor's loader names the module "kernel" and passes the tensor data pointer getter's
        # address in this variable (torch/_inductor/codecache.py, CppPythonBindingsCodeCache)
        "PyMODINIT_FUNC PyInit_kernel(void) {",
        '  const char* addr = std::getenv("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR");',
        "  char* end = nullptr;",
        "  errno = 0;",
        "  uintptr_t value = addr ? std::strtoull(addr, &end, 10) : 0;",
        "  if (!addr || errno != 0 || end == addr || value == 0) {",
        '    PyErr_SetString(PyExc_RuntimeError, "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR is not set");',
        "    return nullptr;",
        "  }",
        "  adaptive_po_data_ptr = reinterpret_cast<void* (*)(PyObject*)>(value);",
        "  return PyModule_Create(&adaptive_po_module);",
        "}",
    ]
    return "\n".join(parts) + "\n"


def _build_bundle(kernels: list[_Kernel]) -> Any:
    """The Python module (inductor's loader, its cache and flags) holding ``kernel_0`` ... of ``kernels``."""
    from torch._inductor.codecache import CppPythonBindingsCodeCache

    source = bundle_source([(k.argtypes, k.source) for k in kernels])
    load = CppPythonBindingsCodeCache.load_async(source, "cpu")
    try:
        return load()
    except ImportError as err:
        # a damaged library in inductor's cache (truncated by a full disk or a killed build,
        # garbled): the loader builds only where the file is missing, so every later process would
        # fail on it too and build the kernels one by one. Removed, and built again, once
        damaged = getattr(err, "path", None)
        if not damaged or not damaged.endswith(".so") or not os.path.isfile(damaged):
            raise
        os.unlink(damaged)
        BUILT["rebuilt"] += 1
        return load()
