"""Numbers and verdicts in prose, quoted from a named cell of a committed report.

A result in the README's or the results page's prose is written as a *quote*::

    <!--q staleness/verdicts.md | lag 16 | esspo | mean of per-task means @ estimate-->+0.350<!--/q-->

The comment is invisible on a rendered page; the text between the two markers is what a reader
sees. Its fields: the report (a path under ``docs/results/``), then the row's keys (each equal to a
whole cell of one table row of that report, backticks ignored), then the column (the start of its
header), optionally followed by ``@ part``: ``all`` (the whole cell, the default), ``estimate`` /
``low`` / ``high`` (the first, second, third number of the cell) or ``word`` (its first word: a
verdict). The quoted text must equal that part of the cell exactly (sign and digits), so a number
cannot silently flip sign, drift or move to another cell, and a verdict word cannot change.

A report path may name a section: ``tuned/verdicts.md#Tuned against tuned`` reads only the tables
under the heading that starts with that text (``#A#B``: section B inside section A).

``python -m adaptive_po.analysis.quotes FILE...`` checks every quote of the files and, outside
quotes, the results prose (:func:`bare_results`); ``--fill`` rewrites each quote's text from its
cell (after a report is rebuilt). ``tests/test_readme_numbers.py`` runs the check.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

QUOTE = re.compile(r"<!--q (?P<locator>[^>]*?)-->(?P<value>.*?)<!--/q-->", re.S)
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?%?")
PARTS = ("all", "estimate", "low", "high", "word")
#: verdict words a results sentence may only state through a quote
VERDICT_WORDS = re.compile(r"\b(wins?|won|loss|losses|loses|lost|ties?|tied|equivalent|inconclusive|not worse|no loss)\b", re.I)


class QuoteError(ValueError):
    pass


@dataclass(frozen=True)
class Locator:
    report: str
    keys: tuple[str, ...]
    column: str
    part: str

    @classmethod
    def parse(cls, text: str) -> "Locator":
        fields = [f.strip() for f in text.split("|")]
        if len(fields) < 3:
            raise QuoteError(f"quote locator {text!r}: want 'report | key ... | column [@ part]'")
        column, _, part = fields[-1].partition("@")
        part = part.strip() or "all"
        if part not in PARTS:
            raise QuoteError(f"quote locator {text!r}: unknown part {part!r} (one of {', '.join(PARTS)})")
        return cls(fields[0], tuple(fields[1:-1]), column.strip(), part)


def _cells(line: str) -> list[str]:
    return [c.strip().replace("`", "") for c in line.strip().strip("|").split("|")]


def _section(lines: list[str], title: str) -> list[str]:
    """The lines of the section whose heading starts with ``title``, up to the next heading of its
    level or above."""
    for i, line in enumerate(lines):
        level = len(line) - len(line.lstrip("#"))
        if level and line[level:].strip().startswith(title):
            end = next((j for j in range(i + 1, len(lines)) if 0 < len(lines[j]) - len(lines[j].lstrip("#")) <= level), len(lines))
            return lines[i:end]
    raise QuoteError(f"no section {title!r}")


@lru_cache(maxsize=None)
def _tables(path: Path, stamp: float, section: str = "") -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table of ``path`` (of its ``section`` only, where given): (header cells, rows of cells)."""
    tables, lines = [], path.read_text().splitlines()
    for title in filter(None, section.split("#")):  # "A#B": section B within section A
        lines = _section(lines, title.strip())
    i = 0
    while i < len(lines) - 1:
        if lines[i].lstrip().startswith("|") and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]) and "-" in lines[i + 1]:
            header, rows = _cells(lines[i]), []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            tables.append((header, rows))
        else:
            i += 1
    return tables


def cell(results: Path, locator: Locator) -> str:
    """The cell a locator names; ``QuoteError`` where the report, the row or the column is missing
    or the locator names two different cells."""
    report, _, section = locator.report.partition("#")
    path = results / report.strip()
    if not path.is_file():
        raise QuoteError(f"no report {report} under {results}")
    found = set()
    try:
        tables = _tables(path, path.stat().st_mtime, section.strip())
    except QuoteError as error:
        raise QuoteError(f"{report}: {error}") from None
    for header, rows in tables:
        columns = [i for i, h in enumerate(header) if h.startswith(locator.column)]
        if not columns:
            continue
        for row in rows:
            if all(key.replace("`", "") in row for key in locator.keys) and columns[0] < len(row):
                found.add(row[columns[0]])
    if not found:
        raise QuoteError(f"{locator.report}: no row with {list(locator.keys)} in a table with a column {locator.column!r}")
    if len(found) > 1:
        raise QuoteError(f"{locator.report}: {list(locator.keys)} / {locator.column!r} names {len(found)} different cells: {sorted(found)}")
    return found.pop()


def part_of(text: str, part: str) -> str:
    if part == "all":
        return text
    if part == "word":
        word = re.match(r"[A-Za-z][\w-]*(?: [a-z]+ aggregation)?", text)
        if not word:
            raise QuoteError(f"cell {text!r} has no word")
        return word.group(0)
    numbers = NUMBER.findall(text)
    index = ("estimate", "low", "high").index(part)
    if index >= len(numbers):
        raise QuoteError(f"cell {text!r} has no {part}")
    return numbers[index]


def quoted(results: Path, locator_text: str) -> str:
    locator = Locator.parse(locator_text)
    return part_of(cell(results, locator), locator.part)


def check_text(text: str, results: Path, where: str = "") -> list[str]:
    """Every quote of ``text`` whose value is not its cell's, named."""
    problems = []
    for m in QUOTE.finditer(text):
        try:
            want = quoted(results, m["locator"])
        except QuoteError as error:
            problems.append(f"{where}: {error}")
            continue
        if m["value"] != want:
            problems.append(f"{where}: quote {m['locator']!r} says {m['value']!r}, the report says {want!r}")
    return problems


def fill_text(text: str, results: Path) -> str:
    return QUOTE.sub(lambda m: f"<!--q {m['locator']}-->{quoted(results, m['locator'])}<!--/q-->", text)


# -- what results prose may say outside quotes ------------------------------------------------------
#: set-up facts that may stand as bare integers: budgets, seeds, lags, sizes, counts of the design
SETUP = re.compile(
    r"\bT = \d+(?:\.\d+)?|\btemperature \d+(?:\.\d+)?|\babout \d+(?:\.\d+)? (?:h|min)\b|\bGPL-\d\.\d\b|\b(?:19|20)\d\d\b"
    r"|\b\d+ × \d+\b|\b\d+ to \d+\b|\blag-\d+\b|\b\d+ CPU cores\b|\b\d+ cores\b"
    r"|\b\d[\d,]*(?:k|M)?\s+(?:steps?|seeds?|runs|trials|tasks|games|objectives|arms|members|epochs|updates?|transitions|episodes|"
    r"samples|search seeds|scoring seeds|environments|minutes|hours|h|min|s|x|×)\b"
    r"|\b(?:lags?|seeds?|lag|T =|version|step|epochs?|updates?)\s+[\d, and-]*\d\b|\b\d+(?:k|M)\b|\b(?:19|20)\d\d-\d\d-\d\d\b|\b\d+-\d+\b"
    r"|\b\d+-(?:update|step|member|seed|task)s?\b"
    # the protocol's own constants: the margin, the levels, the normalization's anchors
    r"|±0\.1\b|\b95%|\b80%|\b[01] = (?:random|solved|reference)\b",
    re.I,
)


def bare_results(prose: str) -> list[str]:
    """Numbers and verdict words of results prose (generated blocks, tables, code, links and quotes
    already removed) that are not quoted: any decimal, percentage or signed number, any integer
    that is not a set-up fact (:data:`SETUP`), and any verdict word."""
    text = SETUP.sub(" ", prose)
    found = [n for n in re.findall(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?%?(?![\w])", text)]
    found += [w.group(0) for w in VERDICT_WORDS.finditer(prose)]
    return found


def strip_for_prose(section: str) -> str:
    """A section without generated blocks, HTML comments, quotes, fenced code, tables, inline code,
    images and link targets: the hand-written prose."""
    text = re.sub(r"<!-- (\S*?)begin.*?-->.*?<!-- \1end -->", "", section, flags=re.S)
    text = QUOTE.sub(" ", text)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.quotes", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--results", default="docs/results", help="the folder the locators' report paths are under")
    parser.add_argument("--fill", action="store_true", help="rewrite each quote's text from its cell")
    args = parser.parse_args(argv)
    results = Path(args.results)
    problems = []
    for name in args.files:
        path = Path(name)
        text = path.read_text()
        if args.fill:
            from ..contract import atomic_write_text

            try:
                atomic_write_text(path, fill_text(text, results))
            except QuoteError as error:
                problems.append(f"{name}: {error}")
        else:
            problems += check_text(text, results, name)
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s) in {len(args.files)} file(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
