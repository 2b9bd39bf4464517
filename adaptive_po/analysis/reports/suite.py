"""The report of one suite: figures (PNG), tables (CSV, Markdown), ``report.md`` and ``results.md``
(the tables only, for embedding in the project README).

Command line: ``python -m adaptive_po.analysis <suite_root> [--out DIR]`` or, the same,
``python -m adaptive_po.analysis.reports.suite <suite_root> [--out DIR]`` (see :func:`main`).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pandas as pd

from adaptive_po.contract import atomic_write_text

from ..labels import BASELINE_ALGO
from ..load import LoadedRuns, load_runs, run_reporting
from ..output import StagedFolder, save_csv, save_figure
from ..plots import algo_colors, plot_ess, plot_learning_curves, plot_noise, plot_staleness
from ..stats import DEFAULT_RESAMPLES, NO_INTERVAL, add_bootstrap_arguments, parse_report_arguments
from ..tables import (
    Aggregate,
    aggregate_table,
    condition_table,
    format_aggregate_table,
    format_condition_table,
    format_references,
    to_markdown,
)

__all__ = ["Report", "make_report", "main"]

#: what the report says in place of any comparison where the baseline has no run
NO_BASELINE = "There is no baseline to compare with: no probability of improvement and no verdicts."


@dataclass
class Report:
    """What :func:`make_report` wrote and computed."""

    out_dir: Path
    report_md: Path
    results_md: Path
    figures: dict[str, Path]
    tables: dict[str, Path]
    runs: LoadedRuns
    aggregate: Aggregate
    conditions: pd.DataFrame
    skipped: list[str] = field(default_factory=list)


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _range_text(values: Sequence[int]) -> str:
    vals = sorted(set(int(v) for v in values))
    return str(vals[0]) if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"


def _setup_sentence(runs: LoadedRuns, agg: Aggregate) -> str:
    f = runs.finals
    per_group = f.groupby(["env", "algo", "condition", "total_timesteps"]).size()
    n_failed = int(f["failed"].sum())
    seeds = sorted(f["seed"].unique())
    budgets = []
    for env, g in f.groupby("env", sort=True):
        tt = sorted(g["total_timesteps"].unique())
        budget = f"{int(tt[0]):,}" if len(tt) == 1 else f"{int(tt[0]):,}-{int(tt[-1]):,}"
        budgets.append(f"{env} {budget}")
    ep = f["eval_episodes"].dropna().unique()
    ep_text = f" over {_range_text(ep)} deterministic episodes" if len(ep) else ""
    runs_text = (f"{len(f) - n_failed} complete runs and {n_failed} failed run(s) (`FAILED`, scored at their "
                 "environment's random score)" if n_failed else f"{len(f)} complete runs")
    return (
        f"{runs_text}: {_range_text(per_group)} seed(s) per environment x algorithm x condition x budget "
        f"(seeds {', '.join(str(int(s)) for s in seeds)}). Budgets (`total_timesteps`, environment steps): "
        f"{'; '.join(budgets)}; the budget is part of a run's key, and a cell run at two budgets is two "
        f"rows of the per-cell table. The final return is the last evaluation (`final_eval_return_mean` of "
        f"`summary.json`{ep_text}); AUC is the trapezoid area under the evaluation curve divided by its "
        f"step span (a mean return over training). {agg.normalization}"
    )


def _aggregate_markdown(agg: Aggregate, confidence: float) -> str:
    table = format_aggregate_table(agg, confidence)
    return to_markdown(table, align="llrr" + "l" * (len(table.columns) - 4))


def _method_sentence(agg: Aggregate, confidence: float, n_resamples: int) -> str:
    pct = round(confidence * 100)
    comparison = (
        f"P(algorithm > {agg.baseline}) is P(X > Y) + 0.5 P(X = Y) for a run X of the algorithm and a run Y of "
        f"{agg.baseline} at the same condition (Mann-Whitney U / (n_x n_y)), averaged over the "
        f"environments where both ran, with a stratified bootstrap CI. "
        if agg.baseline_ran else NO_BASELINE + " "
    )
    t = agg.table
    single = (
        f" One run per environment gives no interval ({NO_INTERVAL}): nothing to resample."
        if not t.empty and (t["iqm"].notna() & t["iqm_low"].isna()).any() else ""
    )
    return (
        f"IQM = interquartile mean (`scipy.stats.trim_mean(x, 0.25)`) of the normalized scores of all runs "
        f"of all environments (the AUC is normalized with the same random and reference scores); {pct}% CIs are percentile intervals of a stratified bootstrap "
        f"({n_resamples} resamples, runs resampled within each environment).{single} {comparison}With few seeds these intervals "
        f"are approximate; read them as descriptive."
    )


def _relative(runs: LoadedRuns, p) -> Path:
    p = Path(p)
    try:
        return p.relative_to(runs.root)
    except ValueError:
        return p


def _left_out_section(runs: LoadedRuns) -> str:
    lines = [f"- `{_relative(runs, p)}`: incomplete (neither COMPLETE nor FAILED)" for p in runs.incomplete]
    for p, why in runs.unscored.items():
        lines.append(f"- `{_relative(runs, p)}`: failed (FAILED) and cannot be scored ({why})")
    for p, why in runs.damaged.items():
        lines.append(f"- `{_relative(runs, p)}`: fails the integrity check ({why}); rerun the bench to redo it")
    for note in runs.notes:
        if not note.startswith(("left out", "scored")):
            lines.append(f"- note: {note}")
    return "\n".join(lines)


def _failed_section(runs: LoadedRuns) -> str:
    """The failed runs, each scored at its environment's random score and counted in the tables."""
    failed = runs.finals[runs.finals["failed"]]
    if failed.empty:
        return ""
    lines = [f"- `{_relative(runs, r.run_dir)}`: scored {r.final_eval_return_mean:g} (random_score)"
             + (f"; {r.failure}" if r.failure else "") for r in failed.itertuples()]
    return ("\n## Failed runs (scored, not left out)\n\n"
            f"{len(failed)} run(s) failed (`FAILED`). Each is scored at its environment's random score (its "
            "config's `random_score`: final return and AUC, normalized 0) and counted in the tables above "
            "(column `failed`); it has no learning curve.\n\n" + "\n".join(lines) + "\n")


def make_report(
    root: str | Path,
    out: str | Path | None = None,
    *,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    baseline: str = BASELINE_ALGO,
    reference: str = "solved",
    dpi: int = 120,
) -> Report:
    """Load ``root``, compute the tables, draw the figures and write everything into ``out``
    (default ``<root>/report``). The whole folder is written into a hidden sibling and replaces
    ``out`` in one step (:class:`~adaptive_po.analysis.output.StagedFolder`): a stop midway
    (SIGTERM included) leaves the old report as it was, and no temporary files."""
    final = Path(out) if out is not None else Path(root) / "report"
    runs = load_runs(root)  # a bad root is named before any folder is made
    with StagedFolder(final) as staging:
        report = _make_report(root, runs, staging, confidence=confidence, n_resamples=n_resamples, seed=seed,
                              baseline=baseline, reference=reference, dpi=dpi)
    moved = lambda path: final / Path(path).name  # noqa: E731
    report.out_dir, report.report_md, report.results_md = final, moved(report.report_md), moved(report.results_md)
    report.figures = {k: moved(v) for k, v in report.figures.items()}
    report.tables = {k: moved(v) for k, v in report.tables.items()}
    return report


def _make_report(
    root: str | Path, runs: LoadedRuns, out_dir: Path, *, confidence: float, n_resamples: int, seed: int | None, baseline: str,
    reference: str, dpi: int,
) -> Report:
    root = Path(root)
    colors = algo_colors(runs.algos, baseline=baseline)
    kw = dict(confidence=confidence, n_resamples=n_resamples, seed=seed)

    conditions = condition_table(runs, baseline=baseline, **kw)
    agg = aggregate_table(runs, baseline=baseline, reference=reference, **kw)
    out_dir.mkdir(parents=True, exist_ok=True)

    figures: dict[str, Path] = {}
    skipped: list[str] = []

    def _save(name: str, fig) -> None:
        figures[name] = save_figure(fig, out_dir / name, dpi=dpi)

    with_curves = set(runs.evals["env"])
    for env in runs.envs:
        if env in with_curves:
            _save(f"curves_{_safe_name(env)}.png", plot_learning_curves(runs, env, colors, **kw))
        else:
            skipped.append(f"curves_{_safe_name(env)}.png: every run of {env} failed (no evaluation curve)")
    if runs.finals["policy_lag"].nunique() > 1:
        _save("staleness.png", plot_staleness(runs, colors, **kw))
    else:
        skipped.append("staleness.png: only one policy lag was run")
    if runs.finals["action_noise"].nunique() > 1:
        _save("noise.png", plot_noise(runs, colors, **kw))
    else:
        skipped.append("noise.png: only one action-noise level was run")
    _save("ess.png", plot_ess(runs, colors, **kw))

    tables = {
        "aggregate.csv": save_csv(agg.table, out_dir / "aggregate.csv"),
        "references.csv": save_csv(agg.references, out_dir / "references.csv"),
        "conditions.csv": save_csv(conditions, out_dir / "conditions.csv"),
        "runs.csv": save_csv(runs.finals, out_dir / "runs.csv"),
    }


    agg_md = _aggregate_markdown(agg, confidence) if not agg.table.empty \
        else "_No environment could be normalized (no random_score / reference); see the table below._\n"
    refs_md = to_markdown(format_references(agg.references), align="lrrlll")
    cond_md = to_markdown(format_condition_table(conditions, confidence), align="lllrrrlllr")
    setup = _setup_sentence(runs, agg)
    method = _method_sentence(agg, confidence, n_resamples)
    agg_notes = "".join(f"\n- {n}" for n in agg.notes)

    verdicts_md, per_run = "", None
    if baseline in set(runs.finals["algo"]) and runs.finals["algo"].nunique() > 1:
        from ..verdicts import suite_verdicts, table_from_runs

        per_run = table_from_runs(runs, root)
        verdicts_md = suite_verdicts(per_run, baseline, f"`python -m adaptive_po.analysis {root}`", seed or 0)
    results_md = (
        verdicts_md
        + "### Aggregate across environments\n\n" + agg_md + "\n" + method + "\n"
        + (agg_notes + "\n" if agg_notes else "")
        + "\n### Normalization\n\n" + refs_md
        + "\n### Final return per environment, algorithm and condition\n\n" + cond_md
        + f"\n{setup}\n"
    )

    suite = root.resolve().name
    fig_md = []
    curve_figs = [n for n in figures if n.startswith("curves_")]
    fig_md.append("## Learning curves\n")
    for name in curve_figs:
        fig_md.append(f"![Learning curves: {name[7:-4]}]({name})\n")
    if "staleness.png" in figures:
        fig_md.append("## Staleness ablation: final return and AUC vs policy lag\n\n![Staleness ablation](staleness.png)\n")
    if "noise.png" in figures:
        fig_md.append("## Action-noise ablation\n\n![Action-noise ablation](noise.png)\n")
    fig_md.append("## Effective sample size over training\n\n![ESS over training](ess.png)\n")
    if skipped:
        fig_md.append("Figures not drawn: " + "; ".join(skipped) + ".\n")
    left_out = _left_out_section(runs)

    report = (
        f"# Results: suite `{suite}`\n\n"
        f"Generated by `python -m adaptive_po.analysis {root}` from the run folders under `{root}`.\n\n"
        f"**Setup.** {setup}\n\n"
        "## Aggregate across environments\n\n" + agg_md + "\n" + method + "\n"
        + (agg_notes + "\n" if agg_notes else "")
        + "\n### Normalization per environment\n\n" + refs_md + "\n"
        + "\n".join(fig_md)
        + "\n## Final return per environment, algorithm and condition\n\n" + cond_md
        + _failed_section(runs)
        + "\n## Runs left out\n\n" + (left_out or "None: every run folder found is complete or scored as failed.") + "\n"
    )
    if per_run is not None:
        tables["per_run.csv"] = save_csv(per_run, out_dir / "per_run.csv")
        report = report.replace("## Aggregate across environments\n\n", verdicts_md.replace("### ", "## ", 1) + "## Aggregate across environments\n\n", 1)
    report_md = atomic_write_text(out_dir / "report.md", report)
    results_path = atomic_write_text(out_dir / "results.md", results_md)
    return Report(out_dir=out_dir, report_md=report_md, results_md=results_path, figures=figures,
                  tables=tables, runs=runs, aggregate=agg, conditions=conditions, skipped=skipped)


# --------------------------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m adaptive_po.analysis",
        description="Learning curves, staleness ablations and an aggregate results table for one suite "
                    "of runs (runs/<suite>/<env>/<algo>/<condition>/seed-<n>/).",
    )
    p.add_argument("suite_root", type=Path, help="suite folder, e.g. runs/quick")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: <suite_root>/report)")
    add_bootstrap_arguments(p)
    p.add_argument("--baseline", default=BASELINE_ALGO, help="baseline algorithm for normalization and P(improvement)")
    p.add_argument("--reference", choices=("auto", "baseline", "solved"), default="solved",
                   help="normalization reference: the config's solved_threshold, external to the sweep "
                        "(solved, default); the baseline at lag 0 when present else the threshold (auto); "
                        "only the baseline (baseline)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_report_arguments(_parser(), argv)
    rep = run_reporting(lambda: make_report(
        args.suite_root, args.out, confidence=args.confidence, n_resamples=args.resamples,
        seed=args.seed, baseline=args.baseline, reference=args.reference,
    ))
    if rep is None:
        return 1

    agg = rep.aggregate
    print(f"Aggregate across environments ({agg.baseline} = baseline):\n" if agg.baseline_ran
          else f"Aggregate across environments. {NO_BASELINE}\n")
    if rep.aggregate.table.empty:
        print("(no environment could be normalized)")
    else:
        print(_aggregate_markdown(rep.aggregate, args.confidence))
    print(rep.aggregate.normalization)
    for note in rep.aggregate.notes:
        print(f"note: {note}")
    print(f"\nWrote {len(rep.figures)} figure(s), tables and report.md to {rep.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

