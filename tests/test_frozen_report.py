"""The frozen-tuning study's report, by the generic report of a searched design
(adaptive_po/analysis/searched_report.py, from docs/results/frozen/plan.toml; its hand-written report
is gone): the published endpoints' numbers, the head to head against a comparator other than
``ppo`` (``decoupled-ppo``), with Holm within each table, endpoint 2's words, non-inferior and
inferior, adjusted the same way, and the committed files it refuses."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from adaptive_po.analysis import endpoints, quotes
from adaptive_po.analysis import searched_report as report
from adaptive_po.analysis.hypothesis import Difference

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "frozen"
ARMS = ("esspo", "ppo", "decoupled-ppo", "vtrace")


from search_records import holm_by_hand as _holm_by_hand  # noqa: E402 - tests/search_records.py

#: the published endpoints as the hand-written report computed them before the port (estimate, se,
#: df, p, Holm p, verdict), and their cells in the verdicts it published (estimate [95% CI], p, Holm p,
#: detectable, verdict)
PUBLISHED = {
    "1": ((0.1991968314886171, 0.01848506256218084, 229.94143323129998, 3.484101991128888e-22, 1.0452305973386664e-21, "win"),
          "+0.1992 [+0.1628, +0.2356] | 3.48e-22 | 1.05e-21 | 0.052 | win"),
    "2": ((-0.2243148508339583, 0.0430617271432664, 27.7865852679066, 0.9962762440439006, 0.9962762440439006, "inferior"),
          "-0.224 [-0.313, -0.136] | 0.996 | 0.996 | 0.125 | inferior"),
    "3": ((-0.3307235242741825, 0.04197374303594808, 34.27176684972392, 3.368337939089708e-09, 6.736675878179416e-09, "win"),
          "-0.331 [-0.416, -0.245] | 3.37e-09 | 6.74e-09 | 0.121 | win"),
    "esspo-tax": ((0.00362017012594143, 0.016938723986138694, 35.47686402498369, None, None, "equivalent"), "+0.004 [-0.031, +0.038] |"),
}


def _analysed(results: Path = RESULTS):
    study = report.load(results)
    result = report.analyse(study)
    return study, result, report.primary(study, result)


def test_the_generic_reports_endpoints_are_the_published_ones_to_the_last_digit():
    """Every primary endpoint (and esspo's own tax) of the generic report, from the plan and the
    committed tables, is the number the hand-written report computed and published."""
    study, result, rows = _analysed()
    assert [r["id"] for r in rows] == list(PUBLISHED)
    text = (RESULTS / "verdicts.md").read_text()
    for r in rows:
        (estimate, se, df, p, p_adj, verdict), cells = PUBLISHED[r["id"]]
        assert (r["d"].estimate, r["d"].se, r["d"].df, r["verdict"]) == (estimate, se, df, verdict), r["id"]
        if p is not None:
            assert (r["p"], r["p_adj"]) == (p, p_adj), r["id"]
        assert f"| {r['endpoint']} | " in text and cells in text.split(f"| {r['endpoint']} | ", 1)[1].split("\n", 1)[0], r["id"]
    assert report.answers(study, rows)[0]["answer"] == "contradicted"
    # endpoint 2's mirror test over tasks and ppo's tax over tasks, as published
    assert (format(rows[1]["p_inferior"], ".3g"), format(rows[1]["p_inferior_adj"], ".3g")) == ("0.00372", "0.00372")
    assert endpoints.format_difference(result["tax_over"][("ppo", "main")]) == "+0.334 [+0.255, +0.413]"


def test_the_head_to_head_against_decoupled_ppo_has_every_other_arm_at_every_lag_with_holm_within_each_table():
    fresh = _fresh()
    task_rows, agg_rows = endpoints.head_to_head(fresh, "decoupled-ppo", ARMS, (0, 8))

def _fresh() -> dict[str, dict[tuple[str, int], np.ndarray]]:
    """Two tasks, four arms, lags 0 and 8, five seeds: decoupled-ppo at 0.5, esspo 0.2 above it at
    lag 8 only, ppo 0.05 below it everywhere, vtrace 0.4 below it everywhere."""
    rng = np.random.default_rng(7)
    shift = {("esspo", 0): 0.0, ("esspo", 8): 0.2, ("ppo", 0): -0.05, ("ppo", 8): -0.05, ("decoupled-ppo", 0): 0.0,
             ("decoupled-ppo", 8): 0.0, ("vtrace", 0): -0.4, ("vtrace", 8): -0.4}
    return {env: {key: 0.5 + s + rng.normal(0, 0.05, 5) for key, s in shift.items()} for env in ("Pendulum-v1", "Acrobot-v1")}


    assert [(r["algo"], r["lag"]) for r in agg_rows] == [(a, lag) for a in ("esspo", "ppo", "vtrace") for lag in (0, 8)]
    assert [(r["env"], r["algo"], r["lag"]) for r in task_rows] == [
        (env, a, lag) for env in ("Pendulum-v1", "Acrobot-v1") for a in ("esspo", "ppo", "vtrace") for lag in (0, 8)]
    assert {r["vs"] for r in task_rows + agg_rows} == {"decoupled-ppo"} and {r["tasks"] for r in agg_rows} == {2}

    # per task: arm minus decoupled-ppo, scipy's Welch test, Holm by hand over the 12 rows of this table
    for r in task_rows:
        x, y = fresh[r["env"]][(r["algo"], r["lag"])], fresh[r["env"]][("decoupled-ppo", r["lag"])]
        assert r["d"].estimate == pytest.approx(float(x.mean() - y.mean()))
        assert r["p"] == pytest.approx(stats.ttest_ind(x, y, equal_var=False).pvalue)
    assert [r["p_adj"] for r in task_rows] == pytest.approx(_holm_by_hand([r["p"] for r in task_rows]))
    # over tasks: the mean of the per-task differences, Holm by hand over the 6 rows of this table
    for r in agg_rows:
        mean = np.mean([fresh[env][(r["algo"], r["lag"])].mean() - fresh[env][("decoupled-ppo", r["lag"])].mean() for env in fresh])
        assert r["d"].estimate == pytest.approx(float(mean))
    assert [r["p_adj"] for r in agg_rows] == pytest.approx(_holm_by_hand([r["p"] for r in agg_rows]))
    assert any(r["p_adj"] > r["p"] for r in agg_rows)  # the adjustment is not a no-op here
    verdicts = {(r["algo"], r["lag"]): r["verdict"] for r in agg_rows}
    assert verdicts[("esspo", 8)] == "win" and verdicts[("vtrace", 0)] == verdicts[("vtrace", 8)] == "loss"
    assert verdicts[("esspo", 0)] == "equivalent"

    # the comparator's table is its own family: against ppo the same data give other rows and other Holm
    _, against_ppo = endpoints.head_to_head(fresh, "ppo", ARMS, (0, 8))
    assert [(r["algo"], r["lag"]) for r in against_ppo] == [(a, lag) for a in ("esspo", "decoupled-ppo", "vtrace") for lag in (0, 8)]
    ppo_minus = {r["lag"]: r["d"].estimate for r in agg_rows if r["algo"] == "ppo"}
    assert {r["lag"]: -r["d"].estimate for r in against_ppo if r["algo"] == "decoupled-ppo"} == pytest.approx(ppo_minus)
    assert [r["p_adj"] for r in against_ppo] == pytest.approx(_holm_by_hand([r["p"] for r in against_ppo]))


def _committed_report(tmp_path: Path) -> tuple[str, Path]:
    study, result, _ = _analysed()
    text = report.report_text(study, result)
    (tmp_path / "frozen").mkdir()
    (tmp_path / "frozen" / "verdicts.md").write_text(text)
    return text, tmp_path


def test_the_report_names_decoupled_ppo_as_the_comparator_and_holds_its_table_after_ppos(tmp_path):
    text, results = _committed_report(tmp_path)
    q = lambda locator: quotes.quoted(results, "frozen/verdicts.md#" + locator)  # noqa: E731
    head = "Secondary: each arm minus `decoupled-ppo"
    assert "## Secondary: each arm minus `decoupled-ppo` at every lag" in text
    assert "| arm | lag | tasks | arm - decoupled-ppo [95% CI] |" in text and "| task | arm | lag | arm - decoupled-ppo [95% CI] |" in text
    # every other arm at every lag, over tasks and per task (4 tasks), in the decoupled-ppo section
    section = text[text.index("## " + head):text.index("## Chosen configurations")]
    for arm in ("esspo", "ppo", "vtrace"):
        for lag in (0, 1, 2, 4, 8, 16, 64):
            assert f"| {arm} | {lag} | 4 of 4 | " in section
    assert section.count("\n| ") - 2 == 3 * 7 + 4 * 3 * 7  # the rows of the two tables, less their two header lines
    assert "Added after the results (not pre-registered)" in section
    # the numbers, recomputed independently from per_run.csv: esspo - decoupled-ppo over tasks
    assert q(f"{head}#Over tasks | esspo | 0 | 4 of 4 | arm - decoupled-ppo") == "-0.181 [-0.281, -0.080]"
    assert q(f"{head}#Over tasks | esspo | 8 | 4 of 4 | arm - decoupled-ppo") == "+0.116 [+0.028, +0.205]"
    # Holm over that table's 21 rows alone (not over the 7 lags of one arm, nor over both comparators' 42)
    over_tasks = [line.split("|")[1:-1] for line in section.split("### Per task")[0].splitlines() if " of 4 | " in line]
    ps = [float(cells[4]) for cells in over_tasks]
    assert len(ps) == 21
    assert float(q(f"{head}#Over tasks | esspo | 8 | 4 of 4 | p (Holm")) == pytest.approx(_holm_by_hand(ps)[4], rel=5e-3)
    assert q(f"{head}#Over tasks | esspo | 8 | 4 of 4 | p (Holm") == "0.0919"
    assert q(f"{head}#Over tasks | esspo | 8 | 4 of 4 | verdict") == "inconclusive"
    # the README's locators still find the table against ppo first, pre-registered
    assert q("Secondary#Over tasks | esspo | 0 | arm - ppo") == "-0.224 [-0.313, -0.136]"
    assert text.index("## The answer") < text.index("## Secondary: each arm minus `ppo`") < text.index("## " + head)
    ppo_section = text[text.index("## Secondary: each arm minus `ppo`"):text.index("## " + head)]
    assert "Pre-registered as secondary and descriptive" in ppo_section


def test_inferior_is_holm_adjusted_like_non_inferior():
    """A difference whose one-sided upper bound lies below -0.1 (unadjusted: inferior) reads "not
    shown" once Holm over four tasks lifts the inferiority p above the level; alone, it is inferior."""
    t = stats.t.ppf(0.03, 9)  # inferiority p 0.03 at 9 degrees of freedom
    worse = Difference(-0.1 + t * 0.1, 0.1, 9.0)
    assert worse.ci(0.9)[1] < -0.1 and endpoints.inferiority_p(worse) == pytest.approx(0.03)
    far = [Difference(-0.1, 0.1, 9.0)] * 3  # exactly at the margin: p 0.5 both ways
    rows = endpoints.non_inferiority([worse, *far])
    assert rows[0]["p_inferior_adj"] == pytest.approx(0.12) and rows[0]["verdict"] == "not shown"
    assert [r["p_inferior_adj"] for r in rows] == pytest.approx(_holm_by_hand([r["p_inferior"] for r in rows]))
    assert endpoints.non_inferiority([worse])[0]["verdict"] == "inferior"
    assert endpoints.non_inferiority_word(worse, 1.0, 0.12) == "not shown" and endpoints.non_inferiority_word(worse, 1.0, 0.03) == "inferior"
    # the mirror: non-inferior at p 0.03 alone, not shown in the same family of four
    better = Difference(-0.1 - t * 0.1, 0.1, 9.0)
    assert endpoints.non_inferiority([better])[0]["verdict"] == "non-inferior"
    assert endpoints.non_inferiority([better, *far])[0]["verdict"] == "not shown"
    assert endpoints.non_inferiority_word(Difference(math.nan, math.nan, math.nan), math.nan, math.nan) == ""


def test_the_committed_study_keeps_its_answer_and_pendulum_at_lag_0_is_not_shown():
    study, result, rows = _analysed()
    assert rows[1]["verdict"] == "inferior" and rows[1]["p_inferior_adj"] < 0.05  # over tasks, Holm over the three
    assert report.answers(study, rows)[0]["answer"] == "contradicted"
    lag0 = report.per_task_verdicts(study, result)["2"]
    assert lag0["Pendulum-v1"]["p_inferior"] < 0.05 < lag0["Pendulum-v1"]["p_inferior_adj"]
    assert lag0["Pendulum-v1"]["p_inferior_adj"] == pytest.approx(0.117, abs=0.001)
    assert {env: r["verdict"] for env, r in lag0.items()} == {
        "Acrobot-v1": "non-inferior", "Pendulum-v1": "not shown", "LunarLanderContinuous-v3": "inferior", "LunarLander-v3": "not shown"}


# -- the report checks the committed files against its plan -------------------------------------------
def _edit_json(path: Path, edit) -> None:
    import json

    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _pick(edit):
    def apply(folder: Path) -> None:
        _edit_json(folder / "selected.json", lambda d: edit(d["selected"]["Acrobot-v1"]["esspo"]["fresh"]))
    return apply


@pytest.mark.parametrize(
    "tamper, match",
    [
        (lambda f: _edit_json(f / "selection.json", lambda d: d.update(tasks=d["tasks"][:2])),
         r"per_run.csv: the run .*'LunarLander.*is not in the plan .* \(its task \(not in the plan after its cuts\)\)"),
        (lambda f: _edit_json(f / "selection.json", lambda d: d["cuts"].update(arms=["esspo"])), r"selection.json: arms \['esspo'\] cannot be cut"),
        (lambda f: _edit_json(f / "selection.json", lambda d: d.pop("cuts")), r"selection.json: expected the keys \['arms', 'lags', 'tasks'\]"),
        (_pick(lambda p: p.update(variant="learning_rate=x1e9")), r"Acrobot-v1 esspo fresh's variant 'learning_rate=x1e9' has 0 search runs in the table, not 3"),
        (_pick(lambda p: p.update(variant="")), r"Acrobot-v1 esspo fresh's variant '' returned .* below the best"),
        (lambda f: _edit_json(f / "selection.json", lambda d: d["tasks"][0].update(budget=1e30)),
         r"selection.json: \('Acrobot-v1', 1e\+30\) is not one of the pilot's candidate tasks and budgets"),
        (lambda f: _edit_json(f / "selected.json", lambda d: d["selected"]["Acrobot-v1"].update(budget=100_000)),
         r"selected.json: 'Acrobot-v1' at 100000 steps is not a task of the plan at its budget"),
    ],
    ids=["two-tasks", "cut-out-of-order", "cuts-missing", "variant-never-searched", "not-the-best", "budget-1e30", "pick-budget"],
)
def test_the_report_refuses_files_that_are_not_the_plans_in_one_line(tmp_path, capsys, tamper, match):
    """Each edit of the committed JSON is refused before anything is computed: one line naming the
    file and the value, exit 2, nothing written."""
    import re
    import shutil

    folder = tmp_path / "frozen"
    shutil.copytree(RESULTS, folder)
    tamper(folder)
    before = (folder / "verdicts.md").read_bytes()
    assert report.main(["--results", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(match, err[0]), err
    assert (folder / "verdicts.md").read_bytes() == before


def test_the_published_files_pass_the_reports_checks():
    report.load(RESULTS)  # the table, the pilot's selection and cuts, and the picks against the plan


def test_the_report_quotes_its_pre_registrations_deviations(tmp_path):
    from adaptive_po.analysis.endpoints import deviations

    committed = (Path(__file__).resolve().parent.parent / "docs" / "results" / "frozen" / "verdicts.md").read_text()
    assert "**Deviations from the pre-registration** (as listed there):" in committed
    assert "> 1. **A note added after results were in.**" in committed
    assert deviations(tmp_path) == ["The pre-registration (`preregistration.md`) is not in this folder."]
    (tmp_path / "preregistration.md").write_text("# Plan\n\n## Deviations\n\nNone yet.\n")
    assert deviations(tmp_path) == ["**Deviations from the pre-registration:** none listed in it."]
    (tmp_path / "preregistration.md").write_text("# Plan\n\n## Deviations\n\n1. Seeds moved.\n\n## After\n")
    assert deviations(tmp_path)[2:] == ["> 1. Seeds moved."]
