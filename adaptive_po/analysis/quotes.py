"""Numbers and verdicts in prose, quoted from a named cell of a committed report.

A result in the README's or the results page's prose is written as a *quote*: a Markdown
reference link whose text is the result and whose definition names the cell it quotes::

    ESS over PPO at lag 16: [+0.350 [+0.228, +0.473]][staleness-lag16], a [win][staleness-lag16-verdict].

    [staleness-lag16]: staleness/verdicts.md "#Primary endpoints | lag 16 | esspo | mean of per-task means"
    [staleness-lag16-verdict]: staleness/verdicts.md "#Primary endpoints | lag 16 | esspo | verdict @ word"

The link text is what a reader sees (linked to the report); the definitions, one per key, stand at
the end of the file and do not render. A definition's target is the report, a path relative to the
Markdown file that holds it (so the link works on GitHub); its title is the *locator*: optionally
``#Section`` first (the tables under the heading that starts with that text; ``#A#B``: section B
inside section A), then the row's keys (each equal to a whole cell of one table row of that report,
backticks ignored), then the column (the start of its header), optionally followed by ``@ part``:
``all`` (the whole cell, the default), ``estimate`` / ``low`` / ``high`` (the first, second, third
number of the cell) or ``word`` (its first word: a verdict). Each use's text must equal that part
of the cell exactly (sign and digits), so a number cannot silently flip sign, drift or move to
another cell, and a verdict word cannot change. Keys are short and say what the cell is; a key may
be used many times, each use checked, and is defined once: a key defined twice, a key used but not
defined and a definition never used are errors naming the key, as is a definition whose cell is
missing (named once, however many uses it has: renaming a report's column is one definition's edit).
Every ``[text][key]`` and ``[key]: ...`` of a checked file is a quote.

Written out, target and title make the locator ``report#Section | key ... | column @ part``
(:func:`quoted` reads that form too).

A quoted interval (``estimate [low, high]``) must also agree with the verdict word beside it
(:func:`interval_words`): a word of a difference (win, loses, costs, better, worse, ...) beside an
interval that spans zero, a word of none shown (not shown, inconclusive, ...) beside one that
excludes it, or a word of no effect (does not cost, gains nothing) beside one wider than the ±0.1
margin is an error naming the word and the quote.

``python -m adaptive_po.analysis.quotes FILE...`` checks every quote of the files and, outside
quotes, the prose of their "## Results" sections (:func:`bare_results`; a table that quotes a cell
counts as prose); ``--fill`` rewrites each
quote's text from its cell (after a report is rebuilt). ``tests/test_readme_numbers.py`` runs the
check.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

#: a quote's use: ``[text][key]``, the text on one line, its brackets balanced (one level deep)
KEY = r"[a-z0-9][a-z0-9.-]*"
QUOTE = re.compile(rf"\[(?P<value>(?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\[(?P<key>{KEY})\]")
#: a quote's definition: ``[key]: report "locator"`` on a line of its own
DEFINITION = re.compile(rf'^\[(?P<key>{KEY})\]:[ \t]+(?P<target>\S+)(?:[ \t]+"(?P<title>[^"\n]*)")?[ \t]*$', re.M)
#: any reference definition, quote or not: each must be a quote
ANY_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:", re.M)
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
    """The quoted text of ``locator_text`` (``report#Section | key ... | column @ part``, the
    report under ``results``)."""
    locator = Locator.parse(locator_text)
    return part_of(cell(results, locator), locator.part)


@dataclass(frozen=True)
class Definition:
    key: str
    target: str
    title: str

    @property
    def locator(self) -> str:
        """Target and title as one locator: ``report#Section | key ... | column @ part``."""
        return self.target + (self.title if self.title.startswith("#") else " | " + self.title)


def definitions(text: str, where: str = "") -> tuple[dict[str, Definition], list[str]]:
    """The quotes' definitions of ``text`` by key, and the problems: a key defined twice, a
    definition without a locator, a reference definition that is not a quote's."""
    found: dict[str, list[Definition]] = {}
    problems = []
    for m in DEFINITION.finditer(text):
        if m["title"] is None:
            problems.append(f"{where}: quote key [{m['key']}] has no locator (its definition wants a \"title\")")
            continue
        found.setdefault(m["key"], []).append(Definition(m["key"], m["target"], m["title"]))
    defined = {m.start() for m in DEFINITION.finditer(text)}
    for m in ANY_DEFINITION.finditer(text):
        if m.start() not in defined:
            line = text[m.start():].split("\n", 1)[0]
            problems.append(f"{where}: {line!r} is not a quote's definition ([key]: report \"locator\")")
    for key, defs in found.items():
        if len(defs) > 1:
            problems.append(f"{where}: quote key [{key}] is defined {len(defs)} times")
    return {key: defs[0] for key, defs in found.items()}, problems


def _resolved(text: str, base: Path, where: str) -> tuple[dict[str, str], list[str]]:
    """Each used and defined key's quoted text, and the problems of the definitions and keys (each
    named once, not once per use)."""
    defs, problems = definitions(text, where)
    used = {m["key"] for m in QUOTE.finditer(text)}
    problems += [f"{where}: quote key [{key}] is used but not defined" for key in sorted(used - set(defs))]
    problems += [f"{where}: quote key [{key}] is defined but never used" for key in sorted(set(defs) - used)]
    wants = {}
    for key in sorted(used & set(defs)):
        try:
            wants[key] = quoted(base, defs[key].locator)
        except QuoteError as error:
            problems.append(f"{where}: quote key [{key}]: {error}")
    return wants, problems


def check_text(text: str, base: Path, where: str = "") -> list[str]:
    """Every quote of ``text`` whose text is not its cell's, and every key or definition in error,
    named; ``base`` is the folder of the Markdown file (its definitions' targets are relative to it)."""
    wants, problems = _resolved(text, base, where)
    for m in QUOTE.finditer(text):
        want = wants.get(m["key"])
        if want is not None and m["value"] != want:
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{where}:{line}: quote [{m['key']}] says {m['value']!r}, the report says {want!r}")
    return problems


def fill_text(text: str, base: Path) -> str:
    """``text`` with each quote's text rewritten from its cell; ``QuoteError`` naming every key or
    definition in error."""
    wants, problems = _resolved(text, base, "")
    if problems:
        raise QuoteError("; ".join(p.lstrip(": ") for p in problems))
    for key, want in wants.items():
        if not QUOTE.fullmatch(f"[{want}][{key}]"):
            raise QuoteError(f"quote key [{key}]: the cell {want!r} cannot be a link's text (a line, brackets balanced one deep)")
    return QUOTE.sub(lambda m: f"[{wants[m['key']]}][{m['key']}]", text)


# -- what results prose may say outside quotes ------------------------------------------------------
#: set-up facts that may stand as bare integers: budgets, seeds, lags, sizes, counts of the design
SETUP = re.compile(
    r"\bT = \d+(?:\.\d+)?|\btemperature \d+(?:\.\d+)?|\babout \d+(?:\.\d+)? (?:h|min)\b|\bGPL-\d\.\d\b|\b(?:19|20)\d\d\b"
    r"|\b\d+ × \d+\b|\b\d+ to \d+\b|\blag-\d+\b|\b\d+ CPU cores\b|\b\d+ cores\b"
    r"|\b\d[\d,]*(?:k|M)?\s+(?:steps?|seeds?|runs|trials|tasks|games|objectives|arms|members|epochs|updates?|transitions|episodes|"
    r"samples|search seeds|scoring seeds|environments|minutes|hours|h|min|s|x|×)\b"
    r"|\b(?:lags?|seeds?|lag|T =|version|step|epochs?|updates?)\s+[\d, and-]*\d\b|\b\d+(?:k|M)\b|\b(?:19|20)\d\d-\d\d-\d\d\b|\b\d+-\d+\b"
    r"|\b\d+-(?:update|step|member|seed|task)s?\b|\bAVX-512\b"
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


def _tables_as_prose(text: str) -> str:
    """``text`` with each Markdown table that quotes a cell read as prose (its rows' cells, so that a
    number or verdict word beside the quotes must be a quote too) and every other table left out (a
    table of measurements written by hand)."""
    out: list[str] = []
    block: list[str] = []

    def flush() -> None:
        if block and any(QUOTE.search(line) for line in block):
            out.extend(line.replace("|", " ") for line in block if not re.match(r"^\s*\|[\s:|-]+\|\s*$", line))
        block.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            block.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out)


def strip_for_prose(section: str) -> str:
    """A section without generated blocks, HTML comments, fenced code, tables that quote nothing,
    quotes and their definitions, inline code, images and link targets: the hand-written prose (a
    table that quotes a cell is read as prose)."""
    text = re.sub(r"<!-- (\S*?)begin.*?-->.*?<!-- \1end -->", "", section, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = _tables_as_prose(text)
    text = QUOTE.sub(" ", text)
    text = DEFINITION.sub("", text)
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def results_sections(text: str, prefix: str = "Results") -> dict[str, str]:
    """The ``## `` sections of a page whose title starts with ``prefix``: title -> body."""
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


# -- a sentence's verdict word against its interval -------------------------------------------------
#: a quoted interval: the quote's text starts with ``estimate [low, high]``
INTERVAL = re.compile(r"^\s*[-+]?\d[\d,]*(?:\.\d+)?\s*\[(?P<low>[-+]?\d[\d,]*(?:\.\d+)?), (?P<high>[-+]?\d[\d,]*(?:\.\d+)?)\]")
#: words that say no difference is shown (tried first, so "not shown to cost" is one of them)
NULL_WORDS = (r"\bnot shown(?: to (?:be )?[\w-]+)?|\binconclusive\b|\bnot decided\b|\bno (?:measurable |shown )?difference\b"
              r"|\bnothing measurable\b|\bnot (?:measurably )?(?:costs?|hurts?)\b|\b(?:covers?|spans?|includes?) zero\b")
#: words that say there is none: an equivalence, which an interval shows only within the ±0.1 margin
NONE_WORDS = r"\bdoes not (?:cost|hurt|change|matter)\b|\b(?:costs|gains|buys) nothing\b"
#: words that say there is one
DIFFERENCE_WORDS = (r"\b(?:wins?|won|beats?|loss|losses|loses|lost|costs?|better|worse|ahead|behind|(?<!non-)inferior"
                    r"|widen(?:s|ed)?)\b")
#: (a phrase may break across lines)
CLAIM = re.compile("(?P<none>" + NONE_WORDS.replace(" ", r"\s+") + ")|(?P<null>" + NULL_WORDS.replace(" ", r"\s+") + ")"
                   "|(?P<difference>" + DIFFERENCE_WORDS + ")", re.I)
#: where a sentence ends: a full stop (bold or not) before the next sentence, a paragraph, a list item, a table row
SENTENCE_END = re.compile(r"[.!?]\**(?=\s+[A-Z`*(\[]|\s*$)|\n\s*\n|\n(?=\s*[-*] )|\n(?=\s*\|)")


def _clause_ends(text: str) -> list[int]:
    """Where sentences and top-level clauses (a ``;`` outside parentheses) end."""
    ends = {m.end() for m in SENTENCE_END.finditer(text)}
    depth = 0
    for i, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        depth = max(depth, 0)
        if c == ";" and depth == 0:
            ends.add(i + 1)
    return sorted(ends | {0, len(text)})


def interval_words(text: str, where: str = "") -> list[str]:
    """Every quoted interval whose verdict word says more, or less, than the interval: a word of a
    difference (win, loss, costs, better, worse, ahead, behind, inferior, widened) next to an interval
    that spans zero, a word of no difference shown (not shown, inconclusive, no difference, nothing
    measurable, not ... cost, covers zero) next to one that excludes it, or a word of no effect (does
    not cost, gains nothing, the same) next to one that reaches beyond the ±0.1 equivalence margin. The word *next to* an interval is the first such word
    after it, up to the next quoted interval or the end of its sentence or clause; where there is none
    there, the last one before it, back to the previous interval or the clause's start. A word of none
    that is itself a quote's text (the report's verdict, Holm-adjusted) may stand beside an interval
    that excludes zero: the interval is unadjusted."""
    quotes = list(QUOTE.finditer(text))
    # the words are read from the text with what does not render as words blanked (the same length):
    # quotes' keys, definitions, link targets, inline code
    blank = lambda m: " " * len(m.group(0))  # noqa: E731
    masked = list(text)
    for m in quotes:
        masked[m.end("value"):m.end()] = " " * (m.end() - m.end("value"))
    words = "".join(masked)
    words = DEFINITION.sub(blank, words)
    words = re.sub(r"\]\([^)\s]*\)", blank, words)
    words = re.sub(r"`[^`\n]*`", blank, words)
    intervals = [(m, INTERVAL.match(m["value"])) for m in quotes]
    intervals = [(m, ci) for m, ci in intervals if ci]
    ends = _clause_ends(text)
    inside = [(m.start("value"), m.end("value")) for m in quotes]
    problems = []
    for i, (m, ci) in enumerate(intervals):
        start_clause = max(e for e in ends if e <= m.start())
        end_clause = min(e for e in ends if e >= m.end())
        after_from = m.start("value") + ci.end()
        after_to = min(end_clause, intervals[i + 1][0].start() if i + 1 < len(intervals) else len(text))
        before_from = max(start_clause, intervals[i - 1][0].end() if i else 0)
        after = list(CLAIM.finditer(words, after_from, after_to))
        before = list(CLAIM.finditer(words, before_from, m.start()))
        word = after[0] if after else before[-1] if before else None
        if word is None:
            continue
        low, high = (float(ci[k].replace(",", "")) for k in ("low", "high"))
        spans = low <= 0 <= high
        quoted = any(a <= word.start() and word.end() <= b for a, b in inside)
        line = text.count("\n", 0, m.start()) + 1
        if word["difference"] and spans:
            problems.append(f"{where}:{line}: {word.group(0)!r} beside [{m['value']}][{m['key']}], an interval that spans zero")
        elif word["null"] and not spans and not quoted:
            problems.append(f"{where}:{line}: {word.group(0)!r} beside [{m['value']}][{m['key']}], an interval that excludes zero")
        elif word["none"] and not -0.1 <= low <= high <= 0.1:
            problems.append(f"{where}:{line}: {word.group(0)!r} beside [{m['value']}][{m['key']}], an interval that reaches "
                            "beyond the ±0.1 equivalence margin")
    return problems


def problems(text: str, base: Path, where: str = "") -> list[str]:
    """Every wrong quote, key or definition of a page, every quoted interval beside a verdict word it
    does not bear out (:func:`interval_words`), and every result of its "## Results" sections stated
    outside a quote."""
    found = check_text(text, base, where)
    found += interval_words(text, where)
    for title, body in results_sections(text).items():
        found += [f"{where}, '## {title}': {item!r} is not a quote" for item in bare_results(strip_for_prose(body))]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.quotes", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--fill", action="store_true", help="rewrite each quote's text from its cell")
    args = parser.parse_args(argv)
    found = []
    for name in args.files:
        path = Path(name)
        text = path.read_text()
        if args.fill:
            from ..contract import atomic_write_text

            try:
                atomic_write_text(path, fill_text(text, path.parent))
            except QuoteError as error:
                found.append(f"{name}: {error}")
        else:
            found += problems(text, path.parent, name)
    for p in found:
        print(p)
    print(f"{len(found)} problem(s) in {len(args.files)} file(s)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
