"""A study's plan file: the pre-registered design as data, and its loader.

A study is one TOML file committed with its prose pre-registration
(``docs/results/<study>/plan.toml``); the runner trains from it and the report checks the table
against it. Its top-level keys and tables (every one validated; an unknown key is an error):

``schema`` (1), ``title``, ``task_noun`` ("game", "task": the texts' word and the selection's key)
``[commands]``  ``run``, ``report``: the command lines the texts name
``[files]``     ``table``, ``selection``, ``cuts``, ``pilot``, ``verdicts``; a searched study's ``picks``,
                ``trials`` and ``record`` (names in the results folder)
``[pilot]``     (optional: a study on fixed tasks has none) ``heading``, ``algo``, ``settings``
                (prose), either ``lags`` (fresh, stale) or ``stressors`` (``[{name, lag, sampler}]``,
                each against lag 0 with the clean sampler; ``sampler`` as a table's sampler cell,
                e.g. "T1.2", "fp8-e4m3") with ``fresh_from`` (optional: ``{table, folder}``, the
                fresh runs read from another study's committed table, relative to this file, not
                run again), ``seeds``, ``order`` ("cheapest" or "registered"),
                and either ``folder``, ``tasks``, ``budget`` and ``reads`` (``[{budget, at}]``, ``at``
                a step or "final": budgets read off one run, in the order tried), or ``candidates``
                (``{task: [budgets in the order tried]}``) and ``folders`` (one per budget's place:
                each budget its own runs)
``[pilot.rule]`` the qualification: ``learns_at_least``, ``hurt_at_least``, ``hurt_at_least_se``,
                ``saturation_fraction`` and ``max_return`` (optional), ``min_tasks``, ``not_run`` (prose)
``[design]``    ``folder``, ``arms``, ``lags``, ``seeds``, ``configurations`` ("shared": one
                configuration, no search; "searched": ``[search]``; "frozen": ``[design.frozen_from]``),
                ``limits`` (prose), ``colors`` (``{arm: color}``); ``tasks`` (``[{env, budget}]``)
                and ``tasks_from`` (the study whose selection they are) where there is no pilot; after
                a pilot of stressors, no ``lags`` but ``midpoints`` (``{lag stressor: lag}``): each
                selected (task, stressor) pair runs lag 0, its stressor and its midpoint
``[design.frozen_from]`` ``study`` (another study's results folder), ``arms`` (``{arm: label}``)
``[search]``    ``folder``, ``seeds``, ``trials``, ``round_size``, ``sampler_seed``, ``space``
                ("zoo-factors", "schedule"), ``own`` (``{arm: {knob: [low, high, default]}}``); every
                arm tuned on fresh data, the tax arms also at the tax lag
``[[parts]]``   sub-plans of a searched study (optional): ``name``, ``kind`` ("search", the
                default: ``arms``, ``fresh_arms``, ``tax_arms``, ``tasks`` and ``lags`` (subsets),
                ``folder`` (the search's), ``space``, ``own``, ``sampler_seed``; "learning-rate":
                ``arms`` (the design's, at this study's fresh picks) and ``from_arms`` (at the fresh
                picks of the study ``from``), rerun with the learning rate x each of ``factors`` at
                ``lags`` on ``tasks`` and ``seeds`` (subsets), into ``folder``)
``[tax]``       ``lag``, ``arms``: the retuning tax (tuned at ``lag`` against tuned fresh, run at ``lag``)
``[cost]``      ``limit_core_hours``, ``recorded_speeds`` ("minatar", "population")
``[[cuts]]``    the registered cut order: ``what`` (lags, arms, parts, tasks, seeds, midpoints) with ``values``
                (each cut in turn while over the limit) or ``rule`` ("dearest" tasks, "highest" seeds)
                and ``keep`` (the fewest left); "midpoints" alone (all cut at once); a design by
                stressor's "tasks" are its (task, stressor) pairs
``[[endpoints]]`` ``id``, ``kind`` (slope, non-inferiority, tax, difference, head-to-head), ``arm``,
                ``versus`` (an arm or a comparator's arm; a tax without one is the arm's own),
                ``lags`` (slope) or ``lag``, ``margin``, ``family`` (the Holm family; "" for none),
                ``label``, ``short``, ``digits``, ``part`` (the sub-plan it needs: cut with it), ``over``
                ("stressor": a design by stressor's slope, over each pair's own conditions: x =
                log2(1 + lag) for a lag stressor, 0 and 1 for a sampler one; margin over the range)
``[[claims]]``  the frozen protocol's claim of one arm, written once (optional; expanded before the
                rest is read into the four endpoints and the decision a plan would otherwise spell
                out, :func:`expand_claims`): ``name`` (the decision's), ``arm``, ``versus``, ``prefix``
                (the endpoints' ids: <prefix>1 slope over ``slope_lags``, <prefix>2 non-inferiority at
                ``fresh_lag`` (0), <prefix>3 the tax difference at ``tax_lag`` (the ``[tax]`` lag),
                <prefix>-tax the arm's own tax outside the families), ``sentence``; optional
                ``margin`` (0.1), ``family`` ("primary"), ``tax_part``, ``digits`` (of the slope, 4),
                ``shown`` and ``versus_shown`` (the arms' names in the labels: the arm, and the
                comparator's own arm name), ``otherwise``, ``undecided``
``[[decisions]]`` ``name``, ``sentence`` (with ``{answer}``), ``undecided``; either ``supported`` and
                ``contradicted`` (lists of alternatives, each a list of "endpoint=verdict" that must
                all hold; a verdict, or "within-margin": its equivalence test alone rejects) with
                ``otherwise``, or ``endpoint`` and ``words`` (``{verdict: word}``); an endpoint cut
                with its part holds no term
``[[secondary]]`` ``kind`` ("head-to-head": ``arms``, each minus every one of ``comparators``, with
                ``margin``; "learning-rate": ``arms`` at the factors of the learning-rate ``part``;
                "difference": the one arm of ``arms`` minus the one of ``comparators`` at each of
                ``lags`` and in slope over ``slope`` (optional), equivalence within ``margin`` (a
                slope's per unit, as an endpoint's), under the heading ``title``; "search-luck": a
                second search of the one arm of ``arms`` (the search ``part``), its fresh pick at the
                one lag of ``lags`` minus the first search's, on each task of the part, printed beside
                the endpoint ``beside`` there (optional)), ``preregistered`` (false: added after the
                study's results); arms of the design or of a comparator
``[report]``    (optional) words of the report, not of the design: ``intro`` (paragraphs that open the
                verdicts in place of the generic one), ``labels`` (``{arm: label}``: a design arm's name
                in the texts), ``claims`` (``{decision: words}``: a decision's row in the answer table)
``[[comparators]]`` results from elsewhere shown beside the study's: ``name``, ``label``, ``kind``
                ("points": ``heading``, ``note``, ``points`` ``{task: [[step, return], ...]}``;
                "study": ``results`` (another study's folder), ``folder``, ``arms`` ``{label: arm}``)

:func:`load_plan` returns a :class:`StudyPlan`; a malformed file raises ``ValueError`` with one
line, ``<file>: <key>: <problem>``. The standard library only (``tomllib``).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from adaptive_po import contract

PLAN_FILE = "plan.toml"
SCHEMA = 1

ENDPOINT_KINDS = ("slope", "non-inferiority", "tax", "difference", "head-to-head")
#: the verdicts an endpoint can read ("" where nothing could be tested)
VERDICTS = ("win", "loss", "equivalent", "inconclusive", "non-inferior", "inferior", "not shown", "")
#: what a decision rule's term may ask of an endpoint: a verdict, or its equivalence test alone
TERMS = (*VERDICTS[:-1], "within-margin")
CUT_KINDS = ("lags", "arms", "parts", "tasks", "seeds", "midpoints")
SPACES = ("zoo-factors", "schedule")
#: a part searches ("search"), or reruns tuned configurations at scaled learning rates ("learning-rate")
PART_KINDS = ("search", "learning-rate")
#: the secondary tables: each arm minus each comparator, each arm at its tuned learning rate x the part's factors, one arm
#: minus another at some lags and in slope, and a second search's pick minus the first's
SECONDARY_KINDS = ("head-to-head", "learning-rate", "difference", "search-luck")
#: the one part of a searched plan without ``[[parts]]``
MAIN_PART = "main"


@dataclass(frozen=True)
class Read:
    """A budget read off the pilot's runs: the evaluation at step ``at`` (None: the final one)."""

    budget: int
    at: int | None


@dataclass(frozen=True)
class Rule:
    """The pilot's qualification rule: the pilot algorithm *learns* (lag-0 mean normalized score at
    least ``learns_at_least``), the stale lag *hurts* it (by at least ``hurt_at_least`` and
    ``hurt_at_least_se`` Welch standard errors), and it is not saturated (every lag-0 seed within
    ``saturation_fraction`` of the task's ``max_return``, where given)."""

    learns_at_least: float
    hurt_at_least: float
    hurt_at_least_se: float
    min_tasks: int
    not_run: str
    saturation_fraction: float | None = None
    max_return: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Stressor:
    """What the pilot stresses its algorithm with, against lag 0 and the clean sampler: a policy
    ``lag``, a ``sampler`` (:func:`~adaptive_po.dials.sampler_name`), or both."""

    name: str
    lag: int = 0
    sampler: str = ""


@dataclass(frozen=True)
class FreshFrom:
    """The pilot's fresh runs, read from another study's committed ``table`` (a path relative to the
    plan file), in its results ``folder``: the same algorithm, seeds, budget and setting."""

    table: str
    folder: str


@dataclass(frozen=True)
class Pilot:
    """The pilot: ``budget`` and ``reads`` (budgets read off one set of runs in ``folder``), or
    ``candidates`` (each task's budgets in the order tried, each its own runs in ``folders``)."""

    heading: str
    algo: str
    settings: str
    tasks: tuple[str, ...]
    lags: tuple[int, int]
    seeds: tuple[int, ...]
    order: str
    rule: Rule
    folder: str = ""
    budget: int = 0
    reads: tuple[Read, ...] = ()
    candidates: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    folders: tuple[str, ...] = ()
    #: the stale conditions: ``lags``' second as ``lag<k>``, or the plan's ``stressors``
    stressors: tuple[Stressor, ...] = ()
    #: the plan names its stressors (each qualifies as a (task, stressor) pair), not ``lags``
    by_stressor: bool = False
    fresh_from: FreshFrom | None = None

    def stressor(self, name: str) -> Stressor:
        return next(s for s in self.stressors if s.name == name)


@dataclass(frozen=True)
class Design:
    folder: str
    arms: tuple[str, ...]
    lags: tuple[int, ...]
    seeds: tuple[int, ...]
    configurations: str
    limits: str
    colors: Mapping[str, str]
    frozen_from: Mapping[str, Any] | None = None
    tasks: tuple[tuple[str, int], ...] = ()
    tasks_from: str = ""
    #: a design on the pilot's (task, stressor) pairs: per lag stressor, the midpoint lag run
    #: between lag 0 and it ({stressor: lag}); its conditions are lag 0, the midpoint and the stressor
    midpoints: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Cut:
    what: str
    values: tuple[Any, ...] = ()
    rule: str = ""
    keep: int = 0


@dataclass(frozen=True)
class Endpoint:
    id: str
    kind: str
    arm: str
    versus: str
    label: str
    short: str
    margin: float
    family: str
    digits: int
    lags: tuple[int, ...] = ()
    lag: int | None = None
    part: str = ""
    #: "stressor": a slope over each (task, stressor) pair's own conditions (a design by stressor)
    over: str = ""

    @property
    def test_margin(self) -> float:
        """The margin on the endpoint's own scale: a slope's is ``margin`` over its lags' range of
        log2(1 + lag), per unit."""
        return self.margin / math.log2(1 + max(self.lags)) if self.kind == "slope" and not self.over else self.margin


@dataclass(frozen=True)
class Decision:
    name: str
    sentence: str
    undecided: str
    supported: tuple[tuple[tuple[str, str], ...], ...] = ()
    contradicted: tuple[tuple[tuple[str, str], ...], ...] = ()
    otherwise: str = ""
    endpoint: str = ""
    words: Mapping[str, str] = field(default_factory=dict)

    def endpoints(self) -> set[str]:
        return {e for alternatives in (self.supported, self.contradicted) for terms in alternatives for e, _ in terms} | (
            {self.endpoint} if self.endpoint else set())


@dataclass(frozen=True)
class Secondary:
    kind: str
    arms: tuple[str, ...]
    comparators: tuple[str, ...]
    margin: float
    preregistered: bool = True
    #: a learning-rate table's part; a search-luck line's second search
    part: str = ""
    #: a difference table's lags and slope lags; a search-luck line's lag
    lags: tuple[int, ...] = ()
    slope: tuple[int, ...] = ()
    #: a difference table's heading
    title: str = ""
    #: a search-luck line's endpoint printed beside it
    beside: str = ""


@dataclass(frozen=True)
class Words:
    """A plan's words for its report (``[report]``): none changes what is computed."""

    intro: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    claims: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Comparator:
    name: str
    label: str
    kind: str = "points"
    heading: str = ""
    note: str = ""
    points: Mapping[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)
    results: str = ""
    folder: str = ""
    arms: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StudyPlan:
    path: Path
    title: str
    task_noun: str
    commands: Mapping[str, str]
    files: Mapping[str, str]
    pilot: Pilot | None
    design: Design
    limit_core_hours: float
    recorded_speeds: str
    cuts: tuple[Cut, ...]
    endpoints: tuple[Endpoint, ...]
    decisions: tuple[Decision, ...]
    secondary: tuple[Secondary, ...]
    comparators: tuple[Comparator, ...]
    search: Mapping[str, Any] | None = None
    tax: Mapping[str, Any] | None = None
    parts: tuple[Mapping[str, Any], ...] = ()
    words: Words = Words()

    @property
    def tasks_word(self) -> str:
        return f"{self.task_noun}s"

    def check_selected(self, path: Path, selected: Sequence[tuple[str, int]]) -> None:
        """``ValueError`` naming ``path`` (a selection) for a ``(task, budget)`` the pilot does not read."""
        budgets = {r.budget for r in self.pilot.reads}
        for task, budget in selected:
            if task not in self.pilot.tasks or budget not in budgets:
                raise ValueError(f"{path}: ({task!r}, {budget}) is not one of this study's {self.tasks_word} and budgets ({self.path})")

    def families(self) -> dict[str, list[Endpoint]]:
        """The Holm families of the endpoints, in the plan's order (``family`` "" tests alone)."""
        out: dict[str, list[Endpoint]] = {}
        for e in self.endpoints:
            if e.family:
                out.setdefault(e.family, []).append(e)
        return out

    def endpoint(self, id: str) -> Endpoint:
        return next(e for e in self.endpoints if e.id == id)

    def cut(self, what: str) -> Cut | None:
        return next((c for c in self.cuts if c.what == what), None)

    @property
    def min_seeds(self) -> int:
        seeds = self.cut("seeds")
        return seeds.keep if seeds else len(self.design.seeds)

    def part_specs(self) -> list[dict[str, Any]]:
        """A searched plan's parts as written (without ``[[parts]]``: one, :data:`MAIN_PART`, every
        arm tuned fresh and swept on every task (``tasks`` None), the tax arms also at the tax lag)."""
        if self.parts:
            return [dict(p) for p in self.parts]
        s = self.search or {}
        return [{"kind": "search", "name": MAIN_PART, "arms": self.design.arms, "fresh_arms": self.design.arms,
                 "tax_arms": tuple(self.tax["arms"]) if self.tax else (), "tasks": None, "lags": self.design.lags, "folder": s.get("folder", ""),
                 "space": s.get("space", ""), "own": s.get("own", {}), "sampler_seed": None}]

    def kept_lags(self) -> tuple[int, ...]:
        """The lags no registered cut removes."""
        lags = self.cut("lags")
        return tuple(lag for lag in self.design.lags if not lags or lag not in lags.values)


# ----------------------------------------------------------------------------------------------
# the loader


class _Reader:
    """Typed access to one table of the file; every error names the file and the dotted key."""

    def __init__(self, path: Path, data: Mapping[str, Any], where: str = "") -> None:
        self.path, self.data, self.where, self.used = path, data, where, set()

    def error(self, key: str, problem: str) -> ValueError:
        return ValueError(f"{self.path}: {self.where}{key}: {problem}")

    def get(self, key: str, check: Callable[[Any], Any], what: str, default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                raise self.error(key, f"missing ({what})")
            return default
        value = self.data[key]
        try:
            return check(value)
        except (TypeError, ValueError):
            raise self.error(key, f"expected {what}, got {value!r}") from None

    def table(self, key: str, optional: bool = False) -> _Reader | None:
        value = self.get(key, _mapping, "a table", None if optional else ...)
        return None if value is None else _Reader(self.path, value, f"{self.where}{key}.")

    def tables(self, key: str) -> list[_Reader]:
        values = self.get(key, lambda v: [_mapping(t) for t in _list(v)], "an array of tables", [])
        return [_Reader(self.path, v, f"{self.where}{key}[{i}].") for i, v in enumerate(values)]

    def done(self) -> None:
        extra = sorted(set(self.data) - self.used)
        if extra:
            raise self.error(extra[0], "not a key of the plan schema")


def _list(v: Any) -> list:
    if not isinstance(v, list):
        raise TypeError
    return v


def _mapping(v: Any) -> dict:
    if not isinstance(v, dict):
        raise TypeError
    return v


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError
    return v


def _name(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise TypeError
    return v


def _whole(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TypeError
    return v


def _positive(v: Any) -> int:
    if _whole(v) < 1:
        raise ValueError
    return v


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise TypeError
    return float(v)


def _positive_number(v: Any) -> float:
    if _number(v) <= 0:
        raise ValueError
    return float(v)


def _tuple_of(check: Callable[[Any], Any], unique: bool = True, nonempty: bool = True) -> Callable[[Any], tuple]:
    def read(v: Any) -> tuple:
        items = tuple(check(x) for x in _list(v))
        if (nonempty and not items) or (unique and len(set(items)) != len(items)):
            raise ValueError
        return items
    return read


def _map_of(check: Callable[[Any], Any]) -> Callable[[Any], dict]:
    return lambda v: {_name(k): check(x) for k, x in _mapping(v).items()}


def _one_of(*choices: str) -> Callable[[Any], str]:
    def read(v: Any) -> str:
        if v not in choices:
            raise ValueError
        return v
    return read


def _terms(v: Any) -> tuple[tuple[tuple[str, str], ...], ...]:
    out = []
    for alternative in _list(v):
        terms = []
        for term in _list(alternative):
            endpoint, sep, word = _name(term).partition("=")
            if not sep or word not in TERMS:
                raise ValueError
            terms.append((endpoint, word))
        out.append(tuple(terms))
    return tuple(out)


CLAIM_KEYS = frozenset({"name", "arm", "versus", "prefix", "sentence", "slope_lags", "fresh_lag", "tax_lag", "margin", "family", "tax_part",
                        "digits", "shown", "versus_shown", "otherwise", "undecided"})


def expand_claims(path: Path, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with its ``[[claims]]`` written out as ``[[endpoints]]`` and ``[[decisions]]`` (after
    any written by hand: every claim's three family endpoints, then every claim's own tax, then the
    decisions), so the loader checks them as it checks any; a ``ValueError`` naming the claim's key
    where one is missing, unknown or of the wrong type. The frozen protocol's claim: robust to
    staleness without retuning is supported where the slope wins, fresh data is non-inferior and
    the tax difference wins (or the arm's own tax is within the margin); contradicted where the
    slope or the tax difference loses or fresh data is inferior."""
    claims = data.get("claims")
    if claims is None:
        return dict(data)
    if not isinstance(claims, list) or not all(isinstance(c, dict) for c in claims):
        raise ValueError(f"{path}: claims: want [[claims]] tables")
    out = {k: v for k, v in data.items() if k != "claims"}
    comparators = {label: arm for c in data.get("comparators", []) if isinstance(c, dict) for label, arm in dict(c.get("arms", {})).items()}
    tax = data.get("tax", {}) if isinstance(data.get("tax"), dict) else {}
    family, own, decisions = [], [], []
    for i, c in enumerate(claims):
        where = f"{path}: claims[{i}]."
        unknown = sorted(set(c) - CLAIM_KEYS)
        if unknown:
            raise ValueError(f"{where}{unknown[0]}: not a key of a claim ({', '.join(sorted(CLAIM_KEYS))})")

        def get(key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
            if key not in c:
                if default is ...:
                    raise ValueError(f"{where}{key}: missing")
                return default
            value = c[key]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(f"{where}{key}: the wrong type ({value!r})")
            return value

        name, arm, versus, prefix, sentence = (get(k, str) for k in ("name", "arm", "versus", "prefix", "sentence"))
        slope_lags = get("slope_lags", list)
        if len(slope_lags) < 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in slope_lags):
            raise ValueError(f"{where}slope_lags: two or more lags, got {slope_lags!r}")
        fresh, tax_lag = get("fresh_lag", int, 0), get("tax_lag", int, tax.get("lag", ...))
        margin, fam, part, digits = get("margin", (int, float), 0.1), get("family", str, "primary"), get("tax_part", str, ""), get("digits", int, 4)
        shown, vs = get("shown", str, arm), get("versus_shown", str, comparators.get(versus, versus))
        with_part = {"part": part} if part else {}
        common = {"arm": arm, "margin": margin}
        family += [
            {"id": f"{prefix}1", "kind": "slope", **common, "versus": versus, "lags": slope_lags, "family": fam,
             "label": f"{prefix}1. slope per unit log2(1 + lag), lags {min(slope_lags)}-{max(slope_lags)}: {shown} - {vs}", "short": f"{prefix}1",
             "digits": digits},
            {"id": f"{prefix}2", "kind": "non-inferiority", **common, "versus": versus, "lag": fresh, "family": fam,
             "label": f"{prefix}2. lag {fresh}: {shown} - {vs} (non-inferiority at -{margin:g})", "short": f"{prefix}2"},
            {"id": f"{prefix}3", "kind": "tax", **common, "versus": versus, "lag": tax_lag, "family": fam, **with_part,
             "label": f"{prefix}3. retuning tax at lag {tax_lag}: {shown}'s - {vs}'s", "short": f"{prefix}3"},
        ]
        own.append({"id": f"{prefix}-tax", "kind": "tax", **common, "lag": tax_lag, "family": "", **with_part,
                    "label": f"{shown}'s retuning tax at lag {tax_lag}", "short": f"{shown}'s tax"})
        ids = [f"{prefix}{x}" for x in ("1", "2", "3", "-tax")]
        decisions.append({
            "name": name, "sentence": sentence,
            "supported": [[f"{ids[0]}=win", f"{ids[1]}=non-inferior", f"{ids[2]}=win"], [f"{ids[0]}=win", f"{ids[1]}=non-inferior", f"{ids[3]}=within-margin"]],
            "contradicted": [[f"{ids[0]}=loss"], [f"{ids[1]}=inferior"], [f"{ids[2]}=loss"]],
            "otherwise": get("otherwise", str, "not decided"), "undecided": get("undecided", str, "not decided (the study is not complete)"),
        })
    out["endpoints"] = list(data.get("endpoints", [])) + family + own
    out["decisions"] = list(data.get("decisions", [])) + decisions
    return out


def load_plan(path: str | Path) -> StudyPlan:
    """The study's plan, validated (types, the keys of the schema, and the cross-references: an
    endpoint's arms and lags in the design, its slope lags out of the cut order's reach, the
    decision rules' endpoints and verdicts); a ``ValueError`` of one line naming the file and the key."""
    path = Path(path)
    try:
        data = tomllib.loads(contract.read_committed_text(path))
    except FileNotFoundError:
        raise ValueError(f"{path}: no plan file (a study is its plan.toml, committed with its pre-registration)") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not TOML ({err})") from None
    top = _Reader(path, expand_claims(path, data))
    if top.get("schema", _whole, "a whole number") != SCHEMA:
        raise top.error("schema", f"this code reads schema {SCHEMA}")
    title = top.get("title", _name, "a string")
    noun = top.get("task_noun", _name, "a string")

    commands_t = top.table("commands")
    commands = {k: commands_t.get(k, _name, "a command line") for k in ("run", "report")}
    commands_t.done()
    files_t = top.table("files")
    files = {k: files_t.get(k, _name, "a file name") for k in ("table", "selection", "cuts", "pilot", "verdicts")}
    files.update({k: files_t.get(k, _name, "a file name") for k in ("picks", "trials", "record") if k in files_t.data})
    files_t.done()

    pilot = _pilot(top.table("pilot", optional=True))

    d = top.table("design")
    configurations = d.get("configurations", _one_of("shared", "searched", "frozen"), '"shared", "searched" or "frozen"')
    frozen_t = d.table("frozen_from", optional=True)
    frozen_from = None
    if frozen_t is not None:
        frozen_from = {"study": frozen_t.get("study", _name, "a results folder"), "arms": frozen_t.get("arms", _map_of(_name), "a table of labels")}
        frozen_t.done()
    design = Design(
        tasks=d.get("tasks", _tasks, "a list of {env, budget}, distinct tasks", ()), tasks_from=d.get("tasks_from", _name, "a results folder", ""),
        folder=d.get("folder", _name, "a folder name"), arms=d.get("arms", _tuple_of(_name), "a list of distinct arms"),
        lags=d.get("lags", _tuple_of(_whole), "a list of distinct lags", (0,) if pilot is not None and pilot.by_stressor else ...),
        midpoints=d.get("midpoints", _map_of(_positive), "a table {stressor: lag}", {}), seeds=d.get("seeds", _tuple_of(_whole), "a list of distinct seeds"),
        configurations=configurations, limits=d.get("limits", _text, "prose"), colors=d.get("colors", _map_of(_name), "a table of colors", {}),
        frozen_from=frozen_from,
    )
    d.done()
    if (configurations == "frozen") != (frozen_from is not None):
        raise d.error("frozen_from", 'given exactly where configurations = "frozen"')
    if (pilot is None) == (not design.tasks):
        raise d.error("tasks", "given exactly where the plan has no pilot (the pilot selects the tasks)")
    if pilot is not None and set(pilot.seeds) & set(design.seeds):
        raise top.error("pilot.seeds", "the pilot's seeds must not be scoring seeds")
    task_names = pilot.tasks if pilot is not None else tuple(t for t, _ in design.tasks)
    by_stressor = pilot is not None and pilot.by_stressor
    if by_stressor:
        lag_stressors = {x.name: x.lag for x in pilot.stressors if x.lag and not x.sampler}
        if design.lags != (0,):
            raise d.error("lags", "a design on (task, stressor) pairs runs lag 0 and each pair's stressor (and midpoints), not lags of its own")
        for name, lag in design.midpoints.items():
            if name not in lag_stressors or not 0 < lag < lag_stressors[name]:
                raise d.error("midpoints", f"{name!r}: a lag stressor's midpoint lies between 0 and its lag ({lag_stressors})")
    elif design.midpoints:
        raise d.error("midpoints", "a design on the pilot's (task, stressor) pairs only")

    search = _search(top.table("search", optional=True), design)
    parts = tuple(_part(t, design, task_names, search) for t in top.tables("parts"))
    if parts and search is None:
        raise top.error("parts", "sub-plans of a searched study only")
    if (configurations == "searched") != (search is not None):
        raise top.error("search", 'given exactly where design.configurations = "searched"')
    tax_t = top.table("tax", optional=True)
    tax = None
    if tax_t is not None:
        tax = {"lag": tax_t.get("lag", _positive, "a lag"), "arms": tax_t.get("arms", _tuple_of(_name), "a list of arms")}
        tax_t.done()
        if tax["lag"] not in design.lags or not set(tax["arms"]) <= set(design.arms):
            raise top.error("tax", "its lag and arms must be the design's")

    cost = top.table("cost")
    limit = cost.get("limit_core_hours", _positive_number, "a positive number")
    speeds = cost.get("recorded_speeds", _one_of("minatar", "population"), '"minatar" or "population"')
    cost.done()

    cuts = []
    for c in top.tables("cuts"):
        what = c.get("what", _one_of(*CUT_KINDS), " or ".join(CUT_KINDS))
        cut = Cut(what, c.get("values", _tuple_of(lambda v: v), "a list", ()), c.get("rule", _one_of("dearest", "highest"), '"dearest" or "highest"', ""),
                  c.get("keep", _whole, "a whole number", 0))
        c.done()
        if what == "midpoints":  # all of them, at once
            if cut.values or cut.rule or not design.midpoints:
                raise c.error("what", "midpoints are cut all at once (no values, no rule), in a design that has them")
            cuts.append(cut)
            continue
        allowed = {"lags": design.lags, "arms": design.arms, "parts": tuple(x["name"] for x in parts), "tasks": task_names, "seeds": design.seeds}[what]
        if cut.values and not set(cut.values) <= set(allowed):
            raise c.error("values", f"not all of the design's {what} ({list(allowed)})")
        if bool(cut.values) == bool(cut.rule) or (cut.rule == "dearest") != (what == "tasks") or (cut.rule == "highest") != (what == "seeds"):
            raise c.error("rule", 'either values, or rule "dearest" (tasks) or "highest" (seeds)')
        cuts.append(cut)
    if len({c.what for c in cuts}) != len(cuts):
        raise top.error("cuts", "one entry per kind of cut")

    comparators = [_comparator(c, pilot) for c in top.tables("comparators")]
    compared = {arm for c in comparators for arm in c.arms}
    endpoints = []
    for e in top.tables("endpoints"):
        kind = e.get("kind", _one_of(*ENDPOINT_KINDS), " or ".join(ENDPOINT_KINDS))
        endpoint = Endpoint(
            id=e.get("id", _name, "a name"), kind=kind, arm=e.get("arm", _name, "an arm"),
            versus=e.get("versus", _name, "an arm", "" if kind == "tax" else ...), part=e.get("part", _name, "a part", ""),
            label=e.get("label", _name, "a label"), short=e.get("short", _name, "a short label"), margin=e.get("margin", _positive_number, "a positive number"),
            family=e.get("family", _text, 'a Holm family ("" for none)'), digits=e.get("digits", _positive, "a whole number", 3),
            lags=e.get("lags", _tuple_of(_whole), "a list of distinct lags", ()), lag=e.get("lag", _whole, "a lag", None),
            over=e.get("over", _one_of("stressor"), '"stressor"', ""),
        )
        e.done()
        if (endpoint.over == "stressor") != (by_stressor and kind == "slope"):
            raise e.error("over", 'a slope of a design by stressor is over "stressor" (each pair\'s conditions), and nothing else is')
        for key, arm in (("arm", endpoint.arm), ("versus", endpoint.versus)):
            if arm and arm not in design.arms and arm not in compared:
                raise e.error(key, f"{arm!r} is not an arm of the design ({list(design.arms)}) or of a comparator")
        if endpoint.part and endpoint.part not in {x["name"] for x in parts}:
            raise e.error("part", f"{endpoint.part!r} is not one of the plan's parts")
        if endpoint.over:
            if endpoint.lags or endpoint.lag is not None:
                raise e.error("lags", "a slope over each pair's conditions names no lags")
        elif kind == "slope":
            if len(endpoint.lags) < 2 or not set(endpoint.lags) <= set(_kept(design, cuts)):
                raise e.error("lags", f"a slope needs two or more of the lags no cut removes ({list(_kept(design, cuts))})")
        elif endpoint.lag is None or endpoint.lag not in _kept(design, cuts):
            raise e.error("lag", f"one of the lags no cut removes ({list(_kept(design, cuts))})")
        endpoints.append(endpoint)
    ids = [e.id for e in endpoints]
    if len(set(ids)) != len(ids):
        raise top.error("endpoints", f"ids must be distinct, got {ids}")

    decisions = []
    for x in top.tables("decisions"):
        decision = Decision(
            name=x.get("name", _name, "a name"), sentence=x.get("sentence", _name, "a sentence with {answer}"),
            undecided=x.get("undecided", _name, "a word"), supported=x.get("supported", _terms, 'a list of lists of "endpoint=verdict"', ()),
            contradicted=x.get("contradicted", _terms, 'a list of lists of "endpoint=verdict"', ()), otherwise=x.get("otherwise", _text, "a word", ""),
            endpoint=x.get("endpoint", _name, "an endpoint id", ""), words=x.get("words", _map_of(_name), "a table of words", {}),
        )
        x.done()
        if "{answer}" not in decision.sentence:
            raise x.error("sentence", "must hold {answer}")
        if bool(decision.endpoint) == bool(decision.supported or decision.contradicted) or bool(decision.endpoint) != bool(decision.words):
            raise x.error("endpoint", "either supported/contradicted/otherwise, or endpoint and words")
        if decision.supported and not decision.otherwise:
            raise x.error("otherwise", "missing (the answer where neither rule holds)")
        unknown = sorted(decision.endpoints() - set(ids))
        if unknown:
            raise x.error("supported" if not decision.endpoint else "endpoint", f"names endpoint {unknown[0]!r}, not one of {ids}")
        bad_words = sorted(set(decision.words) - set(VERDICTS))
        if bad_words:
            raise x.error("words", f"{bad_words[0]!r} is not a verdict")
        decisions.append(decision)

    secondary = []
    for s in top.tables("secondary"):
        kind = s.get("kind", _one_of(*SECONDARY_KINDS), " or ".join(SECONDARY_KINDS))
        item = Secondary(kind=kind, arms=s.get("arms", _tuple_of(_name), "a list of arms"),
                         comparators=s.get("comparators", _tuple_of(_name, nonempty=kind == "head-to-head"), "a list of arms", ()),
                         margin=s.get("margin", _positive_number, "a positive number", 0.1),
                         preregistered=s.get("preregistered", _bool, "true or false", True), part=s.get("part", _name, "a part", ""),
                         lags=s.get("lags", _tuple_of(_whole), "a list of distinct lags", ()), slope=s.get("slope", _tuple_of(_whole), "a list of distinct lags", ()),
                         title=s.get("title", _name, "a heading", ""), beside=s.get("beside", _name, "an endpoint id", ""))
        s.done()
        _check_secondary(s, item, design, compared, parts, ids, cuts)
        secondary.append(item)
    kinds = [x["kind"] for x in parts]
    if "learning-rate" in kinds and "search" in kinds[kinds.index("learning-rate"):]:
        raise top.error("parts", "a learning-rate part comes after every search part (it reruns their picks)")

    words = _words(top.table("report", optional=True), design, [x.name for x in decisions])
    top.done()
    return StudyPlan(
        path=path, title=title, task_noun=noun, commands=commands, files=files, pilot=pilot, design=design, limit_core_hours=limit,
        recorded_speeds=speeds, cuts=tuple(cuts), endpoints=tuple(endpoints), decisions=tuple(decisions), secondary=tuple(secondary),
        comparators=tuple(comparators), search=search, tax=tax, parts=parts, words=words,
    )


def _check_secondary(s: _Reader, item: Secondary, design: Design, compared: set[str], parts: Sequence[Mapping[str, Any]], ids: list[str],
                     cuts: list[Cut]) -> None:
    """A secondary table's cross-references: its arms, its part (of its kind), its lags and its endpoint."""
    kind = item.kind
    if not {*item.arms, *item.comparators} <= set(design.arms) | compared:
        raise s.error("comparators", f"arms of the design or of a comparator only ({list(design.arms) + sorted(compared)})")
    part_kind = {"learning-rate": "learning-rate", "search-luck": "search"}.get(kind)
    if bool(part_kind) != bool(item.part) or (item.part and not any(x["name"] == item.part and x["kind"] == part_kind for x in parts)):
        raise s.error("part", "a learning-rate table names its learning-rate part, a search-luck line its search part, and only they name one")
    if kind == "difference" and (len(item.arms) != 1 or len(item.comparators) != 1 or not (item.lags or item.slope) or not item.title):
        raise s.error("arms", "a difference table: one arm, one comparator, lags or a slope, and a title")
    if kind == "search-luck" and (len(item.arms) != 1 or len(item.lags) != 1 or item.comparators):
        raise s.error("arms", "a search-luck line: one arm and one lag, no comparators")
    if (item.slope or item.title) and kind != "difference" or item.lags and kind not in ("difference", "search-luck") or item.beside and kind != "search-luck":
        raise s.error("kind", "lags, slope and title are a difference table's (lags and beside a search-luck line's)")
    if not set(item.lags) <= set(design.lags) or not set(item.slope) <= set(_kept(design, cuts)) or item.slope and len(item.slope) < 2:
        raise s.error("lags", f"the design's lags; a slope's two or more that no cut removes ({list(_kept(design, cuts))})")
    if item.beside and item.beside not in ids:
        raise s.error("beside", f"names endpoint {item.beside!r}, not one of {ids}")


def _words(t: _Reader | None, design: Design, decisions: list[str]) -> Words:
    if t is None:
        return Words()
    out = Words(intro=t.get("intro", _tuple_of(_name, unique=False), "a list of paragraphs", ()),
                labels=t.get("labels", _map_of(_name), "a table {arm: label}", {}), claims=t.get("claims", _map_of(_name), "a table {decision: words}", {}))
    t.done()
    if not set(out.labels) <= set(design.arms) or len(set(out.labels.values())) != len(out.labels):
        raise t.error("labels", f"distinct labels of the design's arms only ({list(design.arms)})")
    if not set(out.claims) <= set(decisions):
        raise t.error("claims", f"the plan's decisions only ({decisions})")
    return out


def _kept(design: Design, cuts: list[Cut]) -> tuple[int, ...]:
    cut = {v for c in cuts if c.what == "lags" for v in c.values}
    return tuple(lag for lag in design.lags if lag not in cut)


def _tasks(v: Any) -> tuple[tuple[str, int], ...]:
    tasks = tuple((_name(t["env"]), _positive(t["budget"])) for t in map(_mapping, _list(v)) if set(t) == {"env", "budget"} or _list(None))
    if len({t for t, _ in tasks}) != len(tasks):
        raise ValueError
    return tasks


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError
    return v


def _knobs(v: Any) -> dict:
    return _map_of(_map_of(lambda x: tuple(_number(y) for y in _list(x)) if len(x) == 3 else _list(None)))(v)


def _pilot(p: _Reader | None) -> Pilot | None:
    if p is None:
        return None
    rule_t = p.table("rule")
    rule = Rule(
        learns_at_least=rule_t.get("learns_at_least", _number, "a number"), hurt_at_least=rule_t.get("hurt_at_least", _number, "a number"),
        hurt_at_least_se=rule_t.get("hurt_at_least_se", _number, "a number"), min_tasks=rule_t.get("min_tasks", _positive, "a whole number >= 1"),
        not_run=rule_t.get("not_run", _text, "a sentence"),
        saturation_fraction=rule_t.get("saturation_fraction", _number, "a number", None),
        max_return=rule_t.get("max_return", _map_of(_number), "a table of numbers", {}),
    )
    rule_t.done()
    reads = []
    for r in p.tables("reads"):
        budget = r.get("budget", _positive, "a whole number of steps")
        at = r.get("at", lambda v: None if v == "final" else _positive(v), 'a step or "final"')
        r.done()
        reads.append(Read(budget, at))
    candidates = p.get("candidates", _map_of(_tuple_of(_positive)), "a table {task: [budgets in the order tried]}", {})
    stressors = tuple(_stressor(t) for t in p.tables("stressors"))
    fresh_t = p.table("fresh_from", optional=True)
    fresh_from = None
    if fresh_t is not None:
        fresh_from = FreshFrom(fresh_t.get("table", _name, "a table path relative to the plan"), fresh_t.get("folder", _name, "a results folder"))
        fresh_t.done()
    if stressors:
        names = [x.name for x in stressors]
        if "lags" in p.data:
            raise p.error("lags", "either lags (fresh, stale) or stressors (each against lag 0), not both")
        if len(set(names)) != len(names) or len({(x.lag, x.sampler) for x in stressors}) != len(stressors):
            raise p.error("stressors", f"names and conditions must be distinct, got {names}")
    elif fresh_from is not None:
        raise p.error("fresh_from", "a pilot of stressors only (lags run their fresh runs)")
    lags = ((0,) if stressors else
            p.get("lags", lambda v: _tuple_of(_whole)(v) if len(v) == 2 else _list(None), "two distinct lags (fresh, stale)"))
    pilot = Pilot(
        heading=p.get("heading", _name, "the pilot text's heading"), algo=p.get("algo", _name, "an algorithm"), settings=p.get("settings", _text, "prose"),
        tasks=p.get("tasks", _tuple_of(_name), "a list of distinct tasks", tuple(candidates)),
        seeds=p.get("seeds", _tuple_of(_whole), "a list of distinct seeds"),
        lags=lags, stressors=stressors or (Stressor(f"lag{lags[1]}", lags[1]),), by_stressor=bool(stressors), fresh_from=fresh_from,
        order=p.get("order", _one_of("cheapest", "registered"), '"cheapest" or "registered"'), rule=rule,
        folder=p.get("folder", _name, "a folder name", ""), budget=p.get("budget", _positive, "a whole number of steps", 0), reads=tuple(reads),
        candidates=candidates, folders=p.get("folders", _tuple_of(_name), "a list of folder names", ()),
    )
    p.done()
    if candidates:
        if pilot.folder or pilot.budget or reads or tuple(candidates) != pilot.tasks:
            raise p.error("candidates", "either candidates and folders (each budget its own runs), or tasks, folder, budget and reads")
        if len(pilot.folders) < max(len(b) for b in candidates.values()):
            raise p.error("folders", "one folder per place in the candidates' budget lists")
        return pilot
    for key in ("folder", "budget", "reads"):
        if not getattr(pilot, key):
            raise p.error(key, "missing (a pilot reads its budgets off one set of runs, or names candidates)")
    for i, r in enumerate(reads):
        if r.budget > pilot.budget or (r.at is not None and r.at > pilot.budget):
            raise p.error(f"reads[{i}]", f"beyond the pilot's budget {pilot.budget:,}")
    return pilot


def _stressor(t: _Reader) -> Stressor:
    out = Stressor(t.get("name", _name, "a name"), t.get("lag", _whole, "a lag", 0), t.get("sampler", _text, 'a sampler ("T1.2", "fp8-e4m3")', ""))
    t.done()
    try:
        contract.sampler_dials(out.sampler)
    except ValueError as err:
        raise t.error("sampler", str(err)) from None
    if not out.lag and not out.sampler:
        raise t.error("lag", "a stressor stresses: a lag above 0, a sampler, or both")
    return out


def _comparator(c: _Reader, pilot: Pilot | None) -> Comparator:
    kind = c.get("kind", _one_of("points", "study"), '"points" or "study"', "points")
    out = Comparator(
        name=c.get("name", _name, "a name"), label=c.get("label", _name, "a label"), kind=kind,
        heading=c.get("heading", _name, "a heading", ""), note=c.get("note", _text, "prose", ""),
        points=c.get("points", _map_of(lambda v: tuple((_positive(s), _number(r)) for s, r in _list(v))), "a table of [[step, return], ...]", {}),
        results=c.get("results", _name, "another study's results folder", ""), folder=c.get("folder", _name, "a folder name", ""),
        arms=c.get("arms", _map_of(_name), "a table {label: arm}", {}),
    )
    c.done()
    if kind == "points":
        if not out.points or not out.heading:
            raise c.error("points", "a points comparator needs heading and points")
        if pilot is None or any(len(v) != len(pilot.reads) for v in out.points.values()):
            raise c.error("points", f"one point per budget read off the pilot ({len(pilot.reads) if pilot else 0})")
    elif not (out.results and out.folder and out.arms):
        raise c.error("results", "a study comparator needs results, folder and arms")
    return out


def _search(t: _Reader | None, design: Design) -> dict[str, Any] | None:
    if t is None:
        return None
    out = {
        "folder": t.get("folder", _name, "a folder name"), "seeds": t.get("seeds", _tuple_of(_whole), "a list of distinct seeds"),
        "trials": t.get("trials", _positive, "a whole number"), "round_size": t.get("round_size", _positive, "a whole number"),
        "sampler_seed": t.get("sampler_seed", _whole, "a whole number"),
        "space": t.get("space", _one_of(*SPACES), " or ".join(SPACES)), "own": t.get("own", _knobs, "a table {arm: {knob: [low, high, default]}}", {}),
    }
    t.done()
    if not set(out["own"]) <= set(design.arms):
        raise t.error("own", f"arms of the design only ({list(design.arms)})")
    if set(out["seeds"]) & set(design.seeds):
        raise t.error("seeds", "the search's seeds must not be scoring seeds")
    return out


def _part(t: _Reader, design: Design, tasks: tuple[str, ...], search: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A search part; its ``space`` and ``own`` default to ``[search]``'s (``own`` for its arms)."""
    kind = t.get("kind", _one_of(*PART_KINDS), " or ".join(PART_KINDS), "search")
    if kind == "learning-rate":
        return _learning_rate_part(t, design, tasks)
    arms = t.get("arms", _tuple_of(_name), "a list of arms")
    search = search or {}
    space_default = search.get("space", ...)
    own_default = {a: k for a, k in search.get("own", {}).items() if a in arms}
    out = {"kind": kind,
        "name": t.get("name", _name, "a name"), "arms": arms, "fresh_arms": t.get("fresh_arms", _tuple_of(_name, nonempty=False), "a list of arms", arms),
        "tax_arms": t.get("tax_arms", _tuple_of(_name, nonempty=False), "a list of arms", ()), "tasks": t.get("tasks", _tuple_of(_name), "a list of tasks", tasks),
        "lags": t.get("lags", _tuple_of(_whole), "a list of lags", design.lags), "folder": t.get("folder", _name, "a folder name"),
        "space": t.get("space", _one_of(*SPACES), " or ".join(SPACES), space_default),
        "own": t.get("own", _knobs, "a table {arm: {knob: [low, high, default]}}", own_default),
        "sampler_seed": t.get("sampler_seed", _whole, "a whole number", None),
    }
    t.done()
    if not set(out["tasks"]) <= set(tasks) or not set(out["lags"]) <= set(design.lags):
        raise t.error("tasks", "the design's tasks and lags only")
    if not set(out["fresh_arms"]) | set(out["tax_arms"]) <= set(arms) or not set(arms) <= set(out["fresh_arms"]) | set(out["tax_arms"]):
        raise t.error("fresh_arms", "every arm of the part tuned fresh or taxed, and only those")
    return out


def _learning_rate_part(t: _Reader, design: Design, tasks: tuple[str, ...]) -> dict[str, Any]:
    out = {
        "kind": "learning-rate", "name": t.get("name", _name, "a name"),
        "arms": t.get("arms", _tuple_of(_name, nonempty=False), "a list of the design's arms", ()),
        "from": t.get("from", _name, "another study's results folder", ""),
        "from_arms": t.get("from_arms", _tuple_of(_name, nonempty=False), "a list of that study's arms", ()),
        "factors": t.get("factors", _tuple_of(_positive_number), "a list of distinct learning-rate factors"),
        "tasks": t.get("tasks", _tuple_of(_name), "a list of tasks", tasks), "lags": t.get("lags", _tuple_of(_whole), "a list of lags", design.lags),
        "seeds": t.get("seeds", _tuple_of(_whole), "a list of seeds", design.seeds), "folder": t.get("folder", _name, "a folder name"),
    }
    t.done()
    if not set(out["arms"]) <= set(design.arms):
        raise t.error("arms", f"the design's arms only ({list(design.arms)})")
    if not out["arms"] and not out["from_arms"]:
        raise t.error("arms", "some arm: of the design, or of the study named by from")
    if bool(out["from"]) != bool(out["from_arms"]):
        raise t.error("from", "given exactly where from_arms are")
    if not set(out["tasks"]) <= set(tasks) or not set(out["lags"]) <= set(design.lags) or not set(out["seeds"]) <= set(design.seeds):
        raise t.error("tasks", "the design's tasks, lags and seeds only")
    if 1 in out["factors"]:
        raise t.error("factors", "x1 is the sweep's own runs: list the other factors")
    return out
