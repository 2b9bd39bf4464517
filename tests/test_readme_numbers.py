"""The READMEs' results say only what a committed report says.

Two pages state results: the project README (``README.md``, the headline) and the results page
(``docs/results/README.md``, every section and the generated blocks).

(a) The staleness and paper verdicts (``adaptive_po.analysis.reports.staleness_and_paper_verdicts``) rebuild byte for byte from the committed
run table alone: ``verdicts.md``, ``per_run.csv`` and the results page's generated blocks.
(b) Every number and verdict word of the results prose (``README.md``'s "Results" section and every
"## Results" section of ``docs/results/README.md``, outside generated blocks, tables and code) is a
*quote* (:mod:`adaptive_po.analysis.quotes`): it names its report, row and column, and must equal
that cell with its sign and digits. A number or verdict word outside a quote fails, except the
set-up facts :data:`adaptive_po.analysis.quotes.SETUP` allows (budgets, seeds, lags, dates). The
check is shown to fail on edited numbers and words (signs flipped, digits nudged, win and loss
swapped, a quote's markup dropped).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from adaptive_po.analysis import quotes
from adaptive_po.analysis.reports import staleness_and_paper_verdicts as classic

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
RUNS = RESULTS / "paper" / "runs.csv"
README = ROOT / "README.md"
RESULTS_README = RESULTS / "README.md"


# -- (a) the committed verdicts rebuild from the committed table ------------------------------------
def test_the_staleness_and_paper_verdicts_rebuild_from_the_committed_run_table_alone(tmp_path):
    readme = tmp_path / "README.md"
    shutil.copy(RESULTS_README, readme)
    assert classic.main(["--table", str(RUNS), "--out", str(tmp_path), "--readme", str(readme)]) == 0
    for suite in ("staleness", "paper"):
        for name in ("verdicts.md", "per_run.csv"):
            rebuilt, committed = tmp_path / suite / name, RESULTS / suite / name
            assert rebuilt.read_bytes() == committed.read_bytes(), f"docs/results/{suite}/{name} differs from its rebuild (`make classic-from-table`)"
    assert readme.read_text() == RESULTS_README.read_text(), "a verdict block of docs/results/README.md differs from its rebuild (`make classic-from-table`)"


def test_the_per_run_tables_hold_the_whole_grid_and_the_failed_p3o_run():
    staleness = pd.read_csv(RESULTS / "staleness" / "per_run.csv")
    paper = pd.read_csv(RESULTS / "paper" / "per_run.csv")
    assert len(staleness) == 4 * 4 * 4 * 5 and (staleness["status"] == "complete").all()
    assert len(paper) == 3 * 10 * 5 * 5
    failed = paper[paper["status"] == "failed"]
    assert failed[["env", "algo", "condition", "seed"]].values.tolist() == [["Pendulum-v1", "p3o", "lag0_noise0_replay0_T1.2", 3]]
    assert failed["score"].tolist() == [0.0]  # scored at the random score
    text = (RESULTS / "paper" / "verdicts.md").read_text()
    assert "Pendulum-v1 / p3o / T = 1.2 (`lag0_noise0_replay0_T1.2`) / seed 3" in text
    assert "curves are not in the table; the run folders were not kept" in text


def test_a_run_missing_from_the_table_is_counted_failed_and_scored_at_random():
    rows = []
    for algo in ("ppo", "esspo"):
        for seed in range(3):
            rows.append({
                "suite": "staleness", "env": "X-v0", "algo": algo, "variant": None, "condition": "lag0_noise0_replay0", "policy_lag": 0,
                "action_noise": 0.0, "replay": 0, "behaviour_log_prob": "actual", "sampler_temperature": 1.0, "sampler_precision": "fp32",
                "seed": seed, "total_timesteps": 1000, "random_score": -10.0, "solved_threshold": 10.0,
                "final_eval_return_mean": 5.0 + seed, "auc": 1.0,
            })
    table = classic.from_runs_csv(pd.DataFrame(rows[:-1]), "staleness")  # esspo seed 2 has no row
    assert len(table) == 6
    missing = table[table["status"] == "failed"].iloc[0]
    assert (missing["algo"], missing["seed"], missing["final_eval_return"], missing["score"]) == ("esspo", 2, -10.0, 0.0)
    tasks = classic.verdicts(table).tasks
    assert tasks[tasks["algo"] == "esspo"]["failed"].tolist() == [1]


# -- (b) numbers and verdicts in the results prose of both pages ------------------------------------
def _results_sections(text: str, prefix: str = "Results") -> dict[str, str]:
    """The ``## `` sections whose title starts with ``prefix``."""
    sections, title, body = {}, None, []
    for line in text.splitlines():
        if line.startswith("## "):
            if title is not None:
                sections[title] = "\n".join(body)
            title, body = (line[3:].strip(), []) if line[3:].startswith(prefix) else (None, [])
        elif title is not None:
            body.append(line)
    if title is not None:
        sections[title] = "\n".join(body)
    return sections


def _problems(text: str, where: str) -> list[str]:
    """Every wrong quote of ``text`` and every result of its results prose stated outside a quote."""
    problems = quotes.check_text(text, RESULTS, where)
    for title, body in _results_sections(text).items():
        problems += [f"{where}, '## {title}': {item!r} is not a quote" for item in quotes.bare_results(quotes.strip_for_prose(body))]
    return problems


@pytest.mark.parametrize("page", [README, RESULTS_README], ids=["README.md", "docs/results/README.md"])
def test_every_number_and_verdict_of_the_results_prose_is_its_reports_cell(page):
    problems = _problems(page.read_text(), str(page.relative_to(ROOT)))
    assert not problems, "\n".join(problems)


def test_the_headline_and_the_results_sections_state_their_results_in_quotes():
    headline = _results_sections(README.read_text())
    assert len(headline) == 1, "the README has one results section, the headline"
    assert len(quotes.QUOTE.findall(next(iter(headline.values())))) >= 20
    sections = _results_sections(RESULTS_README.read_text())
    for title in ("the quick suite", "equal tuning", "MinAtar", "four objectives under staleness", "after R2VPO",
                  "the paper's conditions", "why the ESS objective", "sampler mismatch"):
        body = next((b for t, b in sections.items() if title in t), None)
        assert body is not None, (title, sorted(sections))
        assert len(quotes.QUOTE.findall(body)) >= 3, f"section {title!r} states no results in quotes"


def _edits(value: str) -> list[str]:
    """Wrong versions of a quoted value: its sign flipped, its last digit nudged, its verdict word swapped."""
    out = []
    first = re.search(r"[-+]?\d[\d,]*(?:\.\d+)?", value)
    if first:
        number = first.group(0)
        flipped = ("-" + number[1:]) if number.startswith("+") else ("+" + number[1:]) if number.startswith("-") else "-" + number
        out.append(value.replace(number, flipped, 1))
        digits = [i for i, c in enumerate(value) if c.isdigit()]
        last = digits[-1]
        out.append(value[:last] + str((int(value[last]) + 3) % 10) + value[last + 1:])
    swap = {"win": "loss", "loss": "win", "inconclusive": "equivalent", "equivalent": "inconclusive"}
    for word, other in swap.items():
        if re.search(rf"\b{word}\b", value):
            out.append(re.sub(rf"\b{word}\b", other, value, count=1))
            break
    return out


@pytest.mark.parametrize("page", [README, RESULTS_README], ids=["README.md", "docs/results/README.md"])
def test_the_check_fails_on_every_edited_number_and_word(page):
    text = page.read_text()
    assert not _problems(text, "page")
    found = list(quotes.QUOTE.finditer(text))
    sample = found if page == README else found[::3]
    tried = 0
    for m in sample:
        for wrong in _edits(m["value"]):
            edited = text[:m.start("value")] + wrong + text[m.end("value"):]
            assert _problems(edited, "page"), f"the check misses {m['value']!r} -> {wrong!r} ({m['locator']})"
            tried += 1
        # the same number with its quote's markup dropped: stated outside a quote
        bare = text[:m.start()] + m["value"] + text[m.end():]
        if quotes.bare_results(quotes.strip_for_prose(m["value"])):
            assert _problems(bare, "page"), f"the check misses an unquoted {m['value']!r}"
    assert tried >= 30


def test_a_verdict_word_or_a_number_outside_a_quote_fails():
    text = RESULTS_README.read_text()
    anchor = "## Results: the quick suite (`make bench`)\n"
    for planted in ("`esspo` wins on Pendulum.", "`esspo` loses on Pendulum.", "PPO scores -12.5 there.", "a gap of 40% here.", "a tie there."):
        edited = text.replace(anchor, anchor + "\n" + planted + "\n", 1)
        assert _problems(edited, "page"), planted


def test_a_quote_naming_a_missing_row_or_two_cells_fails():
    assert quotes.check_text("<!--q staleness/verdicts.md | lag 3 | esspo | verdict @ word-->win<!--/q-->", RESULTS)
    two = quotes.check_text("<!--q staleness/verdicts.md | lag 16 | esspo | verdict @ word-->win<!--/q-->", RESULTS)
    assert two and "different cells" in two[0]
    assert not quotes.check_text("<!--q staleness/verdicts.md#Primary endpoints | lag 16 | esspo | verdict @ word-->win<!--/q-->", RESULTS)


@pytest.mark.parametrize("title", ["Results: four objectives under staleness", "Results: the paper's conditions"])
def test_the_classic_sections_quote_their_verdicts(title):
    sections = _results_sections(RESULTS_README.read_text())
    body = next(b for t, b in sections.items() if t.startswith(title))
    assert len(quotes.QUOTE.findall(body)) >= 10, "the prose gives its verdicts in quotes"
    suite = "staleness" if "staleness" in title else "paper"
    begin, end = classic.README_MARKERS[suite]
    assert begin in body and end in body
