"""The READMEs' results say only what a committed report says.

Two pages state results: the project README (``README.md``, the headline) and the results page
(``docs/results/README.md``, every section and the generated blocks).

(a) The staleness and paper verdicts (``adaptive_po.analysis.reports.staleness_and_paper_verdicts``) rebuild byte for byte from the committed
run table alone: ``verdicts.md``, ``per_run.csv`` and the results page's generated blocks.
(b) Every decimal number in the prose (outside generated blocks, tables and code; intervals and
"±" values included) of every section of ``README.md``, and of every section of
``docs/results/README.md`` whose heading starts with "## Results", is written in at least one
committed text report under ``docs/results/`` (the results page itself does not count). A dry-run
duration ("about 37.5 h") is left to ``tests/test_docs.py``, which checks it against the bench.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from adaptive_po.analysis.reports import staleness_and_paper_verdicts as classic

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
RUNS = RESULTS / "paper" / "runs.csv"
README = ROOT / "README.md"
RESULTS_README = RESULTS / "README.md"
NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)[-+]?\d+\.\d+(?![\w.]*\d)")  # not a version or a licence (GPL-3.0)


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


# -- (b) numbers in the results prose of both pages ------------------------------------------------
#: a dry-run estimate of a make target ("about 37.5 h"): tests/test_docs.py checks it against the bench
DRY_RUN_DURATION = re.compile(r"\babout \d+(?:\.\d+)? (?:h|min)\b")


def _results_sections(text: str, prefix: str = "Results") -> dict[str, str]:
    """The ``## `` sections whose title starts with ``prefix`` (every section for ``prefix=""``)."""
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


def _prose(section: str) -> str:
    """The section without generated blocks, HTML comments, fenced code, tables, inline code and link targets."""
    text = re.sub(r"<!-- (\S*?)begin.*?-->.*?<!-- \1end -->", "", section, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))
    text = re.sub(r"`[^`]*`", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def _published_numbers() -> set[str]:
    """The decimal numbers of every committed report under docs/results/ (.md), the results page,
    which quotes them, left out."""
    numbers = set()
    for path in sorted(RESULTS.rglob("*")):
        if path.is_file() and path.suffix == ".md" and path != RESULTS_README:
            numbers.update(n.lstrip("+") for n in NUMBER.findall(path.read_text(errors="replace")))
    return numbers


def _found(number: str, published: set[str]) -> bool:
    number = number.lstrip("+")
    # an unsigned number in prose (a range "0.727 to 0.855", a size) may be written signed in a report
    return number in published or (not number.startswith("-") and f"-{number}" in published)


def test_the_prose_walker_skips_generated_blocks_tables_and_code():
    section = "a 1.25 b\n<!-- results:x:begin (gen) -->\n9.99\n<!-- results:x:end -->\n| 8.88 |\n`7.77` [l](docs/v1.5.md) -0.5 [0.1, +0.2] and 3 ± 1.5"
    assert NUMBER.findall(_prose(section)) == ["1.25", "-0.5", "0.1", "+0.2", "1.5"]


def _missing(page: Path, sections: dict[str, str]) -> list[str]:
    published = _published_numbers()
    return [
        f"{number!r} in {page.relative_to(ROOT)}, section '## {title}'"
        for title, body in sections.items()
        for number in dict.fromkeys(NUMBER.findall(DRY_RUN_DURATION.sub("", _prose(body))))
        if not _found(number, published)
    ]


def test_the_published_numbers_leave_out_the_results_page_itself():
    published = _published_numbers()
    assert "0.364" in published  # the quick suite's lag-16 aggregate, from tuned/verdicts.md
    assert RESULTS_README.is_file() and not _found("12345.678", published)


def test_every_decimal_number_in_the_results_page_prose_is_in_a_committed_report():
    sections = _results_sections(RESULTS_README.read_text())
    titles = " ".join(sections)
    for title in ("the quick suite", "equal tuning", "MinAtar", "four objectives under staleness (`make bench-staleness`)",
                  "the paper's conditions", "why the ESS objective loses on fresh data"):
        assert title in titles, sorted(sections)
    missing = _missing(RESULTS_README, sections)
    assert not missing, "numbers in docs/results/README.md's results prose that no report under docs/results/ (.md) contains:\n" + "\n".join(missing)


def test_every_decimal_number_in_the_readme_prose_is_in_a_committed_report():
    sections = _results_sections(README.read_text(), prefix="")
    headline = [body for title, body in sections.items() if title.startswith("Results")]
    assert len(headline) == 1, "the README has one results section, the headline"
    assert len(NUMBER.findall(_prose(headline[0]))) >= 10, "the headline gives its verdicts in numbers"
    missing = _missing(README, sections)
    assert not missing, "numbers in README.md's prose that no report under docs/results/ (.md) contains:\n" + "\n".join(missing)


@pytest.mark.parametrize("title", ["Results: four objectives under staleness", "Results: the paper's conditions"])
def test_the_classic_sections_quote_their_verdicts(title):
    sections = _results_sections(RESULTS_README.read_text())
    body = next(b for t, b in sections.items() if t.startswith(title))
    numbers = NUMBER.findall(_prose(body))
    assert len(numbers) >= 10, "the prose gives its verdicts in numbers"
    suite = "staleness" if "staleness" in title else "paper"
    begin, end = classic.README_MARKERS[suite]
    assert begin in body and end in body
