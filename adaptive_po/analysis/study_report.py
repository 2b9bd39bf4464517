"""The generic report of a pre-registered study, from its plan file and its committed files alone.

``python -m adaptive_po.analysis.study_report --results docs/results/<study>`` reads the plan
(``<results>/plan.toml``, :mod:`adaptive_po.studies.plan`; ``--plan`` names another), the per-run
table with each run's learning curve, the pilot's selection and the cuts; checks every row of the
table against the plan (a run the plan does not have is one line, exit 2); and writes the
verdicts with the figures ``pilot.png`` (the pilot's runs beside the plan's comparators),
``curves.png`` (learning curves per task with 95% bands) and ``staleness.png`` (score against
lag). The endpoints, their margins and Holm families, the decision rules and the secondary tables
are the plan's (:mod:`adaptive_po.analysis.endpoints`); a study in progress is reported over the
tasks whose runs are all in, and says so.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats

from adaptive_po import contract
from adaptive_po.contract import FROZEN_CURVE_COLUMN as CURVE_COLUMN, parse_curve
from adaptive_po.studies import pilot as pilot_rule
from adaptive_po.studies.cuts import Runs, apply_cuts, check_cuts, pair_name, split_pair
from adaptive_po.studies.plan import PLAN_FILE, StudyPlan, load_plan

from .endpoints import decide, deviations, format_difference, format_p, head_to_head, log_lag, per_task_family, plan_rows, slope, slope_on
from .hypothesis import Difference, mean_of_differences, weighted_sum, welch

NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


@dataclass(frozen=True)
class Plan:
    """The study's runs as its committed files give them: the selected tasks and budgets, less the cuts."""

    study: StudyPlan
    #: whether the pilot has decided (its selection is written), whatever it selected
    decided: bool
    selected: tuple[tuple[str, int], ...]
    runs: Runs
    cuts: Mapping[str, list[Any]]

    @property
    def tasks(self) -> tuple[tuple[str, int], ...]:
        return self.runs.tasks


def load(results: Path, plan_file: str | Path | None = None) -> tuple[dict, Plan]:
    """The table and the study's runs, each checked against the plan."""
    study = load_plan(plan_file or results / PLAN_FILE)
    if study.pilot is None or study.pilot.candidates or study.design.configurations != "shared" or study.parts:
        raise ValueError(f"{study.path}: this report reads a study of shared configurations whose pilot reads its budgets off one set of "
                         "runs; searched and frozen designs, candidate budgets and fixed tasks come with the frozen studies' port")
    files = study.files
    table = contract.read_frozen_table(results / files["table"])
    contract.check_table_normalization(results / files["table"], table)  # random score and reference: the environment files'
    if table:  # a published table's digest is committed with it (read_frozen_table checked it where present)
        contract.check_table_digest(results / files["table"], required=True)
    selection = contract.read_committed_json(results / files["selection"]) if (results / files["selection"]).is_file() else None
    cuts_path = results / files["cuts"]
    cuts = check_cuts(study, contract.read_committed_json(cuts_path), cuts_path) if cuts_path.is_file() else {}
    try:
        selected = tuple((str(g["env"]), int(g["budget"])) for g in (selection or {}).get(study.tasks_word, []))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{results / files['selection']}: not a selection of this study ({err})") from None
    study.check_selected(results / files["selection"], selected)
    plan = Plan(study, selection is not None, selected, apply_cuts(study, selected, cuts), {k: list(v) for k, v in cuts.items()})
    check_table(results / files["table"], table, plan)
    return table, plan


def check_table(path: Path, table: Mapping, plan: Plan) -> None:
    """Every run of the table is one the plan has: a pilot run of its algorithm, lags, seeds and
    budget on one of its tasks, or a run of the design on a selected task at its budget."""
    p, d = plan.study.pilot, plan.study.design
    selected = dict(plan.selected)
    for key in table:
        folder, task, algo, variant, lag, seed, budget, sampler = key
        if sampler:
            why = "sampler"
        elif folder == p.folder:
            why = ("task" if task not in p.tasks else "algorithm" if algo != p.algo else "lag" if lag not in p.lags else
                   "seed" if seed not in p.seeds else "budget" if budget != p.budget else "variant" if variant else "")
        elif folder == d.folder:
            why = ("task (not selected)" if task not in selected else "budget" if budget != selected[task] else "arm" if algo not in d.arms else
                   "lag" if lag not in d.lags else "seed" if seed not in d.seeds else "variant" if variant else "")
        else:
            why = "folder"
        if why:
            raise ValueError(f"{path}: the run {key} is not in the plan {plan.study.path} (its {why})")


def scores(table: Mapping, plan: Plan) -> dict[str, dict[tuple[str, int], np.ndarray]]:
    """``{task: {(arm, lag): normalized scores}}``: each cell whose seeds are all in the table."""
    out: dict[str, dict[tuple[str, int], np.ndarray]] = {}
    for task, budget in plan.tasks:
        cells = {}
        for arm in plan.runs.arms:
            for lag in plan.runs.lags:
                rows = [table.get((plan.study.design.folder, task, arm, "", lag, s, budget, "")) for s in plan.runs.seeds]
                if all(r is not None for r in rows):
                    cells[(arm, lag)] = np.array([r["score"] for r in rows], float)
        out[task] = cells
    return out


def slope_lags(study: StudyPlan) -> tuple[int, ...]:
    """The lags of the per-task slope columns: the first slope endpoint's (else the kept lags)."""
    return next((e.lags for e in study.endpoints if e.kind == "slope"), study.kept_lags())


def analyse(table: Mapping, plan: Plan) -> dict[str, Any]:
    """Per task the slopes; each endpoint per task and over the tasks that have it."""
    fresh = scores(table, plan)
    slopes: dict[tuple[str, str, tuple[int, ...]], tuple[float, float, float]] = {}
    wanted = {slope_lags(plan.study)} | {e.lags for e in plan.study.endpoints if e.kind == "slope"}
    for task, cells in fresh.items():
        for arm in plan.runs.arms:
            for lags in wanted:
                if all((arm, lag) in cells for lag in lags):
                    pts = [(lag, v) for lag in lags for v in cells[(arm, lag)]]
                    slopes[(task, arm, lags)] = slope([a for a, _ in pts], [b for _, b in pts])
    out: dict[str, Any] = {"fresh": fresh, "slopes": slopes, "endpoints": {}, "by_task": {}}
    for e in plan.study.endpoints:
        if e.kind == "slope":
            tasks = [t for t in fresh if (t, e.arm, e.lags) in slopes and (t, e.versus, e.lags) in slopes]
            by_task = {t: weighted_sum([(*slopes[(t, e.arm, e.lags)], 1.0), (*slopes[(t, e.versus, e.lags)], -1.0)]) for t in tasks}
            # the mean over tasks, each slope a term of its own (Welch-Satterthwaite degrees of freedom)
            overall = weighted_sum([(*slopes[(t, arm, e.lags)], w / len(tasks)) for t in tasks for arm, w in ((e.arm, 1.0), (e.versus, -1.0))]) \
                if tasks else Difference(math.nan, math.nan, math.nan)
        elif e.kind in ("non-inferiority", "difference"):
            pairs = {t: (c[(e.arm, e.lag)], c[(e.versus, e.lag)]) for t, c in fresh.items() if (e.arm, e.lag) in c and (e.versus, e.lag) in c}
            by_task = {t: welch(*pair) for t, pair in pairs.items()}
            overall = mean_of_differences(list(pairs.values())) if pairs else Difference(math.nan, math.nan, math.nan)
        else:
            raise ValueError(f"{plan.study.path}: endpoints {e.id!r}: kind {e.kind!r} is read by the frozen studies' reports, not yet by this one")
        out["endpoints"][e.id], out["by_task"][e.id] = overall, by_task
    return out


def primary(plan: Plan, result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every endpoint of a Holm family with its verdict (Holm over its family), in the plan's order;
    an endpoint outside any family alone."""
    return plan_rows(plan.study, result["endpoints"])


def answers(plan: Plan, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each decision rule's answer, in the plan's order."""
    by_id = {r["id"]: r for r in rows}
    return [decide(d, by_id) for d in plan.study.decisions]


def per_task_verdicts(plan: Plan, result: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each endpoint per task, Holm over that endpoint's per-task tests."""
    return {e.id: per_task_family(e, result["by_task"][e.id]) for e in plan.study.endpoints}


def _half(x: np.ndarray) -> float:
    return float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan


def report_text(table: Mapping, plan: Plan, result: Mapping[str, Any]) -> str:
    s = plan.study
    noun, nouns, table_file = s.task_noun, s.tasks_word, s.files["table"]
    done = sum(1 for k in table if k[0] == s.design.folder)
    pilot = sum(1 for k in table if k[0] == s.pilot.folder)
    lines = [
        f"# {s.title}: verdicts", "",
        f"Pre-registered in [`preregistration.md`](preregistration.md) before any run, the pilot included; {nouns} and budgets "
        f"chosen by the `{s.pilot.algo}`-only pilot ([`{s.files['pilot']}`]({s.files['pilot']})). Rebuilt from the committed files by "
        f"`{s.commands['report']}`.", "",
    ]
    if not plan.decided:
        lines += [f"**The pilot is not complete** ({pilot} of its runs in [`{table_file}`]({table_file})): no {noun} is selected yet, "
                  "and the study has not started."]
        return "\n".join(lines) + "\n"
    if len(plan.selected) < s.pilot.rule.min_tasks:
        lines += [f"**{len(plan.selected)} {noun}(s) qualify, fewer than {s.pilot.rule.min_tasks}: as registered, the study is not run.** "
                  f"The pilot is the result ({pilot} runs: [`{s.files['pilot']}`]({s.files['pilot']}), `pilot.png`): {s.pilot.rule.not_run}"]
        return "\n".join(lines) + "\n"
    runs = plan.runs
    complete = [t for t, _ in plan.tasks if len(result["fresh"].get(t, {})) == len(runs.arms) * len(runs.lags)]
    lines += [
        f"**Progress:** {done} of {runs.runs()} runs in [`{table_file}`]({table_file}); {nouns} "
        f"{', '.join(f'{t} ({b:,} steps)' for t, b in plan.tasks)}; lags {', '.join(map(str, runs.lags))}; scoring seeds "
        f"{runs.seeds[0]}-{runs.seeds[-1]}.",
    ]
    if any(plan.cuts.values()):
        lines.append(f"Cut by the pre-registered order before the study's first run: {json.dumps(plan.cuts, sort_keys=True)}.")
    rows = primary(plan, result)
    interim = len(complete) < len(plan.tasks)
    families = s.families()
    holm_header = (f"p (Holm over the {NUMBER_WORDS.get(len(next(iter(families.values()))), len(next(iter(families.values()))))})"
                   if len(families) == 1 else "p (Holm within its family)")
    lines += [
        "", "## The answer", "",
        (f"**Interim, {len(complete)} of {len(plan.tasks)} {nouns} complete: no verdict here is the study's until every {noun} is in.** "
         if interim else "")
        + "**" + " ".join(d.sentence.format(answer=a) for d, a in zip(s.decisions, answers(plan, rows))) + "** " + s.design.limits, "",
        f"| endpoint | estimate [95% CI] | p | {holm_header} | detectable (80% power) | verdict |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        d = r["d"]
        lines.append(f"| {r['endpoint']} | {format_difference(d, r['digits'])} | {format_p(r['p'])} | {format_p(r['p_adj'])} | "
                     f"{format_p(d.detectable())} | {r['verdict'] or 'n/a'} |")
    notes = []
    sloped = next((e for e in s.endpoints if e.kind == "slope"), None)
    if sloped is not None:
        notes.append(f"Slopes are in normalized score per unit of log2(1 + lag) over lags {', '.join(map(str, sloped.lags))}; their "
                     f"equivalence margin is {sloped.margin:g} over lags {sloped.lags[0]}-{sloped.lags[-1]} ({sloped.test_margin:.4f} per unit).")
    for r, e in zip(rows, s.endpoints):
        if e.kind == "non-inferiority":
            notes.append(f"Endpoint {e.id} is one-sided (p of \"{e.arm} is worse by {e.margin:g} or more\"); it reads inferior where the mirror "
                         f"test rejects after the same Holm: p {format_p(r['p_inferior'])}, Holm {format_p(r['p_inferior_adj'])}.")
    lag_set = slope_lags(s)
    lines += [
        "", " ".join(notes), "",
        f"## Per {noun}", "",
        f"| {noun} | " + " | ".join(f"slope {arm}" for arm in runs.arms) + " | " + " | ".join(e.short for e in s.endpoints) + " |",
        "|---|" + "---:|" * (len(runs.arms) + len(s.endpoints)),
    ]
    verdicts = per_task_verdicts(plan, result)
    for task, _ in plan.tasks:
        def sl(arm: str) -> str:
            b = result["slopes"].get((task, arm, lag_set))
            return f"{b[0]:+.4f} ({b[1]:.4f})" if b and math.isfinite(b[0]) else "n/a"

        def cell(id: str, digits: int) -> str:
            row = verdicts[id].get(task)
            return f"{format_difference(row['d'], digits)} {row['verdict'] or ''} (Holm p {format_p(row['p_adj'])})".strip() if row else "n/a"

        lines.append(f"| {task} | " + " | ".join(sl(arm) for arm in runs.arms) + " | " + " | ".join(cell(e.id, e.digits) for e in s.endpoints) + " |")
    lines += ["", f"Slopes with their standard errors; each endpoint's per-{noun} tests are one Holm family.", ""]
    for secondary in s.secondary:
        for comparator in secondary.comparators:
            per_task, aggregate = head_to_head(result["fresh"], comparator, (*secondary.arms, comparator), runs.lags, secondary.margin)
            lines += [f"## Secondary: `{'`, `'.join(secondary.arms)}` minus `{comparator}` at every lag", "",
                      f"| {noun} | lag | difference [95% CI] | p (Holm within the table) | detectable (80% power) | verdict |", "|---|---:|---:|---:|---:|---|"]
            lines += [f"| over {r['tasks']} {noun}(s) | {r['lag']} | {format_difference(r['d'])} | {format_p(r['p_adj'])} | {format_p(r['d'].detectable())} | {r['verdict']} |"
                      for r in aggregate]
            lines += [f"| {r['env']} | {r['lag']} | {format_difference(r['d'])} | {format_p(r['p_adj'])} | {format_p(r['d'].detectable())} | {r['verdict']} |"
                      for r in per_task]
            lines += ["", f"Per {noun}: Welch's t; over {nouns}: the mean of per-{noun} differences; each table one Holm family; equivalence within "
                      f"±{secondary.margin:g} by two one-sided tests.", ""]
    lines += ["## Every cell", "", f"| {noun} | arm | lag | mean normalized score [95% CI] | runs |", "|---|---|---:|---:|---:|"]
    for task, _ in plan.tasks:
        for arm in runs.arms:
            for lag in runs.lags:
                got = result["fresh"].get(task, {}).get((arm, lag))
                if got is not None:
                    h = _half(got)
                    lines.append(f"| {task} | {arm} | {lag} | {got.mean():.3f} [{got.mean() - h:.3f}, {got.mean() + h:.3f}] | {len(got)} |")
    fresh, stale = s.pilot.lags
    beside = "".join(f", with {c.name} points" for c in s.comparators)
    lines += ["", f"Figures: [`curves.png`](curves.png) (evaluation return over training per {noun}, mean and 95% band per arm "
              f"at lags {fresh} and {stale}{beside}), [`staleness.png`](staleness.png) (score against lag), "
              f"[`pilot.png`](pilot.png) (the pilot's `{s.pilot.algo}` on every {noun})."]
    return "\n".join(lines) + "\n"


def curve_band(rows: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(steps, mean, 95% half-width) over ``rows``' learning curves at the steps all of them share."""
    curves = [dict(parse_curve(str(r.get(CURVE_COLUMN, "")))) for r in rows if r["status"] == "complete"]
    if not curves:
        return None
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    values = np.array([[c[s] for s in steps] for c in curves], float)
    half = (stats.t.ppf(0.975, len(curves) - 1) * values.std(axis=0, ddof=1) / math.sqrt(len(curves))) if len(curves) > 1 else np.zeros(len(steps))
    return np.array(steps, float), values.mean(axis=0), half


def _curves_figure(study: StudyPlan, panels: Sequence[tuple[str, Sequence[tuple[str, str, str, Sequence[Mapping[str, Any]]]]]], title: str, out: Path) -> Path:
    """One panel per task: each line's mean learning curve with its 95% band (``(label, color,
    line style, rows)``), and the plan's comparators' points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(panels))
    fig, axes = plt.subplots(math.ceil(len(panels) / cols), cols, figsize=(4.8 * cols, 3.4 * math.ceil(len(panels) / cols) + 0.9), squeeze=False)
    for ax, (task, lines) in zip(axes.flat, panels):
        for label, color, style, rows in lines:
            band = curve_band(rows)
            if band is not None:
                x, m, h = band
                ax.plot(x / 1e6, m, style, color=color, lw=1.3, label=label)
                ax.fill_between(x / 1e6, m - h, m + h, color=color, alpha=0.15, lw=0)
        for c in study.comparators:
            points = c.points.get(task, ())
            if points:
                ax.plot([s / 1e6 for s, _ in points], [r for _, r in points], "k*", ms=9, label=c.label)
        ax.set_title(task, fontsize=10)
        ax.set_xlabel("environment steps (millions)")
        ax.set_ylabel("evaluation return")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, (0.25 + 0.17 * math.ceil(max(len(labels), 1) / 4)) / fig.get_figheight(), 1, 1 - 0.3 / fig.get_figheight()))
    return _save(fig, out)


def figures(table: Mapping, plan: Plan, result: Mapping[str, Any], results: Path) -> list[Path]:
    """``pilot.png`` (the pilot algorithm at its two lags on every task, beside the comparators'
    points), and once the study has runs, ``curves.png`` and ``staleness.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = plan.study
    colors = s.design.colors

    def rows(folder: str, task: str, arm: str, lag: int, seeds: Sequence[int], budget: int) -> list[Mapping[str, Any]]:
        return [r for r in (table.get((folder, task, arm, "", lag, seed, budget, "")) for seed in seeds) if r is not None]

    written = []
    p = s.pilot
    if any(k[0] == p.folder for k in table):
        panels = [(task, [(f"{p.algo}, lag {lag}", colors.get(p.algo, "k"), style, rows(p.folder, task, p.algo, lag, p.seeds, p.budget))
                          for lag, style in zip(p.lags, ("-", "--"))]) for task in p.tasks]
        written.append(_curves_figure(s, panels, f"The pilot: our {p.algo} (mean and 95% band over seeds {', '.join(map(str, p.seeds))})",
                                      results / "pilot.png"))
    if not any(result["fresh"].values()):
        return written
    runs = plan.runs
    panels = [(task, [(f"{arm}, lag {lag}", colors.get(arm, "k"), style, rows(s.design.folder, task, arm, lag, runs.seeds, budget))
                      for arm in runs.arms for lag, style in zip(p.lags, ("-", "--")) if lag in runs.lags]) for task, budget in plan.tasks]
    written.append(_curves_figure(s, panels, f"{s.title}: deterministic evaluation, mean and 95% band over seeds", results / "curves.png"))
    fig, axes = plt.subplots(1, len(plan.tasks), figsize=(4.6 * len(plan.tasks), 3.6), squeeze=False)
    for ax, (task, _) in zip(axes.flat, plan.tasks):
        for arm in runs.arms:
            cells = [(lag, result["fresh"][task][(arm, lag)]) for lag in runs.lags if (arm, lag) in result["fresh"].get(task, {})]
            if cells:
                ax.errorbar([log_lag(lag) for lag, _ in cells], [c.mean() for _, c in cells], yerr=[_half(c) for _, c in cells],
                            color=colors.get(arm, "k"), marker="o", ms=3.5, capsize=2.5, lw=1.4, label=arm)
        ax.set_xticks([log_lag(lag) for lag in runs.lags], [str(lag) for lag in runs.lags])
        ax.set_xlabel("policy lag (updates), log2(1 + lag) scale")
        ax.set_ylabel("normalized score")
        ax.set_title(task, fontsize=10)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    written.append(_save(fig, results / "staleness.png"))
    return written


def _save(fig: Any, out: Path) -> Path:
    import matplotlib.pyplot as plt

    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out)
    return out


def pair_x(study: StudyPlan, pair: str, condition: tuple[int, str]) -> float:
    """A condition's place on a pair's x axis: log2(1 + lag) for a lag stressor; 0 (lag 0, clean)
    and 1 (the stressor) for a sampler stressor."""
    stressor = study.pilot.stressor(split_pair(pair)[1])
    if stressor.sampler:
        return 0.0 if condition == (0, "") else 1.0
    return log_lag(condition[0])


def analyse_pairs(table: Mapping, study: StudyPlan, runs: Runs) -> dict[str, Any]:
    """A design on (task, stressor) pairs: per pair, each arm's cells at its conditions (all seeds
    in), and each endpoint per pair and over the pairs that have it. A slope over the stressor is
    scaled by its pair's range of x (the stressor's x), so that every pair's endpoint is the change
    over its whole range and the margin is the plan's on every pair; the aggregate is the mean over
    pairs (each a term of its own, Welch-Satterthwaite degrees of freedom). An endpoint naming a cut
    arm is not computed."""
    cells: dict[str, dict[tuple[str, tuple[int, str]], np.ndarray]] = {}
    for pair, budget in runs.tasks:
        task = split_pair(pair)[0]
        got = {}
        for arm in runs.arms:
            for condition in runs.conditions[pair]:
                rows = [table.get((study.design.folder, task, arm, "", condition[0], seed, budget, condition[1])) for seed in runs.seeds]
                if all(r is not None for r in rows):
                    got[(arm, condition)] = np.array([r["score"] for r in rows], float)
        cells[pair] = got
    endpoints, by_pair = {}, {}
    for e in study.endpoints:
        if e.arm not in runs.arms or e.versus not in runs.arms:
            continue
        if e.over:
            slopes = {}
            for pair, c in cells.items():
                conditions = runs.conditions[pair]
                if all((arm, cond) in c for arm in (e.arm, e.versus) for cond in conditions):
                    reach = pair_x(study, pair, conditions[-1])
                    fits = [slope_on([pair_x(study, pair, cond) for cond in conditions for _ in c[(arm, cond)]],
                                     [v for cond in conditions for v in c[(arm, cond)]]) for arm in (e.arm, e.versus)]
                    slopes[pair] = [(b * reach, se * reach, df) for b, se, df in fits]
            by = {pair: weighted_sum([(*a, 1.0), (*b, -1.0)]) for pair, (a, b) in slopes.items()}
            overall = weighted_sum([(*t, w / len(slopes)) for a, b in slopes.values() for t, w in ((a, 1.0), (b, -1.0))]) \
                if slopes else Difference(math.nan, math.nan, math.nan)
        else:
            condition = (e.lag, "")
            groups = {pair: (c[(e.arm, condition)], c[(e.versus, condition)]) for pair, c in cells.items()
                      if (e.arm, condition) in c and (e.versus, condition) in c}
            by = {pair: welch(*g) for pair, g in groups.items()}
            overall = mean_of_differences(list(groups.values())) if groups else Difference(math.nan, math.nan, math.nan)
        endpoints[e.id], by_pair[e.id] = overall, by
    return {"cells": cells, "endpoints": endpoints, "by_pair": by_pair}


def pairs_text(study: StudyPlan, runs: Runs, result: Mapping[str, Any]) -> list[str]:
    """The answer and the per-pair table of a design on (task, stressor) pairs."""
    rows = plan_rows(study, result["endpoints"])
    complete = [p for p, _ in runs.tasks if len(result["cells"].get(p, {})) == len(runs.arms) * len(runs.conditions[p])]
    interim = len(complete) < len(runs.tasks)
    by_id = {r["id"]: r for r in rows}
    lines = ["", "## The answer", "",
             (f"**Interim, {len(complete)} of {len(runs.tasks)} pairs complete: no verdict here is the study's until every pair is in.** "
              if interim else "")
             + "**" + " ".join(d.sentence.format(answer=decide(d, by_id)) for d in study.decisions) + "** " + study.design.limits, "",
             "| endpoint | estimate [95% CI] | p | p (Holm within its family) | detectable (80% power) | verdict |", "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['endpoint']} | {format_difference(r['d'], r['digits'])} | {format_p(r['p'])} | {format_p(r['p_adj'])} | "
                     f"{format_p(r['d'].detectable())} | {r['verdict'] or 'n/a'} |")
    lines += ["", "A slope over the stressor is each pair's least-squares slope of normalized score on x (log2(1 + lag) for a lag "
              "stressor; 0 and 1 for a sampler stressor) times the pair's range of x: the change over the whole range, with the "
              "margin on that scale on every pair; aggregates are means over the pairs (a game's lag-0 runs count in each of its pairs).",
              "", "## Per pair", "", "| pair | " + " | ".join(e.short for e in study.endpoints if e.id in result["endpoints"]) + " |",
              "|---|" + "---:|" * len(result["endpoints"])]
    verdicts = {e.id: per_task_family(e, result["by_pair"][e.id]) for e in study.endpoints if e.id in result["endpoints"]}
    for pair, _ in runs.tasks:
        cells = []
        for e in study.endpoints:
            if e.id in verdicts:
                row = verdicts[e.id].get(pair)
                cells.append(f"{format_difference(row['d'], e.digits)} {row['verdict'] or ''} (Holm p {format_p(row['p_adj'])})".strip()
                             if row else "n/a")
        lines.append(f"| {pair} | " + " | ".join(cells) + " |")
    return lines


def stressor_pilot(results: Path, study: StudyPlan) -> tuple[str, list[Path]]:
    """A design on (task, stressor) pairs while its pilot decides: the table checked against the
    pilot (its algorithm, seeds, budget and each stressor's lag and sampler), the verdicts' text
    (not complete; no pair qualifies, so the study is not run; or the pairs selected), and
    ``pilot.png``: per task, the fresh runs (``fresh_from``'s where given) and each stressor's."""
    files, p = study.files, study.pilot
    path = results / files["table"]
    table = contract.read_frozen_table(path)
    contract.check_table_normalization(path, table)
    if table:
        contract.check_table_digest(path, required=True)
    conditions = {(x.lag, x.sampler): x.name for x in p.stressors}
    selection_path = results / files["selection"]
    pairs = contract.read_committed_json(selection_path).get("pairs") if selection_path.is_file() else None
    cuts_path = results / files["cuts"]
    cuts = check_cuts(study, contract.read_committed_json(cuts_path), cuts_path) if cuts_path.is_file() else {}
    runs = apply_cuts(study, [(pair_name(x["env"], x["stressor"]), int(x["budget"])) for x in pairs or ()], cuts)
    planned_runs = {(task, arm, lag, seed, budget, sampler) for name, budget in runs.tasks for arm in runs.arms for seed in runs.seeds
                    for lag, sampler in runs.conditions[name] for task in (split_pair(name)[0],)}
    for key in table:
        folder, task, algo, variant, lag, seed, budget, sampler = key
        if folder == study.design.folder:
            why = "" if (task, algo, lag, seed, budget, sampler) in planned_runs and not variant else "place in the selected pairs' design"
        else:
            why = ("folder" if folder != p.folder else "task" if task not in p.tasks else "algorithm" if algo != p.algo else
                   "stressor (lag, sampler)" if (lag, sampler) not in conditions else "seed" if seed not in p.seeds else
                   "budget" if budget != p.budget else "variant" if variant else "")
        if why:
            raise ValueError(f"{path}: the run {key} is not in the plan {study.path} (its {why})")
    fresh = pilot_rule.fresh_from_rows(study)
    table_pilot = {k: r for k, r in table.items() if k[0] == p.folder}
    planned = len(p.tasks) * len(p.seeds) * (len(p.stressors) + (0 if p.fresh_from else 1))
    lines = [f"# {study.title}: verdicts", "",
             f"Pre-registered in [`preregistration.md`](preregistration.md) before any run, the pilot included; (game, stressor) pairs "
             f"and budgets chosen by the `{p.algo}`-only pilot ([`{files['pilot']}`]({files['pilot']})). Rebuilt from the committed files by "
             f"`{study.commands['report']}`.", ""]
    if pairs is None:
        lines.append(f"**The pilot is not complete** ({len(table_pilot)} of its {planned} runs in [`{files['table']}`]({files['table']})): no "
                     f"({study.task_noun}, stressor) pair is selected yet, and the study has not started.")
    elif not pairs:
        lines.append(f"**No ({study.task_noun}, stressor) pair qualifies: as registered, the study is not run.** The pilot is the result "
                     f"({len(table_pilot)} runs: [`{files['pilot']}`]({files['pilot']}), `pilot.png`): {p.rule.not_run}")
    else:
        chosen = "; ".join(f"{x['env']} under `{x['stressor']}` at {int(x['budget']):,} steps" for x in pairs)
        lines.append(f"**Selected by the pilot:** {chosen}. **Progress:** {len(table) - len(table_pilot)} of the study's {runs.runs()} runs in "
                     f"[`{files['table']}`]({files['table']})" + (f"; cut by the pre-registered order before its first run: {json.dumps(cuts, sort_keys=True)}"
                                                                 if any(cuts.values()) else "") + ".")
    lines += ["", *deviations(results)]
    if pairs and len(table) > len(table_pilot):
        lines += pairs_text(study, runs, analyse_pairs(table, study, runs))
    written = []
    if table_pilot:
        table = table_pilot
        colors = ("tab:orange", "tab:red", "tab:purple", "tab:brown", "tab:olive", "tab:cyan")

        def rows(source: Mapping, folder: str, task: str, lag: int, sampler: str) -> list[Mapping[str, Any]]:
            return [r for r in (source.get((folder, task, p.algo, "", lag, seed, p.budget, sampler)) for seed in p.seeds) if r is not None]

        fresh_folder = p.fresh_from.folder if p.fresh_from else p.folder
        panels = [(task, [(f"{p.algo}, lag {p.lags[0]}", "k", "-", rows(fresh or table, fresh_folder, task, p.lags[0], ""))]
                   + [(f"{p.algo}, {x.name}", colors[i % len(colors)], "--", rows(table, p.folder, task, x.lag, x.sampler))
                      for i, x in enumerate(p.stressors)]) for task in p.tasks]
        written.append(_curves_figure(study, panels, f"The pilot: our {p.algo} under each stressor (mean and 95% band over seeds "
                                      f"{', '.join(map(str, p.seeds))})", results / "pilot.png"))
    return "\n".join(lines) + "\n", written


def main(argv: Sequence[str] | None = None, prog: str = "python -m adaptive_po.analysis.study_report", results: str | None = None,
         plan: str | None = None, name: str = "study report") -> int:
    """The command line; a bad input (the plan file, or a table that is not the plan's) is one line
    on stderr, naming ``name``, with exit status 2. ``results`` and ``plan``: the defaults of a study's own command."""
    return contract.one_line_errors(name, lambda: _main(argv, prog, results, plan))


def _main(argv: Sequence[str] | None, prog: str, default_results: str | None, default_plan: str | None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description="a pre-registered study's verdicts and figures, from its plan and its committed files")
    parser.add_argument("--results", default=default_results, required=default_results is None)
    parser.add_argument("--plan", default=default_plan, help="the study's plan file (default: the results folder's plan.toml)")
    args = parser.parse_args(argv)
    results = contract.existing_folder(args.results, "the study's results folder")  # a report makes no folder
    study = load_plan(args.plan or results / PLAN_FILE)
    if study.design.configurations == "searched":  # a searched design has its own generic report
        from .searched_report import build

        print("wrote " + ", ".join(str(p) for p in build(results, args.plan)))
        return 0
    if study.pilot is not None and study.pilot.by_stressor:
        text, written = stressor_pilot(results, study)
        contract.atomic_write_text(results / study.files["verdicts"], text)
        print(f"wrote {results / study.files['verdicts']}" + "".join(f", {p}" for p in written))
        return 0
    table, plan = load(results, args.plan)
    result = analyse(table, plan)
    verdicts = results / plan.study.files["verdicts"]
    contract.atomic_write_text(verdicts, report_text(table, plan, result))
    written = figures(table, plan, result, results) if table else []
    print(f"wrote {verdicts}" + "".join(f", {p}" for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
