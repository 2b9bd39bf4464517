"""Verdicts a skeptical reviewer accepts, for any suite: per task first, aggregates that drop no
task, failures scored, and a verdict only where the aggregator does not decide it.

Input is a *per-run table* (:func:`per_run_table`): one row per run folder, FAILED runs included,
with its configuration keys (the budget among them), final evaluation return, last
training-episode return, AUC and evaluation curve. It is small enough to commit next to a report,
and every function here works from it alone, so a report can be rebuilt without the run folders.

Rules, stated once (the tests themselves: :mod:`adaptive_po.analysis.hypothesis`):

* a FAILED run is scored at its task's random score (normalized 0) and counted in its cell;
* a difference to the baseline is a *win* / *loss* where Welch's t-test rejects 0 at 5% after
  Holm's adjustment over every comparison of the same kind in the table (per task, or the
  aggregates); else *equivalent* where two one-sided tests put it within ±0.1 normalized score;
  else *inconclusive*. Each comparison states the smallest difference it detects with 80% power;
* an interval needs two runs of each arm in some task: from one run per task no interval is
  printed ("n = 1, no interval"), and no verdict ("n = 1, no verdict");
* a task and condition is *saturated* for a pair (an arm and the baseline) when both mean
  normalized scores are at least :data:`SATURATED`; it is marked and left out of that pair's
  aggregate only, so no other arm of the suite changes which tasks a pair counts;
* the primary endpoint of each condition and arm is the difference to the baseline of the mean of
  per-task normalized means (every task weighs the same, none is trimmed); the IQM difference of
  all normalized runs is printed beside it, and a win or loss it points against reads "depends on
  aggregation".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from . import previous_rule
from .hypothesis import LOSS, MARGIN, WIN, holm, mean_of_differences, rules_text, verdict, welch
from .stats import (
    NO_INTERVAL,
    bootstrap,
    iqm_difference_ci,
    mean_of_task_means,
    normalize_score,
    without_interval,
)

SATURATED = 0.95
RUN_COLUMNS = ("suite", "env", "algo", "condition", "policy_lag", "seed", "total_timesteps", "status", "random_score", "solved_threshold")


# -- the per-run table ------------------------------------------------------------------------------
def _curve_text(evals: pd.DataFrame) -> str:
    return " ".join(f"{int(s)}:{r:.4g}" for s, r in zip(evals["timesteps"], evals["return"]))


def per_run_table(*roots: str | Path) -> pd.DataFrame:
    """One row per run folder under ``roots`` (complete and FAILED runs), see the module docstring."""
    return pd.concat([_suite_table(Path(root)) for root in roots], ignore_index=True)


def _suite_table(root: Path) -> pd.DataFrame:
    import warnings

    from .load import load_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_runs(root)
    return table_from_runs(runs, root)


def table_from_runs(runs, root: str | Path) -> pd.DataFrame:
    """The per-run table of runs loaded already (:func:`adaptive_po.analysis.load.load_runs` of ``root``)."""
    rows = []
    finals = runs.finals
    last_train = runs.progress.sort_values("timesteps").groupby("run_dir")["rollout_return_mean"].last()
    for _, run in finals.iterrows():
        if run["failed"]:  # loaded as a row scored at the random score; scored here by the same rule
            rows.append({
                **{k: run[k] for k in RUN_COLUMNS if k != "status"}, "status": "failed",
                "final_eval_return": run["random_score"], "final_train_return": run["random_score"],
                "auc": run["random_score"], "eval_curve": "",
            })
            continue
        evals = runs.evals[runs.evals["run_dir"] == run["run_dir"]].sort_values("timesteps")
        rows.append({
            **{k: run[k] for k in RUN_COLUMNS if k != "status"}, "status": "complete",
            "final_eval_return": run["final_eval_return_mean"], "final_train_return": last_train.get(run["run_dir"], np.nan),
            "auc": run["auc"], "eval_curve": _curve_text(evals),
        })
    # FAILED folders the loader could not score (no readable configuration): named by their path
    for folder in runs.unscored:
        rows.append(_failed_row(Path(root), Path(folder), finals))
    table = pd.DataFrame(rows)
    return table.sort_values(["suite", "env", "algo", "condition", "seed"]).reset_index(drop=True)


def _failed_row(root: Path, folder: Path, finals: pd.DataFrame) -> dict:
    """A FAILED run, scored at its game's random score (the folder's path names its cell)."""
    folder = folder if folder.is_absolute() else root / folder
    env, algo, condition, seed = folder.parts[-4:]
    same_env = finals[finals["env"] == env]
    random_score = float(same_env["random_score"].iloc[0]) if len(same_env) else np.nan
    lag = re.match(r"lag(\d+)", condition)
    return {
        "suite": root.name, "env": env, "algo": algo, "condition": condition, "policy_lag": int(lag.group(1)) if lag else np.nan,
        "seed": int(seed.split("-")[1]), "total_timesteps": int(same_env["total_timesteps"].iloc[0]) if len(same_env) else np.nan,
        "status": "failed", "random_score": random_score,
        "solved_threshold": float(same_env["solved_threshold"].iloc[0]) if len(same_env) else np.nan,
        "final_eval_return": random_score, "final_train_return": random_score, "auc": random_score, "eval_curve": "",
    }


# -- verdicts ---------------------------------------------------------------------------------------
#: the verdict where an arm has one run per task: its difference has no interval
NO_VERDICT = "n = 1, no verdict"


def ci_text(estimate: float, low: float, high: float, spec: str = ".2f") -> str:
    """``estimate [low, high]`` in the format ``spec``, or ``estimate (n = 1, no interval)`` where the
    bounds are NaN (an interval would rest on one run)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return f"{estimate:{spec}} ({NO_INTERVAL})"
    return f"{estimate:{spec}} [{low:{spec}}, {high:{spec}}]"


def _mean_ci(x: np.ndarray) -> tuple[float, float, float]:
    """The mean of ``x`` with its t-interval (NaN bounds from one run)."""
    d = mean_of_differences([(x, None)])
    return (d.estimate, *d.ci())


def _span(cell: pd.DataFrame) -> float:
    return float(cell["solved_threshold"].iloc[0] - cell["random_score"].iloc[0])


def adjust(rows: list[dict], estimate: str = "diff") -> None:
    """Holm over the rows' ``p`` (and, separately, their equivalence ``p_equivalence``), then each
    row's ``verdict`` from the sign of its ``estimate``; rows without a test keep their word."""
    testable = [r for r in rows if np.isfinite(r["p"])]
    for r, p_adj, q_adj in zip(testable, holm([r["p"] for r in testable]), holm([r["p_equivalence"] for r in testable])):
        r["p_holm"], r["p_equivalence_holm"] = p_adj, q_adj
        r["verdict"] = verdict(r[estimate], p_adj, q_adj)


def per_task(table: pd.DataFrame, baseline: str, seed: int = 0, previous: bool = True) -> pd.DataFrame:
    """Per task, condition and arm: mean final return [t-interval], failures, normalized mean, the
    difference to ``baseline`` [Welch CI], its p-values (raw and Holm-adjusted over every per-task
    comparison of ``table``), the smallest detectable difference and the verdict (the rules of
    :mod:`adaptive_po.analysis.hypothesis`). ``saturated``: the arm and the baseline both score at
    least :data:`SATURATED` there (such a pair is left out of that pair's aggregate). ``previous``:
    the verdict under the rule these reports used before (a percentile-bootstrap CI with ``seed``
    that excludes 0), for the reports' "what changed" lists (``previous=False`` skips it)."""
    rows = []
    for (env, condition), cell in table.groupby(["env", "condition"], sort=True):
        base = cell[cell["algo"] == baseline]["final_eval_return"].to_numpy(float)
        span = _span(cell)
        normalized = {
            algo: normalize_score(arm["final_eval_return"].to_numpy(float), arm["random_score"].iloc[0], arm["solved_threshold"].iloc[0]).mean()
            for algo, arm in cell.groupby("algo")
        }
        for algo, arm in cell.groupby("algo"):
            x = arm["final_eval_return"].to_numpy(float)
            mean, low, high = _mean_ci(x)
            row = {
                "env": env, "condition": condition, "algo": algo, "runs": len(x), "failed": int((arm["status"] == "failed").sum()),
                "mean": mean, "low": low, "high": high, "normalized": normalized[algo],
                "saturated": bool(normalized[algo] >= SATURATED and normalized.get(baseline, -np.inf) >= SATURATED),
                "diff": np.nan, "diff_low": np.nan, "diff_high": np.nan, "p": np.nan, "p_holm": np.nan,
                "p_equivalence": np.nan, "p_equivalence_holm": np.nan, "detectable": np.nan, "verdict": "", "previous": "",
            }
            if algo != baseline and len(base):
                d = welch(x, base)
                row.update(diff=d.estimate, p=d.p_value(), p_equivalence=d.p_equivalence(MARGIN * span),
                           detectable=d.detectable() / span, verdict=NO_VERDICT)
                row["diff_low"], row["diff_high"] = d.ci()
                row["previous"] = previous_rule.task_verdict(x, base, seed) if previous else ""
            rows.append(row)
    adjust(rows)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ComparedPair:
    """One arm against the baseline at one condition, over the tasks of the pair's aggregate
    (where both ran and the two are not both saturated): each task's normalized scores, in task order."""

    condition: str
    algo: str
    runs: pd.DataFrame  #: the condition's scored runs, every arm
    saturated: list[str]  #: tasks both ran where both are saturated: left out of this pair's aggregate
    envs: list[str]
    arm: dict[str, np.ndarray]
    base: dict[str, np.ndarray]
    missing: list[str]  #: unsaturated tasks of the condition one of the two did not run


def compared_pairs(table: pd.DataFrame, tasks: pd.DataFrame, baseline: str) -> Iterator[ComparedPair]:
    """Every (condition, arm) compared with ``baseline`` in the aggregates, in condition then arm
    order; saturation is decided for the pair alone (another arm of the suite never changes which
    tasks count); a pair with no task to aggregate is skipped."""
    scored = _scored(table)
    for condition in sorted(scored["condition"].unique(), key=natural_key):
        cond = scored[scored["condition"] == condition]
        runs = {(e, a): cell["score"].to_numpy() for (e, a), cell in cond.groupby(["env", "algo"])}
        all_envs = sorted(cond["env"].unique())
        for algo in sorted(set(cond["algo"]) - {baseline}):
            saturated = sorted(pair_saturated(tasks, condition, algo))
            both = [e for e in all_envs if (e, algo) in runs and (e, baseline) in runs]
            envs = [e for e in both if e not in saturated]
            missing = [e for e in all_envs if e not in both]
            if envs:
                yield ComparedPair(condition, algo, cond, saturated, envs,
                                   {e: runs[(e, algo)] for e in envs}, {e: runs[(e, baseline)] for e in envs}, missing)


def natural_key(text: str) -> list:
    """``lag4`` before ``lag16``: digits compared as numbers."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text)]


def pair_saturated(tasks: pd.DataFrame, condition: str, algo: str) -> set[str]:
    """The tasks where ``algo`` and the baseline are both saturated at ``condition``."""
    rows = tasks[(tasks["condition"] == condition) & (tasks["algo"] == algo) & tasks["saturated"]]
    return set(rows["env"])


def aggregates(table: pd.DataFrame, tasks: pd.DataFrame, baseline: str, seed: int = 0, previous: bool = True) -> pd.DataFrame:
    """The primary endpoints: per condition and arm, the difference to ``baseline`` of the mean of
    per-task normalized means (Welch-Satterthwaite test, Holm over every row of ``table``'s
    aggregates, equivalence at :data:`MARGIN`) and, beside it, the IQM difference of all normalized
    runs with a stratified bootstrap CI (descriptive). A win or loss whose IQM difference points
    the other way (or is 0) is printed "depends on aggregation"."""
    rows = []
    for pair in compared_pairs(table, tasks, baseline):
        arm, base, k = list(pair.arm.values()), list(pair.base.values()), len(pair.envs)
        d = mean_of_differences(list(zip(arm, base)))
        low, high = d.ci()
        iqm_diff = without_interval(iqm_difference_ci(pair.arm, pair.base, seed=seed), arm, base)
        rows.append({
            "condition": pair.condition, "algo": pair.algo, "tasks": k,
            "left_out_saturated": len(pair.saturated), "saturated_tasks": ", ".join(pair.saturated),
            "missing": ", ".join(pair.missing),
            "mean_diff": d.estimate, "mean_low": low, "mean_high": high,
            "p": d.p_value(), "p_holm": np.nan, "p_equivalence": d.p_equivalence(MARGIN), "p_equivalence_holm": np.nan,
            "detectable": d.detectable(),
            "iqm_diff": iqm_diff.estimate, "iqm_low": iqm_diff.low, "iqm_high": iqm_diff.high,
            "verdict": NO_VERDICT if not d.testable else "",
            "previous": previous_rule.aggregate_verdict(table, tasks, baseline, pair.condition, pair.algo, seed) if previous else "",
        })
    adjust(rows, estimate="mean_diff")
    for r in rows:
        if r["verdict"] in (WIN, LOSS) and not np.sign(r["iqm_diff"]) == np.sign(r["mean_diff"]):
            r["verdict"] = "depends on aggregation"
    return pd.DataFrame(rows)


# -- Markdown ---------------------------------------------------------------------------------------
def condition_label(condition: str) -> str:
    """A condition's folder name in words: ``lag4_noise0_replay0`` -> ``lag 4``,
    ``lag0_noise0_replay0`` -> ``fresh (lag 0)``, ``lag0_noise0_replay0_T1.2`` -> ``T = 1.2``,
    ``..._fp8-e4m3_blp-policy`` -> ``fp8-e4m3, learner log-probs``; anything else as it is."""
    match = re.fullmatch(r"lag(\d+)_noise([^_]+)_replay(\d+)((?:_[^_]+)*)", condition)
    if not match:
        return condition
    lag, noise, replay, suffix = match.groups()
    parts = [f"lag {lag}"] if lag != "0" else []
    if noise != "0":
        parts.append(f"action noise {noise}")
    if replay != "0":
        parts.append(f"replay {replay}")
    for part in filter(None, suffix.split("_")):
        if part.startswith("T"):
            parts.append(f"T = {part[1:]}")
        elif part.startswith("blp-"):
            parts.append("learner log-probs" if part == "blp-policy" else f"behaviour log-probs {part[4:]}")
        else:
            parts.append(part)
    return ", ".join(parts) if parts else "fresh (lag 0)"


#: the per-task counts' header, in :func:`win_tie_loss`'s order
COUNT_HEADER = "win / equivalent / inconclusive / loss"


def p_text(p: float) -> str:
    """A p-value as printed: 3 significant digits, "< 0.001" below."""
    return "" if not np.isfinite(p) else "< 0.001" if p < 0.001 else f"{p:.3f}"


def references_text(table: pd.DataFrame) -> str:
    """Each task's normalization, named: ``CartPole-v1 22 -> 475``  (random score -> reference)."""
    refs = table.groupby("env")[["random_score", "solved_threshold"]].first()
    return "; ".join(f"{env} {r['random_score']:g} -> {r['solved_threshold']:g}" for env, r in refs.iterrows())


def detectable_text(value: float) -> str:
    """A smallest detectable difference as printed ("" without an interval)."""
    return f"{value:.3f}" if np.isfinite(value) else ""


def verdict_cell(r: pd.Series | dict) -> str:
    """A row's verdict with its Holm-adjusted p (``win (p = 0.012)``)."""
    if not r["verdict"] or r["verdict"] == NO_VERDICT:
        return r["verdict"]
    shown = p_text(r["p_equivalence_holm"] if r["verdict"] == "equivalent" else r["p_holm"])
    return f"{r['verdict']} (p {shown if shown.startswith('<') else '= ' + shown})"


def rules_paragraph(family: str, calibration_link: str | None = "../calibration.md") -> str:
    """The rules every verdict table states before its tables (``calibration_link`` None: the
    calibration named by its path in the repository, for a report outside ``docs/results``)."""
    text = rules_text(family)
    if calibration_link is None:
        return text.replace("[`calibration.md`](../calibration.md)", "`docs/results/calibration.md`")
    return text.replace("../calibration.md", calibration_link)


def aggregate_lines(agg: pd.DataFrame, baseline: str, task: str = "task", counts: dict | None = None) -> list[str]:
    """The primary endpoints as a Markdown table."""
    lines = [
        f"| condition | algorithm | {task}s (left out: both saturated) | mean of per-{task} normalized means, difference to {baseline} [95% CI] | "
        f"detectable (80% power) | IQM difference [95% CI] | verdict (Holm p) |" + (f" per {task} ({COUNT_HEADER}) |" if counts is not None else ""),
        "|:---|:---|:---|:---|---:|:---|:---|" + (":---|" if counts is not None else ""),
    ]
    for _, r in agg.iterrows():
        tasks_text = f"{r['tasks']}" + (f" ({r['saturated_tasks']})" if r["saturated_tasks"] else "") + (f" (not run: {r['missing']})" if r["missing"] else "")
        row = (
            f"| {condition_label(r['condition'])} | {r['algo']} | {tasks_text} | {ci_text(r['mean_diff'], r['mean_low'], r['mean_high'], '+.3f')} "
            f"| {detectable_text(r['detectable'])} | {ci_text(r['iqm_diff'], r['iqm_low'], r['iqm_high'], '+.3f')} | {verdict_cell(r)} |"
        )
        if counts is not None:
            row += f" {' / '.join(map(str, counts[(r['algo'], r['condition'])]))} |"
        lines.append(row)
    return lines


def what_changed_lines(tasks: pd.DataFrame, agg: pd.DataFrame, baseline: str, task: str = "task") -> list[str]:
    """What the calibrated rule changed against the rule of before (a percentile-bootstrap CI that
    excludes 0, saturation over every arm, no multiplicity control): every aggregate and per-task
    verdict whose word changed beyond a "tie" read as equivalent or inconclusive."""
    def changed(old: str, new: str) -> bool:
        if old == new:
            return False
        return not (old == "tie" and new in ("equivalent", "inconclusive"))

    lines = ["What changed against the rule used before (a 95% percentile-bootstrap CI that excludes 0, no multiplicity "
             "control; saturation over every arm): each verdict whose meaning changed. A former \"tie\" now reads "
             "equivalent or inconclusive; that alone is not listed.", ""]
    items = []
    for _, r in agg.iterrows():
        if changed(r["previous"], r["verdict"]):
            items.append(f"- aggregate, {condition_label(r['condition'])}, {r['algo']}: {r['previous']} -> {r['verdict']}")
    rows = tasks[tasks["algo"] != baseline]
    for _, r in rows.sort_values(["env", "condition", "algo"]).iterrows():
        if changed(r["previous"], r["verdict"]):
            items.append(f"- {r['env']}, {condition_label(r['condition'])}, {r['algo']}: {r['previous']} -> {r['verdict']}")
    ties = rows[rows["previous"] == "tie"]["verdict"].value_counts()
    items.append(f"- former per-{task} ties: {int(ties.get('equivalent', 0))} now equivalent, {int(ties.get('inconclusive', 0))} inconclusive")
    return lines + items


def verdicts_markdown(
    table: pd.DataFrame, tasks: pd.DataFrame, agg: pd.DataFrame, baseline: str, *, title: str, made_by: str, task: str = "task",
    calibration_link: str | None = "../calibration.md",
) -> str:
    """The verdicts as Markdown: the rules and primary endpoints (the aggregates) first, then per
    task, then the counts and what changed. ``task`` names a task in the prose (``"game"`` for MinAtar)."""
    budgets = ", ".join(f"{e} {int(b):,}" for e, b in table.groupby("env")["total_timesteps"].first().items())
    seeds = sorted(table["seed"].unique())
    lines = [
        f"# {title}",
        "",
        f"Generated by {made_by} from {len(table)} runs "
        f"({int((table['status'] == 'failed').sum())} failed, scored at the random score): seeds {', '.join(map(str, seeds))}; "
        f"budgets (environment steps per run): {budgets}. Final return = the last deterministic evaluation. "
        f"Normalized score = (return - random) / (reference - random), the references of each {task}'s YAML file "
        f"(random -> reference: {references_text(table)}).",
        "",
        rules_paragraph(f"the table's {len(agg)} aggregates, and separately over its per-{task} comparisons", calibration_link),
        "",
        f"## Primary endpoints: aggregate over {task}s",
        "",
        f"Declared before the tables: per condition and algorithm, the difference to {baseline} of the mean of per-{task} "
        f"normalized means over the {task}s where the pair is not saturated (both at least {SATURATED}), Welch-Satterthwaite test. "
        "The IQM difference of all normalized runs (stratified bootstrap CI) is descriptive; a win or loss it points against "
        "reads \"depends on aggregation\".",
        "",
        *aggregate_lines(agg, baseline, task),
        "",
        f"## Per {task}",
        "",
        f"| {task} | condition | algorithm | runs (failed) | final return mean [95% CI] | normalized | difference to {baseline} [95% CI] | detectable (normalized) | verdict (Holm p) |",
        "|:---|:---|:---|---:|:---|---:|:---|---:|:---|",
    ]
    order = {baseline: 0, "esspo": 1}
    tasks = tasks.assign(_o=tasks["algo"].map(lambda a: order.get(a, 2)))
    for _, r in tasks.sort_values(["env", "condition", "_o", "algo"]).iterrows():
        if r["algo"] == baseline:
            diff, detectable = "(baseline)", ""
        elif np.isnan(r["diff"]):
            diff, detectable = f"({baseline} not run)", ""
        else:
            diff, detectable = ci_text(r["diff"], r["diff_low"], r["diff_high"], "+.2f"), detectable_text(r["detectable"])
        verdict_text = "" if r["algo"] == baseline else verdict_cell(r) + (" (saturated)" if r["saturated"] else "")
        lines.append(
            f"| {r['env']} | {condition_label(r['condition'])} | {r['algo']} | {r['runs']} ({r['failed']}) | "
            f"{ci_text(r['mean'], r['low'], r['high'])} | {r['normalized']:.2f} | {diff} | {detectable} | {verdict_text} |"
        )
    lines += ["", f"## Verdicts against {baseline} per {task}: counts", "", f"| algorithm | condition | {COUNT_HEADER.replace(' / ', ' | ')} |", "|:---|:---|---:|---:|---:|---:|"]
    for (algo, condition), counts in win_tie_loss(tasks, baseline).items():
        lines.append(f"| {algo} | {condition_label(condition)} | {' | '.join(map(str, counts))} |")
    lines += ["", "## What changed", "", *what_changed_lines(tasks, agg, baseline, task)]
    return "\n".join(lines) + "\n"


def win_tie_loss(tasks: pd.DataFrame, baseline: str) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    """(algo, condition) -> (wins, equivalent, inconclusive, losses) against ``baseline`` over the tasks."""
    out = {}
    for (algo, condition), cell in tasks[tasks["algo"] != baseline].groupby(["algo", "condition"]):
        v = cell["verdict"]
        out[(algo, condition)] = tuple(int((v == word).sum()) for word in ("win", "equivalent", "inconclusive", "loss"))
    return out


# -- more aggregates over the same tasks ------------------------------------------------------------
def _scored(table: pd.DataFrame) -> pd.DataFrame:
    return table.assign(score=normalize_score(table["final_eval_return"].to_numpy(float), table["random_score"].to_numpy(float), table["solved_threshold"].to_numpy(float)))


def arm_aggregates(table: pd.DataFrame, tasks: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per condition and arm, over every task of the condition (descriptive: each arm's level): the mean of per-task normalized means and the IQM of all
    normalized runs, each with a stratified bootstrap CI, and the arm's failed runs."""
    from .stats import iqm_ci

    scored = _scored(table)
    rows = []
    for condition, cond in scored.groupby("condition", sort=True):
        envs = sorted(cond["env"].unique())
        for algo, arm in cond.groupby("algo", sort=True):
            strata = [arm[arm["env"] == e]["score"].to_numpy() for e in envs if (arm["env"] == e).any()]
            if not strata:
                continue
            mean = without_interval(bootstrap(strata, mean_of_task_means, seed=seed).ci, strata)
            interquartile = without_interval(iqm_ci(dict(enumerate(strata)), seed=seed), strata)
            rows.append({
                "condition": condition, "algo": algo, "tasks": len(strata), "failed": int((arm["status"] == "failed").sum()),
                "mean": mean.estimate, "mean_low": mean.low, "mean_high": mean.high,
                "iqm": interquartile.estimate, "iqm_low": interquartile.low, "iqm_high": interquartile.high,
            })
    return pd.DataFrame(rows)


def improvement_probabilities(table: pd.DataFrame, tasks: pd.DataFrame, baseline: str, seed: int = 0) -> pd.DataFrame:
    """Per condition and arm: P(a run of the arm scores above a run of ``baseline``) + half the ties,
    averaged over the tasks of the condition's aggregates, with a stratified bootstrap CI."""
    from .stats import probability_of_improvement_ci

    rows = []
    for pair in compared_pairs(table, tasks, baseline):
        ci = without_interval(probability_of_improvement_ci(pair.arm, pair.base, seed=seed), pair.arm, pair.base)
        rows.append({"condition": pair.condition, "algo": pair.algo, "tasks": len(pair.envs), "poi": ci.estimate, "poi_low": ci.low, "poi_high": ci.high})
    return pd.DataFrame(rows)


def verdicts_section(table: pd.DataFrame, baseline: str, *, made_by: str, seed: int = 0, level: int = 3,
                     calibration_link: str | None = "../calibration.md") -> str:
    """The verdicts of a per-run table as a section of a larger report: :func:`verdicts_markdown`
    with its sections' headings moved down to ``level`` (``###`` by default; its title one above)."""
    tasks = per_task(table, baseline, seed)
    agg = aggregates(table, tasks, baseline, seed)
    body = verdicts_markdown(table, tasks, agg, baseline, title=f"Verdicts against {baseline}", made_by=made_by, task="environment",
                             calibration_link=calibration_link)
    return shift_headings(body, level - 2)


def shift_headings(markdown: str, by: int) -> str:
    """``markdown`` with every heading moved ``by`` levels down (up where negative, never above ``#``)."""
    def shifted(line: str) -> str:
        level = len(line) - len(line.lstrip("#"))
        return "#" * max(1, level + by) + line[level:] if level and line[level:level + 1] == " " else line

    return "\n".join(map(shifted, markdown.split("\n")))


def replace_block(text: str, begin: str, end: str, block: str, what: str) -> str:
    """``text`` with the part between the markers ``begin`` and ``end`` replaced by ``block`` (the
    README's generated results blocks); ``ValueError`` naming ``what`` where a marker is missing."""
    if begin not in text or end not in text:
        raise ValueError(f"no {what} markers ({begin!r} ... {end!r})")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block}\n{end}{tail}"


# -- a suite report's verdicts, and their re-issue from its committed per-run table --------------
VERDICTS_TITLE = "Verdicts against {baseline}: per environment, then aggregates that drop none"
VERDICTS_END = "The pooled IQM below is descriptive: its trimming can drop a whole environment's runs, so read the verdicts above."


def suite_verdicts(per_run, baseline: str, made_by: str, seed: int = 0, calibration_link: str | None = None) -> str:
    """The suite report's verdicts section (``###`` headings, as in ``results.md``)."""
    body = verdicts_section(per_run, baseline, made_by=made_by, seed=seed, level=4, calibration_link=calibration_link).split("\n", 2)[2]
    return f"### {VERDICTS_TITLE.format(baseline=baseline)}\n\n{body}\n{VERDICTS_END}\n\n"


def replace_verdicts(text: str, section: str, baseline: str, where: str) -> str:
    """``text`` with its verdicts section (from its title line to :data:`VERDICTS_END`) replaced by
    ``section``, whose headings are moved to the level the title has in ``text``."""
    title = VERDICTS_TITLE.format(baseline=baseline)
    start = next((i for i, line in enumerate(text.split("\n")) if line.lstrip("#").strip() == title and line.startswith("#")), None)
    if start is None or VERDICTS_END not in text:
        raise ValueError(f"{where} has no verdicts section ({title!r} ... {VERDICTS_END!r})")
    lines = text.split("\n")
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    head = "\n".join(lines[:start]) + "\n"
    tail = text[len(head):].split(VERDICTS_END, 1)[1].lstrip("\n")
    return head + shift_headings(section, level - 3).rstrip("\n").rstrip() + "\n\n" + tail


def reissue(folder: Path, readme: Path | None, baseline: str = "ppo", seed: int = 0) -> None:
    from ..contract import atomic_write_text

    """Re-issue a published suite report's verdicts from its committed ``per_run.csv`` alone:
    ``report.md``, ``results.md`` and the README block that copies ``results.md``."""
    table_path = folder / "per_run.csv"
    if not table_path.is_file():
        raise SystemExit(f"{table_path} does not exist: `make readme` copies it from runs/<suite>/report")
    per_run = pd.read_csv(table_path)
    made_by = f"`make quick-from-table` (`python -m adaptive_po.analysis.reports.reissue {folder}`, the committed `per_run.csv` alone)"
    section = suite_verdicts(per_run, baseline, made_by, seed)
    for path in [folder / "report.md", folder / "results.md"] + ([readme] if readme is not None else []):
        atomic_write_text(path, replace_verdicts(path.read_text(), section, baseline, str(path)))
    print(f"re-issued the verdicts of {folder / 'report.md'}, {folder / 'results.md'}" + (f" and {readme}" if readme else ""))

