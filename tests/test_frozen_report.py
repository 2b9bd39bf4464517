"""The frozen-tuning study's report (adaptive_po/analysis/reports/frozen.py) beyond the pre-registered
endpoints: the head to head against a comparator other than ``ppo`` (``decoupled-ppo``), with Holm
within each table, and endpoint 2's words, non-inferior and inferior, adjusted the same way."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from adaptive_po.analysis import endpoints, quotes
from adaptive_po.analysis.hypothesis import Difference
from adaptive_po.analysis.reports import frozen as report

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "frozen"
ARMS = ("esspo", "ppo", "decoupled-ppo", "vtrace")


from search_records import holm_by_hand as _holm_by_hand  # noqa: E402 - tests/search_records.py


def _fresh() -> dict[str, dict[tuple[str, int], np.ndarray]]:
    """Two tasks, four arms, lags 0 and 8, five seeds: decoupled-ppo at 0.5, esspo 0.2 above it at
    lag 8 only, ppo 0.05 below it everywhere, vtrace 0.4 below it everywhere."""
    rng = np.random.default_rng(7)
    shift = {("esspo", 0): 0.0, ("esspo", 8): 0.2, ("ppo", 0): -0.05, ("ppo", 8): -0.05, ("decoupled-ppo", 0): 0.0,
             ("decoupled-ppo", 8): 0.0, ("vtrace", 0): -0.4, ("vtrace", 8): -0.4}
    return {env: {key: 0.5 + s + rng.normal(0, 0.05, 5) for key, s in shift.items()} for env in ("Pendulum-v1", "Acrobot-v1")}


def test_the_head_to_head_against_decoupled_ppo_has_every_other_arm_at_every_lag_with_holm_within_each_table():
    fresh = _fresh()
    task_rows, agg_rows = report.head_to_head(fresh, "decoupled-ppo", ARMS, (0, 8))
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
    _, against_ppo = report.head_to_head(fresh, "ppo", ARMS, (0, 8))
    assert [(r["algo"], r["lag"]) for r in against_ppo] == [(a, lag) for a in ("esspo", "decoupled-ppo", "vtrace") for lag in (0, 8)]
    ppo_minus = {r["lag"]: r["d"].estimate for r in agg_rows if r["algo"] == "ppo"}
    assert {r["lag"]: -r["d"].estimate for r in against_ppo if r["algo"] == "decoupled-ppo"} == pytest.approx(ppo_minus)
    assert [r["p_adj"] for r in against_ppo] == pytest.approx(_holm_by_hand([r["p"] for r in against_ppo]))


def _committed_report(tmp_path: Path) -> tuple[str, Path]:
    text = report.report(RESULTS)
    (tmp_path / "frozen").mkdir()
    (tmp_path / "frozen" / "verdicts.md").write_text(text)
    return text, tmp_path


def test_the_report_names_decoupled_ppo_as_the_comparator_and_puts_the_head_to_head_after_the_answer(tmp_path):
    text, results = _committed_report(tmp_path)
    q = lambda locator: quotes.quoted(results, "frozen/verdicts.md#" + locator)  # noqa: E731
    assert "## Secondary: every arm against decoupled-ppo at every lag" in text
    assert "| arm | lag | tasks | arm - decoupled-ppo [95% CI] |" in text and "| task | arm | lag | arm - decoupled-ppo [95% CI] |" in text
    # every other arm at every lag, over tasks and per task (4 tasks), in the decoupled-ppo section
    section = text[text.index("## Secondary: every arm against decoupled-ppo"):text.index("## Frozen configurations")]
    for arm in ("esspo", "ppo", "vtrace"):
        for lag in (0, 1, 2, 4, 8, 16, 64):
            assert f"| {arm} | {lag} | 4 of 4 | " in section
    assert section.count("\n| ") - 2 == 3 * 7 + 4 * 3 * 7  # the rows of the two tables, less their two header lines
    # the numbers, recomputed independently from per_run.csv: esspo - decoupled-ppo over tasks
    assert q("Secondary: every arm against decoupled-ppo#Over tasks | esspo | 0 | arm - decoupled-ppo") == "-0.181 [-0.281, -0.080]"
    assert q("Secondary: every arm against decoupled-ppo#Over tasks | esspo | 8 | arm - decoupled-ppo") == "+0.116 [+0.028, +0.205]"
    # Holm over that table's 21 rows alone (not over the 7 lags of one arm, nor over both comparators' 42)
    over_tasks = [line.split("|")[1:-1] for line in section.split("### Per task")[0].splitlines() if " of 4 | " in line]
    ps = [float(cells[4]) for cells in over_tasks]
    assert len(ps) == 21
    assert float(q("Secondary: every arm against decoupled-ppo#Over tasks | esspo | 8 | p (Holm")) == pytest.approx(_holm_by_hand(ps)[4], rel=5e-3)
    assert q("Secondary: every arm against decoupled-ppo#Over tasks | esspo | 8 | p (Holm") == "0.0919"
    # the README's locators still find the table against ppo first
    assert q("Secondary#Over tasks | esspo | 0 | arm - ppo") == "-0.224 [-0.313, -0.136]"

    # the head to head: after the answer, before the per-task section, each row its table's Holm p and verdict
    assert text.index("## The answer") < text.index("## Head to head (secondary): esspo against ppo and decoupled-ppo") < text.index("## Per task")
    for comparator in ("ppo", "decoupled-ppo"):
        for lag in ("0", "8"):
            table = f"Secondary: every arm against {comparator} at#Over tasks | esspo | {lag}"
            assert q(f"Head to head | esspo - {comparator} | {lag} | p (Holm") == q(f"{table} | p (Holm")
            assert q(f"Head to head | esspo - {comparator} | {lag} | verdict") == q(f"{table} | verdict")
    assert q("Head to head | esspo - decoupled-ppo | 8 | verdict") == "inconclusive"
    assert "not a decision rule" in text and "added after the study" in text


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
    table, selected, _, plan, result = report.load_and_analyse(RESULTS)
    rows = report.primary(result)
    assert rows[1]["verdict"] == "inferior" and rows[1]["p_inferior_adj"] < 0.05  # over tasks, Holm over the three
    assert report.decision(rows, result["esspo_tax"]) == "contradicted"
    lag0 = report.per_task_verdicts(result)["2"]
    assert lag0["Pendulum-v1"]["p_inferior"] < 0.05 < lag0["Pendulum-v1"]["p_inferior_adj"]
    assert lag0["Pendulum-v1"]["p_inferior_adj"] == pytest.approx(0.117, abs=0.001)
    assert {env: r["verdict"] for env, r in lag0.items()} == {
        "Acrobot-v1": "non-inferior", "Pendulum-v1": "not shown", "LunarLanderContinuous-v3": "inferior", "LunarLander-v3": "not shown"}


# -- the report checks its plan (issue 42) ----------------------------------------------------------
def _edit_json(path: Path, edit) -> None:
    import json

    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _two_tasks_and_four_seeds(folder: Path) -> None:
    """The issue's case: two tasks kept and score_seeds [0, 2, 3, 9]; the report said "supported"."""
    _edit_json(folder / "selection.json", lambda d: d.update(tasks=d["tasks"][:2]))
    _edit_json(folder / "selected.json", lambda d: (d["plan"].update(score_seeds=[0, 2, 3, 9]), d["plan"].update(tasks=d["plan"]["tasks"][:2]),
                                                    [d["selected"].pop(e) for e in list(d["selected"])[2:]]))


def _pick(edit):
    def apply(folder: Path) -> None:
        _edit_json(folder / "selected.json", lambda d: edit(d["selected"]["Acrobot-v1"]["esspo"]["fresh"]))
    return apply


@pytest.mark.parametrize(
    "tamper, match",
    [
        (_two_tasks_and_four_seeds, r"selected.json: the plan's score_seeds \[0, 2, 3, 9\] is not the registered"),
        (lambda f: (_two_tasks_and_four_seeds(f), _edit_json(f / "selected.json", lambda d: d["plan"].update(score_seeds=list(range(10))))),
         r"selection.json: the tasks .* are not the pilot's qualifying tasks less the cuts"),
        (lambda f: _edit_json(f / "selected.json", lambda d: d["plan"].update(score_seeds=[0, 2, 3, 9])),
         r"selected.json: the plan's score_seeds \[0, 2, 3, 9\] is not the registered"),
        (lambda f: _edit_json(f / "selected.json", lambda d: d["plan"].update(lags=[0, 1, 2, 4, 8])), r"the plan's lags \[0, 1, 2, 4, 8\] is not the registered"),
        (lambda f: _edit_json(f / "selection.json", lambda d: d["cuts"].update(arms=["esspo"])), r"cuts arms \['esspo'\] are not in the registered cut order"),
        (_pick(lambda p: p.update(variant="learning_rate=x1e9")), r"Acrobot-v1 esspo fresh's variant 'learning_rate=x1e9' has 0 search runs in the table, not 3"),
        (_pick(lambda p: p.update(variant="")), r"Acrobot-v1 esspo fresh's variant '' returned .* below the best"),
        (lambda f: _edit_json(f / "selection.json", lambda d: d["tasks"][0].update(budget=1e30)), r"selection.json: the budget 1e\+30 of 'Acrobot-v1' is not a whole number"),
        (lambda f: _edit_json(f / "selection.json", lambda d: d["pilot"][3].update(lag0_mean=0.99)), r"the pilot's lag0_mean 0.99 of Acrobot-v1 at 50,000 steps is not the mean"),
    ],
    ids=["two-tasks-four-seeds", "two-tasks", "seeds", "lags", "cut-out-of-order", "variant-never-searched", "not-the-best", "budget-1e30", "pilot-mean"],
)
def test_the_report_refuses_a_plan_that_is_not_the_registered_one_in_one_line(tmp_path, capsys, tamper, match):
    """Each edit of the committed JSON, which the report used to take as it was, is refused before
    anything is computed: one line naming the file and the value, exit 2, nothing written."""
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


def test_the_published_report_passes_its_plan_check():
    table, selected, selection = report._load(RESULTS)
    report.check_plan(RESULTS, table, selected, selection)


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
