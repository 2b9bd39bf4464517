"""The READMEs' results say only what a committed report says.

Two pages state results: the project README (``README.md``, the headline) and the results page
(``docs/results/README.md``, every section and the generated blocks).

(a) The staleness and paper verdicts (``adaptive_po.analysis.reports.staleness_and_paper_verdicts``) rebuild byte for byte from the committed
run table alone: ``verdicts.md``, ``per_run.csv`` and the results page's generated blocks.
(b) Every number and verdict word of the results prose (``README.md``'s "Results" section and every
"## Results" section of ``docs/results/README.md``, outside generated blocks, code and tables that quote
nothing; a table that quotes a cell is read as prose) is a
*quote* (:mod:`adaptive_po.analysis.quotes`): a reference link ``[text][key]`` whose definition
names its report, row and column, and its text must equal that cell with its sign and digits. A number or verdict word outside a quote fails, except the
set-up facts :data:`adaptive_po.analysis.quotes.SETUP` allows (budgets, seeds, lags, dates). The
check is shown to fail on edited numbers and words (signs flipped, digits nudged, win and loss
swapped, a quote's markup dropped), and on keys in error: defined twice, used but not defined,
defined but never used; a renamed report column is named once, by its definition's key.
(c) A quoted interval's verdict word agrees with it (:func:`adaptive_po.analysis.quotes.interval_words`):
shown to fail on planted sentences.
(d) The README's answer table is generated (:mod:`adaptive_po.analysis.answer`): each cell is a
report's cell, located in ``docs/results/answer.toml``; the check fails on every edited number and
word, on an estimate beside words it does not bear out, and names the row of a bad rows file.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from adaptive_po.analysis import answer, quotes
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
_results_sections = quotes.results_sections


def _problems(text: str, where: str, base: Path = RESULTS) -> list[str]:
    """Every wrong quote, key or definition of ``text`` and every result of its results prose stated
    outside a quote (``base``: the folder of the page, which its definitions' targets are relative to)."""
    return quotes.problems(text, base, where)


@pytest.mark.parametrize("page", [README, RESULTS_README], ids=["README.md", "docs/results/README.md"])
def test_every_number_and_verdict_of_the_results_prose_is_its_reports_cell(page):
    problems = _problems(page.read_text(), str(page.relative_to(ROOT)), page.parent)
    assert not problems, "\n".join(problems)


def test_the_headline_and_the_results_sections_state_their_results_in_quotes():
    headline = _results_sections(README.read_text())
    assert len(headline) == 1, "the README has one results section, the headline"
    assert len(answer.read_rows()) >= 15 and answer.BEGIN in next(iter(headline.values()))
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


def test_the_check_fails_on_every_edited_number_and_word():
    page = RESULTS_README
    text = page.read_text()
    assert not _problems(text, "page", page.parent)
    found = list(quotes.QUOTE.finditer(text))
    sample = found[::3]
    tried = 0
    for m in sample:
        for wrong in _edits(m["value"]):
            edited = text[:m.start("value")] + wrong + text[m.end("value"):]
            problems = _problems(edited, "page", page.parent)
            assert any(f"quote [{m['key']}] says {wrong!r}" in p for p in problems), f"the check misses {m['value']!r} -> {wrong!r} ([{m['key']}])"
            tried += 1
        # the same number with its quote's markup dropped: stated outside a quote
        bare = text[:m.start()] + m["value"] + text[m.end():]
        if quotes.bare_results(quotes.strip_for_prose(m["value"])):
            assert any("is not a quote" in p for p in _problems(bare, "page", page.parent)), f"the check misses an unquoted {m['value']!r}"
    assert tried >= 30


def test_a_verdict_word_or_a_number_outside_a_quote_fails():
    text = RESULTS_README.read_text()
    anchor = "## Results: the quick suite (`make bench`)\n"
    for planted in ("`esspo` wins on Pendulum.", "`esspo` loses on Pendulum.", "PPO scores -12.5 there.", "a gap of 40% here.", "a tie there."):
        edited = text.replace(anchor, anchor + "\n" + planted + "\n", 1)
        assert _problems(edited, "page"), planted


def _page(*lines: str, definitions: tuple[str, ...] = ()) -> str:
    return "\n".join(lines) + "\n\n" + "\n".join(definitions) + "\n"


def test_a_quote_naming_a_missing_row_or_column_or_part_or_two_cells_fails():
    def check(title: str, text: str = "[win][k]") -> list[str]:
        return quotes.check_text(_page(text, definitions=(f'[k]: staleness/verdicts.md "{title}"',)), RESULTS)

    assert check("lag 3 | esspo | verdict @ word")  # no row
    assert check("#Primary endpoints | lag 16 | esspo | no such column @ word")
    assert check("#No such section | lag 16 | esspo | verdict @ word")
    assert "unknown part" in check("#Primary endpoints | lag 16 | esspo | verdict @ verdict")[0]
    two = check("lag 16 | esspo | verdict @ word")
    assert two and "different cells" in two[0]
    assert not check("#Primary endpoints | lag 16 | esspo | verdict @ word")
    assert check("#Primary endpoints | lag 16 | esspo | verdict @ word", "[loss][k]")
    missing = quotes.check_text(_page("[win][k]", definitions=('[k]: nowhere/verdicts.md "lag 16 | esspo | verdict @ word"',)), RESULTS)
    assert missing and "no report" in missing[0]


def test_a_key_defined_twice_used_undefined_or_defined_unused_is_named():
    good = '[lag16-verdict]: staleness/verdicts.md "#Primary endpoints | lag 16 | esspo | verdict @ word"'
    assert not quotes.check_text(_page("a [win][lag16-verdict], again [win][lag16-verdict]", definitions=(good,)), RESULTS)
    twice = quotes.check_text(_page("a [win][lag16-verdict]", definitions=(good, good)), RESULTS)
    assert twice == [": quote key [lag16-verdict] is defined 2 times"]
    undefined = quotes.check_text(_page("a [win][lag16-verdict], a [win][lag4-verdict]", definitions=(good,)), RESULTS)
    assert undefined == [": quote key [lag4-verdict] is used but not defined"]
    unused = quotes.check_text(_page("a [win][lag16-verdict]", definitions=(good, good.replace("[lag16-verdict]", "[spare]"))), RESULTS)
    assert unused == [": quote key [spare] is defined but never used"]
    untitled = quotes.check_text(_page("a [win][lag16-verdict]", definitions=("[lag16-verdict]: staleness/verdicts.md",)), RESULTS)
    assert untitled and "[lag16-verdict] has no locator" in untitled[0]


def test_the_modules_example_is_a_page_that_passes_and_a_foreign_definition_fails():
    example = textwrap.dedent(quotes.__doc__.split("::\n", 1)[1].split("\n\nThe link text", 1)[0])
    assert len(quotes.QUOTE.findall(example)) == 2 and not quotes.check_text(example, RESULTS)
    foreign = quotes.check_text(example + "[Project Page]: https://example.org\n", RESULTS)
    assert foreign and "is not a quote's definition" in foreign[0]


def test_link_text_with_inner_brackets_is_one_quote_and_renders_as_one_link():
    text = _page("esspo - ppo: [+0.350 [+0.228, +0.473]][lag16] at lag 16.",
                 definitions=('[lag16]: staleness/verdicts.md "#Primary endpoints | lag 16 | esspo | mean of per-task means"',))
    assert [(m["value"], m["key"]) for m in quotes.QUOTE.finditer(text)] == [("+0.350 [+0.228, +0.473]", "lag16")]
    assert not quotes.check_text(text, RESULTS)
    markdown = pytest.importorskip("markdown")
    html = markdown.markdown(text)
    assert '<a href="staleness/verdicts.md" title="#Primary endpoints | lag 16 | esspo | mean of per-task means">+0.350 [+0.228, +0.473]</a>' in html, html


def test_renaming_a_report_column_is_one_definitions_edit(tmp_path):
    """A column renamed in a report: the check names each definition of that column once, however
    many uses it has, and no use; editing those definitions alone mends the page."""
    shutil.copytree(RESULTS, tmp_path, ignore=lambda folder, names: [n for n in names if "." in n and not n.endswith(".md")], dirs_exist_ok=True)
    report = tmp_path / "quick" / "results.md"
    report.write_text(report.read_text().replace("| verdict (Holm p) |", "| decision (Holm p) |"))
    text = RESULTS_README.read_text()
    keys = {d.key for d in quotes.definitions(text)[0].values() if d.target == "quick/results.md" and " | verdict" in d.title}
    uses = [m for m in quotes.QUOTE.finditer(text) if m["key"] in keys]
    assert keys and len(uses) > len(keys), "a key of that column is used more than once"
    problems = quotes.check_text(text, tmp_path, "page")
    named = [re.search(r"quote key \[([^\]]+)\]", p)[1] for p in problems]
    assert sorted(named) == sorted(keys), problems  # each definition once, no use
    assert all("no row with" in p and "a column 'verdict'" in p for p in problems), problems
    edited = re.sub(r'(?m)^(\[[^\]]+\]: quick/results\.md ".*) \| verdict', r"\1 | decision", text)
    assert edited.count("| decision") == len(keys)
    assert not quotes.check_text(edited, tmp_path, "page")


@pytest.mark.parametrize("title", ["Results: four objectives under staleness", "Results: the paper's conditions"])
def test_the_classic_sections_quote_their_verdicts(title):
    sections = _results_sections(RESULTS_README.read_text())
    body = next(b for t, b in sections.items() if t.startswith(title))
    assert len(quotes.QUOTE.findall(body)) >= 10, "the prose gives its verdicts in quotes"
    suite = "staleness" if "staleness" in title else "paper"
    begin, end = classic.README_MARKERS[suite]
    assert begin in body and end in body


# -- a verdict word against its interval ----------------------------------------------------------------
@pytest.mark.parametrize("planted, word", [
    ("`esspo` wins within the searched schedule: [+0.088 [-0.078, +0.254]][schedule-objective-lag0].", "wins"),
    ("`esspo` loses to `ppo` there, [+0.088 [-0.078, +0.254]][schedule-objective-lag0].", "loses"),
    ("The stale actor costs `ppo` on Freeway, [+0.026 [-0.194, +0.246]][mpilot-freeway-hurt].", "costs"),
    ("`esspo` is better than `ppo` at lag 0 within it ([+0.088 [-0.078, +0.254]][schedule-objective-lag0]).", "better"),
    ("Retuning is worse for it: [-0.065 [-0.294, +0.163]][schedule-a3b].", "worse"),
    ("The searched schedule is not shown to cost PPO: [-0.452 [-0.608, -0.296]][schedule-ppo-lag0].", "not shown to cost"),
    ("Where `ppo` learns, the stale actor does not cost it: Freeway [+0.026 [-0.194, +0.246]][mpilot-freeway-hurt].", "does not cost"),
])
def test_a_verdict_word_beside_an_interval_that_does_not_bear_it_out_fails(planted, word):
    """A word of a difference beside a quoted interval that spans zero, a word of none shown beside one
    that excludes zero, a word of no effect beside one wider than the margin: each named, with its quote."""
    text = RESULTS_README.read_text()
    assert not quotes.interval_words(text, "page") and not quotes.interval_words(README.read_text(), "README.md")
    anchor = "\n\n### MinAtar at learning budgets"
    assert anchor in text
    edited = text.replace(anchor, "\n\n" + planted + anchor, 1)
    found = quotes.interval_words(edited, "page")
    assert len(found) == 1 and f"{word!r} beside [" in found[0], found
    assert any(f"{word!r} beside [" in p for p in _problems(edited, "page")), "the page check runs it"


# -- the README's answer table: generated from the reports' cells -----------------------------------
def test_the_readmes_answer_table_is_its_reports_cells(capsys):
    assert answer.main(["--check"]) == 0, capsys.readouterr().out
    text = README.read_text()
    assert not quotes.DEFINITION.search(text) and not quotes.QUOTE.search(text), "the README holds quote markup; its answer is generated"
    table = answer.BLOCK.search(text)["table"]
    links = list(re.finditer(r"\[(?P<value>[^\[\]\n]*(?:\[[^\[\]\n]*\][^\[\]\n]*)?)\]\((?P<target>docs/results/[^)]+)\)", table))
    assert len(links) >= 30
    for m in links:
        assert (ROOT / m["target"]).is_file(), m["target"]
    built = answer.render(answer.read_rows(), RESULTS)
    tried = 0
    for m in links:  # every edited number and word of a cell differs from the rebuilt table, which restores it
        for wrong in _edits(m["value"]):
            edited = text.replace(table, table[:m.start("value")] + wrong + table[m.end("value"):], 1)
            assert edited != text and answer.rebuilt(edited, built) == text
            tried += 1
    assert tried >= 40


def _rows_file(tmp_path: Path, edit: tuple[str, str] | None = None, append: str = "") -> Path:
    text = answer.ROWS.read_text()
    if edit:
        assert edit[0] in text, edit[0]
        text = text.replace(*edit, 1)
    path = tmp_path / "answer.toml"
    path.write_text(text + append)
    return path


def test_the_answer_tables_words_are_checked_against_their_intervals(tmp_path):
    rows = _rows_file(tmp_path, ('words = "not shown;', 'words = "costs it;'))
    with pytest.raises(answer.AnswerError, match=r"'costs' beside \[\+0\.026"):
        answer.render(answer.read_rows(rows), RESULTS)
    rows = _rows_file(tmp_path, ('after = "to none"', 'after = "so it wins"'))
    with pytest.raises(answer.AnswerError, match=r"'wins' beside \[\+0\.004"):
        answer.render(answer.read_rows(rows), RESULTS)


@pytest.mark.parametrize(("edit", "append", "message"), [
    (("esspo's retuning tax at lag 8 | estimate", "esspo's retuning tax at lag 9 | estimate"), "", r"row 5 .*no row with"),
    (("frozen/verdicts.md#The answer | 1.", "frozen/verdict.md#The answer | 1."), "", r"row 3 .*no report frozen/verdict\.md"),
    (None, '\n[[rows]]\nquestion = "q"\ncomparison = "c"\nverdict = ["frozen/verdicts.md | x | y"]\n', r"row {next}: unknown key\(s\) \['verdict'\]"),
    (None, '\n[[rows]]\nquestion = "q"\ncomparison = "c"\n', r"row {next}: give verdicts \(locators\) or words"),
    (None, '\n[[rows]]\nquestion = "a | b"\ncomparison = "c"\nwords = "w"\n', r"row {next}: question 'a \| b' holds a '\|'"),
    (None, "\n[[rows]\n", r"not TOML"),
])
def test_bad_answer_rows_are_errors_naming_the_row(tmp_path, capsys, edit, append, message):
    rows = _rows_file(tmp_path, edit, append)
    message = message.replace("{next}", str(len(answer.read_rows()) + 1))  # a row appended after the committed ones
    readme = tmp_path / "README.md"
    readme.write_text(README.read_text())
    assert answer.main(["--rows", str(rows), "--readme", str(readme), "--results", str(RESULTS)]) == 2
    assert re.search(message, capsys.readouterr().out)
    assert readme.read_text() == README.read_text(), "nothing written"


def test_the_words_next_to_an_interval_are_its_own_and_a_reports_adjusted_verdict_may_stand_beside_it():
    page = lambda *lines: "\n".join(lines) + "\n"  # noqa: E731
    # each interval reads the first word after it (up to the next interval), else the last before it
    assert not quotes.interval_words(page("A is [+0.3 [+0.1, +0.5]][a] ([win][b]) and B [+0.1 [-0.2, +0.4]][c] ([inconclusive][d])."))
    assert quotes.interval_words(page("A is [+0.3 [+0.1, +0.5]][a] and B [+0.1 [-0.2, +0.4]][c], a win."))
    # the report's own (Holm-adjusted) verdict beside an unadjusted interval that excludes zero
    assert not quotes.interval_words(page("At lag 8 [+0.116 [+0.028, +0.205]][a] ([inconclusive][b])."))
    assert quotes.interval_words(page("At lag 8 [+0.116 [+0.028, +0.205]][a], inconclusive."))
    # a clause ends at a top-level semicolon, not at one inside parentheses; keys and code are not words
    assert not quotes.interval_words(page("It is not shown to cost (3 seeds; per lag): X [+0.026 [-0.194, +0.246]][win-cost]; `wins` [+0.1 [-0.2, +0.3]][k]."))
    assert quotes.interval_words(page("It costs; X [+0.026 [-0.194, +0.246]][a], a loss."))


def test_a_table_that_quotes_a_cell_is_read_as_prose_and_one_that_quotes_none_is_left_out():
    quoted = "| a | [+0.1 [-0.2, +0.4]][k] | win |\n|---|---|---|\n| b | 0.37 | [win][w] |\n"
    assert sorted(quotes.bare_results(quotes.strip_for_prose(quoted))) == ["0.37", "win"]
    measured = "| a | b |\n|---|---|\n| speed | 0.37 s |\n"
    assert quotes.bare_results(quotes.strip_for_prose(measured)) == []
