"""The docs say what the code and the tree say.

* **Durations and sizes come from the dry run.** Every "about <n> min|h" stated for a `make` target
  in README.md, docs/results/README.md, docs/usage.md and the Makefile's help, and the run counts
  the target table (docs/usage.md), the README's set-up commands and the help give, equal the bench's own dry-run
  estimate, computed here through the functions the dry run uses (the grid of
  ``adaptive_po.bench.grid.expand_grid``, costed by ``adaptive_po.bench.estimate.estimate_cost``
  and ``atari_hours``, rounded by ``format_duration``) for the project's 2-core machine. Which
  suites a target runs is read from the Makefile itself (``make -n``).
* **The Layout section (docs/usage.md) is the tree.** Every path it names exists, and it names every module and
  folder at the top of ``adaptive_po/`` and every subpackage below it.
* **No work-item numbers where a user reads**, and links and named paths that resolve.
* **The Makefile**: ``clean-runs`` removes every folder a bench target writes (never
  ``runs/README.md``); every generated results block goes to docs/results/README.md; no recipe line
  holds ``$(MAKE)`` beside another command (``make -n`` runs such a line, and would start a bench).

Fast: no training; the grids are expanded, not run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from adaptive_po.bench.suites import SUITES, get_suite
from adaptive_po.bench.estimate import ATARI_MACHINE_CORES, atari_hours, estimate_cost, format_duration
from adaptive_po.bench.grid import Grid, expand_grid
from adaptive_po.bench.tuning import TuningPlan, plan_specs

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RESULTS_README = ROOT / "docs" / "results" / "README.md"
USAGE = ROOT / "docs" / "usage.md"
PAGES = (README, RESULTS_README, USAGE)
MAKEFILE = ROOT / "Makefile"
#: the machine the docs' durations are stated for
CORES = 2

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


# -- the dry run's estimate -------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    runs: int
    steps: int
    duration: str | None  # on CORES cores, the CPU suites
    gpu_duration: str | None  # on one GPU machine, the Atari suites (environment-bound)


def _bench_specs(argv: list[str]) -> list:
    """The runs of one `adaptive-po bench ARGS` command line, the way `bench` builds its grid: the
    suite's defaults, its explicit conditions unless a dial flag is given, the flags over them."""
    values: dict[str, str] = {}
    flags = iter(argv)
    for flag in flags:
        if flag in ("--suite", "--suite-name", "--envs", "--algos", "--lags", "--device", "--workers"):
            values[flag] = next(flags)
        elif flag != "--no-report":
            raise AssertionError(f"a Makefile bench command has a flag this test does not model: {flag} in {argv}")
    suite = get_suite(values["--suite"])
    lags = [int(x) for x in values["--lags"].split(",")] if "--lags" in values else None
    return expand_grid(
        Grid(
            suite=suite.name,
            envs=values["--envs"].split(",") if "--envs" in values else list(suite.envs),
            algos=values["--algos"].split(",") if "--algos" in values else list(suite.algos),
            seeds=list(range(suite.seeds)),
            conditions=suite.data_conditions(policy_lag=lags),
            variants={a: list(v) for a, v in (suite.variants or {}).items()} or None,
            suite_name=values.get("--suite-name"),
            tensorboard=False,
        )
    )


def estimate(specs: list) -> Estimate:
    """The dry run's cost estimate of ``specs`` (``estimate_cost``, the function ``describe_grid``
    prints, population engine) on the project's 2 cores; Atari environment-bound on a GPU machine
    with ATARI_MACHINE_CORES cores."""
    cost = estimate_cost(specs, "population")
    return Estimate(
        runs=len(specs),
        steps=sum(s.total_timesteps for s in specs),
        duration=format_duration(cost.hours(CORES)) if sum(cost.seconds.values()) else None,
        gpu_duration=format_duration(atari_hours(cost.atari_steps, ATARI_MACHINE_CORES)) if cost.atari_steps else None,
    )


def _make_n(target: str) -> str:
    """``make -n TARGET`` with a Python that does nothing, should a recipe line run anyway."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # not the flags of a `make test` this may run under (its variables, its jobserver)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", target, "VPY=true", "PYTHON=true", "WORKERS="],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _adaptive_po_commands(target: str, command: str) -> list[list[str]]:
    """The arguments of each ``-m adaptive_po <command>`` in ``make -n TARGET``."""
    found = []
    for part in re.split(r"\|\||&&|;|\n|\\\n", _make_n(target)):
        words = shlex.split(part.replace("\\", " "), posix=True) if "-m adaptive_po " + command in part else []
        if words:
            at = words.index("adaptive_po")
            found.append(words[at + 2 :])
    return found


#: the targets that run the bench, and so state a dry-run estimate
BENCH_TARGETS = ("bench", "bench-full", "bench-staleness", "bench-paper", "bench-sensitivity", "bench-minatar", "bench-fresh-data", "bench-atari", "bench-r2vpo")


@lru_cache(maxsize=None)
def target_estimate(target: str) -> Estimate:
    commands = _adaptive_po_commands(target, "bench")
    # bench-atari's fallback without a GPU runs the smoke grid, whose duration the docs do not state
    commands = [c for c in commands if c[c.index("--suite") + 1] != "atari-smoke"]
    assert commands, f"`make -n {target}` runs no bench"
    return estimate([spec for argv in commands for spec in _bench_specs(argv)])


def tuning_search_runs() -> int:
    """The search runs of `adaptive-po tune`'s default plan (what its dry run counts)."""
    suite = get_suite("tuning")
    plan = TuningPlan(envs=tuple(suite.envs), algos=tuple(suite.algos))
    return plan.trials * sum(len(plan_specs(plan, e, a, [""], plan.search_seeds, plan.search_suite)) for e in plan.envs for a in plan.algos)


# -- where durations and sizes are stated -----------------------------------------------------------
def _units(text: str) -> list[str]:
    """A page cut where a statement ends: table rows and code lines one by one, paragraphs and list items."""
    units, current, fenced = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            units.append("\n".join(current))
            current = []
        elif fenced or line.lstrip().startswith("|"):
            units.append(line)
        elif not line.strip() or line.lstrip().startswith(("- ", "#")):
            units.append("\n".join(current))
            current = [line]
        else:
            current.append(line)
    units.append("\n".join(current))
    return [u for u in units if u.strip()]


def _help_lines() -> list[str]:
    return [m.group(1) for m in re.finditer(r'^\t@echo "(.*)"$', MAKEFILE.read_text(), re.M)]


TARGET = re.compile(r"\bmake ([a-z][a-z0-9-]*)")
#: a stated duration, in the dry run's own format ("9 min", "37.5 h"); a measurement reads "took ..."
DURATION = re.compile(r"(?<!took )\babout (<1|\d+(?:\.\d+)?) (min|h)\b")
#: any other way to state how long something takes, which the checks below refuse beside a target
LOOSE_DURATION = re.compile(
    r"(?<!took )(?:\babout|\baround|\broughly|~|\bunder|\bnearly|\balmost)\s*(?:an?|one|two|three|half an?|\d[\d.,]*)\s*(?:hours?|minutes?|h|min)\b", re.I
)
RUNS = re.compile(r"\b(\d[\d,]*) runs\b")


def _statements() -> list[tuple[str, str]]:
    """(where, text) of every unit that names a make target."""
    found = [(f"{page.relative_to(ROOT)}", unit) for page in PAGES for unit in _units(page.read_text())]
    found += [("Makefile help", line) for line in _help_lines()]
    return [(where, unit) for where, unit in found if TARGET.search(unit)]


def _target_before(unit: str, at: int) -> str | None:
    names = [m.group(1) for m in TARGET.finditer(unit[:at])]
    return names[-1] if names else None


def test_the_estimate_is_the_dry_runs_for_the_quick_suite():
    # the dry run of `adaptive-po bench --suite quick` on 2 cores: 40 runs, 6,000,000 steps, about 9 min
    quick = target_estimate("bench")
    assert (quick.runs, quick.steps) == (40, 6_000_000)
    assert re.fullmatch(r"<1 min|\d+ min|\d+\.\d h", quick.duration)


def test_every_duration_stated_for_a_make_target_is_the_dry_runs_estimate():
    wrong = []
    for where, unit in _statements():
        for loose in LOOSE_DURATION.finditer(unit):
            exact = DURATION.match(unit, loose.start())
            target = _target_before(unit, loose.start())
            if target is None:
                continue  # a duration before any target in this statement: not a target's
            stated = f"{exact.group(1)} {exact.group(2)}" if exact and exact.end() == loose.end() else None
            if target not in BENCH_TARGETS:
                wrong.append(f"{where}: `make {target}` has no dry run, yet the docs say {loose.group(0)!r}: {unit.strip()[:120]}")
                continue
            est = target_estimate(target)
            expected = est.gpu_duration if "GPU" in unit[loose.start() : loose.end() + 40] and est.gpu_duration else est.duration
            if stated != expected:
                wrong.append(f"{where}: `make {target}` says {loose.group(0)!r}, the dry run estimates 'about {expected}': {unit.strip()[:120]}")
    assert not wrong, "\n".join(wrong)


def test_every_run_count_stated_for_a_make_target_is_the_dry_runs():
    wrong = []
    for where, unit in _statements():
        for count in RUNS.finditer(unit):
            target = _target_before(unit, count.start())
            if target in BENCH_TARGETS and int(count.group(1).replace(",", "")) != target_estimate(target).runs:
                wrong.append(f"{where}: `make {target}` says {count.group(0)!r}, the dry run counts {target_estimate(target).runs:,}")
        for count in re.finditer(r"\b(\d+) search runs\b", unit):
            if _target_before(unit, count.start()) == "bench-tuned" and int(count.group(1)) != tuning_search_runs():
                wrong.append(f"{where}: `make bench-tuned` says {count.group(0)!r}, the tuner's plan has {tuning_search_runs()}")
    assert not wrong, "\n".join(wrong)


def _target_rows() -> dict[str, str]:
    """The make-target table (docs/usage.md; the README links to it): target -> row."""
    section = USAGE.read_text().split("## Make targets", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `make ([a-z0-9-]+)", line)
        if match:
            rows[match.group(1)] = line
    return rows


@pytest.mark.parametrize("target", BENCH_TARGETS)
def test_the_readme_table_and_the_help_state_each_bench_targets_estimate(target):
    est = target_estimate(target)
    duration = est.gpu_duration or est.duration
    row = _target_rows()[target]
    help_line = next(line for line in _help_lines() if re.match(rf"make {target}\s", line))
    for where, text in (("docs/usage.md's target table", row), ("Makefile help", help_line)):
        assert f"about {duration}" in text, f"{where}: `make {target}` should say 'about {duration}': {text}"
        assert f"{est.runs:,} runs" in text, f"{where}: `make {target}` should say '{est.runs:,} runs': {text}"


def test_the_full_suite_is_stated_in_algorithms_runs_and_steps():
    est = target_estimate("bench-full")
    algos = len(get_suite("classic").algos)
    for text in (_target_rows()["bench-full"], next(line for line in _help_lines() if line.startswith("make bench-full "))):
        assert f"all {algos} algorithms" in text, text
    assert f"{est.steps / 1e9:.1f} billion steps" in _target_rows()["bench-full"]


def test_the_set_up_commands_state_the_quick_suites_estimate():
    est = target_estimate("bench")
    block = README.read_text().split("## Two commands", 1)[1].split("```", 2)[1]
    assert f"({est.runs} runs, about {est.duration} on {CORES} CPU cores)" in block, block


def test_the_tuned_target_states_the_tuners_search_runs():
    assert f"({tuning_search_runs()} search runs)" in _target_rows()["bench-tuned"]


# -- the Layout section ----------------------------------------------------------------------------
def _layout_paths() -> list[str]:
    """The paths the Layout block names (docs/usage.md; the README links to it): a name column indented
    two spaces a level (a folder ends in "/"), descriptions from column 28; a line indented to the
    descriptions continues one."""
    section = USAGE.read_text().split("## Layout", 1)[1]
    block = section.split("```", 2)[1].strip("\n")
    paths, stack = [], []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if indent >= 20:
            continue
        names = [n.strip() for n in re.split(r"\s{2,}", line.strip())[0].split(",")]
        stack = stack[: indent // 2]
        paths += ["/".join([*stack, n]) for n in names]
        if len(names) == 1 and names[0].endswith("/"):
            stack.append(names[0].rstrip("/"))
    return paths


def test_every_path_the_layout_names_exists():
    paths = _layout_paths()
    assert "adaptive_po/" in paths and len(paths) > 20, paths
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"docs/usage.md's Layout names paths that do not exist: {missing}"


def test_the_layout_names_every_module_and_subpackage_of_the_package():
    named = {p.rstrip("/") for p in _layout_paths()}
    package = ROOT / "adaptive_po"
    wanted = {
        f"adaptive_po/{child.name}"
        for child in package.iterdir()
        if (child.suffix == ".py" or child.is_dir()) and child.name != "__pycache__"
    }
    wanted |= {str(init.parent.relative_to(ROOT)) for init in package.rglob("__init__.py")}
    wanted |= {
        top.name for top in ROOT.iterdir()
        if top.is_dir() and not top.name.startswith(".") and not top.name.endswith(".egg-info") and top.name != "__pycache__"
    }
    missing = sorted(wanted - named)
    assert not missing, f"docs/usage.md's Layout leaves out: {missing}"


# -- what a user reads -------------------------------------------------------------------------------
WORK_ITEM = re.compile(r"\bissues?[\s#-]*\d|\(issues?\b|\bthe issue's\b|\bitem \d+\b", re.I)


def _user_facing_files() -> list[Path]:
    files = [README, MAKEFILE, ROOT / "runs" / "README.md", ROOT / "pyproject.toml"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "examples").glob("*.py"))
    package = ROOT / "adaptive_po"
    files += sorted(package.rglob("*.py")) + sorted(package.rglob("*.yaml"))
    return [f for f in files if f.is_file() and "__pycache__" not in f.parts]


def test_no_work_item_numbers_where_a_user_reads():
    hits = []
    for path in _user_facing_files():
        text = path.read_text(errors="replace")
        for hit in WORK_ITEM.finditer(text):  # a reference may wrap onto the next line
            number = text.count("\n", 0, hit.start()) + 1
            hits.append(f"{path.relative_to(ROOT)}:{number}: {text.splitlines()[number - 1].strip()[:100]}")
    assert not hits, "say what a reference means, not which work item it was:\n" + "\n".join(hits)


def _slug(title: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES + (ROOT / "runs" / "README.md", ROOT / "docs" / "results" / "minatar" / "README.md"), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_named_paths_resolve(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    broken = []
    # inline links and reference definitions (the quotes' links to their reports)
    for target in re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"^\[[^\]\n]+\]:[ \t]+(\S+)", text, re.M):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in {_slug(h) for h in re.findall(r"^#+ (.*)$", file.read_text(), re.M)}:
            broken.append(target)
    # repository paths named in code spans (placeholders such as <suite> and globs left out)
    for name in re.findall(r"`((?:adaptive_po|benchmarks|examples|tests|docs|runs)/[^`\s]*)`", text):
        if name.startswith("runs/") and name != "runs/README.md":
            continue  # what a bench writes, not part of the checkout
        if not re.search(r"[<*{]", name) and not (ROOT / name).exists() and not (page.parent / name).exists():
            broken.append(name)
    assert not broken, f"{page.relative_to(ROOT)}: links or paths that do not resolve: {broken}"


def test_the_results_index_names_every_report_under_docs_results():
    index = RESULTS_README.read_text().split("## Index", 1)[1].split("\n## ", 1)[0]
    named = {m.rstrip("/") for m in re.findall(r"^\| \[?`([^`]+)`", index, re.M)}
    present = {child.name for child in RESULTS_README.parent.iterdir()}
    assert present <= named, f"docs/results/README.md's index leaves out: {sorted(present - named)}"


# -- the generated blocks and the Makefile ---------------------------------------------------------------
BLOCK = re.compile(r"<!-- results(?::([\w-]+))?:(begin|end)\b")


def test_the_generated_results_blocks_live_in_the_results_page():
    assert not BLOCK.search(README.read_text()), "README.md holds a generated results block; they live in docs/results/README.md"
    marks = [(m.group(1) or "", m.group(2)) for m in BLOCK.finditer(RESULTS_README.read_text())]
    names = [name for name, kind in marks if kind == "begin"]
    assert sorted(names) == sorted(["", "tuned", "minatar", "staleness-verdicts", "staleness", "paper-verdicts", "fresh-data"]), names
    for name in names:  # each block once, begin before end
        assert marks.count((name, "begin")) == marks.count((name, "end")) == 1
        assert marks.index((name, "begin")) + 1 == marks.index((name, "end")), name


@needs_make
def test_every_make_target_that_writes_a_block_writes_it_into_the_results_page():
    writers: dict[str, set[str]] = {}
    for target in re.findall(r"^([a-z][a-z0-9-]*):", MAKEFILE.read_text(), re.M):
        for argv in _adaptive_po_commands(target, "readme"):
            assert "--readme" in argv, f"`make {target}` leaves `adaptive-po readme` its default page: {argv}"
        for path in re.findall(r"--readme (\S+)", _make_n(target)):
            writers.setdefault(path, set()).add(target)
    assert set(writers) == {"docs/results/README.md"}, writers
    assert {"readme", "readme-staleness", "tuned-from-table", "minatar-from-table", "fresh-data-from-table", "classic-from-table"} <= writers["docs/results/README.md"]


def test_no_recipe_line_holds_make_beside_another_command():
    # `make -n` runs a recipe line that holds $(MAKE): beside a bench, it would start the bench
    text = MAKEFILE.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.startswith("\t") and "$(MAKE)" in line]
    assert all(re.fullmatch(r"\$\(MAKE\) [a-z0-9-]+", line) for line in lines), lines


@needs_make
def test_clean_runs_removes_every_folder_the_bench_targets_write_and_never_the_contract():
    removed = shlex.split(_make_n("clean-runs").strip().removeprefix("rm -rf "))
    assert all(re.fullmatch(r"runs/[\w.-]+", path) for path in removed), removed
    assert "runs/README.md" not in removed
    folders = {path.removeprefix("runs/") for path in removed}
    written = set(SUITES) | {TuningPlan.search_suite, TuningPlan.score_suite}
    recipes = "\n".join(line for line in MAKEFILE.read_text().splitlines() if not line.startswith("#"))
    written |= set(re.findall(r"--suite-name ([\w.-]+)", recipes))
    assert written <= folders, f"make clean-runs leaves {sorted(written - folders)}"


def test_no_committed_result_names_a_path_of_the_machine_that_made_it():
    """A results folder reads the same on every machine and from every worktree: no file under
    docs/results holds an absolute path (a study's record once named the worktree it ran from)."""
    found = []
    for path in sorted((ROOT / "docs" / "results").rglob("*")):
        if path.is_file() and path.suffix in {".json", ".csv", ".md", ".toml", ".txt"}:
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if re.search(r"""(^|[\s"'(,=])/(work|home|tmp|root|Users)/""", line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not found, "\n".join(found[:20])
