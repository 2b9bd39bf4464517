"""Why the ESS objective loses on fresh data: the diagnosis, and the verdicts of the variants pre-registered to fix it.

Two parts, each rebuilt by a make target:

* ``diagnosis``: reads the per-epoch traces that ``adaptive-po trace`` wrote
  (``<traces>/<env>/<algo>/<condition>/seed-<n>.csv``, columns of
  :data:`adaptive_po.bench.trace.TRACE_COLUMNS`) and writes ``diagnosis.md``, ``diagnosis.csv``
  (one summary row per env, objective and condition) and ``diagnosis.png``.
* ``results``: the verdicts of the pre-registered variants (``python -m adaptive_po.analysis.reports.fresh_data
  results``): per task, each arm against the original ``esspo`` and against ``ppo``, through
  :mod:`adaptive_po.analysis.verdicts`.

This module reads CSV files only; of the package it imports the torch-free contract module alone.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from adaptive_po.contract import atomic_write_text, report_folder  # torch-free: the run-folder contract

from ..verdicts import aggregates, ci_text, per_run_table, per_task, replace_block, shift_headings, verdicts_markdown
from ..verdicts import condition_label as verdict_condition

MADE_BY_DIAGNOSIS = "`make fresh-data-diagnosis` (`python -m adaptive_po.analysis.reports.fresh_data diagnosis --traces docs/results/fresh-data/trace --out docs/results/fresh-data`)"
#: the trace's reference band (PPO's default clip range), as in adaptive_po.bench.trace.BAND
BAND = 0.2


# -- loading ---------------------------------------------------------------------------------------
def load_traces(root: str | Path) -> pd.DataFrame:
    """Every trace under ``root`` in one frame, with ``env``, ``algo``, ``condition`` and ``seed``."""
    root = Path(root)
    frames = []
    for path in sorted(root.glob("*/*/*/seed-*.csv")):
        env, algo, condition = path.parts[-4:-1]
        frame = pd.read_csv(path)
        if frame.empty:
            continue
        frame.insert(0, "seed", int(path.stem.split("-", 1)[1]))
        frame.insert(0, "condition", condition)
        frame.insert(0, "algo", algo)
        frame.insert(0, "env", env)
        frames.append(frame)
    if not frames:
        raise FileNotFoundError(f"no traces under {root} (expected <env>/<algo>/<condition>/seed-<n>.csv; run `make fresh-data-trace`)")
    return pd.concat(frames, ignore_index=True)


def condition_label(condition: str) -> str:
    lag = condition.split("_", 1)[0]
    return "fresh" if lag == "lag0" else f"lag {lag[3:]}"


# -- the summary -------------------------------------------------------------------------------------
def summary(traces: pd.DataFrame) -> pd.DataFrame:
    """One row per env, objective and condition: medians over every traced update of every seed."""
    rows = []
    for (env, algo, condition), cell in traces.groupby(["env", "algo", "condition"], sort=True):
        last_epoch = cell["epoch"].max()
        first = cell[cell["epoch"] == 1]
        last = cell[cell["epoch"] == last_epoch]
        final_update = cell[cell["update"] == cell.groupby("seed")["update"].transform("max")]
        final_update = final_update[final_update["epoch"] == final_update["epoch"].max()]
        bias = cell["fixed_mb_ess_mean"] - cell["batch_ess"]
        rows.append({
            "env": env,
            "algo": algo,
            "condition": condition_label(condition),
            "seeds": cell["seed"].nunique(),
            "traced_updates": int(first.shape[0]),
            "epochs": int(last_epoch),
            "start_ess_median": float(first["start_ess"].median()),
            "kl_first_epoch_median": float(first["batch_approx_kl"].median()),
            "kl_last_epoch_median": float(last["batch_approx_kl"].median()),
            "kl_last_epoch_q1": float(last["batch_approx_kl"].quantile(0.25)),
            "kl_last_epoch_q3": float(last["batch_approx_kl"].quantile(0.75)),
            "outside_band_last_epoch": float(last["outside_band"].median()),
            "kl_weight_seen": float(cell["kl_weight"].median()),
            "one_minus_batch_ess": float((1.0 - cell["batch_ess"]).median()),
            "minibatch_ess_bias_median": float(bias.median()),
            "minibatch_ess_bias_max": float(bias.max()),
            "minibatch_ess_std_fixed": float(cell["fixed_mb_ess_std"].median()),
            "policy_std_final": float(final_update["policy_std"].mean()),
            "entropy_final": float(final_update["entropy"].mean()),
            "rollout_return_final": float(final_update["ep_return"].mean()),
        })
    return pd.DataFrame(rows)


def _row(table: pd.DataFrame, env: str, algo: str, condition: str) -> pd.Series | None:
    hit = table[(table["env"] == env) & (table["algo"] == algo) & (table["condition"] == condition)]
    return None if hit.empty else hit.iloc[0]


def diagnosis_markdown(traces: pd.DataFrame, table: pd.DataFrame) -> str:
    """The diagnosis report: the summary table, then the ratios the mechanism rests on."""
    lines = [
        "# Why the ESS objective loses on fresh data: the diagnosis",
        "",
        f"Made by {MADE_BY_DIAGNOSIS} from the traces in `trace/` (written by `make fresh-data-trace`:",
        "`adaptive-po trace`, the process engine, seeds 0-2, Zoo settings; Pendulum-v1 at 100k steps every update traced,",
        "CartPole-v1 at 100k every 5th update). One trace row per epoch of an update: what the loss saw over the epoch's",
        "minibatches, and what the whole batch says at the parameters the epoch ended with.",
        "",
        "Columns (medians over every traced update of every seed unless said):",
        "",
        "- *KL to start*: the approximate KL of the policy to the policy at the start of the update over the whole batch, after the first and the last epoch (with the quartiles);",
        f"- *outside band*: the fraction of the batch whose ratio to the behaviour policy lies outside [{1 - BAND:.1f}, {1 + BAND:.1f}] after the last epoch (PPO's clip band, as a reference);",
        "- *pull seen*: the KL weight 1 - e_B the loss used, per minibatch; *1 - e(batch)*: the same from the whole batch at the end of each epoch;",
        "- *e bias*: the mean minibatch ESS minus the whole-batch ESS at the same parameters (a random partition of the batch into minibatches of the run's size), median and largest;",
        "- *std*, *return*: the Gaussian policy's standard deviation and the mean rollout return at the last update, averaged over seeds.",
        "",
        "| env | objective | condition | seeds | start e | KL to start, epoch 1 | KL to start, last epoch [quartiles] | outside band | pull seen | 1 - e(batch) | e bias (median / max) | std | return |",
        "|:---|:---|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in table.itertuples():
        std = "" if np.isnan(r.policy_std_final) else f"{r.policy_std_final:.2f}"
        lines.append(
            f"| {r.env} | {r.algo} | {r.condition} | {r.seeds} | {r.start_ess_median:.3f} | {r.kl_first_epoch_median:.3f} | "
            f"{r.kl_last_epoch_median:.3f} [{r.kl_last_epoch_q1:.3f}, {r.kl_last_epoch_q3:.3f}] | {r.outside_band_last_epoch:.2f} | "
            f"{r.kl_weight_seen:.3f} | {r.one_minus_batch_ess:.3f} | {r.minibatch_ess_bias_median:+.3f} / {r.minibatch_ess_bias_max:+.3f} | "
            f"{std} | {r.rollout_return_final:.0f} |"
        )
    lines += ["", "## What the numbers say", ""]
    for env in sorted(table["env"].unique()):
        esspo, ppo = _row(table, env, "esspo", "fresh"), _row(table, env, "ppo", "fresh")
        if esspo is None or ppo is None:
            continue
        ratio = esspo.kl_last_epoch_median / max(ppo.kl_last_epoch_median, 1e-12)
        lines.append(
            f"- **{env}, fresh data**: one update of `esspo` moves the policy {esspo.kl_last_epoch_median:.3f} nats from where it started "
            f"(median), PPO's {ppo.kl_last_epoch_median:.3f}: {ratio:.0f} times as far. "
            f"After the first epoch alone `esspo` is at {esspo.kl_first_epoch_median:.3f}. "
            f"{esspo.outside_band_last_epoch:.0%} of its ratios end outside PPO's band (PPO: {ppo.outside_band_last_epoch:.0%})."
        )
        if not np.isnan(esspo.policy_std_final):
            lines.append(
                f"  The Gaussian's standard deviation at the last update is {esspo.policy_std_final:.2f} for `esspo` and "
                f"{ppo.policy_std_final:.2f} for PPO; the rollout return {esspo.rollout_return_final:.0f} and {ppo.rollout_return_final:.0f}."
            )
        lines.append(
            f"  The pull the loss saw had weight {esspo.kl_weight_seen:.3f}; the whole batch called for {esspo.one_minus_batch_ess:.3f}. "
            f"The minibatch ESS is biased towards 1 by {esspo.minibatch_ess_bias_median:+.3f} in the median and by up to "
            f"{esspo.minibatch_ess_bias_max:+.3f} in one epoch."
        )
        stale = _row(table, env, "esspo", "lag 16")
        if stale is not None:
            std = "" if np.isnan(stale.policy_std_final) else f", and its standard deviation ends at {stale.policy_std_final:.2f}"
            lines.append(
                f"- **{env}, lag 16**: the batch starts at e = {stale.start_ess_median:.3f} (median), so the pull has weight "
                f"{stale.kl_weight_seen:.3f} from the first step and points at a 16-update-old policy{std}."
            )
    lines.append("")
    return "\n".join(lines)


# -- the figure ---------------------------------------------------------------------------------------
_STYLE = {
    ("esspo", "fresh"): ("tab:red", "-"),
    ("esspo", "lag 16"): ("tab:red", "--"),
    ("ppo", "fresh"): ("tab:blue", "-"),
    ("ppo", "lag 16"): ("tab:blue", "--"),
    # the pre-registered variants, traced after their registration
    ("esspo-batch-ess", "fresh"): ("tab:green", "-"),
    ("esspo-forward-kl", "fresh"): ("tab:purple", "-"),
}


def _band(ax, frame: pd.DataFrame, x: str, y: str, label: str, color: str, style: str, log: bool = False) -> None:
    grouped = frame.groupby(x)[y]
    med, q1, q3 = grouped.median(), grouped.quantile(0.25), grouped.quantile(0.75)
    ax.plot(med.index, med.to_numpy(), style, color=color, label=label)
    ax.fill_between(med.index, q1.to_numpy(), q3.to_numpy(), color=color, alpha=0.12, linewidth=0)
    if log:
        ax.set_yscale("log")


def diagnosis_figure(traces: pd.DataFrame, path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = traces.assign(cond=traces["condition"].map(condition_label))
    pend = traces[traces["env"] == "Pendulum-v1"]
    cart = traces[traces["env"] == "CartPole-v1"]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    (a, b, c), (d, e, f) = axes
    for (algo, cond), (color, style) in _STYLE.items():
        cell = pend[(pend["algo"] == algo) & (pend["cond"] == cond)]
        if cell.empty:
            continue
        label = f"{algo}, {cond}"
        _band(a, cell, "epoch", "batch_approx_kl", label, color, style, log=True)
        _band(c, cell, "epoch", "outside_band", label, color, style)
        last = cell[cell["epoch"] == cell["epoch"].max()]
        per_update = last.groupby("timesteps")
        d.plot(per_update["policy_std"].mean().index, per_update["policy_std"].mean().to_numpy(), style, color=color, label=label)
        if cond == "fresh":
            e.plot(per_update["ep_return"].mean().index, per_update["ep_return"].mean().to_numpy(), style, color=color, label=label)
        if algo == "esspo":
            _band(b, cell, "epoch", "kl_weight", f"pull seen (1 - e minibatch), {cond}", color, style)
            frame = cell.assign(batch_pull=1.0 - cell["batch_ess"])
            _band(b, frame, "epoch", "batch_pull", f"1 - e of the whole batch, {cond}", "black", style)
    for algo, color in (("esspo", "tab:red"), ("ppo", "tab:blue")):
        cell = cart[cart["algo"] == algo]
        if not cell.empty:
            _band(f, cell, "epoch", "batch_approx_kl", f"{algo}, fresh", color, "-", log=True)
    a.set(title="Pendulum: KL to the start of the update, per epoch", xlabel="epoch of the update", ylabel="approx. KL (nats), median and quartiles")
    b.set(title="Pendulum, esspo: the pull the loss saw vs the whole batch's", xlabel="epoch of the update", ylabel="KL weight 1 - e")
    c.set(title=f"Pendulum: ratios outside [{1 - BAND:.1f}, {1 + BAND:.1f}] after each epoch", xlabel="epoch of the update", ylabel="fraction of the batch")
    d.set(title="Pendulum: the Gaussian's standard deviation", xlabel="environment steps", ylabel="policy std (mean over seeds)")
    e.set(title="Pendulum, fresh data: rollout return", xlabel="environment steps", ylabel="mean episode return (mean over seeds)")
    f.set(title="CartPole, fresh data: KL to the start of the update", xlabel="epoch of the update (20 per update)", ylabel="approx. KL (nats)")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle("Inside an update on fresh data: the ESS objective moves an order of magnitude further than PPO (traces, seeds 0-2; the two variants were traced after their registration)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_diagnosis(traces_root: str | Path, out: str | Path) -> pd.DataFrame:
    traces = load_traces(traces_root)
    table = summary(traces)
    out = Path(out)
    report_folder(out)
    atomic_write_text(out / "diagnosis.csv", table.to_csv(index=False, float_format="%.6g", lineterminator="\n"))
    atomic_write_text(out / "diagnosis.md", diagnosis_markdown(traces, table))
    diagnosis_figure(traces, out / "diagnosis.png")
    return table


# -- the results: the pre-registered variants' verdicts ----------------------------------------------
MADE_BY_RESULTS = "`make bench-fresh-data` (`make fresh-data-from-table` rebuilds it from the committed `per_run.csv`)"
ORIGINAL = "esspo"
VARIANTS: tuple[str, ...] = ("esspo-batch-ess", "esspo-forward-kl")
DIAGNOSIS_ENVS: tuple[str, ...] = ("Pendulum-v1", "CartPole-v1", "Acrobot-v1")
HELDOUT_ENVS: tuple[str, ...] = ("LunarLander-v3", "LunarLanderContinuous-v3", "MountainCar-v0", "Breakout-MinAtar")
CONTINUOUS_HELDOUT = "LunarLanderContinuous-v3"
FRESH = "lag0_noise0_replay0"
LAG16 = "lag16_noise0_replay0"
README_BEGIN = "<!-- results:fresh-data:begin (generated by `make fresh-data-report` / `make fresh-data-from-table`; do not edit by hand) -->"
README_END = "<!-- results:fresh-data:end -->"


#: the pre-registered grid: (environments, conditions) x every arm x seeds 0-4
PLANNED: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (DIAGNOSIS_ENVS, (FRESH, LAG16, "lag0_noise0_replay0_T1.2")),
    (("LunarLander-v3", "LunarLanderContinuous-v3"), (FRESH, LAG16)),
    (("MountainCar-v0", "Breakout-MinAtar"), (FRESH,)),
)
ARMS: tuple[str, ...] = (ORIGINAL, *VARIANTS, "ppo")
SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)


def not_run(table: pd.DataFrame) -> list[str]:
    """The cells of the pre-registered grid with fewer runs than seeds (failed runs count as run)."""
    have = table.groupby(["env", "condition", "algo"])["seed"].nunique().to_dict()
    missing = []
    for envs, conditions in PLANNED:
        for env in envs:
            for condition in conditions:
                for algo in ARMS:
                    n = have.get((env, condition, algo), 0)
                    if n < len(SEEDS):
                        missing.append(f"{env}, {verdict_condition(condition)}, `{algo}`: {n} of {len(SEEDS)} seeds")
    return missing


#: what the pre-registration's "a tie" reads as under the calibrated rule: no significant difference
#: (the rule of its time called every such difference a tie); "equivalent" is the stronger claim
TIE = ("equivalent", "inconclusive", "tie")


def registered(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its verdicts under the rule in force when the predictions were registered."""
    return frame.assign(verdict=frame["previous"]) if len(frame) else frame


def _verdict_of(tasks: pd.DataFrame, env: str, condition: str, algo: str) -> pd.Series | None:
    hit = tasks[(tasks["env"] == env) & (tasks["condition"] == condition) & (tasks["algo"] == algo)]
    return None if hit.empty else hit.iloc[0]


def _agg_of(agg: pd.DataFrame, condition: str, algo: str) -> pd.Series | None:
    if agg.empty:
        return None
    hit = agg[(agg["condition"] == condition) & (agg["algo"] == algo)]
    return None if hit.empty else hit.iloc[0]


def _diff(row: pd.Series | None, digits: int = 2) -> str:
    if row is None or np.isnan(row["diff"]):
        return "not run"
    return f"{row['verdict']} ({ci_text(row['diff'], row['diff_low'], row['diff_high'], f'+.{digits}f')})"


def _agg_text(row: pd.Series | None) -> str:
    if row is None:
        return "not run"
    return f"{row['verdict']} ({ci_text(row['mean_diff'], row['mean_low'], row['mean_high'], '+.3f')}; IQM {ci_text(row['iqm_diff'], row['iqm_low'], row['iqm_high'], '+.3f')})"


def _held(ok: bool | None) -> str:
    return "not run" if ok is None else "held" if ok else "**failed**"


def _all_ties(cells: pd.DataFrame) -> tuple[str, str]:
    """(what happened, held / failed / not run) of a prediction that every cell is a tie."""
    not_tie = cells[~cells["verdict"].isin(TIE)]
    named = "; ".join(f"{r.env} {verdict_condition(r.condition)} {r.verdict}" for r in not_tie.itertuples())
    return f"{len(cells) - len(not_tie)} of {len(cells)} ties" + (f": not ties: {named}" if named else ""), _held(None if cells.empty else not_tie.empty)


def prediction_checks(tasks_vs_esspo: pd.DataFrame, tasks_vs_ppo: pd.DataFrame, diagnosis: pd.DataFrame | None) -> list[tuple[str, str, str, str]]:
    """(id, what was predicted, what happened, held / failed) for every pre-registered prediction."""
    checks: list[tuple[str, str, str, str]] = []

    def trace(algo: str) -> pd.Series | None:
        if diagnosis is None:
            return None
        return _row(diagnosis, "Pendulum-v1", algo, "fresh")

    t = trace("esspo-batch-ess")
    checks.append((
        "P1.1", "esspo-batch-ess, Pendulum fresh trace: pull seen >= 0.25 and step per update >= 0.10 nats",
        "not traced" if t is None else f"pull seen {t.kl_weight_seen:.3f}, step {t.kl_last_epoch_median:.3f} nats",
        _held(None if t is None else bool(t.kl_weight_seen >= 0.25 and t.kl_last_epoch_median >= 0.10)),
    ))
    vs_ppo = _verdict_of(tasks_vs_ppo, "Pendulum-v1", FRESH, "esspo-batch-ess")
    vs_orig = _verdict_of(tasks_vs_esspo, "Pendulum-v1", FRESH, "esspo-batch-ess")
    checks.append((
        "P1.2a", "esspo-batch-ess, Pendulum fresh: a loss against ppo, a tie with esspo",
        f"against ppo {_diff(vs_ppo)}; against esspo {_diff(vs_orig)}",
        _held(None if vs_ppo is None or vs_orig is None else bool(vs_ppo["verdict"] == "loss" and vs_orig["verdict"] in TIE)),
    ))
    others = tasks_vs_esspo[(tasks_vs_esspo["algo"] == "esspo-batch-ess") & ~((tasks_vs_esspo["env"] == "Pendulum-v1") & (tasks_vs_esspo["condition"] == FRESH))]
    checks.append(("P1.2b", "esspo-batch-ess: a tie with esspo on every other task and condition", *_all_ties(others)))
    t = trace("esspo-forward-kl")
    checks.append((
        "P2.1", "esspo-forward-kl, Pendulum fresh trace: standard deviation at the last update >= 0.25",
        "not traced" if t is None else f"{t.policy_std_final:.2f}",
        _held(None if t is None else bool(t.policy_std_final >= 0.25)),
    ))
    vs_orig = _verdict_of(tasks_vs_esspo, "Pendulum-v1", FRESH, "esspo-forward-kl")
    checks.append((
        "P2.2a", "esspo-forward-kl, Pendulum fresh: a win against esspo",
        f"against esspo {_diff(vs_orig)}", _held(None if vs_orig is None else bool(vs_orig["verdict"] == "win")),
    ))
    vs_ppo = _verdict_of(tasks_vs_ppo, "Pendulum-v1", FRESH, "esspo-forward-kl")
    orig_ppo = _verdict_of(tasks_vs_ppo, "Pendulum-v1", FRESH, ORIGINAL)
    ok = None
    if vs_ppo is not None and orig_ppo is not None:
        ok = bool(vs_ppo["verdict"] != "loss" or abs(vs_ppo["diff"]) <= 0.5 * abs(orig_ppo["diff"]))
    checks.append((
        "P2.2b", "esspo-forward-kl, Pendulum fresh, against ppo: a tie, or a loss at most half of esspo's",
        f"esspo-forward-kl {_diff(vs_ppo)}; esspo {_diff(orig_ppo)}", _held(ok),
    ))
    cont = _verdict_of(tasks_vs_esspo, CONTINUOUS_HELDOUT, FRESH, "esspo-forward-kl")
    checks.append((
        "P2.2c", f"esspo-forward-kl, {CONTINUOUS_HELDOUT} fresh (held out): a win or a tie against esspo",
        f"against esspo {_diff(cont)}", _held(None if cont is None else bool(cont["verdict"] == "win" or cont["verdict"] in TIE)),
    ))
    discrete = tasks_vs_esspo[(tasks_vs_esspo["algo"] == "esspo-forward-kl") & ~tasks_vs_esspo["env"].isin(["Pendulum-v1", CONTINUOUS_HELDOUT])]
    checks.append(("P2.2d", "esspo-forward-kl: a tie with esspo on the discrete tasks (every condition)", *_all_ties(discrete)))
    stale = _verdict_of(tasks_vs_esspo, "Pendulum-v1", LAG16, "esspo-forward-kl")
    checks.append((
        "P2.2e", "esspo-forward-kl, Pendulum lag 16: a tie with esspo",
        f"against esspo {_diff(stale)}", _held(None if stale is None else bool(stale["verdict"] in TIE)),
    ))
    return checks


def headline(tasks_vs_esspo: pd.DataFrame, agg_vs_esspo: pd.DataFrame, variant: str) -> tuple[str, str]:
    """The pre-registered headline rule: on fresh data over *every* held-out task, the aggregate
    verdict against esspo is a win and no held-out task is lost to esspo. Returns ``("fix" | "not a
    fix" | "undecided", text)``: undecided when a held-out task was not run for the variant and the
    tasks that were run leave the rule open (a loss decides it even then)."""
    agg = _agg_of(agg_vs_esspo, FRESH, variant)
    held_out = tasks_vs_esspo[(tasks_vs_esspo["algo"] == variant) & (tasks_vs_esspo["condition"] == FRESH) & tasks_vs_esspo["env"].isin(HELDOUT_ENVS)]
    losses = sorted(held_out[held_out["verdict"] == "loss"]["env"])
    absent = [e for e in HELDOUT_ENVS if e not in set(held_out["env"])]
    if losses or (agg is not None and not absent and agg["verdict"] != "win"):
        outcome = "not a fix"
    elif absent or agg is None:
        outcome = "undecided"
    else:
        outcome = "fix"
    text = (
        f"aggregate against esspo on fresh held-out data: {_agg_text(agg)}; held-out tasks lost to esspo: {', '.join(losses) or 'none'}"
        + (f"; held-out tasks not run: {', '.join(absent)}" if absent else "")
    )
    return outcome, text


def results_markdown(table: pd.DataFrame, diagnosis: pd.DataFrame | None, seed: int = 0) -> tuple[str, str]:
    """``(verdicts.md, README block)`` of the pre-registered test."""
    parts: dict[str, dict[str, tuple[pd.DataFrame, pd.DataFrame]]] = {}
    sections = []
    for name, envs in (("held-out tasks", HELDOUT_ENVS), ("diagnosis tasks, the paper's conditions", DIAGNOSIS_ENVS)):
        sub = table[table["env"].isin(envs)]
        if sub.empty:
            continue
        for baseline in (ORIGINAL, "ppo"):
            tasks = per_task(sub, baseline, seed)
            agg = aggregates(sub, tasks, baseline, seed)
            parts.setdefault(baseline, {})[name] = (tasks, agg)
            body = verdicts_markdown(sub, tasks, agg, baseline, title=f"{name.capitalize()}: against {baseline}", made_by=MADE_BY_RESULTS)
            sections.append(shift_headings(body, 1))
    tasks_e = pd.concat([t for t, _ in parts.get(ORIGINAL, {}).values()], ignore_index=True) if ORIGINAL in parts else pd.DataFrame()
    tasks_p = pd.concat([t for t, _ in parts.get("ppo", {}).values()], ignore_index=True) if "ppo" in parts else pd.DataFrame()
    agg_held_e = parts.get(ORIGINAL, {}).get("held-out tasks", (None, pd.DataFrame()))[1]
    agg_held_p = parts.get("ppo", {}).get("held-out tasks", (None, pd.DataFrame()))[1]
    checks = prediction_checks(tasks_e, tasks_p, diagnosis) if not tasks_e.empty else []
    then = prediction_checks(registered(tasks_e), registered(tasks_p), diagnosis) if not tasks_e.empty else []
    checks = [(*c, t[3]) for c, t in zip(checks, then)]
    missing = not_run(table)
    lines = [
        "# Why the ESS objective loses on fresh data: the pre-registered variants, tested",
        "",
        f"Generated by {MADE_BY_RESULTS} from {len(table)} runs ({int((table['status'] == 'failed').sum())} failed, scored at the random score). "
        "The variants, their formulas and these predictions were committed before any of their runs: "
        "[`preregistration.md`](preregistration.md). The diagnosis they follow from: [`diagnosis.md`](diagnosis.md).",
        "",
        "The verdicts follow the calibrated rule (Welch's t, Holm within each verdict table below, equivalence within ±0.1 "
        "normalized score; [`calibration.md`](../calibration.md)); a prediction of \"a tie\", written under the rule of its time, "
        "holds where the verdict is equivalent or inconclusive (no significant difference).",
        "",
        "## The headline rule",
        "",
        "A variant is a fix only if, on fresh data over the held-out tasks, its aggregate verdict against `esspo` is a win and it loses no held-out task to `esspo`. "
        "Where a held-out task was not run for a variant, the rule is undecided unless the tasks that were run already decide it (a loss does).",
        "",
    ]
    block = ["| variant | held-out, fresh: against esspo | held-out, fresh: against ppo | a fix by the pre-registered rule? | under the verdict rule registered with it |", "|:---|:---|:---|:---|:---|"]
    for variant in VARIANTS:
        if variant not in set(table["algo"]):
            continue
        outcome, text = headline(tasks_e, agg_held_e, variant)
        outcome_then = headline(registered(tasks_e), registered(agg_held_e), variant)[0]
        said = {
            "fix": "a fix",
            "not a fix": "not a fix: it does not beat the original on the held-out tasks",
            "undecided": "undecided: not every held-out task was run, and those run leave the rule open",
        }[outcome]
        lines.append(f"- `{variant}`: **{said}**; {text}. Under the rule registered with the predictions: {outcome_then}.")
        answers = {"fix": "yes", "not a fix": "no", "undecided": "undecided (held-out tasks not run)"}
        block.append(f"| `{variant}` | {_agg_text(_agg_of(agg_held_e, FRESH, variant))} | {_agg_text(_agg_of(agg_held_p, FRESH, variant))} | {answers[outcome]} | {answers[outcome_then]} |")
    block.append(f"| `esspo` (the original) | (baseline) | {_agg_text(_agg_of(agg_held_p, FRESH, ORIGINAL))} | | |")
    lines += ["", "## Cells of the pre-registered grid not run", ""]
    lines += [f"- {m}" for m in missing] if missing else ["None: every cell has its 5 seeds."]
    lines += ["", "## The predictions, checked", "", "| prediction | what was predicted | what happened (calibrated rule) | calibrated rule | rule registered with it |", "|:---|:---|:---|:---|:---|"]
    lines += [f"| {pid} | {what} | {happened} | {held} | {then_} |" for pid, what, happened, held, then_ in checks]
    block += ["", f"Cells of the pre-registered grid not run: {len(missing)}" + (f" ({'; '.join(missing)})." if missing else ".")]
    block += ["", "| prediction | what happened (calibrated rule) | calibrated rule | rule registered with it |", "|:---|:---|:---|:---|"]
    block += [f"| {pid}: {what} | {happened} | {held} | {then_} |" for pid, what, happened, held, then_ in checks]
    lines += ["", *sections]
    return "\n".join(lines).rstrip("\n") + "\n", "\n".join(block)


def write_results(table: pd.DataFrame, out: str | Path, readme: str | Path | None = None, diagnosis: str | Path | None = None) -> Path:
    out = Path(out)
    report_folder(out)
    diag_path = Path(diagnosis) if diagnosis else out / "diagnosis.csv"
    diag = pd.read_csv(diag_path) if diag_path.exists() else None
    report, block = results_markdown(table, diag)
    atomic_write_text(out / "verdicts.md", report)
    if readme:
        path = Path(readme)
        atomic_write_text(path, replace_block(path.read_text(), README_BEGIN, README_END, block, "fresh-data results"))
    return out / "verdicts.md"


PER_RUN_NAME = "per_run.csv"


def results_from_runs(roots: Sequence[str | Path], out: str | Path) -> pd.DataFrame:
    """The per-run table of the runs under ``roots``, written to ``<out>/per_run.csv``, read back."""
    missing = [str(r) for r in roots if not Path(r).is_dir()]
    if missing:
        raise FileNotFoundError(f"no run folders at {', '.join(missing)} (run `make bench-fresh-data`)")
    table = per_run_table(*roots)
    out = Path(out)
    report_folder(out)
    atomic_write_text(out / PER_RUN_NAME, table.to_csv(index=False, lineterminator="\n"))
    return read_table(out / PER_RUN_NAME)


def read_table(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no per-run table at {path}")
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adaptive_po.analysis.reports.fresh_data", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    diag = sub.add_parser("diagnosis", help="the diagnosis report and figure from the traces")
    diag.add_argument("--traces", required=True)
    diag.add_argument("--out", required=True)
    res = sub.add_parser("results", help="the pre-registered variants' verdicts (and the README block)")
    source = res.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", nargs="+", help="run roots (runs/fresh-data runs/fresh-data-heldout)")
    source.add_argument("--table", help="a per-run table written before (docs/results/fresh-data/per_run.csv)")
    res.add_argument("--out", required=True)
    res.add_argument("--readme", help="refresh this README's results:fresh-data block")
    res.add_argument("--diagnosis", help="the diagnosis summary (default: <out>/diagnosis.csv)")
    args = parser.parse_args(argv)
    try:
        if args.command == "diagnosis":
            write_diagnosis(args.traces, args.out)
            print(f"wrote {args.out}/diagnosis.md, diagnosis.csv, diagnosis.png")
        else:
            table = results_from_runs(args.runs, args.out) if args.runs else read_table(args.table)
            path = write_results(table, args.out, args.readme, args.diagnosis)
            print(f"wrote {path}" + (f" and the README block of {args.readme}" if args.readme else ""))
    except (FileNotFoundError, ValueError) as err:
        print(f"python -m adaptive_po.analysis.reports.fresh_data {args.command}: error: {err}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
