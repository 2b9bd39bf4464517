"""The statistics a pre-registered study's report is made of, shared by every study report.

Each study's endpoints are differences of mean scores (``hypothesis``'s Welch and mean-of-differences
intervals) tested in families: two-sided with equivalence (:func:`tested`), one-sided for
non-inferiority and its mirror (:func:`non_inferiority`), per task and over tasks, Holm within each
table (:func:`head_to_head`); the slope of score on log2(1 + lag) (:func:`slope`); the reading of a
committed per-run table (:func:`frozen_scores`, :func:`fresh_scores`, :func:`check_pick`) and the
cells' formatting. The reports import this module and never each other.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats

from adaptive_po import contract
from adaptive_po.contract import FROZEN_SCORE_FOLDER
from adaptive_po.studies.plan import Decision, Endpoint, StudyPlan

from .hypothesis import ALPHA, MARGIN, Difference, holm, mean_of_differences, verdict, weighted_sum, welch


def lag_name(lag: int) -> str:
    return "fresh" if lag == 0 else f"lag{lag}"


#: the primary endpoint's lags (pre-registered: fresh data and the realistic range)
SLOPE_LAGS: tuple[int, ...] = (0, 1, 2, 4, 8)

#: the slope endpoint's equivalence margin: MARGIN over the whole range of x = log2(1 + lag), lags 0-8
SLOPE_MARGIN = MARGIN / math.log2(1 + max(SLOPE_LAGS))


def log_lag(lag: int) -> float:
    return math.log2(1 + lag)


def slope(lags: Sequence[int], scores: Sequence[float]) -> tuple[float, float, float]:
    """(least-squares slope of score on log2(1 + lag), its standard error, degrees of freedom)."""
    return slope_on([log_lag(lag) for lag in lags], scores)


def slope_on(xs: Sequence[float], scores: Sequence[float]) -> tuple[float, float, float]:
    """(least-squares slope of score on ``xs``, its standard error, degrees of freedom)."""
    x = np.asarray(xs, float)
    y = np.asarray(scores, float)
    n = len(y)
    if n < 3 or np.ptp(x) == 0:
        return math.nan, math.nan, math.nan
    sxx = float(((x - x.mean()) ** 2).sum())
    b = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    resid = y - (y.mean() + b * (x - x.mean()))
    s2 = float((resid ** 2).sum() / (n - 2))
    return b, math.sqrt(s2 / sxx), float(n - 2)


def non_inferiority_p(d: Difference, margin: float = MARGIN) -> float:
    """One-sided p of "the difference is at most -margin" (non-inferiority is shown below the level)."""
    if not d.testable:
        return math.nan
    if d.se == 0:
        return 0.0 if d.estimate > -margin else 1.0
    return float(stats.t.sf((d.estimate + margin) / d.se, d.df))


def inferiority_p(d: Difference, margin: float = MARGIN) -> float:
    """One-sided p of "the difference is at least -margin", the mirror of :func:`non_inferiority_p`
    (inferiority, worse by more than the margin, is shown below the level)."""
    if not d.testable:
        return math.nan
    if d.se == 0:
        return 0.0 if d.estimate < -margin else 1.0
    return float(stats.t.cdf((d.estimate + margin) / d.se, d.df))


#: a search's trials file (``trials.csv``): one row per trial, the search's own record of it
TRIAL_COLUMNS: tuple[str, ...] = ("env", "budget", "algo", "tuned_at", "trial", "variant", "failed_runs", "search_return", "search_score")


def read_trials(path: Path) -> dict[tuple[str, str, int, str, str], list[dict[str, Any]]]:
    """A study's ``trials.csv`` grouped by search, ``(part, env, budget, algo, tuned_at) -> rows``
    (``part`` "" where the file has no such column); a ``ValueError`` naming the file and the line
    for a file that is not the study's (columns missing, a cell that does not parse)."""
    import csv
    import io

    from adaptive_po import contract

    text = contract.read_committed_text(path)
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in TRIAL_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise ValueError(f"{path}: columns {missing} are missing: not the study's trials file")
    out: dict[tuple[str, str, int, str, str], list[dict[str, Any]]] = {}
    for line, raw in enumerate(reader, start=2):
        try:
            if None in raw or any(v is None for v in raw.values()):
                raise ValueError("the row has a different number of cells from the header")
            row = {**raw, "variant": raw["variant"] or "", "budget": int(raw["budget"]), "trial": int(raw["trial"]),
                   "failed_runs": int(raw["failed_runs"]), "search_return": float(raw["search_return"]),
                   "search_score": float(raw["search_score"])}
        except ValueError as err:
            raise ValueError(f"{path}, line {line}: {err}") from None
        key = (str(raw.get("part") or ""), row["env"], row["budget"], row["algo"], row["tuned_at"])
        out.setdefault(key, []).append(row)
    return out


def read_search_trials(path: Path, selected: Mapping[str, Any]) -> dict:
    """The study's ``trials.csv`` (:func:`~adaptive_po.analysis.endpoints.read_trials`), required
    once ``selected.json`` selects anything (the trials are the searches' record of each choice)."""
    if not selected.get("selected"):
        return {}
    if not path.is_file():
        raise ValueError(f"{path} is missing: selected.json's choices are checked against it")
    return read_trials(path)


def check_no_stray_trials(path: Path, trials: Mapping, searched: set) -> None:
    """Every search of ``trials.csv`` is one that ``selected.json`` chose from (and so was checked)."""
    stray = sorted(set(trials) - searched)
    if stray:
        part, env, budget, algo, tuned = stray[0]
        raise ValueError(f"{path}: the search {(part + ' ') if part else ''}{env} at {budget:,} steps, {algo} {tuned} has no choice in "
                         f"selected.json")


def _same(a: float, b: float) -> bool:
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)


def check_pick(where: Path, table: Mapping, folder: str, seeds: Sequence[int], tax_lag: int, what: tuple[str, int, str, str], pick: Mapping[str, Any],
               trials: Sequence[Mapping[str, Any]] | None = None, where_trials: Path | None = None) -> None:
    """A selected configuration (``what``: env, budget, arm, ``fresh`` or ``lag<tax_lag>``) must be
    a best one of its search: every variant searched there (``folder`` of the table) has its runs on
    exactly the search ``seeds`` (a variant with a run deleted or moved to another seed is not
    skipped: it could be the trial that beat the choice), the selected one among them, and none
    returned more on average; its ``search_return`` and ``search_score`` are its runs' means. With
    ``trials`` (the search's rows of ``trials.csv``, at ``where_trials``): one trial per variant
    searched in the table, numbered 0, 1, ..., each trial's return, score and failures its runs',
    and the pick's ``trial`` the one of its variant. A ``ValueError`` naming the file otherwise."""
    env, budget, algo, tuned = what
    lag = 0 if tuned == "fresh" else tax_lag
    if tuned != lag_name(lag):
        raise ValueError(f"{where}: {env} {algo} is tuned at {tuned!r}, not fresh or {lag_name(tax_lag)}")
    runs: dict[str, dict[int, Mapping[str, Any]]] = {}
    for k, r in table.items():
        if k[0] == folder and k[1:3] == (env, algo) and k[4] == lag and k[6] == budget:
            runs.setdefault(k[3], {})[k[5]] = r
    got = runs.get(str(pick.get("variant")))
    if got is None or len(got) != len(seeds):
        raise ValueError(f"{where}: {env} {algo} {tuned}'s variant {pick.get('variant')!r} has {len(got or [])} search runs in the "
                         f"table, not {len(seeds)}")
    for variant, by_seed in sorted(runs.items()):
        if sorted(by_seed) != sorted(seeds):
            raise ValueError(f"{where}: {env} {algo} {tuned}'s search in the table is not whole: its variant {variant!r} ran on seeds "
                             f"{sorted(by_seed)}, not the search seeds {sorted(seeds)} (a search row deleted or moved)")

    def mean(variant: str, column: str) -> float:  # in the seeds' order, as the search told its sampler
        return float(np.mean([float(runs[variant][s][column]) for s in seeds]))

    best = max(mean(v, "final_eval_return") for v in runs)
    chosen = mean(str(pick.get("variant")), "final_eval_return")
    if chosen < best:
        raise ValueError(f"{where}: {env} {algo} {tuned}'s variant {pick.get('variant')!r} returned {chosen!r} in its "
                         f"search, below the best {best!r}: it is not the search's choice")
    for column in ("search_return", "search_score"):
        table_mean = mean(str(pick.get("variant")), "final_eval_return" if column == "search_return" else "score")
        if not isinstance(pick.get(column), (int, float)) or isinstance(pick.get(column), bool) or not _same(pick[column], table_mean):
            raise ValueError(f"{where}: {env} {algo} {tuned}'s {column} {pick.get(column)!r} is not its search runs' mean in the table, "
                             f"{table_mean!r}")
    if trials is None:
        return
    where_trials = where_trials or where
    by_variant: dict[str, Mapping[str, Any]] = {}
    for t in trials:
        if t["variant"] in by_variant:
            raise ValueError(f"{where_trials}: {env} {algo} {tuned}'s variant {t['variant']!r} is trial {by_variant[t['variant']]['trial']} "
                             f"and trial {t['trial']}")
        by_variant[t["variant"]] = t
    if sorted(t["trial"] for t in trials) != list(range(len(trials))):
        raise ValueError(f"{where_trials}: {env} {algo} {tuned}'s trials are numbered {sorted(t['trial'] for t in trials)}, not 0-{len(trials) - 1}")
    if set(by_variant) != set(runs):
        stray = sorted(set(by_variant) ^ set(runs))[0]
        side = "has no runs in the search table" if stray in by_variant else "has no trial"
        raise ValueError(f"{where_trials}: {env} {algo} {tuned}'s variant {stray!r} {side}: {len(by_variant)} trials, "
                         f"{len(runs)} variants searched in the table")
    for variant, t in by_variant.items():
        failed = sum(r.get("status") == "failed" for r in runs[variant].values())
        for column, value in (("search_return", mean(variant, "final_eval_return")), ("search_score", mean(variant, "score"))):
            if not _same(t[column], value):
                raise ValueError(f"{where_trials}: {env} {algo} {tuned}'s trial {t['trial']} has {column} {t[column]!r}, not its runs' "
                                 f"mean in the table, {value!r}")
        if t["failed_runs"] != failed:
            raise ValueError(f"{where_trials}: {env} {algo} {tuned}'s trial {t['trial']} has failed_runs {t['failed_runs']}, not the "
                             f"{failed} of the table")
    t = by_variant[str(pick.get("variant"))]
    if pick.get("trial") != t["trial"]:
        raise ValueError(f"{where}: {env} {algo} {tuned}'s trial {pick.get('trial')!r} is not its variant's trial in "
                         f"{where_trials.name}, {t['trial']}")


def check_searched_picks(where: Path, table: Mapping, selected: Mapping[str, Any], parts: Mapping[str, tuple[str, Sequence[int], int]],
                         where_trials: Path | None = None) -> None:
    """Each selected configuration of each part (``selected.json``: ``{task: {"budget": b, part:
    {arm: {"fresh"|"lag<k>": pick}}}}``) is a best one of that part's search in the table, its trial,
    return and score those of ``trials.csv`` (``where_trials``) and the table (:func:`check_pick`);
    ``parts``: each registered part's ``(search folder, search seeds, tax lag)``; every search of
    ``trials.csv`` one that ``selected.json`` chose from. A ``ValueError`` naming the file otherwise."""
    where_trials = where_trials or where.with_name(contract.FROZEN_TRIALS_FILE)
    trials = read_search_trials(where_trials, selected)
    searched = set()
    for env, chosen in selected.get("selected", {}).items():
        for part, picks in chosen.items():
            if part == "budget":
                continue
            if part not in parts or not isinstance(picks, Mapping):
                raise ValueError(f"{where}: {env}'s part {part!r} is not one of {list(parts)}")
            folder, seeds, tax_lag = parts[part]
            for algo, tuned_picks in picks.items():
                for tuned, pick in tuned_picks.items():
                    key = (part, env, int(chosen["budget"]), algo, tuned)
                    searched.add(key)
                    check_pick(where, table, folder, tuple(int(x) for x in seeds), int(tax_lag), (env, int(chosen["budget"]), algo, tuned), pick,
                               trials.get(key, []), where_trials)
    check_no_stray_trials(where_trials, trials, searched)


def read_study_table(path: Path) -> dict:
    """A study's committed per-run table (:func:`contract.read_frozen_table`), a missing or empty
    file read as no runs; each row's random score and reference the environment file's
    (:func:`contract.check_table_normalization`), and a table with rows its committed digest."""
    if path.is_file() and not contract.read_regular_text(path).strip():
        return {}
    table = contract.read_frozen_table(path)
    contract.check_table_normalization(path, table)
    if table:  # a published table's digest is committed with it (read_frozen_table checked it where present)
        contract.check_table_digest(path, required=True)
    return table


def pick_at(selected: Mapping[str, Any], env: str, *path: str) -> Mapping[str, Any] | None:
    """``selected.json``'s node at ``selected[env][path...]`` (a part, an arm, "fresh" or
    "lag<k>"), None where any step is missing."""
    node: Any = selected.get("selected", {}).get(env)
    for name in path:
        if not isinstance(node, Mapping) or name not in node:
            return None
        node = node[name]
    return node


def half_width(x: np.ndarray) -> float:
    """The 95% t-interval's half width of the mean of ``x`` (NaN for fewer than two runs)."""
    return float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan


def tax_sum(groups: Mapping[str, Mapping[str, Sequence[tuple[np.ndarray, float]]]], envs: Sequence[str], signs: Mapping[str, float]) -> Difference:
    """sum over ``envs`` and arms of sign x the arm's retuning tax / len(envs): ``groups[env][arm]``
    the tax's terms, ``[(lag-k-tuned scores, 1), (fresh-tuned scores, -1)]`` at the tax lag, or
    none where the lag-k choice is the fresh one (a tax of exactly 0); each group a term of
    :func:`~adaptive_po.analysis.hypothesis.weighted_sum` (Welch-Satterthwaite degrees of freedom)."""
    if not envs:
        return Difference(math.nan, math.nan, math.nan)
    terms = [(float(g.mean()), float(g.std(ddof=1) / math.sqrt(len(g))), float(len(g) - 1), s * sign / len(envs))
             for env in envs for arm, sign in signs.items() for g, s in groups[env][arm]]
    return weighted_sum(terms) if terms else Difference(0.0, 0.0, math.inf)


def slope_difference(slopes: Mapping[tuple[str, str], tuple[float, float, float]], envs: Sequence[str], a: str, b: str) -> Difference:
    """The mean over ``envs`` of arm ``a``'s slope minus ``b``'s (``slopes[(env, arm)]``:
    :func:`slope`), each slope a term of its own (Welch-Satterthwaite degrees of freedom)."""
    if not envs:
        return Difference(math.nan, math.nan, math.nan)
    return weighted_sum([(*slopes[(env, arm)], w / len(envs)) for env in envs for arm, w in ((a, 1.0), (b, -1.0))])


def frozen_scores(table: Mapping, env: str, budget: int, algo: str, variant: str, lag: int, seeds: Sequence[int],
                  folder: str = FROZEN_SCORE_FOLDER) -> np.ndarray | None:
    """The normalized scores of one configuration's runs in ``folder`` at ``lag``, in the order of
    ``seeds``; None unless every seed's run is in the table."""
    rows = [table.get((folder, env, algo, variant, lag, s, budget, "")) for s in seeds]
    if any(r is None for r in rows):
        return None
    return np.array([r["score"] for r in rows], float)


def fresh_scores(table: Mapping, tasks: Sequence[tuple[str, int]], variants: Mapping[str, Mapping[str, str]], lags: Sequence[int],
                 seeds: Sequence[int]) -> dict[str, dict[tuple[str, int], np.ndarray]]:
    """``{task: {(arm, lag): scores}}``, in the order of ``tasks``, for the tasks of ``variants``
    (``{task: {arm: the arm's frozen configuration}}``, the arms in their order): each cell of
    ``lags`` whose ``seeds`` are all in the table. The inputs of :func:`head_to_head`."""
    out: dict[str, dict[tuple[str, int], np.ndarray]] = {}
    for env, budget in tasks:
        if env not in variants:
            continue
        out[env] = {}
        for algo, variant in variants[env].items():
            for lag in lags:
                got = frozen_scores(table, env, budget, algo, variant, lag, seeds)
                if got is not None:
                    out[env][(algo, lag)] = got
    return out


def tested(diffs: Sequence[Difference], margin: float | Sequence[float], sign: float = 1.0) -> list[dict[str, Any]]:
    """One family of comparisons: each difference's p, its p after Holm over the family, and its
    verdict (equivalence within ``margin`` by two one-sided tests, Holm over the family too; one
    margin for every comparison, or one per comparison where the family mixes scales, such as a
    lag-0 difference beside a slope). ``sign`` -1 reads a negative difference as the win (the tax
    difference)."""
    margins = [margin] * len(diffs) if isinstance(margin, (int, float)) else list(margin)
    p = [d.p_value() for d in diffs]
    adjusted = holm(p)
    equivalence = holm([d.p_equivalence(m) for d, m in zip(diffs, margins)])
    return [{"d": d, "p": pi, "p_adj": a, "verdict": verdict(sign * d.estimate, a, e)} for d, pi, a, e in zip(diffs, p, adjusted, equivalence)]


def non_inferiority(diffs: Sequence[Difference], margin: float = MARGIN) -> list[dict[str, Any]]:
    """Endpoint 2's family: one-sided p of "worse by the margin or more", Holm over the family;
    non-inferior where it rejects; inferior where the mirror test ("worse by less than the margin")
    rejects after its own Holm over the same family."""
    p = [non_inferiority_p(d, margin) for d in diffs]
    q = [inferiority_p(d, margin) for d in diffs]
    return [{"d": d, "p": pi, "p_adj": a, "p_inferior": qi, "p_inferior_adj": b, "verdict": non_inferiority_word(d, a, b)}
            for d, pi, a, qi, b in zip(diffs, p, holm(p), q, holm(q))]


def non_inferiority_word(d: Difference, p_adjusted: float, p_inferior_adjusted: float) -> str:
    """non-inferior where the adjusted one-sided test of "worse by the margin or more" rejects;
    inferior where the adjusted one-sided test of "worse by less than the margin" rejects (the
    mirror, adjusted the same way); else not shown; "" where nothing could be tested."""
    if not d.testable:
        return ""
    if p_adjusted < ALPHA:
        return "non-inferior"
    if p_inferior_adjusted < ALPHA:
        return "inferior"
    return "not shown"


def head_to_head(fresh: Mapping[str, Mapping[tuple[str, int], np.ndarray]], comparator: str, arms: Sequence[str],
                 lags: Sequence[int], margin: float = MARGIN) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every arm of ``arms`` but ``comparator`` minus ``comparator`` at every lag of ``lags``, from
    ``fresh`` (``{task: {(arm, lag): scores}}``, :func:`fresh_scores`): per task (Welch) and over the
    tasks that have both cells (the mean of per-task differences, every task weighing the same),
    each of the two tables with its own Holm. Returns ``(per_task_rows, aggregate_rows)``."""
    others = [a for a in arms if a != comparator]
    keys, diffs = [], []
    pairs: dict[tuple[str, int], list[tuple[np.ndarray, np.ndarray]]] = {}
    for env, cells in fresh.items():
        for algo in others:
            for lag in lags:
                if (algo, lag) in cells and (comparator, lag) in cells:
                    keys.append((env, algo, lag))
                    diffs.append(welch(cells[(algo, lag)], cells[(comparator, lag)]))
                    pairs.setdefault((algo, lag), []).append((cells[(algo, lag)], cells[(comparator, lag)]))
    task_rows = [{"env": env, "algo": algo, "vs": comparator, "lag": lag, **row} for (env, algo, lag), row in zip(keys, tested(diffs, margin))]
    agg_keys = [(algo, lag) for algo in others for lag in lags if (algo, lag) in pairs]
    agg = tested([mean_of_differences(pairs[k]) for k in agg_keys], margin)
    agg_rows = [{"algo": algo, "vs": comparator, "lag": lag, "tasks": len(pairs[(algo, lag)]), **row} for (algo, lag), row in zip(agg_keys, agg)]
    return task_rows, agg_rows


def deviations(results: Path) -> list[str]:
    """The lines a pre-registered study's report gives its pre-registration's "Deviations" section
    (``results/preregistration.md``): none, or each listed deviation quoted as it stands there."""
    path = results / "preregistration.md"
    if not path.is_file():
        return ["The pre-registration (`preregistration.md`) is not in this folder."]
    text = contract.read_regular_text(path)
    if "## Deviations" not in text:
        return ["Deviations: the pre-registration has no \"Deviations\" section."]
    section = text.split("## Deviations", 1)[1].split("\n## ", 1)[0].strip()
    if not section or section.lower().startswith("none"):
        return ["**Deviations from the pre-registration:** none listed in it."]
    return ["**Deviations from the pre-registration** (as listed there):", "", *[f"> {line}" if line else ">" for line in section.splitlines()]]


def format_difference(d: Difference, digits: int = 3) -> str:
    if not math.isfinite(d.estimate):
        return "n/a"
    lo, hi = d.ci()
    if not math.isfinite(lo):
        return f"{d.estimate:+.{digits}f}"
    return f"{d.estimate:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def format_p(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else "n/a"


def row_cells(r: Mapping[str, Any], digits: int = 3) -> str:
    d = r["d"]
    return f"{format_difference(d, digits)} | {format_p(r['p'])} | {format_p(r['p_adj'])} | {format_p(d.detectable())} | {r['verdict'] or 'n/a'} |"


# ----------------------------------------------------------------------------------------------
# a plan's endpoints (adaptive_po.studies.plan): their kinds, their Holm families, the decision rule

#: the kinds whose test is two-sided with equivalence within the margin (the others: non-inferiority)
TWO_SIDED_KINDS = ("slope", "difference", "tax", "head-to-head")


def family(endpoints: Sequence[Endpoint], diffs: Sequence[Difference]) -> list[dict[str, Any]]:
    """One Holm family of a plan's endpoints (``diffs`` in their order): each endpoint's p and its
    Holm-adjusted p; a two-sided endpoint reads win, loss, equivalent (two one-sided tests within
    its margin, Holm over the family's two-sided endpoints, a non-inferiority endpoint's place
    left empty) or inconclusive, with ``sign`` -1 for a tax (a negative difference wins); a
    non-inferiority endpoint reads non-inferior, inferior (its mirror test, in its own place in
    the same Holm) or not shown."""
    p = [non_inferiority_p(d, e.margin) if e.kind == "non-inferiority" else d.p_value() for e, d in zip(endpoints, diffs)]
    adjusted = holm(p)
    equivalence = holm([math.nan if e.kind == "non-inferiority" else d.p_equivalence(e.test_margin) for e, d in zip(endpoints, diffs)])
    rows = []
    for i, (e, d) in enumerate(zip(endpoints, diffs)):
        row = {"id": e.id, "endpoint": e.label, "digits": e.digits, "d": d, "p": p[i], "p_adj": adjusted[i], "p_equivalence_adj": equivalence[i]}
        if e.kind == "non-inferiority":
            mirror = [*p[:i], inferiority_p(d, e.margin), *p[i + 1:]]
            row.update(p_inferior=mirror[i], p_inferior_adj=holm(mirror)[i])
            row["verdict"] = non_inferiority_word(d, adjusted[i], row["p_inferior_adj"])
        else:
            row["verdict"] = verdict((-1.0 if e.kind == "tax" else 1.0) * d.estimate, adjusted[i], equivalence[i])
            row["within_margin"] = bool(d.p_equivalence(e.test_margin) < ALPHA)
        rows.append(row)
    return rows


def plan_rows(study: StudyPlan, diffs: Mapping[str, Difference]) -> list[dict[str, Any]]:
    """Each endpoint of ``diffs`` (``{endpoint id: difference}``, the ones a report computes, in
    its order) with its verdict: Holm within its family of the plan (:func:`family`), alone where
    the plan gives it none. A family holding an endpoint the report does not compute, or an
    endpoint the plan does not have, is refused in one line naming the plan."""
    ids = {e.id for e in study.endpoints}
    unknown = [i for i in diffs if i not in ids]
    if unknown:
        raise ValueError(f"{study.path}: endpoints: the plan has no endpoint {unknown[0]!r} (this report computes {list(diffs)})")
    rows: dict[str, dict[str, Any]] = {}
    for name, members in study.families().items():
        missing = [e.id for e in members if e.id not in diffs]
        if missing:
            raise ValueError(f"{study.path}: endpoints: family {name!r} holds {missing}, which this report does not compute ({list(diffs)})")
        for row in family(members, [diffs[e.id] for e in members]):
            rows[row["id"]] = row
    for i, d in diffs.items():
        if i not in rows:
            rows[i] = family([study.endpoint(i)], [d])[0]
    return [rows[i] for i in diffs]


def per_task_family(endpoint: Endpoint, by_task: Mapping[str, Difference]) -> dict[str, dict[str, Any]]:
    """One endpoint per task, Holm over its per-task tests: ``{task: row}``."""
    tasks = list(by_task)
    diffs = [by_task[t] for t in tasks]
    if endpoint.kind == "non-inferiority":
        rows = non_inferiority(diffs, endpoint.margin)
    else:
        rows = tested(diffs, endpoint.test_margin, sign=-1.0 if endpoint.kind == "tax" else 1.0)
    return dict(zip(tasks, rows))


def decide(decision: Decision, rows: Mapping[str, Mapping[str, Any]]) -> str:
    """A plan's decision rule on the endpoints' rows (``{endpoint id: row}``, :func:`family`; an
    endpoint cut with its part has none): its ``undecided`` answer where a verdict it reads could
    not be tested; else "supported" where every term of one of its supported alternatives holds
    (a term: the endpoint's verdict, or "within-margin": its equivalence test alone rejects),
    "contradicted" where one of its contradicted alternatives holds, its ``otherwise`` answer
    else; or, for a rule of words, its endpoint's verdict in its words."""
    if any(e in rows and not rows[e]["verdict"] for e in decision.endpoints()):
        return decision.undecided
    if decision.endpoint:
        v = rows[decision.endpoint]["verdict"] if decision.endpoint in rows else ""
        return decision.words.get(v, v) if v else decision.undecided

    def holds(terms: Sequence[tuple[str, str]]) -> bool:
        return all(e in rows and (rows[e].get("within_margin", False) if word == "within-margin" else rows[e]["verdict"] == word)
                   for e, word in terms)

    if any(holds(terms) for terms in decision.supported):
        return "supported"
    if any(holds(terms) for terms in decision.contradicted):
        return "contradicted"
    return decision.otherwise
