"""What instruction set each side of ``benchmarks/peers.py`` really ran, read from the machine code it
built: both children import this (plain Python, so that the peer's interpreter, without adaptive-po,
imports it too) and put what it finds in their JSON record; ``peers.py`` refuses a capped row whose
record shows the cap did not hold.

* :func:`avx512_instructions` disassembles compiled code (``objdump -d``) and counts the AVX-512
  instructions in it: the EVEX-encoded ones (the ``0x62`` prefix, whatever registers they use:
  AVX-512VL on ``ymm`` registers included) and those on ``zmm`` or mask (``k``) registers.
* :func:`torch_evidence` (our side): ATen's kernel level, the vector ISA inductor picked for its
  generated C++ and the ``-march`` it builds with, the AVX-512 instructions in the kernel libraries
  inductor built into its cache, and the ISA oneDNN and MKL name in their verbose output.
* :func:`xla_evidence` (the peer): the timed program compiled again with XLA's dump on, the AVX-512
  instructions in the objects XLA wrote, XLA's own record of ``xla_cpu_max_isa``, and the library
  fusions of the optimized program (YNNPACK, XNNPACK, oneDNN), whose kernels pick their ISA at run
  time and so are not capped by ``xla_cpu_max_isa``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

#: an instruction line of ``objdump -d -w``: address, raw bytes, the instruction
_LINE = re.compile(r"^\s*[0-9a-f]+:\t((?:[0-9a-f]{2} )+)\s*\t(.*)$")
#: prefixes that may stand before an EVEX prefix (address size, segment overrides)
_BEFORE_EVEX = {"67", "26", "2e", "36", "3e", "64", "65"}
#: AVX-512's own registers: zmm, and the mask registers (kmov and friends are VEX-encoded)
_AVX512_REGISTERS = re.compile(r"%zmm\d|%k[0-7]\b")
#: the library fusions XLA hands to libraries that pick their kernels by the CPU at run time
LIBRARY_FUSIONS = {"ynnpack": "__ynn_fusion", "xnnpack": "__xnn_fusion", "onednn": "__onednn"}


def avx512_instructions(files: Iterable[str | Path]) -> dict[str, Any]:
    """``{"files", "instructions", "avx512", "example"}`` of the machine code in ``files`` (shared
    libraries or objects): how many instructions, how many of them AVX-512 (EVEX-encoded, or on
    zmm or mask registers), one such line; ``{"error": ...}`` where ``objdump`` is missing or fails."""
    paths = [str(f) for f in files]
    if not paths:
        return {"files": 0, "instructions": 0, "avx512": 0, "example": None}
    objdump = shutil.which("objdump")
    if objdump is None:
        return {"files": len(paths), "error": "objdump not found (binutils): the machine code was not read"}
    total = avx512 = 0
    example = None
    for start in range(0, len(paths), 200):  # a command line of a few hundred paths at a time
        out = subprocess.run([objdump, "-d", "-w", *paths[start:start + 200]], capture_output=True, text=True)
        if out.returncode != 0:
            return {"files": len(paths), "error": f"objdump failed: {out.stderr.strip()[-300:]}"}
        for line in out.stdout.splitlines():
            match = _LINE.match(line)
            if not match:
                continue
            total += 1
            raw, text = match.group(1).split(), match.group(2)
            while raw and raw[0] in _BEFORE_EVEX:
                raw = raw[1:]
            if (raw and raw[0] == "62") or _AVX512_REGISTERS.search(text):
                avx512 += 1
                example = example or " ".join(text.split())
    return {"files": len(paths), "instructions": total, "avx512": avx512, "example": example}


def captured_stdout(fn: Callable[[], Any]) -> str:
    """What ``fn`` writes to file descriptor 1 (C libraries' verbose output included)."""
    sys.stdout.flush()
    with tempfile.TemporaryFile() as out:
        saved = os.dup(1)
        os.dup2(out.fileno(), 1)
        try:
            fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        return out.read().decode(errors="replace")


def torch_evidence(cache_dir: str | None = None) -> dict[str, Any]:
    """Our side's instruction sets, in this process (after its compiled runs): ATen's capability,
    inductor's picked vector ISA (name, bits) and ``-march``, the AVX-512 instructions in the kernel
    libraries under inductor's cache (``cache_dir``, else ``$TORCHINDUCTOR_CACHE_DIR``, else
    inductor's default: give the run a fresh one, as ``peers.py`` does), and oneDNN's and MKL's ISA
    as their verbose output names it (MKL names it only on Intel CPUs)."""
    import torch
    from torch._inductor import config as inductor_config
    from torch._inductor import cpu_vec_isa

    isa = cpu_vec_isa.pick_vec_isa()
    if cache_dir is None:
        from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

        cache_dir = inductor_cache_dir()
    libraries = sorted(str(p) for p in Path(cache_dir).rglob("*.so")) if Path(cache_dir).is_dir() else []
    march = inductor_config.cpp.march
    evidence: dict[str, Any] = {
        "aten": torch.backends.cpu.get_cpu_capability(),
        "inductor_isa": str(isa) if isa else "none",
        "inductor_bits": isa.bit_width() if isa else 0,
        "inductor_march": "native" if march is None else march,
        "kernels": avx512_instructions(libraries),
    }

    def onednn() -> None:
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            x = torch.randn(8, 16).to_mkldnn()
            torch._C._nn.mkldnn_linear(x, torch.randn(4, 16).to_mkldnn())

    def mkl() -> None:
        with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
            a = torch.randn(32, 32)
            a @ a

    try:
        found = re.search(r"isa:([^,\n]*)", captured_stdout(onednn)) if torch.backends.mkldnn.is_available() else None
        evidence["onednn"] = found.group(1).strip() if found else "not stated"
    except Exception as err:  # noqa: BLE001 - a torch without the op: said, not fatal
        evidence["onednn"] = f"not probed ({type(err).__name__})"
    try:
        text = captured_stdout(mkl) if torch.backends.mkl.is_available() else ""
        found = re.search(r"(Intel\(R\) (?:Advanced Vector Extensions|AVX|Streaming SIMD)[^,\n]*?)\s*(?:enabled processors|,|$)", text)
        evidence["mkl"] = found.group(1).strip() if found else "not stated"
    except Exception as err:  # noqa: BLE001
        evidence["mkl"] = f"not probed ({type(err).__name__})"
    return evidence


def xla_evidence(jitted: Any, *args: Any) -> dict[str, Any]:
    """The peer's instruction sets: ``jitted`` (a ``jax.jit`` function already called on ``args``)
    compiled again with XLA's dump on (the same flags, ``$XLA_FLAGS`` included; after the timed
    calls, so not in their time), the AVX-512 instructions in the objects XLA wrote, XLA's record of
    ``xla_cpu_max_isa`` in the dump (``"unset"`` where absent) and the library fusions of the
    optimized program, whose kernels the cap does not reach."""
    with tempfile.TemporaryDirectory(prefix="xla-dump-") as dump:
        compiled = jitted.lower(*args).compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_module_re": ".*"})
        hlo = compiled.as_text()
        objects = sorted(str(p) for p in Path(dump).rglob("*.o"))
        max_isa = "unset"
        for options in Path(dump).glob("*.debug_options"):
            found = re.search(r'xla_cpu_max_isa:\s*"([^"]*)"', options.read_text())
            if found:
                max_isa = found.group(1)
        code = avx512_instructions(objects)
    return {"xla_max_isa": max_isa, "objects": code, "library_fusions": {name: hlo.count(marker) for name, marker in LIBRARY_FUSIONS.items()}}
