"""Our population engine beside its peer, pure-JAX PPO (rejax), on the same cells: CPU seconds per
million member-steps, cold and warm, with both sides' final evaluation returns.

Both sides train K seeds of PPO with the same settings on the same task, each on one core of its
own (pinned, one thread), at the same time, so that a machine's load weighs on both alike:

* **rejax** (``benchmarks/peer_rejax.py``, with an interpreter that has the ``peers`` extra:
  ``pip install 'adaptive-po[peers]'``, or ``--peer-python``): ``jit(vmap(train))`` over K keys,
  the whole training loop compiled by XLA, gymnax's environment included. *Cold*: the process from
  its start to the end of the first call (imports, tracing, compilation); *warm*: a second call on
  other keys (the compiled program alone).
* **adaptive-po** (``benchmarks/peer_ours.py``): one population of K members through the bench's
  population engine, the compiled step (``ADAPTIVE_PO_COMPILE=1``, an empty compile cache), one
  torch thread. *Cold*: the process from its start to the end of the first population; *warm*: a
  second population of other seeds in the same process.

Cells (:data:`CELLS`):

* **CartPole-v1**, K = 50 x 50,000 steps: the RL Zoo's settings (8 envs x 32 steps, one minibatch
  of 256, 20 epochs, gamma 0.98, GAE 0.8, clip 0.2, no entropy bonus, value 0.5, gradient norm 0.5,
  separate 64 x 64 tanh actor and critic) with the learning rate held at 1e-3 (rejax takes a
  constant; the Zoo anneals it); envpool's CartPole on our side, gymnax's on rejax's; 10 greedy
  evaluation episodes every 5,000 steps.
* **Breakout-MinAtar in gymnax's configuration**, K = 8 x 262,144 steps: gymnax-blines' settings
  (64 envs x 128 steps, 8 minibatches, 4 epochs, lr 5e-4, gamma 0.999, GAE 0.95, entropy 0.01)
  with their separate 2 x 256 ReLU MLPs; gymnax's game has no sticky actions and 1,000-step
  episodes, so ours runs ``MinAtar/Breakout-gymnax-v1`` (the same settings, the ``minatar``
  package's game), not the shipped task (sticky actions 0.1, the MinAtar CNN).

The two PPOs differ in details that do not change the cost (rejax steps actor and critic with two
optimizers and clips the value; ours is SB3's single optimizer), so the returns are shown beside
the times, not compared by a test. Both train the same number of steps (rejax's: whole evaluation
intervals of whole rollouts). What rejax cannot run at all (Box2D and ALE through envpool, the SB3
class, per-member staleness dials) has no cell here.

Instruction sets (``--isa``, comma-separated, default ``native,avx2``): each cell runs once per
instruction set, both sides at the same one, and the table has a row per engine and ISA, with the
ratios ours / rejax per ISA and avx2 / native per side:

* ``native``: the machine's own (any cap in the caller's environment removed from the children's).
* ``avx2``: both sides capped at AVX2 through their children's environment (:data:`CAPS`,
  :data:`XLA_CAPS`), so that an AVX-512 machine also gives the figures of an AVX2 one. Ours:
  ``ATEN_CPU_CAPABILITY=avx2`` (ATen's kernels; inductor picks its vector ISA for the generated C++
  by the same variable, and ``adaptive_po.compile_setup``'s trusted probe leaves that pick alone),
  ``TORCHINDUCTOR_CPP_MARCH=x86-64-v3`` (inductor builds with ``-march=native`` otherwise, and g++
  then puts AVX-512 instructions in the AVX2 kernels all the same), ``MKL_ENABLE_INSTRUCTIONS=AVX2``,
  ``ONEDNN_MAX_CPU_ISA=AVX2``. rejax's: ``--xla_cpu_max_isa=AVX2`` (XLA's generated code) and
  ``--xla_cpu_experimental_ynn_fusion_type=`` (no YNNPACK fusions: jax 0.10's XLA hands its dots to
  YNNPACK, which picks its kernels by the CPU at run time, past the cap; without them XLA compiles
  the dots or runs them in jaxlib's Eigen, built for AVX), so rejax's avx2 row also runs its dots
  another way.

Where our warm time goes: after its timed runs, our child trains one more, shorter population
under torch's profiler and splits its CPU seconds into ATen's matrix products (MKL), inductor's
generated kernels, other ATen ops and the rest (Python, the environments, dispatch); the table
gives each part per million member-steps per ISA, and avx2 / native per part, which says which
part an AVX2 cap makes dearer (rejax's side is one XLA program, not split).

Each child reads back, after its timed runs, what its machine code shows (``benchmarks/peer_isa.py``):
ours, ATen's level, inductor's picked ISA and ``-march``, the AVX-512 instructions (EVEX-encoded, or
on zmm or mask registers) in the kernel libraries it built, oneDNN's and MKL's ISA as their verbose
output names it; rejax's, its program compiled again with XLA's dump on, the AVX-512 instructions
in the objects XLA wrote, XLA's record of ``xla_cpu_max_isa`` and the library fusions of the
program. That is the table's last column; a capped run whose evidence shows the cap did not hold is
refused (exit 1, naming the side and the evidence), its row not printed. The reading needs
``objdump`` (binutils, which the C++ compiler uses too).

Usage::

    python benchmarks/peers.py                                        # both cells, native and avx2 (~25 min per ISA on 2 cores)
    python benchmarks/peers.py --cells cartpole --members 8 --steps 10000   # a smoke run (~6 min)
    python benchmarks/peers.py --isa native                           # the machine's own instruction set only
    python benchmarks/peers.py --peer-python /path/to/venv/bin/python # rejax installed elsewhere

Without rejax (no ``peers`` extra and no ``--peer-python``) it says so and exits 0: ``make perf``
runs it either way. On a machine shared with other jobs the figures are noisy: read the ratios of
one invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@dataclass(frozen=True)
class Cell:
    """One task both sides train: rejax's settings and gymnax id, and our environment file's changes."""

    name: str
    gymnax_id: str
    env: str
    rejax: dict[str, Any]
    ours: dict[str, Any]
    members: int
    steps: int
    eval_every: int
    eval_episodes: int = 10


#: the RL Zoo's CartPole-v1 PPO, learning rate held constant, in rejax's names and in ours
CARTPOLE = Cell(
    "CartPole-v1", "CartPole-v1", "CartPole-v1",
    rejax={"num_envs": 8, "num_steps": 32, "num_epochs": 20, "num_minibatches": 1, "learning_rate": 1e-3, "gamma": 0.98,
           "gae_lambda": 0.8, "clip_eps": 0.2, "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5,
           "agent_kwargs": {"activation": "tanh", "hidden_layer_sizes": [64, 64]}},
    ours={"hyperparams__learning_rate": 1e-3, "hyperparams__clip_range": 0.2},
    members=50, steps=50_000, eval_every=5_000,
)
#: gymnax-blines' MinAtar PPO (64 envs x 128 steps, 8 minibatches, 4 epochs, lr 5e-4, gamma 0.999)
#: with their 2 x 256 ReLU MLPs, on Breakout in gymnax's configuration (no sticky actions, 1,000-step
#: episodes: ``MinAtar/Breakout-gymnax-v1`` on our side, not the shipped task)
BREAKOUT = Cell(
    "Breakout-MinAtar (gymnax's configuration)", "Breakout-MinAtar", "Breakout-MinAtar",
    rejax={"num_envs": 64, "num_steps": 128, "num_epochs": 4, "num_minibatches": 8, "learning_rate": 5e-4, "gamma": 0.999,
           "gae_lambda": 0.95, "clip_eps": 0.2, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5,
           "agent_kwargs": {"activation": "relu", "hidden_layer_sizes": [256, 256]}},
    ours={"ids": {"minatar": "MinAtar/Breakout-gymnax-v1"}, "hyperparams__policy": "MlpPolicy",
          "hyperparams__policy_kwargs": {"net_arch": {"pi": [256, 256], "vf": [256, 256]}, "activation_fn": "ReLU"}},
    members=8, steps=262_144, eval_every=131_072,
)
CELLS = {"cartpole": CARTPOLE, "breakout": BREAKOUT}
#: the instruction sets a cell runs at (``--isa``): the machine's own, or both sides capped at AVX2
ISAS = ("native", "avx2")
#: the environment that caps both sides' children: ATen's kernels; inductor's generated C++ (its
#: vector ISA follows ``ATEN_CPU_CAPABILITY``, and ``-march=x86-64-v3`` in place of ``-march=native``
#: keeps g++ from using AVX-512 in them all the same); MKL; oneDNN (torch's, and XLA's where it uses it)
CAPS: dict[str, dict[str, str]] = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "TORCHINDUCTOR_CPP_MARCH": "x86-64-v3", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
#: XLA's flags for the cap: its generated code at AVX2 at most, and no YNNPACK fusions (jax 0.10's
#: XLA hands the dots to YNNPACK, which picks its kernels by the CPU at run time, past the cap; without
#: them XLA compiles the dots or runs them in jaxlib's Eigen, built for AVX)
XLA_CAPS: dict[str, tuple[str, ...]] = {"avx2": ("--xla_cpu_max_isa=AVX2", "--xla_cpu_experimental_ynn_fusion_type=")}


def parse_isas(text: str) -> list[str]:
    """``--isa``'s value: a comma-separated list of :data:`ISAS`, each once; a ``SystemExit`` naming
    an unknown value."""
    isas = list(dict.fromkeys(i.strip() for i in text.split(",") if i.strip()))
    unknown = [i for i in isas if i not in ISAS]
    if unknown or not isas:
        raise SystemExit(f"--isa: unknown value {', '.join(map(repr, unknown)) if unknown else repr(text)}; choose from {', '.join(ISAS)}")
    return isas


def isa_env(env: dict[str, str], isa: str) -> dict[str, str]:
    """``env`` with the caps of ``isa`` (:data:`CAPS`, :data:`XLA_CAPS`); for ``native``, without
    any of them (a cap in the caller's environment removed)."""
    variables = {name for caps in CAPS.values() for name in caps}
    flags = {flag.split("=", 1)[0] for caps in XLA_CAPS.values() for flag in caps}
    out = {name: value for name, value in env.items() if name not in variables}
    xla = [flag for flag in env.get("XLA_FLAGS", "").split() if flag.split("=", 1)[0] not in flags] + list(XLA_CAPS.get(isa, ()))
    out.pop("XLA_FLAGS", None)
    if xla:
        out["XLA_FLAGS"] = " ".join(xla)
    out.update(CAPS.get(isa, {}))
    return out


def _machine_code(code: dict[str, Any], what: str, none: str = "") -> list[str]:
    if "error" in code:
        return [code["error"]]
    if not code.get("files"):
        return [f"no {what} to read{none}"]
    if code.get("avx512"):
        return [f"{code['avx512']:,} AVX-512 instructions in its {what} (e.g. `{code['example']}`)"]
    return []


def cap_failures(isa: str, engine: str, evidence: dict[str, Any] | None) -> list[str]:
    """Why the record of ``engine`` (``adaptive-po`` or ``rejax``) shows that the cap of ``isa`` did
    not hold (empty where it held, and for ``native``, which caps nothing)."""
    if isa == "native":
        return []
    if not evidence:
        return ["its record has no instruction-set evidence"]
    bad: list[str] = []
    if engine == "rejax":
        if evidence.get("xla_max_isa") != "AVX2":
            bad.append(f"XLA's xla_cpu_max_isa is {evidence.get('xla_max_isa')!r}")
        bad += _machine_code(evidence.get("objects", {}), "XLA-compiled objects")
        bad += [f"{n} {name} fusions (their kernels pick the ISA by the CPU, past xla_cpu_max_isa)"
                for name, n in evidence.get("library_fusions", {}).items() if n]
        return bad
    if str(evidence.get("aten", "")).upper().startswith("AVX512"):
        bad.append(f"ATen runs its {evidence['aten']} kernels")
    if evidence.get("inductor_bits", 0) > 256:
        bad.append(f"inductor picked {evidence.get('inductor_isa')} ({evidence.get('inductor_bits')}-bit) for its C++")
    bad += _machine_code(evidence.get("kernels", {}), "inductor-built kernel libraries", " (did the step run eagerly?)")
    for library in ("onednn", "mkl"):
        said = str(evidence.get(library, ""))
        if re.search(r"AVX-?512|AMX|Vector Extensions 512", said, re.I):
            bad.append(f"{library} runs {said}")
    return bad


def evidence_text(engine: str, evidence: dict[str, Any] | None) -> str:
    """One table cell: what instruction sets ``engine``'s record says it ran."""
    if not evidence:
        return "no evidence"

    def code(c: dict[str, Any], what: str) -> str:
        if "error" in c:
            return c["error"]
        return f"{c.get('avx512', 0):,} of {c.get('instructions', 0):,} instructions AVX-512 ({what}: {c.get('files', 0)})"

    if engine == "rejax":
        fusions = ", ".join(f"{name} {n}" for name, n in evidence.get("library_fusions", {}).items())
        return f"XLA max ISA {evidence.get('xla_max_isa')}; {code(evidence.get('objects', {}), 'objects')}; library fusions: {fusions}"
    return (f"ATen {evidence.get('aten')}; inductor {evidence.get('inductor_isa')}, {evidence.get('inductor_bits')}-bit, "
            f"-march={evidence.get('inductor_march')}; {code(evidence.get('kernels', {}), 'kernel libraries')}; "
            f"oneDNN {evidence.get('onednn')}; MKL {evidence.get('mkl')}")
ALGO = "ppo"
#: what perf.md says after the tables: the cells of this project that the peer cannot run at all
ONLY_OURS = [
    "What only this engine runs. rejax 0.1.3 trains on gymnax's tasks (and brax, navix, jumanji, kinetix, craftax), and on "
    "gymnasium only for five classic-control tasks, one environment at a time through a host callback. So of this "
    "project's 20 environment files, rejax runs none of these at all:",
    "- LunarLander-v3 and LunarLanderContinuous-v3 (Box2D);",
    "- the nine Atari games (ALE through envpool);",
    "- the five MinAtar games as they ship here: the `minatar` package's dynamics with sticky actions 0.1 and the "
    "MinAtar CNN (gymnax's versions have no sticky actions and cap episodes at 1,000 steps; the Breakout cell above "
    "runs ours in gymnax's configuration for that reason);",
    "- any cell with a data dial: a member's policy lag, replay, action noise, sampler temperature or precision (rejax's "
    "PPO trains on its own fresh rollouts only), which is what every staleness study here varies;",
    "- the SB3 class (`BatchPolicyOptimization`), its callbacks, loggers and the RL Zoo;",
    "- the 16 objectives besides PPO, the ESS objective among them.",
]
#: the markers of this benchmark's section of docs/results/perf.md (benchmarks/roofline.py, which
#: rewrites the rest of that file, keeps the section as it is)
BEGIN, END = "<!-- peers: written by benchmarks/peers.py -->", "<!-- /peers -->"


def cpu_model() -> str:
    """The CPU's model name as Linux gives it (``/proc/cpuinfo``), "" where it does not: the peer
    table's figures depend on it (MKL, our matrix products' library, takes another path on AMD)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def write_section(path: Path, lines: list[str]) -> None:
    """Put ``lines`` between :data:`BEGIN` and :data:`END` in ``path`` (appended where absent), atomically."""
    text = path.read_text() if path.exists() else ""
    block = "\n".join(lines).strip("\n")
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = f"{head}{BEGIN}\n{block}\n{END}{rest.split(END, 1)[1]}"
    else:
        text = f"{text.rstrip()}\n\n{BEGIN}\n{block}\n{END}\n"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def peer_python(given: str | None) -> str | None:
    """The interpreter with rejax: ``given``, else this one if it imports rejax, else None."""
    if given:
        return given
    probe = subprocess.run([sys.executable, "-c", "import rejax, gymnax, jax"], capture_output=True)
    return sys.executable if probe.returncode == 0 else None


def our_envs_dir(cell: Cell, tmp: Path) -> Path:
    """The cell's environment file with its changes and the peer's evaluation schedule."""
    from adaptive_po.bench.config import write_env_config_copy

    out = tmp / "envs"
    out.mkdir(exist_ok=True)
    write_env_config_copy(cell.env, out, evaluation={"episodes": cell.eval_episodes, "every": cell.eval_every}, **cell.ours)
    return out


def start(cmd: list[str], core: int, env: dict[str, str], log: Path) -> subprocess.Popen:
    """``cmd`` pinned to ``core``, its output (stdout and stderr) into ``log``."""
    with log.open("w") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=lambda: os.sched_setaffinity(0, {core}))


def finish(proc: subprocess.Popen, started: float, log: Path) -> dict[str, float]:
    """Wait for ``proc``: its CPU seconds (user + system, all its threads) and wall seconds."""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, proc.args))} failed (exit {proc.returncode}):\n{log.read_text()[-3000:]}")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall}


def run_cell(cell: Cell, python: str, members: int, steps: int, isa: str = "native") -> list[tuple[str, dict[str, Any]]]:
    """Both sides of one cell at the same time, one pinned core each, at the instruction set ``isa``
    (:func:`isa_env`); their JSON records. A capped run whose records show the cap did not hold (:func:`cap_failures`)
    is a ``SystemExit`` naming the side and the evidence."""
    cores = sorted(os.sched_getaffinity(0))
    peer_core, our_core = cores[0], cores[-1]
    cell = replace(cell, eval_every=min(cell.eval_every, steps))  # a short smoke run still evaluates at its end
    iteration = cell.rejax["num_envs"] * cell.rejax["num_steps"]
    per_eval = -(-cell.eval_every // iteration) * iteration
    trained = per_eval * -(-steps // cell.eval_every)  # what rejax trains; ours trains the same
    with tempfile.TemporaryDirectory(prefix="peers-") as name:
        tmp = Path(name)
        (tmp / "tmp").mkdir()
        # cold: nothing compiled before (inductor's cache, and anything its compiler keeps under
        # the temporary directory, empty), as on a machine's first run
        child = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ADAPTIVE_PO_COMPILE": "1",
                 "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor"), "TMPDIR": str(tmp / "tmp")}
        peer_cmd = [python, str(ROOT / "benchmarks/peer_rejax.py"), "--env", cell.gymnax_id, "--members", str(members),
                    "--steps", str(steps), "--eval-every", str(cell.eval_every), "--eval-episodes", str(cell.eval_episodes),
                    "--config", json.dumps(cell.rejax)]
        our_cmd = [sys.executable, str(ROOT / "benchmarks/peer_ours.py"), "--env", cell.env, "--algo", ALGO, "--members",
                   str(members), "--steps", str(trained), "--envs-dir", str(our_envs_dir(cell, tmp)), "--out", str(tmp / "runs")]
        print(f"peers: {cell.name}, ISA {isa}, K = {members} x {trained:,} steps, rejax on core {peer_core}, ours on core {our_core}, "
              "at the same time", flush=True)
        t0 = time.perf_counter()
        procs = [(start(peer_cmd, peer_core, isa_env({**os.environ, "JAX_PLATFORMS": "cpu"}, isa), tmp / "rejax.log"), tmp / "rejax.log"),
                 (start(our_cmd, our_core, isa_env(child, isa), tmp / "ours.log"), tmp / "ours.log")]
        results = []
        for proc, log in procs:
            finish(proc, t0, log)
            results.append(json.loads(log.read_text().strip().splitlines()[-1]))
    theirs, ours = results
    for r in results:
        r["member_steps"] = members * trained
        r["isa_run"] = isa
    for engine, record in (("rejax", theirs), ("adaptive-po", ours)):
        failures = cap_failures(isa, engine, record.get("isa"))
        if failures:
            raise SystemExit(f"peers: {cell.name}: the {isa} cap did not hold on the {engine} side: {'; '.join(failures)} "
                             f"(its evidence: {evidence_text(engine, record.get('isa'))}); no row printed")
    return [(f"rejax, jax {theirs['jax']}", theirs), ("adaptive-po, torch " + ours["torch"], ours)]


def table(cell: Cell, rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """One cell's table: a row per engine and instruction set (``rows``: rejax's record then ours, for
    each ISA run, as :func:`run_cell` returns them; a record without ``isa_run`` ran natively), the
    instruction sets each side's machine code shows; then the ratios, ours / rejax per ISA, and
    avx2 / native per side where both ran."""
    lines = ["| cell | ISA | engine | K x steps | cold CPU s | cold wall s | warm CPU s | warm wall s | CPU s per M member-steps, cold | "
             "CPU s per M member-steps, warm | final evaluation return, mean (sd) | instruction sets, read from the machine code |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    runs: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for name, r in rows:
        isa = r.get("isa_run", "native")
        runs.setdefault(isa, []).append((name, r))
        cold, warm, returns, million = r["cold"], r["warm"], r["final_returns"], r["member_steps"] / 1e6
        sd = statistics.stdev(returns) if len(returns) > 1 else 0.0
        engine = "rejax" if name.startswith("rejax") else "adaptive-po"
        lines.append(f"| {cell.name} | {isa} | {name} | {r['members']} x {r['member_steps'] // r['members']:,} | {cold['cpu_s']:.1f} | "
                     f"{cold['wall_s']:.1f} | {warm['cpu_s']:.1f} | {warm['wall_s']:.1f} | {cold['cpu_s'] / million:.1f} | "
                     f"{warm['cpu_s'] / million:.1f} | {statistics.mean(returns):.1f} ({sd:.1f}) | {evidence_text(engine, r.get('isa'))} |")
    pairs = {isa: (pair[0][1], pair[1][1]) for isa, pair in runs.items() if len(pair) == 2}
    lines.append("")
    for isa, (theirs, ours) in pairs.items():
        lines.append(f"{cell.name}, {isa}: ours / rejax, CPU seconds: cold {ours['cold']['cpu_s'] / theirs['cold']['cpu_s']:.2f}x, "
                     f"warm {ours['warm']['cpu_s'] / theirs['warm']['cpu_s']:.2f}x")
    if "native" in pairs and "avx2" in pairs:
        (n_theirs, n_ours), (a_theirs, a_ours) = pairs["native"], pairs["avx2"]
        lines.append(f"{cell.name}, avx2 / native, CPU seconds: ours cold {a_ours['cold']['cpu_s'] / n_ours['cold']['cpu_s']:.2f}x, "
                     f"warm {a_ours['warm']['cpu_s'] / n_ours['warm']['cpu_s']:.2f}x; rejax cold "
                     f"{a_theirs['cold']['cpu_s'] / n_theirs['cold']['cpu_s']:.2f}x, warm {a_theirs['warm']['cpu_s'] / n_theirs['warm']['cpu_s']:.2f}x "
                     "(rejax's avx2 run without YNNPACK's fusions: its dots compiled by XLA or run by Eigen)")
    for isa, (_, ours) in pairs.items():
        parts = ours["cold"].get("parts")
        if parts:
            calls = parts["first_calls_wall_s"]
            named = ", ".join(f"{name} {calls[name]:.1f}" for name in ("act", "forward", "step") if name in calls)
            lines.append(f"\nWhat our cold run paid that the warm one did not ({isa}): {parts['before_population']['cpu_s']:.1f} CPU s of imports "
                         f"before the first population; {sum(calls.values()):.1f} wall s in the compiled callables' first calls ({named}: "
                         f"dynamo's tracing and inductor's compilation; the forward pass and the step are compiled ahead and their "
                         f"kernels built with the act's, in its first call), of which the g++ processes' {parts['children_cpu_s']:.1f} CPU s.")
    lines += breakdown_lines(cell, pairs)
    return lines


#: the parts of our profiled population (``peer_ours.breakdown``), in the words of perf.md
PARTS = {"matmul": "matrix products (ATen's bmm/mm, MKL)", "generated": "inductor's generated kernels",
         "aten": "other ATen ops", "outside": "outside them (Python, the environments, dispatch, the profiler)"}


def breakdown_lines(cell: Cell, pairs: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    """Where our warm time goes, per ISA: the profiled population's CPU seconds per million
    member-steps by part, and where both ISAs ran, avx2 / native per part (which part an AVX2 cap
    makes dearer)."""
    per_m: dict[str, dict[str, float]] = {}
    for isa, (_, ours) in pairs.items():
        b = ours.get("breakdown")
        if b:
            million = ours["members"] * b["steps"] / 1e6
            per_m[isa] = {part: b[part] / million for part in PARTS}
            per_m[isa]["total"] = b["cpu_s"] / million
    lines = []
    for isa, parts in per_m.items():
        named = "; ".join(f"{PARTS[part]} {parts[part]:.1f} ({100 * parts[part] / parts['total']:.0f}%)" for part in PARTS)
        lines.append(f"\nWhere our warm time goes ({isa}; one more population of {pairs[isa][1]['members']} members under torch's profiler, "
                     f"CPU s per M member-steps, {parts['total']:.1f} in all): {named}.")
    if "native" in per_m and "avx2" in per_m:
        n, a = per_m["native"], per_m["avx2"]
        lines.append(f"{cell.name}, avx2 / native by part (ours): " + ", ".join(
            f"{part} {a[part] / n[part]:.2f}x" if n[part] > 0 else f"{part} n/a" for part in (*PARTS, "total")))
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", default="cartpole,breakout", help=f"comma-separated, of {sorted(CELLS)}")
    p.add_argument("--members", type=int, default=None, help="K (default: the cell's, CartPole 50, Breakout 8)")
    p.add_argument("--steps", type=int, default=None, help="steps per member (default: the cell's, CartPole 50,000, Breakout 262,144)")
    p.add_argument("--peer-python", default=os.environ.get("ADAPTIVE_PO_PEER_PYTHON"), help="an interpreter with rejax, gymnax and jax")
    p.add_argument("--isa", default=",".join(ISAS),
                   help=f"comma-separated, of {', '.join(ISAS)}: each cell once per instruction set (avx2: both sides capped, checked in their machine code)")
    p.add_argument("--out", type=Path, default=None, help="also write the tables into this file's peers section (make perf: docs/results/perf.md)")
    args = p.parse_args()
    isas = parse_isas(args.isa)
    cells = [c.strip() for c in args.cells.split(",") if c.strip()]
    unknown = [c for c in cells if c not in CELLS]
    if unknown or not cells:
        raise SystemExit(f"--cells: unknown {unknown or args.cells!r}; choose from {sorted(CELLS)}")
    for flag, value in (("--members", args.members), ("--steps", args.steps)):
        if value is not None and value < 1:
            raise SystemExit(f"{flag} must be >= 1, got {value}")
    python = peer_python(args.peer_python)
    if python is None:
        print("peers: rejax is not installed here (pip install 'adaptive-po[peers]', or --peer-python): skipped")
        return 0
    lines = []
    for key in cells:
        cell = CELLS[key]
        rows = [row for isa in isas for row in run_cell(cell, python, args.members or cell.members, args.steps or cell.steps, isa)]
        lines += table(cell, rows) + [""]
    print("\n" + "\n".join(lines))
    if args.out is not None:
        import platform

        import torch

        write_section(args.out, [
            "## Beside its peer: pure-JAX PPO (rejax) on the same core", "",
            f"Written by `make perf` (`benchmarks/peers.py`) on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores "
            f"({cpu_model() or platform.processor() or platform.machine()}), torch {torch.__version__}: each side one pinned core and one thread, "
            "both at the same time; cold from process start (compilation included; ours with empty compile caches, as on a "
            "machine's first run: later processes load the compiled kernels from the cache), warm a second "
            "call (rejax) or population (ours) in the same process; CPU seconds are the process's and its waited-for children's (our compiler's g++ runs); "
            "returns are the final greedy evaluations (10 episodes) per seed. Each cell runs once per instruction set: "
            f"{', '.join(isas)} (native: the machine's own; avx2: both sides capped at AVX2 through their children's environment, "
            "ATen, inductor's C++, MKL and oneDNN on ours, XLA's generated code on rejax's, whose YNNPACK fusions are turned off "
            "there since YNNPACK picks its kernels by the CPU past the cap); the last column is what each side's machine code "
            "shows, read after the timed runs (a capped run whose code shows AVX-512 is refused, not printed).", "", *lines, *ONLY_OURS,
        ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
