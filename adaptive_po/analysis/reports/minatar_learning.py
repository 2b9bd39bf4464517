"""MinAtar at learning budgets: the study's report, from its committed files alone.

``python -m adaptive_po.analysis.reports.minatar_learning --results docs/results/minatar-learning``
reads ``per_run.csv`` (every finished run with its learning curve), ``selection.json`` (the
pilot's games and budgets) and ``cuts.json``, and writes ``verdicts.md`` with the figures
``curves.png`` (learning curves per game with 95% bands, and our ``ppo`` beside gymnax-blines'
points) and ``staleness.png`` (score against lag). The endpoints and the decision rule are those
of ``preregistration.md``: endpoint 1 the slope of ``esspo`` against ``ppo`` over lags 0, 2, 8,
endpoint 2 non-inferiority at lag 0, endpoint 3 the slope against ``decoupled-ppo``; a study in
progress is reported over the games whose runs are all in, and says so.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats

from adaptive_po import contract
from adaptive_po.contract import (
    FROZEN_CURVE_COLUMN as CURVE_COLUMN, FROZEN_TABLE_FILE as TABLE_FILE, MINATAR_LEARNING_CUTS_FILE as CUTS_FILE,
    MINATAR_LEARNING_PILOT_FOLDER as PILOT_FOLDER, MINATAR_LEARNING_PUBLISHED as PUBLISHED,
    MINATAR_LEARNING_REGISTERED as REGISTERED, MINATAR_LEARNING_SCORE_FOLDER as SCORE_FOLDER,
    MINATAR_LEARNING_SELECTION_FILE as SELECTION_FILE, parse_curve,
)

from ..endpoints import (
    format_difference, format_p, head_to_head, inferiority_p, log_lag, non_inferiority, non_inferiority_p,
    non_inferiority_word, slope, tested,
)
from ..hypothesis import MARGIN, Difference, holm, mean_of_differences, verdict, weighted_sum, welch

#: the slopes' lags (no cut removes them) and their equivalence margin per unit of log2(1 + lag)
SLOPE_LAGS: tuple[int, ...] = REGISTERED["kept_lags"]
SLOPE_MARGIN = MARGIN / math.log2(1 + max(SLOPE_LAGS))
COMPARATORS: tuple[str, ...] = ("ppo", "decoupled-ppo")
COLORS = {"esspo": "tab:red", "ppo": "tab:blue", "decoupled-ppo": "tab:green"}


class Plan:
    """The study's plan as its committed files give it: the selected games and budgets, less the cuts."""

    def __init__(self, selection: Mapping[str, Any] | None, cuts: Mapping[str, Sequence[Any]] | None) -> None:
        cuts = cuts or {}
        games = [(str(g["env"]), int(g["budget"])) for g in (selection or {}).get("games", [])]
        #: whether the pilot has decided (its selection is written), whatever it selected
        self.decided = selection is not None
        self.selected = tuple(games)
        self.games = tuple(g for g in games if g[0] not in cuts.get("games", ()))
        self.lags = tuple(lag for lag in REGISTERED["lags"] if lag not in cuts.get("lags", ()))
        self.seeds = tuple(s for s in REGISTERED["score_seeds"] if s not in cuts.get("seeds", ()))
        self.arms: tuple[str, ...] = REGISTERED["arms"]
        self.cuts = {k: list(v) for k, v in cuts.items()}

    def runs(self) -> int:
        return len(self.games) * len(self.arms) * len(self.lags) * len(self.seeds)


def load(results: Path) -> tuple[dict, Plan]:
    table = contract.read_frozen_table(results / TABLE_FILE)
    contract.check_table_normalization(results / TABLE_FILE, table)  # random score and reference: the environment files'
    if table:  # a published table's digest is committed with it (read_frozen_table checked it where present)
        contract.check_table_digest(results / TABLE_FILE, required=True)
    selection = contract.read_committed_json(results / SELECTION_FILE) if (results / SELECTION_FILE).is_file() else None
    cuts = contract.read_committed_json(results / CUTS_FILE) if (results / CUTS_FILE).is_file() else None
    return table, Plan(selection, cuts)


def scores(table: Mapping, plan: Plan) -> dict[str, dict[tuple[str, int], np.ndarray]]:
    """``{game: {(arm, lag): normalized scores}}``: each cell whose seeds are all in the table."""
    out: dict[str, dict[tuple[str, int], np.ndarray]] = {}
    for game, budget in plan.games:
        cells = {}
        for arm in plan.arms:
            for lag in plan.lags:
                rows = [table.get((SCORE_FOLDER, game, arm, "", lag, s, budget)) for s in plan.seeds]
                if all(r is not None for r in rows):
                    cells[(arm, lag)] = np.array([r["score"] for r in rows], float)
        out[game] = cells
    return out


def analyse(table: Mapping, plan: Plan) -> dict[str, Any]:
    """Per game the slopes; the three endpoints per game and over the games that have them."""
    fresh = scores(table, plan)
    slopes: dict[tuple[str, str], tuple[float, float, float]] = {}
    for game, cells in fresh.items():
        for arm in plan.arms:
            if all((arm, lag) in cells for lag in SLOPE_LAGS):
                pts = [(lag, v) for lag in SLOPE_LAGS for v in cells[(arm, lag)]]
                slopes[(game, arm)] = slope([a for a, _ in pts], [b for _, b in pts])

    def slope_difference(comparator: str) -> tuple[dict[str, Difference], Difference]:
        games = [g for g in fresh if (g, "esspo") in slopes and (g, comparator) in slopes]
        per_game = {g: weighted_sum([(*slopes[(g, "esspo")], 1.0), (*slopes[(g, comparator)], -1.0)]) for g in games}
        # the mean over games, each slope a term of its own (Welch-Satterthwaite degrees of freedom)
        overall = weighted_sum([(*slopes[(g, arm)], w / len(games)) for g in games for arm, w in (("esspo", 1.0), (comparator, -1.0))]) \
            if games else Difference(math.nan, math.nan, math.nan)
        return per_game, overall

    e1_games, e1 = slope_difference("ppo")
    e3_games, e3 = slope_difference("decoupled-ppo")
    pairs = {g: (c[("esspo", 0)], c[("ppo", 0)]) for g, c in fresh.items() if ("esspo", 0) in c and ("ppo", 0) in c}
    e2_games = {g: welch(*pair) for g, pair in pairs.items()}
    e2 = mean_of_differences(list(pairs.values())) if pairs else Difference(math.nan, math.nan, math.nan)
    return {"fresh": fresh, "slopes": slopes, "e1": e1, "e1_games": e1_games, "e2": e2, "e2_games": e2_games, "e3": e3, "e3_games": e3_games}


def primary(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The three primary endpoints, Holm over them (the mirror "inferior" test in endpoint 2's place
    adjusted the same way), each with its verdict."""
    e1, e2, e3 = result["e1"], result["e2"], result["e3"]
    p = [e1.p_value(), non_inferiority_p(e2), e3.p_value()]
    adjusted = holm(p)
    p_inferior = inferiority_p(e2)
    inferior_adj = holm([p[0], p_inferior, p[2]])[1]
    eq = holm([e1.p_equivalence(SLOPE_MARGIN), math.nan, e3.p_equivalence(SLOPE_MARGIN)])
    return [
        {"endpoint": "1. slope per unit log2(1 + lag), lags 0-8: esspo - ppo", "d": e1, "p": p[0], "p_adj": adjusted[0],
         "verdict": verdict(e1.estimate, adjusted[0], eq[0])},
        {"endpoint": "2. lag 0: esspo - ppo (non-inferiority at -0.1)", "d": e2, "p": p[1], "p_adj": adjusted[1],
         "verdict": non_inferiority_word(e2, adjusted[1], inferior_adj), "p_inferior": p_inferior, "p_inferior_adj": inferior_adj},
        {"endpoint": "3. slope per unit log2(1 + lag), lags 0-8: esspo - decoupled-ppo", "d": e3, "p": p[2], "p_adj": adjusted[2],
         "verdict": verdict(e3.estimate, adjusted[2], eq[2])},
    ]


def answers(rows: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """(against ``ppo``, against ``decoupled-ppo``) by the registered rule."""
    v1, v2, v3 = (r["verdict"] for r in rows)
    if "" in (v1, v2):
        against_ppo = "not decided (no game complete)"
    elif v1 == "win" and v2 == "non-inferior":
        against_ppo = "supported"
    elif v1 == "loss" or v2 == "inferior":
        against_ppo = "contradicted"
    else:
        against_ppo = "not decided at this size"
    words = {"win": "ahead", "loss": "behind", "equivalent": "equivalent", "inconclusive": "not decided at this size", "": "not decided (no game complete)"}
    return against_ppo, words.get(v3, v3)


def per_game_verdicts(result: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each endpoint per game, Holm over that endpoint's per-game tests."""
    families = {
        "1": (result["e1_games"], lambda ds: tested(ds, SLOPE_MARGIN)),
        "2": (result["e2_games"], non_inferiority),
        "3": (result["e3_games"], lambda ds: tested(ds, SLOPE_MARGIN)),
    }
    return {name: dict(zip(list(by), test([by[g] for g in by]))) for name, (by, test) in families.items()}


def _half(x: np.ndarray) -> float:
    return float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan


def report_text(table: Mapping, plan: Plan, result: Mapping[str, Any]) -> str:
    done = sum(1 for k in table if k[0] == SCORE_FOLDER)
    pilot = sum(1 for k in table if k[0] == PILOT_FOLDER)
    lines = [
        "# MinAtar at learning budgets: verdicts", "",
        "Pre-registered in [`preregistration.md`](preregistration.md) before any run, the pilot included; games and budgets "
        "chosen by the `ppo`-only pilot ([`pilot.md`](pilot.md)). Rebuilt from the committed files by "
        "`python -m adaptive_po.analysis.reports.minatar_learning`.", "",
    ]
    if not plan.decided:
        lines += [f"**The pilot is not complete** ({pilot} of its runs in [`per_run.csv`](per_run.csv)): no game is selected yet, "
                  "and the study has not started."]
        return "\n".join(lines) + "\n"
    if len(plan.selected) < REGISTERED["min_games"]:
        lines += [f"**{len(plan.selected)} game(s) qualify, fewer than {REGISTERED['min_games']}: as registered, the study is not run.** "
                  f"The pilot is the result ({pilot} runs: [`pilot.md`](pilot.md), `pilot.png`): MinAtar at up to 2M steps on this "
                  "engine is not a learning budget where staleness measurably hurts `ppo` on two games."]
        return "\n".join(lines) + "\n"
    complete = [g for g, _ in plan.games if len(result["fresh"].get(g, {})) == len(plan.arms) * len(plan.lags)]
    lines += [
        f"**Progress:** {done} of {plan.runs()} runs in [`per_run.csv`](per_run.csv); games "
        f"{', '.join(f'{g} ({b:,} steps)' for g, b in plan.games)}; lags {', '.join(map(str, plan.lags))}; scoring seeds "
        f"{plan.seeds[0]}-{plan.seeds[-1]}.",
    ]
    if any(plan.cuts.values()):
        lines.append(f"Cut by the pre-registered order before the study's first run: {json.dumps(plan.cuts, sort_keys=True)}.")
    rows = primary(result)
    against_ppo, against_dppo = answers(rows)
    interim = len(complete) < len(plan.games)
    lines += [
        "", "## The answer", "",
        (f"**Interim, {len(complete)} of {len(plan.games)} games complete: no verdict here is the study's until every game is in.** "
         if interim else "")
        + f"**Against `ppo`, the claim (as robust to a stale actor, not worse on fresh data) is {against_ppo}. "
        f"Against `decoupled-ppo`, `esspo`'s slope is {against_dppo}.** All three arms run PPO's published schedule "
        "(4 epochs of 8 minibatches) with no per-arm search: a limit of this answer.", "",
        "| endpoint | estimate [95% CI] | p | p (Holm over the three) | detectable (80% power) | verdict |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        d = r["d"]
        digits = 3 if r["endpoint"].startswith("2") else 4
        lines.append(f"| {r['endpoint']} | {format_difference(d, digits)} | {format_p(r['p'])} | {format_p(r['p_adj'])} | {format_p(d.detectable())} | {r['verdict'] or 'n/a'} |")
    lines += [
        "", f"Slopes are in normalized score per unit of log2(1 + lag) over lags {', '.join(map(str, SLOPE_LAGS))}; their "
        f"equivalence margin is 0.1 over lags 0-8 ({SLOPE_MARGIN:.4f} per unit). Endpoint 2 is one-sided (p of \"esspo is "
        "worse by 0.1 or more\"); it reads inferior where the mirror test rejects after the same Holm: "
        f"p {format_p(rows[1]['p_inferior'])}, Holm {format_p(rows[1]['p_inferior_adj'])}.", "",
        "## Per game", "",
        "| game | slope esspo | slope ppo | slope decoupled-ppo | 1. esspo - ppo | 2. lag 0: esspo - ppo | 3. esspo - decoupled-ppo |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    verdicts = per_game_verdicts(result)
    for game, _ in plan.games:
        def sl(arm: str) -> str:
            b = result["slopes"].get((game, arm))
            return f"{b[0]:+.4f} ({b[1]:.4f})" if b and math.isfinite(b[0]) else "n/a"

        def cell(name: str, digits: int) -> str:
            row = verdicts[name].get(game)
            return f"{format_difference(row['d'], digits)} {row['verdict'] or ''} (Holm p {format_p(row['p_adj'])})".strip() if row else "n/a"

        lines.append(f"| {game} | {sl('esspo')} | {sl('ppo')} | {sl('decoupled-ppo')} | {cell('1', 4)} | {cell('2', 3)} | {cell('3', 4)} |")
    lines += ["", "Slopes with their standard errors; each endpoint's per-game tests are one Holm family.", ""]
    for comparator in COMPARATORS:
        arms = ("esspo", comparator)
        per_game, aggregate = head_to_head(result["fresh"], comparator, arms, plan.lags)
        lines += [f"## Secondary: `esspo` minus `{comparator}` at every lag", "",
                  "| game | lag | difference [95% CI] | p (Holm within the table) | detectable (80% power) | verdict |", "|---|---:|---:|---:|---:|---|"]
        lines += [f"| over {r['tasks']} game(s) | {r['lag']} | {format_difference(r['d'])} | {format_p(r['p_adj'])} | {format_p(r['d'].detectable())} | {r['verdict']} |" for r in aggregate]
        lines += [f"| {r['env']} | {r['lag']} | {format_difference(r['d'])} | {format_p(r['p_adj'])} | {format_p(r['d'].detectable())} | {r['verdict']} |" for r in per_game]
        lines += ["", f"Per game: Welch's t; over games: the mean of per-game differences; each table one Holm family; equivalence within ±{MARGIN:g} by two one-sided tests.", ""]
    lines += ["## Every cell", "", "| game | arm | lag | mean normalized score [95% CI] | runs |", "|---|---|---:|---:|---:|"]
    for game, _ in plan.games:
        for arm in plan.arms:
            for lag in plan.lags:
                got = result["fresh"].get(game, {}).get((arm, lag))
                if got is not None:
                    h = _half(got)
                    lines.append(f"| {game} | {arm} | {lag} | {got.mean():.3f} [{got.mean() - h:.3f}, {got.mean() + h:.3f}] | {len(got)} |")
    lines += ["", "Figures: [`curves.png`](curves.png) (evaluation return over training per game, mean and 95% band per arm "
              "at lags 0 and 8, with gymnax-blines' PPO points), [`staleness.png`](staleness.png) (score against lag), "
              "[`pilot.png`](pilot.png) (the pilot's `ppo` on every game)."]
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


def _curves_figure(panels: Sequence[tuple[str, Sequence[tuple[str, str, str, Sequence[Mapping[str, Any]]]]]], title: str, out: Path) -> Path:
    """One panel per game: each line's mean learning curve with its 95% band (``(label, color,
    line style, rows)``), and gymnax-blines' PPO points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(panels))
    fig, axes = plt.subplots(math.ceil(len(panels) / cols), cols, figsize=(4.8 * cols, 3.4 * math.ceil(len(panels) / cols) + 0.9), squeeze=False)
    for ax, (game, lines) in zip(axes.flat, panels):
        for label, color, style, rows in lines:
            band = curve_band(rows)
            if band is not None:
                x, m, h = band
                ax.plot(x / 1e6, m, style, color=color, lw=1.3, label=label)
                ax.fill_between(x / 1e6, m - h, m + h, color=color, alpha=0.15, lw=0)
        points = PUBLISHED.get(game, ())
        if points:
            ax.plot([s / 1e6 for s, _ in points], [r for _, r in points], "k*", ms=9, label="gymnax-blines PPO (no sticky actions)")
        ax.set_title(game, fontsize=10)
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
    """``pilot.png`` (our ``ppo`` at lags 0 and 8 on every game, beside the published points), and
    once the study has runs, ``curves.png`` and ``staleness.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def rows(folder: str, game: str, arm: str, lag: int, seeds: Sequence[int], budget: int) -> list[Mapping[str, Any]]:
        return [r for r in (table.get((folder, game, arm, "", lag, s, budget)) for s in seeds) if r is not None]

    written = []
    pilot = REGISTERED["pilot_algo"], REGISTERED["pilot_seeds"], REGISTERED["pilot_budget"]
    if any(k[0] == PILOT_FOLDER for k in table):
        panels = [(game, [(f"{pilot[0]}, lag {lag}", COLORS[pilot[0]], style, rows(PILOT_FOLDER, game, pilot[0], lag, pilot[1], pilot[2]))
                          for lag, style in zip(REGISTERED["pilot_lags"], ("-", "--"))]) for game in REGISTERED["games"]]
        written.append(_curves_figure(panels, f"The pilot: our {pilot[0]} (mean and 95% band over seeds {', '.join(map(str, pilot[1]))})",
                                      results / "pilot.png"))
    if not any(result["fresh"].values()):
        return written
    panels = [(game, [(f"{arm}, lag {lag}", COLORS[arm], style, rows(SCORE_FOLDER, game, arm, lag, plan.seeds, budget))
                      for arm in plan.arms for lag, style in ((0, "-"), (8, "--")) if lag in plan.lags]) for game, budget in plan.games]
    written.append(_curves_figure(panels, "MinAtar at learning budgets: deterministic evaluation, mean and 95% band over seeds", results / "curves.png"))
    fig, axes = plt.subplots(1, len(plan.games), figsize=(4.6 * len(plan.games), 3.6), squeeze=False)
    for ax, (game, _) in zip(axes.flat, plan.games):
        for arm in plan.arms:
            cells = [(lag, result["fresh"][game][(arm, lag)]) for lag in plan.lags if (arm, lag) in result["fresh"].get(game, {})]
            if cells:
                ax.errorbar([log_lag(lag) for lag, _ in cells], [c.mean() for _, c in cells], yerr=[_half(c) for _, c in cells],
                            color=COLORS[arm], marker="o", ms=3.5, capsize=2.5, lw=1.4, label=arm)
        ax.set_xticks([log_lag(lag) for lag in plan.lags], [str(lag) for lag in plan.lags])
        ax.set_xlabel("policy lag (updates), log2(1 + lag) scale")
        ax.set_ylabel("normalized score")
        ax.set_title(game, fontsize=10)
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


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; a bad input is one line on stderr with exit status 2."""
    return contract.one_line_errors("minatar-learning report", lambda: _main(argv))


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.reports.minatar_learning",
                                     description="the MinAtar learning-budget study's verdicts and figures, from its committed files")
    parser.add_argument("--results", default=contract.MINATAR_LEARNING_RESULTS)
    args = parser.parse_args(argv)
    results = contract.existing_folder(args.results, "the study's results folder")  # a report makes no folder
    table, plan = load(results)
    result = analyse(table, plan)
    contract.atomic_write_text(results / "verdicts.md", report_text(table, plan, result))
    written = figures(table, plan, result, results) if table else []
    print(f"wrote {results / 'verdicts.md'}" + "".join(f", {p}" for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
