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


def _refused(tmp_path: Path, text: str, old: str, new: str, named: str) -> None:
    """``text`` with ``old`` made ``new`` is refused in one line naming the file and matching ``named``."""
    assert old in text
    with pytest.raises(ValueError, match=named) as err:
        _plan_from(tmp_path, text.replace(old, new, 1))
    assert str(err.value).startswith(str(tmp_path / "plan.toml")) and "\n" not in str(err.value)


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
    _refused(tmp_path, PLAN_TEXT, old, new, named)
    # the report (and the runner) say it in one line, exit status 2
    from adaptive_po.analysis.reports import minatar_learning

    assert minatar_learning.main(["--results", str(tmp_path), "--plan", str(tmp_path / "plan.toml")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and str(tmp_path / "plan.toml") in lines[0]


SCHEDULE_TEXT = (REPO / "docs/results/frozen-schedule/plan.toml").read_text()


@pytest.mark.parametrize("old, new, named", [
    ('title = "the objective\'s effect within one schedule (arm 1 - arm 2)"\n', "", r"secondary\[2\]\.arms: a difference table: one arm, one comparator"),
    ('arms = ["esspo"]\ncomparators = ["ppo"]', 'arms = ["esspo", "ppo"]\ncomparators = ["ppo"]', r"secondary\[2\]\.arms: a difference table"),
    ("slope = [0, 1, 2, 4, 8]", "slope = [0, 64]", r"secondary\[1\]\.lags: the design's lags; a slope's two or more that no cut removes"),
    ('kind = "search-luck"\npart = "luck"', 'kind = "search-luck"\npart = "dppo-tax"\ntitle = "luck"', r"secondary\[3\]\.kind: lags, slope and title"),
    ('part = "luck"\narms = ["esspo"]\nlags = [0]', 'arms = ["esspo"]\nlags = [0]', r"secondary\[3\]\.part: .* a search-luck line its search part"),
    ('beside = "A2"', 'beside = "A9"', r"secondary\[3\]\.beside: names endpoint 'A9'"),
    ('labels = { esspo = "esspo (schedule search)"', 'labels = { vtrace = "esspo (schedule search)"', r"report\.labels: distinct labels of the design's arms only"),
    ('claims = { A = "against PPO', 'claims = { D = "against PPO', r"report\.claims: the plan's decisions only"),
    ("[report]\n", "[report]\ncolour = 1\n", r"report\.colour: not a key of the plan schema"),
])
def test_the_secondary_tables_and_the_reports_words_are_checked(tmp_path, old, new, named):
    """The searched study's secondary kinds and ``[report]`` words, each malformed: one line naming the file and the key."""
    _refused(tmp_path, SCHEDULE_TEXT, old, new, named)


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
    # the mirror test at the plan's margin too: 0.25 worse is inferior at 0.1, neither at 0.3
    worse = Difference(-0.25, 0.05, 50)
    assert _primary(load_plan(RESULTS / "plan.toml"), win, worse, flat)[0][1]["verdict"] == "inferior"
    rows, answers = _primary(wider, win, worse, flat)
    assert rows[1]["verdict"] == "not shown" and answers[0] == "not decided at this size"


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


# -- the frozen study and its extension in the same schema (their reports read the endpoints and rules) --

def test_the_frozen_studys_draft_plan_holds_what_its_code_registers():
    from adaptive_po import contract
    from adaptive_po.bench import frozen

    plan = load_plan(REPO / "docs/results/frozen/plan.toml")
    p, reg = plan.pilot, contract.FROZEN_REGISTERED
    assert tuple(p.candidates.items()) == frozen.CANDIDATES and p.folders == frozen.PILOT_FOLDERS
    assert (p.algo, p.lags, p.seeds) == (frozen.PILOT_ALGO, frozen.PILOT_LAGS, frozen.PILOT_SEEDS)
    assert (p.rule.learns_at_least, p.rule.hurt_at_least, p.rule.saturation_fraction, dict(p.rule.max_return)) == (
        frozen.LEARNS_AT_LEAST, frozen.HURT_AT_LEAST, frozen.SATURATION_FRACTION, frozen.MAX_RETURN)
    assert (plan.design.arms, plan.design.lags, plan.design.seeds, plan.design.folder) == (reg["arms"], reg["lags"], reg["score_seeds"], contract.FROZEN_SCORE_FOLDER)
    assert (plan.tax["arms"], plan.tax["lag"]) == (reg["tax_arms"], reg["tax_lag"])
    s = plan.search
    assert (s["seeds"], s["trials"], s["round_size"], s["sampler_seed"], s["folder"]) == (
        reg["search_seeds"], reg["trials"], reg["round_size"], reg["sampler_seed"], contract.FROZEN_SEARCH_FOLDER)
    assert s["own"] == frozen.OWN_SPACE and s["space"] == "zoo-factors"
    assert [(c.what, c.values) for c in plan.cuts if c.values] == list(contract.FROZEN_CUT_ORDER.items())
    assert plan.limit_core_hours == frozen.LIMIT_CORE_HOURS and plan.endpoint("1").lags == frozen.SLOPE_LAGS


def test_the_schedule_extensions_plan_holds_its_preregistered_design():
    plan = load_plan(REPO / "docs/results/frozen-schedule/plan.toml")
    parts = {x["name"]: x for x in plan.parts}
    assert plan.pilot is None and [e for e, _ in plan.design.tasks] == ["Acrobot-v1", "Pendulum-v1", "LunarLanderContinuous-v3", "LunarLander-v3"]
    assert plan.design.lags == (0, 1, 2, 4, 8, 16, 64) and tuple(parts) == ("main", "dppo-tax", "luck")
    assert parts["main"]["arms"] == ("esspo", "ppo") and parts["main"]["tax_arms"] == ("esspo",) and parts["main"]["own"] == {"ppo": {"clip_range": (0.1, 0.5, 0.2)}}
    assert parts["dppo-tax"]["arms"] == ("decoupled-ppo",) and parts["dppo-tax"]["fresh_arms"] == ()
    assert parts["dppo-tax"]["own"] == {"decoupled-ppo": {"clip_range": (0.1, 0.5, 0.2), "is_truncation": (0.5, 2.0, 1.0)}}
    assert (parts["luck"]["tasks"], parts["luck"]["arms"], parts["luck"]["sampler_seed"]) == (("Pendulum-v1",), ("esspo",), 1)
    assert [x["folder"] for x in plan.parts] == ["schedule-search", "schedule-dppo-search", "schedule-luck-search"] and plan.design.folder == "schedule-score"
    assert (plan.search["seeds"], plan.design.seeds, plan.search["trials"], plan.search["round_size"]) == ((100, 101, 102), tuple(range(10)), 16, 4)
    assert plan.limit_core_hours == 16.0 and [c.values for c in plan.cuts if c.values] == [(64,), ("luck", "dppo-tax")]
    assert plan.cut("tasks").keep == 2 and len(plan.families()["primary"]) == 7


VERDICT_GRID = [(v1, v2, v3) for v1 in ("", "win", "loss", "equivalent", "inconclusive") for v2 in ("", "non-inferior", "inferior", "not shown")
                for v3 in ("", "win", "loss", "equivalent", "inconclusive")]


def _frozen_rule(v1: str, v2: str, v3: str, tax_equivalent: bool) -> str:
    """The frozen study's registered rule as its report wrote it before the plan file."""
    if "" in (v1, v2, v3):
        return "not decided (the study is not complete)"
    if v1 == "win" and v2 == "non-inferior" and (v3 == "win" or tax_equivalent):
        return "supported"
    if v1 == "loss" or v2 == "inferior" or v3 == "loss":
        return "contradicted"
    return "not decided at this size"


def _schedule_rule(v1: str, v2: str, v3: str | None, tax_equivalent: bool) -> str:
    """The extension's registered family rule as its report wrote it before the plan file (``v3``
    None: endpoint 3 cut, never supported)."""
    if "" in (v1, v2) or v3 == "":
        return "not decided (the study is not complete)"
    if v3 is not None and v1 == "win" and v2 == "non-inferior" and (v3 == "win" or tax_equivalent):
        return "supported"
    if v1 == "loss" or v2 == "inferior" or v3 == "loss":
        return "contradicted"
    return "not decided"


def test_the_generic_decision_rule_reads_the_frozen_studies_rules_as_their_reports_do():
    """Every combination of the three verdicts and the tax's equivalence: the plans' rules, read by
    analysis.endpoints.decide (which the generic report reads them by), answer what the studies' own
    reports' rules answered before the plan files (an endpoint cut with its part: never supported)."""
    from adaptive_po.analysis.endpoints import decide

    rule = load_plan(REPO / "docs/results/frozen/plan.toml").decisions[0]
    a_rule, b_rule, c_rule = load_plan(REPO / "docs/results/frozen-schedule/plan.toml").decisions
    for v1, v2, v3 in VERDICT_GRID:
        for within in (True, False):
            rows = {"1": {"verdict": v1}, "2": {"verdict": v2}, "3": {"verdict": v3}, "esspo-tax": {"verdict": "inconclusive", "within_margin": within}}
            assert decide(rule, rows) == _frozen_rule(v1, v2, v3, within), (v1, v2, v3, within)
            family = {"B1": {"verdict": v1}, "B2": {"verdict": v2}, "B3": {"verdict": v3}, "B-tax": {"verdict": "inconclusive", "within_margin": within}}
            assert decide(b_rule, family) == _schedule_rule(v1, v2, v3, within), (v1, v2, v3, within)
            cut = {k: v for k, v in family.items() if k in ("B1", "B2")}
            assert decide(b_rule, cut) == _schedule_rule(v1, v2, None, within), (v1, v2, within)
    for v in ("", "win", "loss", "equivalent", "inconclusive"):
        words = {"win": "closed", "loss": "widened", "equivalent": "equivalent", "inconclusive": "not decided"}
        expected = words[v] if v else "not decided (the study is not complete)"
        assert decide(c_rule, {"C": {"verdict": v}}) == expected


def test_the_frozen_report_reads_its_margins_families_and_rule_from_its_plan(tmp_path):
    """The published frozen study, rebuilt by the generic report with a planted margin: endpoint 2 at
    -0.35 instead of -0.1 reads non-inferior, and the claim flips from contradicted to supported;
    endpoint 3 taken out of the primary family leaves the other two's Holm over two."""
    from adaptive_po.analysis import searched_report

    results = REPO / "docs/results/frozen"
    text = (results / "plan.toml").read_text()
    study = searched_report.load(results)
    result = searched_report.analyse(study)

    def read(plan):
        mine = replace(study, plan=plan)
        rows = searched_report.primary(mine, result)
        return rows, searched_report.answers(mine, rows)[0]["answer"], searched_report.report_text(mine, result)

    rows, answer, report_text = read(study.plan)
    assert answer == "contradicted" and "**The claim is contradicted.**" in report_text
    assert "| robust to staleness without retuning | 1 4/4, 2 4/4, 3 4/4, esspo-tax 4/4 | **contradicted** |" in report_text
    old = 'lag = 0\nmargin = 0.1\nfamily = "primary"\nlabel = "2.'
    assert old in text
    wide = _plan_from(tmp_path, text.replace(old, old.replace("0.1", "0.35")))
    rows, answer, report_text = read(wide)
    assert rows[1]["verdict"] == "non-inferior" and answer == "supported" and "**The claim is supported.**" in report_text
    two = replace(study.plan, endpoints=tuple(replace(e, family="") if e.id == "3" else e for e in study.plan.endpoints))
    (rows, answer, report_text), before = read(two), searched_report.primary(study, result)
    # endpoint 1 has the smallest p: Holm multiplies it by 3 in the family of three, by 2 without endpoint 3
    assert rows[2]["p_adj"] == rows[2]["p"] and rows[0]["p_adj"] == pytest.approx(2 * rows[0]["p"], rel=1e-9)
    assert before[0]["p_adj"] == pytest.approx(3 * before[0]["p"], rel=1e-9)
    assert answer == "contradicted" and "**The claim is contradicted.**" in report_text


def test_the_schedule_report_reads_its_holm_family_from_its_plan():
    """The published extension's seven primary tests under the plan's family, by the generic report:
    C out of the family leaves the other six under Holm over six (no adjusted p larger) and C
    unadjusted; arm 1's own tax put in the family makes it Holm over eight."""
    from adaptive_po.analysis import searched_report

    study = searched_report.load(REPO / "docs/results/frozen-schedule")
    result = searched_report.analyse(study)

    def rows(family: dict[str, str]) -> list[dict]:
        plan = replace(study.plan, endpoints=tuple(replace(e, family=family.get(e.id, e.family)) for e in study.plan.endpoints))
        return searched_report.primary(replace(study, plan=plan), result)[:7]

    seven, six, eight = rows({}), rows({"C": ""}), rows({"A-tax": "primary"})
    assert [r["id"] for r in seven] == [r["id"] for r in six] == ["A1", "A2", "A3", "B1", "B2", "B3", "C"]
    assert six[6]["p_adj"] == six[6]["p"] and all(b["p_adj"] <= a["p_adj"] for a, b in zip(seven[:6], six[:6]))
    assert any(b["p_adj"] < a["p_adj"] for a, b in zip(seven[:6], six[:6]) if a["p_adj"] < 1)
    # A1 has the smallest p: Holm multiplies it by 7 in the family of seven, by 8 with arm 1's tax in it
    assert seven[0]["p_adj"] == pytest.approx(7 * seven[0]["p"], rel=1e-9) and eight[0]["p_adj"] == pytest.approx(8 * seven[0]["p"], rel=1e-9)


QUATRO = REPO / "docs/results/frozen-quatro"
QUATRO_CLAIMS = '''
[[claims]]
name = "quatro"
arm = "quatro"
versus = "ppo (frozen study)"
prefix = "Q"
slope_lags = [0, 1, 2, 4, 8]
sentence = "After-QUATRO (`quatro`) against the published tuned `ppo`: robust to staleness without retuning is {answer}."

[[claims]]
name = "r2vpo"
arm = "r2vpo"
versus = "ppo (frozen study)"
prefix = "R"
slope_lags = [0, 1, 2, 4, 8]
tax_part = "r2vpo-tax"
sentence = "After-R2VPO (`r2vpo`) against the published tuned `ppo`: robust to staleness without retuning is {answer}."
'''


def _compact_quatro_plan() -> str:
    """frozen-quatro's committed plan with its endpoints and decisions written as two claims and its
    parts' search spaces left to ``[search]``'s."""
    text = (QUATRO / "plan.toml").read_text()
    head, rest = text.split("[[endpoints]]", 1)
    tail = "[[secondary]]" + rest.split("[[secondary]]", 1)[1]
    for own in ('own = { quatro = { radius = [0.002, 0.05, 0.01] } }\n',
                'own = { r2vpo = { variance_target = [0.005, 0.08, 0.02], dual_step = [1.0, 100.0, 10.0], initial_multiplier = [0.1, 10.0, 1.0] } }\n'):
        head = head.replace('space = "zoo-factors"\n' + own, "")
    return head + QUATRO_CLAIMS.lstrip() + "\n" + tail


def test_a_claim_is_the_four_endpoints_and_the_decision_a_plan_would_spell_out(tmp_path):
    """Two claims and the parts' default spaces load to exactly the committed frozen-quatro plan (the
    same endpoints in the same order, the same decisions and parts): 228 lines become 132."""
    committed = load_plan(QUATRO / "plan.toml")
    text = _compact_quatro_plan()
    (tmp_path / "plan.toml").write_text(text)
    compact = load_plan(tmp_path / "plan.toml")
    assert replace(compact, path=committed.path) == committed
    assert len((QUATRO / "plan.toml").read_text().splitlines()) - len(text.splitlines()) >= 90
    assert len(text.splitlines()) <= 135


@pytest.mark.parametrize(("old", "new", "named"), [
    ('prefix = "Q"\n', "", r"claims\[0\]\.prefix: missing"),
    ('prefix = "R"\n', 'prefix = "R"\nlag = 3\n', r"claims\[1\]\.lag: not a key of a claim"),
    ('slope_lags = [0, 1, 2, 4, 8]\nsentence = "After-QUATRO', 'slope_lags = [0]\nsentence = "After-QUATRO', r"claims\[0\]\.slope_lags: two or more lags"),
    ('tax_part = "r2vpo-tax"', 'tax_part = "r2vpo-taxes"', r"endpoints.*part: 'r2vpo-taxes' is not one of the plan's parts"),
    ('arm = "quatro"\nversus', 'arm = "qautro"\nversus', r"'qautro' is not an arm of the design"),
    ('sentence = "After-R2VPO (`r2vpo`) against the published tuned `ppo`: robust to staleness without retuning is {answer}."',
     'sentence = "After-R2VPO."', r"decisions.*sentence: must hold \{answer\}"),
])
def test_a_bad_claim_is_one_line_naming_the_file_and_the_key(tmp_path, old, new, named):
    _refused(tmp_path, _compact_quatro_plan(), old, new, named)
