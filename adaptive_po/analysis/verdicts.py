"""Verdicts a skeptical reviewer accepts, for any suite: per task first, aggregates that drop no
task, failures scored, and a verdict only where the aggregator does not decide it.

Input is a *per-run table* (:func:`per_run_table`): one row per run folder, FAILED runs included,
with its configuration keys (the budget among them), final evaluation return, last
training-episode return, AUC and evaluation curve. It is small enough to commit next to a report,
and every function here works from it alone, so a report can be rebuilt without the run folders.

Rules, stated once:

* a FAILED run is scored at its task's random score (normalized 0) and counted in its cell;
* a difference to the baseline is a *win* / *loss* when its 95% bootstrap CI excludes 0, else a
  *tie* (the arms' runs resampled independently);
* an interval needs two runs of each arm in some task: from one run per task no interval is
  printed ("n = 1, no interval"), and no verdict ("n = 1, no verdict");
* a task and condition is *saturated* when every arm's mean normalized score is at least
  :data:`SATURATED`; saturated tasks are marked and left out of the aggregates;
* the aggregate is the difference to the baseline of the mean of per-task normalized means (every
  task weighs the same, none is trimmed) and, beside it, of the IQM of all normalized runs, each
  with a stratified bootstrap CI; a verdict is printed only where both agree, else "depends on
  aggregation".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from .stats import (
    NO_INTERVAL,
    bootstrap,
    bootstrap_ci,
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


def _verdict(low: float, high: float) -> str:
    if not (np.isfinite(low) and np.isfinite(high)):
        return NO_VERDICT
    return "win" if low > 0 else "loss" if high < 0 else "tie"


def ci_text(estimate: float, low: float, high: float, spec: str = ".2f") -> str:
    """``estimate [low, high]`` in the format ``spec``, or ``estimate (n = 1, no interval)`` where the
    bounds are NaN (an interval would rest on one run)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return f"{estimate:{spec}} ({NO_INTERVAL})"
    return f"{estimate:{spec}} [{low:{spec}}, {high:{spec}}]"


def per_task(table: pd.DataFrame, baseline: str, seed: int = 0) -> pd.DataFrame:
    """Per task, condition and arm: mean final return [CI], failures, difference to ``baseline`` [CI], verdict."""
    rows = []
    for (env, condition), cell in table.groupby(["env", "condition"], sort=True):
        base = cell[cell["algo"] == baseline]["final_eval_return"].to_numpy(float)
        normalized = {
            algo: normalize_score(arm["final_eval_return"].to_numpy(float), arm["random_score"].iloc[0], arm["solved_threshold"].iloc[0]).mean()
            for algo, arm in cell.groupby("algo")
        }
        saturated = all(v >= SATURATED for v in normalized.values())
        for algo, arm in cell.groupby("algo"):
            x = arm["final_eval_return"].to_numpy(float)
            mean, low, high = without_interval(bootstrap_ci(x, seed=seed), x)
            row = {
                "env": env, "condition": condition, "algo": algo, "runs": len(x), "failed": int((arm["status"] == "failed").sum()),
                "mean": mean, "low": low, "high": high, "normalized": normalized[algo], "saturated": saturated,
                "diff": np.nan, "diff_low": np.nan, "diff_high": np.nan, "verdict": "",
            }
            if algo != baseline and len(base):
                ci = without_interval(bootstrap([x, base], lambda s: s[0].mean(axis=-1) - s[1].mean(axis=-1), seed=seed).ci, x, base)
                row.update(diff=ci.estimate, diff_low=ci.low, diff_high=ci.high, verdict=_verdict(ci.low, ci.high))
            rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ComparedPair:
    """One arm against the baseline at one condition, over the tasks of the condition's aggregates
    where both ran: each task's normalized scores, in task order."""

    condition: str
    algo: str
    runs: pd.DataFrame  #: the condition's scored runs, every arm
    unsaturated: list[str]  #: the condition's aggregated tasks (a task either arm lacks is "missing")
    envs: list[str]
    arm: dict[str, np.ndarray]
    base: dict[str, np.ndarray]


def compared_pairs(table: pd.DataFrame, tasks: pd.DataFrame, baseline: str) -> Iterator[ComparedPair]:
    """Every (condition, arm) compared with ``baseline`` in the aggregates, in condition then arm
    order; a pair with no task both ran is skipped."""
    for condition, cond in _scored(table).groupby("condition", sort=True):
        unsaturated = aggregated_tasks(table, tasks, condition)
        runs = {(e, a): cell["score"].to_numpy() for (e, a), cell in cond.groupby(["env", "algo"])}
        for algo in sorted(set(cond["algo"]) - {baseline}):
            envs = [e for e in unsaturated if (e, algo) in runs and (e, baseline) in runs]
            if envs:
                yield ComparedPair(condition, algo, cond, unsaturated, envs,
                                   {e: runs[(e, algo)] for e in envs}, {e: runs[(e, baseline)] for e in envs})


def aggregates(table: pd.DataFrame, tasks: pd.DataFrame, baseline: str, seed: int = 0) -> pd.DataFrame:
    """Per condition and arm: the difference to ``baseline`` of the mean of per-game normalized means and of
    the IQM of all normalized runs, each with a stratified bootstrap CI; a verdict only where the two
    agree, else "depends on aggregation"."""
    rows = []
    for pair in compared_pairs(table, tasks, baseline):
        arm, base, k = list(pair.arm.values()), list(pair.base.values()), len(pair.envs)
        mean_of_means = without_interval(
            bootstrap(arm + base, lambda s: mean_of_task_means(s[:k]) - mean_of_task_means(s[k:]), seed=seed).ci, arm, base)
        iqm_diff = without_interval(iqm_difference_ci(pair.arm, pair.base, seed=seed), arm, base)
        a, b = _verdict(mean_of_means.low, mean_of_means.high), _verdict(iqm_diff.low, iqm_diff.high)
        rows.append({
            "condition": pair.condition, "algo": pair.algo, "tasks": k,
            "left_out_saturated": pair.runs["env"].nunique() - len(pair.unsaturated),
            "missing": ", ".join(e for e in pair.unsaturated if e not in pair.envs),
            "mean_diff": mean_of_means.estimate, "mean_low": mean_of_means.low, "mean_high": mean_of_means.high,
            "iqm_diff": iqm_diff.estimate, "iqm_low": iqm_diff.low, "iqm_high": iqm_diff.high,
            "verdict": a if a == b else "depends on aggregation",
        })
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


def verdicts_markdown(
    table: pd.DataFrame, tasks: pd.DataFrame, agg: pd.DataFrame, baseline: str, *, title: str, made_by: str, task: str = "task",
) -> str:
    """The verdicts as Markdown: aggregate over tasks, then per task, then wins / ties / losses.
    ``task`` names a task in the prose (``"game"`` for MinAtar)."""
    budgets = ", ".join(f"{e} {int(b):,}" for e, b in table.groupby("env")["total_timesteps"].first().items())
    seeds = sorted(table["seed"].unique())
    lines = [
        f"# {title}",
        "",
        f"Generated by {made_by} from {len(table)} runs "
        f"({int((table['status'] == 'failed').sum())} failed, scored at the random score): seeds {', '.join(map(str, seeds))}; "
        f"budgets (environment steps per run): {budgets}. Final return = the last deterministic evaluation. "
        "A difference is a win or a loss when its 95% bootstrap CI excludes 0; saturated = every arm's mean normalized score "
        f"is at least {SATURATED} (left out of the aggregates).",
        "",
        f"## Aggregate over {task}s",
        "",
        f"Normalized score = (return - random) / (reference - random), the references of each {task}'s YAML file. "
        f"Both aggregates are differences to {baseline} at the same condition, with 95% stratified bootstrap CIs; "
        f"the verdict is printed only where the mean of per-{task} means (no {task} dropped) and the IQM of all runs agree.",
        "",
        f"| condition | algorithm | {task}s | mean of per-{task} means, difference to {baseline} [95% CI] | IQM difference to {baseline} [95% CI] | verdict |",
        "|:---|:---|---:|:---|:---|:---|",
    ]
    for _, r in agg.iterrows():
        lines.append(
            f"| {condition_label(r['condition'])} | {r['algo']} | {r['tasks']}{f' (not run: {missing})' if (missing := r['missing']) else ''} | {ci_text(r['mean_diff'], r['mean_low'], r['mean_high'], '+.3f')} "
            f"| {ci_text(r['iqm_diff'], r['iqm_low'], r['iqm_high'], '+.3f')} | {r['verdict']} |"
        )
    lines += [
        "",
        f"## Per {task}",
        "",
        f"| {task} | condition | algorithm | runs (failed) | final return mean [95% CI] | normalized | difference to {baseline} [95% CI] | verdict |",
        "|:---|:---|:---|---:|:---|---:|:---|:---|",
    ]
    order = {baseline: 0, "esspo": 1}
    tasks = tasks.assign(_o=tasks["algo"].map(lambda a: order.get(a, 2)))
    for _, r in tasks.sort_values(["env", "condition", "_o", "algo"]).iterrows():
        if r["algo"] == baseline:
            diff = "(baseline)"
        elif np.isnan(r["diff"]):
            diff = f"({baseline} not run)"
        else:
            diff = ci_text(r["diff"], r["diff_low"], r["diff_high"], "+.2f")
        verdict = "" if r["algo"] == baseline else r["verdict"] + (" (saturated)" if r["saturated"] else "")
        lines.append(
            f"| {r['env']} | {condition_label(r['condition'])} | {r['algo']} | {r['runs']} ({r['failed']}) | "
            f"{ci_text(r['mean'], r['low'], r['high'])} | {r['normalized']:.2f} | {diff} | {verdict} |"
        )
    lines += ["", f"## Wins, ties and losses against {baseline} (per {task})", "", "| algorithm | condition | wins | ties | losses |", "|:---|:---|---:|---:|---:|"]
    for (algo, condition), (wins, ties, losses) in win_tie_loss(tasks, baseline).items():
        lines.append(f"| {algo} | {condition_label(condition)} | {wins} | {ties} | {losses} |")
    return "\n".join(lines) + "\n"


def win_tie_loss(tasks: pd.DataFrame, baseline: str) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(algo, condition) -> (wins, ties, losses) against ``baseline`` over the tasks."""
    out = {}
    for (algo, condition), cell in tasks[tasks["algo"] != baseline].groupby(["algo", "condition"]):
        verdicts = cell["verdict"]
        out[(algo, condition)] = (int((verdicts == "win").sum()), int((verdicts == "tie").sum()), int((verdicts == "loss").sum()))
    return out


# -- more aggregates over the same tasks ------------------------------------------------------------
def aggregated_tasks(table: pd.DataFrame, tasks: pd.DataFrame, condition: str) -> list[str]:
    """The tasks of ``condition`` that enter its aggregates: those not saturated there (sorted)."""
    saturated = set(tasks[(tasks["condition"] == condition) & tasks["saturated"]]["env"])
    return sorted(e for e in table[table["condition"] == condition]["env"].unique() if e not in saturated)


def _scored(table: pd.DataFrame) -> pd.DataFrame:
    return table.assign(score=normalize_score(table["final_eval_return"].to_numpy(float), table["random_score"].to_numpy(float), table["solved_threshold"].to_numpy(float)))


def arm_aggregates(table: pd.DataFrame, tasks: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per condition and arm, over the tasks that enter the condition's aggregates (saturated ones
    left out, as in :func:`aggregates`): the mean of per-task normalized means and the IQM of all
    normalized runs, each with a stratified bootstrap CI, and the arm's failed runs."""
    from .stats import iqm_ci

    scored = _scored(table)
    rows = []
    for condition, cond in scored.groupby("condition", sort=True):
        envs = aggregated_tasks(table, tasks, condition)
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


def verdicts_section(table: pd.DataFrame, baseline: str, *, made_by: str, seed: int = 0, level: int = 3) -> str:
    """The verdicts of a per-run table as a section of a larger report: :func:`verdicts_markdown`
    with its sections' headings moved down to ``level`` (``###`` by default; its title one above)."""
    tasks = per_task(table, baseline, seed)
    agg = aggregates(table, tasks, baseline, seed)
    body = verdicts_markdown(table, tasks, agg, baseline, title=f"Verdicts against {baseline}", made_by=made_by, task="environment")
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
