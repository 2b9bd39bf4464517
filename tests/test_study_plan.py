"""A study is a plan file (adaptive_po/studies/plan.py): the committed plan loads, a malformed one is
one line naming the file and the key, a planted change to a margin, a Holm family or the decision
rule changes the verdict or is refused, a table run the plan does not have is refused, and the
MinAtar study's published files rebuild byte for byte from its plan and its table."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from adaptive_po.analysis import study_report as report
from adaptive_po.analysis.hypothesis import Difference
from adaptive_po.studies.cuts import apply_cuts
from adaptive_po.studies.plan import load_plan

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs/results/minatar-learning"
PLAN_TEXT = (RESULTS / "plan.toml").read_text()


def _plan_from(tmp_path: Path, text: str):
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return load_plan(path)


def test_the_committed_plan_holds_the_registered_design():
    plan = load_plan(RESULTS / "plan.toml")
    p, d = plan.pilot, plan.design
    assert (p.algo, p.lags, p.seeds, p.budget) == ("ppo", (0, 8), (200, 201, 202), 2_000_000)
    assert [(r.budget, r.at) for r in p.reads] == [(1_000_000, 1_000_000), (2_000_000, None)]
    assert (p.rule.learns_at_least, p.rule.hurt_at_least, p.rule.hurt_at_least_se, p.rule.min_tasks) == (0.5, 0.05, 1.0, 2)
    assert d.arms == ("esspo", "ppo", "decoupled-ppo") and d.lags == (0, 2, 8, 16) and d.seeds == tuple(range(10))
    assert plan.limit_core_hours == 12.0 and plan.kept_lags() == (0, 2, 8) and plan.min_seeds == 5
    assert [c.what for c in plan.cuts] == ["lags", "tasks", "seeds"]
    assert [(e.id, e.kind, e.margin, e.family) for e in plan.endpoints] == [
        ("1", "slope", 0.1, "primary"), ("2", "non-inferiority", 0.1, "primary"), ("3", "slope", 0.1, "primary")]
    assert plan.endpoints[0].test_margin == pytest.approx(0.1 / 3.169925, rel=1e-6)


@pytest.mark.parametrize("old, new, named", [
    ("budget = 2_000_000\n", "", r"pilot\.budget: missing"),
    ("margin = 0.1  # over lags 0-8: 0.1 / log2(9) per unit of log2(1 + lag)", 'margin = "wide"', r"endpoints\[0\]\.margin: expected a positive number, got 'wide'"),
    ('configurations = "shared"\n', 'configurations = "shared"\ncolour = "red"\n', r"design\.colour: not a key of the plan schema"),
    ('supported = [["1=win", "2=non-inferior"]]', 'supported = [["4=win", "2=non-inferior"]]', r"decisions\[0\]\.supported: names endpoint '4'"),
    ('supported = [["1=win", "2=non-inferior"]]', 'supported = [["1=winn"]]', r"decisions\[0\]\.supported: expected"),
    ("lags = [0, 2, 8]\nmargin = 0.1  #", "lags = [0, 2, 16]\nmargin = 0.1  #", r"endpoints\[0\]\.lags: a slope needs two or more of the lags no cut removes"),
    ('versus = "decoupled-ppo"', 'versus = "vtrace"', r"endpoints\[2\]\.versus: 'vtrace' is not an arm of the design"),
    ("seeds = [200, 201, 202]", "seeds = [0, 1, 2]", r"pilot\.seeds: the pilot's seeds must not be scoring seeds"),
    ("limit_core_hours = 12.0", "limit_core_hours = -1", r"cost\.limit_core_hours: expected a positive number"),
    ("schema = 1", "schema = 1\nschema = 2", r"not TOML"),
])
def test_a_malformed_plan_is_one_line_naming_the_file_and_the_key(tmp_path, capsys, old, new, named):
    assert old in PLAN_TEXT
    with pytest.raises(ValueError, match=named) as err:
        _plan_from(tmp_path, PLAN_TEXT.replace(old, new, 1))
    assert str(err.value).startswith(str(tmp_path / "plan.toml")) and "\n" not in str(err.value)
    # the report (and the runner) say it in one line, exit status 2
    from adaptive_po.analysis.reports import minatar_learning

    assert minatar_learning.main(["--results", str(tmp_path), "--plan", str(tmp_path / "plan.toml")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and str(tmp_path / "plan.toml") in lines[0]


def _primary(plan, d1: Difference, d2: Difference, d3: Difference) -> tuple[list[dict], list[str]]:
    study = report.Plan(plan, True, (), apply_cuts(plan, ()), {})
    rows = report.primary(study, {"endpoints": {"1": d1, "2": d2, "3": d3}})
    return rows, report.answers(study, rows)


def test_a_planted_change_to_a_margin_changes_the_verdict(tmp_path):
    win, stale, flat = Difference(0.3, 0.01, 50), Difference(-0.15, 0.02, 50), Difference(0.0, 0.05, 50)
    rows, answers = _primary(load_plan(RESULTS / "plan.toml"), win, stale, flat)
    assert rows[1]["verdict"] == "inferior" and answers[0] == "contradicted"
    wider = _plan_from(tmp_path, PLAN_TEXT.replace("margin = 0.1\nfamily", "margin = 0.3\nfamily", 1))
    assert wider.endpoint("2").margin == 0.3
    rows, answers = _primary(wider, win, stale, flat)
    assert rows[1]["verdict"] == "non-inferior" and answers[0] == "supported"


def test_a_planted_change_to_a_holm_family_or_the_decision_rule_changes_the_verdict(tmp_path):
    # endpoint 1's p is 0.027: Holm over the three doubles it past 0.05 (endpoint 2's p is smaller)
    d1, d2, d3 = Difference(0.05, 0.022, 50), Difference(0.0, 0.02, 50), Difference(0.0, 0.05, 50)
    plan = load_plan(RESULTS / "plan.toml")
    rows, answers = _primary(plan, d1, d2, d3)
    assert rows[0]["verdict"] == "inconclusive" and rows[1]["verdict"] == "non-inferior" and answers[0] == "not decided at this size"
    alone = replace(plan, endpoints=(replace(plan.endpoints[0], family=""), *plan.endpoints[1:]))
    rows, answers = _primary(alone, d1, d2, d3)
    assert rows[0]["p_adj"] == rows[0]["p"] < 0.05 and rows[0]["verdict"] == "win" and answers[0] == "supported"
    # the rule itself: "supported" asking endpoint 3 to win as well
    stricter = _plan_from(tmp_path, PLAN_TEXT.replace('supported = [["1=win", "2=non-inferior"]]', 'supported = [["1=win", "2=non-inferior", "3=win"]]'))
    rows, answers = _primary(replace(stricter, endpoints=alone.endpoints), d1, d2, d3)
    assert answers[0] == "not decided at this size"


def test_a_run_the_plan_does_not_have_is_refused(tmp_path, capsys):
    from adaptive_po.analysis.reports import minatar_learning

    for name in ("per_run.csv", "per_run.csv.sha256"):  # the table and its recorded digest (the report requires it)
        shutil.copy(RESULTS / name, tmp_path / name)
    assert minatar_learning.main(["--results", str(tmp_path)]) == 0
    # the same table against a plan whose pilot had other seeds
    (tmp_path / "plan.toml").write_text(PLAN_TEXT.replace("seeds = [200, 201, 202]", "seeds = [200, 201, 203]"))
    assert minatar_learning.main(["--results", str(tmp_path), "--plan", str(tmp_path / "plan.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "per_run.csv: the run ('minatar-learning-pilot'" in err and "is not in the plan" in err and "(its seed)" in err


def test_the_published_files_rebuild_byte_for_byte_from_the_plan_and_the_table(tmp_path):
    from adaptive_po.analysis.reports import minatar_learning as report_command
    from adaptive_po.bench import minatar_learning as run_command

    for name in ("per_run.csv", "per_run.csv.sha256", "preregistration.md"):
        shutil.copy(RESULTS / name, tmp_path / name)
    assert run_command.main(["select", "--results", str(tmp_path)]) == 0
    assert report_command.main(["--results", str(tmp_path)]) == 0
    for name in ("pilot.md", "selection.json", "verdicts.md"):
        assert (tmp_path / name).read_bytes() == (RESULTS / name).read_bytes(), name
