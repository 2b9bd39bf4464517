"""``benchmarks/peers.py --isa``: a cell run at the machine's own instruction set and with both sides
capped at AVX2. The avx2 children's environment really runs our side at AVX2 (ATen's kernels,
inductor's picked vector ISA, and no AVX-512 instruction in the kernels it builds, read back from
their machine code); a capped record whose evidence shows AVX-512 is refused, naming the side; a
bad ``--isa`` value is an error naming it before anything runs. No rejax needed."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import peers  # noqa: E402

#: a compiled function, as the engine compiles (compile_setup's trusted probe, bundled kernels), then
#: what peer_ours.py reports of the process's instruction sets
SCRIPT = textwrap.dedent("""
    import json, sys
    import torch
    sys.path.insert(0, sys.argv[1])
    torch.set_num_threads(1)
    from adaptive_po import compile_setup
    compile_setup.prepare()

    def f(x, y):
        return torch.where(x > y, x * y + 3.0, torch.exp(x) - y).sum(0), torch.tanh(x @ y.T).mean(1)

    x = torch.randn(64, 512)
    torch.compile(f, dynamic=False)(x, x.flip(0))
    import peer_isa
    print(json.dumps(peer_isa.torch_evidence()))
""")


def test_a_bad_isa_value_is_named_before_anything_runs():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/peers.py"), "--cells", "cartpole", "--isa", "native,avx512"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--isa" in out.stderr and "'avx512'" in out.stderr and "native, avx2" in out.stderr
    assert "peers: CartPole" not in out.stdout  # nothing ran
    assert peers.parse_isas("avx2, native,avx2") == ["avx2", "native"]


def test_the_avx2_child_environment_runs_our_side_at_avx2(tmp_path):
    import torch

    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip(f"this CPU runs ATen at {torch.backends.cpu.get_cpu_capability()}: no AVX2 to cap at")
    if not (shutil.which("g++") or shutil.which(os.environ.get("CXX", "c++"))) or not shutil.which("objdump"):
        pytest.skip("no C++ compiler or objdump here")
    # a cap in the caller's environment is what native removes and avx2 sets
    env = peers.isa_env({**os.environ, "ATEN_CPU_CAPABILITY": "default", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
                         "TMPDIR": str(tmp_path)}, "avx2")
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["TORCHINDUCTOR_CPP_MARCH"] == "x86-64-v3"
    assert "--xla_cpu_max_isa=AVX2" in env["XLA_FLAGS"].split()
    assert "ATEN_CPU_CAPABILITY" not in peers.isa_env(env, "native") and "XLA_FLAGS" not in peers.isa_env(env, "native")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT / "benchmarks")], env=env, capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    evidence = json.loads(out.stdout.strip().splitlines()[-1])
    assert evidence["aten"] == "AVX2"
    assert (evidence["inductor_isa"], evidence["inductor_bits"], evidence["inductor_march"]) == ("avx2", 256, "x86-64-v3")
    kernels = evidence["kernels"]
    assert kernels["files"] >= 1 and kernels["instructions"] > 0 and kernels["avx512"] == 0, kernels
    assert "512" not in evidence["onednn"]
    assert peers.cap_failures("avx2", "adaptive-po", evidence) == []
    assert "ATen AVX2" in peers.evidence_text("adaptive-po", evidence)


def test_a_capped_record_that_shows_avx512_is_refused_naming_the_side():
    ours = {"aten": "AVX512", "inductor_isa": "avx512", "inductor_bits": 512, "inductor_march": "native",
            "kernels": {"files": 1, "instructions": 100, "avx512": 7, "example": "vaddps %zmm1,%zmm2,%zmm3"},
            "onednn": "Intel AVX-512", "mkl": "not stated"}
    theirs = {"xla_max_isa": "unset", "objects": {"files": 3, "instructions": 90, "avx512": 0, "example": None},
              "library_fusions": {"ynnpack": 22, "xnnpack": 0, "onednn": 0}}
    assert peers.cap_failures("native", "adaptive-po", ours) == [] and peers.cap_failures("native", "rejax", theirs) == []
    bad = " ".join(peers.cap_failures("avx2", "adaptive-po", ours))
    assert "ATen runs its AVX512" in bad and "512-bit" in bad and "7 AVX-512 instructions" in bad and "zmm" in bad and "onednn" in bad
    bad = " ".join(peers.cap_failures("avx2", "rejax", theirs))
    assert "xla_cpu_max_isa is 'unset'" in bad and "22 ynnpack fusions" in bad
    assert peers.cap_failures("avx2", "rejax", None) and peers.cap_failures("avx2", "adaptive-po", {**ours, "kernels": {"files": 0}})


def test_the_disassembly_counts_evex_and_avx512_registers(tmp_path):
    """peer_isa's reading of machine code: an EVEX instruction on ymm registers (AVX-512VL) counts,
    a VEX one does not."""
    if not shutil.which("objdump") or not shutil.which("as"):
        pytest.skip("no binutils here")
    import peer_isa

    source = tmp_path / "k.s"
    source.write_text(".text\nvaddps %ymm1, %ymm2, %ymm3\nvaddps %ymm17, %ymm2, %ymm3\nvpternlogd $0x96, %ymm1, %ymm2, %ymm3\n"
                      "kmovw %k1, %eax\nvaddps %zmm1, %zmm2, %zmm3\n")
    subprocess.run(["as", "-o", str(tmp_path / "k.o"), str(source)], check=True)
    code = peer_isa.avx512_instructions([tmp_path / "k.o"])
    assert (code["files"], code["instructions"], code["avx512"]) == (1, 5, 4), code


def test_our_warm_time_is_split_by_where_the_profiler_saw_it():
    """``peer_ours.breakdown``: a profiled call's matrix products, compiled graph and other ATen ops
    land in their own parts, and the rest of the CPU seconds is "outside"; peers.py prints each
    part per million member-steps and, where both instruction sets ran, avx2 / native per part."""
    import time

    import torch
    from torch.profiler import ProfilerActivity, profile

    import peer_ours

    @torch.compile(dynamic=False)
    def kernel(x):
        return torch.tanh(x * 2.0 + 1.0).sum(1)

    a, b = torch.randn(50, 256, 64), torch.randn(50, 64, 64)
    kernel(a)  # compiled before the profile
    t0, w0 = time.process_time(), time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            y = torch.bmm(a, b)
            kernel(y)
            torch.sort(y.flatten())
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    parts = peer_ours.breakdown(prof.key_averages(), cpu, wall)
    assert parts["matmul"] > 0 and parts["generated"] > 0 and parts["aten"] > 0 and parts["outside"] >= 0
    assert abs(sum(parts.values()) - cpu) < 1e-9
    assert peer_ours.breakdown(prof.key_averages(), 2 * cpu, wall)["matmul"] == pytest.approx(2 * parts["matmul"])

    def record(total, matmul):
        return {"members": 10, "breakdown": {"steps": 100_000, "cpu_s": total, "matmul": matmul, "generated": 1.0, "aten": 0.5,
                                             "outside": total - matmul - 1.5}}

    lines = peers.breakdown_lines(peers.CELLS["cartpole"], {"native": ({}, record(10.0, 4.0)), "avx2": ({}, record(12.0, 6.0))})
    assert "matrix products (ATen's bmm/mm, MKL) 4.0 (40%)" in lines[0] and "10.0 in all" in lines[0]
    assert lines[-1].endswith("matmul 1.50x, generated 1.00x, aten 1.00x, outside 1.00x, total 1.20x")
