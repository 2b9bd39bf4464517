"""Issue 21: why the ESS objective loses on fresh data.

Two parts, each rebuilt by a make target:

* ``diagnosis``: reads the per-epoch traces that ``adaptive-po trace`` wrote
  (``<traces>/<env>/<algo>/<condition>/seed-<n>.csv``, columns of
  :data:`adaptive_po.harness.trace.TRACE_COLUMNS`) and writes ``diagnosis.md``, ``diagnosis.csv``
  (one summary row per env, objective and condition) and ``diagnosis.png``.
* ``results``: the verdicts of the pre-registered variants (``python -m analysis.fresh_data
  results``): per task, each arm against the original ``esspo`` and against ``ppo``, through
  :mod:`analysis.verdicts`.

This module reads CSV files only; of the package it imports the torch-free contract module alone.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from adaptive_po.harness.contract import atomic_write_text  # torch-free: the run-folder contract

MADE_BY_DIAGNOSIS = "`make fresh-data-diagnosis` (`python -m analysis.fresh_data diagnosis --traces docs/results/fresh-data/trace --out docs/results/fresh-data`)"
#: the trace's reference band (PPO's default clip range), as in adaptive_po.harness.trace.BAND
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
def _quartiles(values: pd.Series) -> str:
    q1, q2, q3 = np.nanpercentile(values.to_numpy(float), [25, 50, 75])
    return f"{q2:.3f} [{q1:.3f}, {q3:.3f}]"


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
    fig.suptitle("Inside an update on fresh data: the ESS objective moves an order of magnitude further than PPO (traces, seeds 0-2)")
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
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "diagnosis.csv", table.to_csv(index=False, float_format="%.6g", lineterminator="\n"))
    atomic_write_text(out / "diagnosis.md", diagnosis_markdown(traces, table))
    diagnosis_figure(traces, out / "diagnosis.png")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.fresh_data", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    diag = sub.add_parser("diagnosis", help="the diagnosis report and figure from the traces")
    diag.add_argument("--traces", required=True)
    diag.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "diagnosis":
        write_diagnosis(args.traces, args.out)
        print(f"wrote {args.out}/diagnosis.md, diagnosis.csv, diagnosis.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
