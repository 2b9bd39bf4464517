"""PPO on LunarLander-v3 at policy lags 0-4: what differs besides the actor's age (docs/results/lunarlander-lag.md).

Trains populations with the bench's own code (:func:`adaptive_po.bench.population_engine.execute_population`,
the Zoo settings of the default envs folder's ``LunarLander-v3.yaml``) into ordinary run folders, and records on the side:

* per update and member, on the update's own rollout states: the entropy of the behaviour policy
  (the distribution the data was sampled from) and of the learner before and after the update, the
  KL from the learner to the behaviour policy at the start of the update, the fraction of samples
  already outside PPO's clip range at the start, and the fraction whose PPO gradient is zero at the
  start (``r > 1 + eps`` with ``A > 0``, or ``r < 1 - eps`` with ``A < 0``); the update's own
  statistics (clip fraction, approx KL) are in progress.csv;
* at every evaluation point, besides the bench's deterministic evaluation, a *stochastic* evaluation
  of the learner (actions sampled from its policy), with episode lengths;
* at the end, deterministic and stochastic evaluations of the learner and of the acting (k-old)
  policy, with episode lengths.

Parts (each one population, or one per hyper-parameter variant):

``main``   lags 0, 1, 2, 4 and lag 0 with logit noise sigma = 1 (more exploratory data), 200k steps;
``ctrl``   lag 0 with learning rate 1e-4 (a slower learner), and lag 0 with ent_coef 0.05 (a
           higher-entropy learner), 200k steps: one population each (hyper-parameters are shared
           within a population, so each variant gets its own envs folder, written by this script);
``long``   lags 0 and 4 at 400k steps.

Usage (OMP_NUM_THREADS=1; ``--part`` may be repeated; ``report`` only aggregates what is there)::

    .venv/bin/python benchmarks/lunarlander_lag.py --part main --seeds 5
    .venv/bin/python benchmarks/lunarlander_lag.py --part ctrl --part long --seeds 5 --long-seeds 3
    .venv/bin/python benchmarks/lunarlander_lag.py --part report
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adaptive_po import distributions as D  # noqa: E402
from adaptive_po import contract  # noqa: E402
from adaptive_po.bench.population_engine import PopulationObserver, execute_population  # noqa: E402
from adaptive_po.bench.run_folder import RunSpec
from adaptive_po.dials import DataDials  # noqa: E402
from adaptive_po.population import PopulationLearner  # noqa: E402

ENV = "LunarLander-v3"
SIDE_FILE = "lag_path_stats.json"  #: the side records, one file per run folder


# -- instrumentation ---------------------------------------------------------------------------------
def _pre_update(learner: PopulationLearner, rollout: Any) -> dict[str, np.ndarray]:
    """Statistics of the update's rollout under the behaviour policy and the learner before the update."""
    kind = learner.kind
    k, t, e = rollout.rewards.shape
    obs = rollout.observations.reshape(k, t * e, *rollout.observations.shape[3:])
    behaviour = rollout.behaviour_params.reshape(k, t * e, -1)
    actions = rollout.actions.reshape(k, t * e, *rollout.actions.shape[3:])
    with torch.no_grad():
        learner_params, _ = learner.forward(learner.params, obs)
        _, advantages, _ = learner._advantages(rollout)  # the same GAE the update will use
        adv = advantages.reshape(k, t * e)
        adv = (adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-8)
        ratio = torch.exp(D.log_prob(kind, learner_params, actions) - rollout.behaviour_log_prob.reshape(k, t * e))
        eps = float(learner.objective_arguments(1.0).get("clip_range", 0.2))
        outside = (ratio - 1.0).abs() > eps
        dead = ((ratio > 1 + eps) & (adv > 0)) | ((ratio < 1 - eps) & (adv < 0))
        return {
            "entropy_behaviour": D.entropy(kind, behaviour).mean(1).numpy(),
            "entropy_learner_start": D.entropy(kind, learner_params).mean(1).numpy(),
            "kl_learner_behaviour_start": D.kl(kind, learner_params, behaviour).mean(1).numpy(),
            "outside_clip_start": outside.double().mean(1).numpy(),
            "zero_gradient_start": dead.double().mean(1).numpy(),
        }


class _SideRecords(PopulationObserver):
    """The side records described in the module docstring, taken through the bench's observer
    and the learner's update listeners (the training loop itself is the bench's, unchanged)."""

    def __init__(self) -> None:
        self.side: list[dict[str, Any]] = []
        self._eval_generator = torch.Generator().manual_seed(12345)
        self._before: dict[str, np.ndarray] = {}

    def started(self, population: Any) -> None:
        self.side = [{"updates": [], "evaluations": [], "final": {}} for _ in population.runs]
        learner = population.learner

        def at_start(rollout: Any) -> None:
            self._before = _pre_update(learner, rollout)

        def after(rollout: Any, stats: dict[str, torch.Tensor]) -> None:
            k, t, e = rollout.rewards.shape
            obs = rollout.observations.reshape(k, t * e, *rollout.observations.shape[3:])
            with torch.no_grad():
                entropy_after = D.entropy(learner.kind, learner.forward(learner.params, obs)[0]).mean(1).numpy()
            for m in range(population.k):
                row = {"update": learner.updates_done, "timesteps": population.timesteps}
                row.update({name: float(v[m]) for name, v in self._before.items()})
                row["entropy_learner_end"] = float(entropy_after[m])
                row.update({name: float(stats[name][m]) for name in ("cap_fraction", "approx_kl", "kl_behaviour", "entropy", "ess")})
                self.side[m]["updates"].append(row)

        learner.add_update_listener(after, at_start=at_start)

    def _act(self, population: Any, params: dict[str, torch.Tensor], stochastic: bool) -> Any:
        kind = population.learner.kind

        def act(obs: torch.Tensor) -> torch.Tensor:
            dist = population.learner.forward(params, obs)[0]
            if not stochastic:
                return D.mode(kind, dist)
            draw = torch.rand if kind == "categorical" else torch.randn
            return D.sample(kind, dist, draw(D.sampling_noise_shape(kind, dist.shape), generator=self._eval_generator))

        return act

    def evaluated(self, population: Any, timesteps: int) -> None:
        returns, lengths = population.episodes(self._act(population, population.learner.params, stochastic=True))
        for m in range(population.k):
            if returns[m]:
                self.side[m]["evaluations"].append(
                    {"timesteps": int(timesteps), "stochastic_return": float(np.mean(returns[m])), "stochastic_length": float(np.mean(lengths[m]))}
                )

    def finished(self, population: Any) -> None:
        learner = population.learner
        acting = learner.acting_parameters()
        finals = {
            "learner_deterministic": population.episodes(self._act(population, learner.params, stochastic=False)),
            "actor_deterministic": population.episodes(self._act(population, acting, stochastic=False)),
            "actor_stochastic": population.episodes(self._act(population, acting, stochastic=True)),
        }
        for m, run in enumerate(population.runs):
            final = self.side[m]["final"]
            for name, (returns, lengths) in finals.items():
                if returns[m]:
                    final[f"{name}_return"] = float(np.mean(returns[m]))
                    final[f"{name}_length"] = float(np.mean(lengths[m]))
                    final[f"{name}_timeouts"] = float(np.mean(np.array(lengths[m]) >= 1000))
            final["acting_update"] = learner.acting_updates[m]
            final["updates"] = learner.updates_done
            (run.spec.run_dir / SIDE_FILE).write_text(json.dumps(self.side[m], indent=1))




# -- the parts ----------------------------------------------------------------------------------------
def _variant_envs(out: Path, name: str, **overrides: Any) -> str:
    """An envs folder whose LunarLander-v3.yaml is the Zoo one with ``overrides`` in hyperparams."""
    from adaptive_po.bench.config import get_env_config, write_env_config_copy

    source = get_env_config(ENV).hyperparams.source  # the default envs folder's file
    changes = {f"hyperparams__{key}": value for key, value in overrides.items()}
    path = write_env_config_copy(ENV, out / "envs" / name, hyperparams__source=f"{source} (a control of this benchmark: {overrides})", **changes)
    return str(path.parent)


def populations(part: str, out: Path, seeds: int, long_seeds: int) -> list[list[RunSpec]]:
    def spec(suite: str, seed: int, total: int, envs_dir: str | None = None, **dials: Any) -> RunSpec:
        return RunSpec(suite, ENV, "ppo", seed, total, out=str(out), envs_dir=envs_dir, tensorboard=False, dials=DataDials(**dials))

    if part == "main":
        members = [spec("main", s, 200_000, policy_lag=lag) for lag in (0, 1, 2, 4) for s in range(seeds)]
        members += [spec("main", s, 200_000, action_noise=1.0) for s in range(seeds)]
        return [members]
    if part == "ctrl":
        lr = _variant_envs(out, "lr1e-4", learning_rate=1e-4)
        ent = _variant_envs(out, "ent0.05", ent_coef=0.05)
        return [
            [spec("ctrl-lr1e-4", s, 200_000, envs_dir=lr) for s in range(seeds)],
            [spec("ctrl-ent0.05", s, 200_000, envs_dir=ent) for s in range(seeds)],
        ]
    if part == "long":
        return [[spec("long-400k", s, 400_000, policy_lag=lag) for lag in (0, 4) for s in range(long_seeds)]]
    raise ValueError(f"unknown part {part!r}")


# -- the report --------------------------------------------------------------------------------------
def _mean_se(values: list[float]) -> str:
    x = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(x) == 0:
        return "n/a"
    se = x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else float("nan")
    return f"{x.mean():+.1f} ± {se:.1f}"


def _mean(values: list[float], digits: int = 3) -> str:
    x = np.array(values, dtype=float)
    return f"{np.nanmean(x):.{digits}f}" if len(x) else "n/a"


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def collect(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Condition label -> one record per complete seed."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for side_path in sorted(root.glob(f"*/{ENV}/*/*/seed-*/{SIDE_FILE}")):
        folder = side_path.parent
        if not contract.is_complete(folder):
            continue
        config = json.loads((folder / contract.CONFIG_FILE).read_text())
        label = f"{config['suite']}: lag {config['policy_lag']}" + (f", noise {config['action_noise']:g}" if config["action_noise"] else "")
        record = {
            "seed": config["seed"],
            "side": json.loads(side_path.read_text()),
            "eval": _read_csv(folder / contract.EVAL_FILE),
            "progress": _read_csv(folder / contract.PROGRESS_FILE),
        }
        groups.setdefault(label, []).append(record)
    return groups


def staleness_controls(root: Path) -> list[str]:
    """Final deterministic returns of the staleness grid's LunarLander runs (if present)."""
    lines = ["| algorithm | lag | seeds | final return (mean ± SE) | learner entropy at the end |", "|:---|---:|---:|:---|---:|"]
    for algo in ("ppo", "decoupled-ppo", "esspo", "tis-pg"):
        for lag in (0, 4, 16, 64):
            folders = sorted((root / ENV / algo / f"lag{lag}_noise0_replay0").glob("seed-*"))
            finals = [float(_read_csv(f / contract.EVAL_FILE)[-1]["eval_return_mean"]) for f in folders if contract.is_complete(f)]
            ents = [float(_read_csv(f / contract.PROGRESS_FILE)[-1]["entropy"]) for f in folders if contract.is_complete(f)]
            if finals:
                lines.append(f"| {algo} | {lag} | {len(finals)} | {_mean_se(finals)} | {_mean(ents)} |")
    return lines


def report(out: Path, staleness: Path | None) -> str:
    groups = collect(out)
    lines = ["## Final evaluation (mean ± standard error over seeds; each seed's return is a mean of 10 episodes)", ""]
    lines += [
        "| condition | seeds | learner, deterministic (bench) | learner, stochastic | actor, deterministic | actor, stochastic | "
        "learner det. episode length | learner det. timeouts | learner entropy (end) |",
        "|:---|---:|:---|:---|:---|:---|---:|---:|---:|",
    ]
    for label, recs in groups.items():
        det = [float(r["eval"][-1]["eval_return_mean"]) for r in recs]
        stoch = [r["side"]["evaluations"][-1]["stochastic_return"] for r in recs]
        fin = [r["side"]["final"] for r in recs]
        lines.append(
            f"| {label} | {len(recs)} | {_mean_se(det)} | {_mean_se(stoch)} | {_mean_se([f['actor_deterministic_return'] for f in fin])} | "
            f"{_mean_se([f['actor_stochastic_return'] for f in fin])} | {_mean([f['learner_deterministic_length'] for f in fin], 0)} | "
            f"{_mean([f['learner_deterministic_timeouts'] for f in fin], 2)} | {_mean([r['side']['updates'][-1]['entropy_learner_end'] for r in recs])} |"
        )
    lines += ["", "## Over the updates (means over updates, then over seeds)", ""]
    lines += [
        "| condition | behaviour entropy | learner entropy (start of update) | KL(learner ‖ behaviour) at start | outside clip at start | "
        "zero PPO gradient at start | clip fraction (update) | approx KL (update) |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, recs in groups.items():
        def avg(name: str) -> list[float]:
            return [float(np.mean([u[name] for u in r["side"]["updates"]])) for r in recs]

        lines.append(
            f"| {label} | {_mean(avg('entropy_behaviour'))} | {_mean(avg('entropy_learner_start'))} | {_mean(avg('kl_learner_behaviour_start'), 4)} | "
            f"{_mean(avg('outside_clip_start'))} | {_mean(avg('zero_gradient_start'))} | {_mean(avg('cap_fraction'))} | {_mean(avg('approx_kl'), 4)} |"
        )
    lines += ["", "## Evaluation curves: learner deterministic / stochastic return (mean ± SE over seeds)", ""]
    for label, recs in groups.items():
        steps = [int(row["timesteps"]) for row in recs[0]["eval"]]
        cells = []
        for i, step in enumerate(steps):
            det = [float(r["eval"][i]["eval_return_mean"]) for r in recs if len(r["eval"]) > i]
            sto = [r["side"]["evaluations"][i]["stochastic_return"] for r in recs if len(r["side"]["evaluations"]) > i]
            cells.append(f"{step // 1000}k: {_mean_se(det)} / {_mean_se(sto)}")
        lines.append(f"- {label}: " + "; ".join(cells))
    lines += ["", "## Per update, lags 0 and 4 (means over seeds)", ""]
    for label, recs in groups.items():
        if not (label.startswith("main: lag 0") or label.startswith("main: lag 4")) or "noise" in label:
            continue
        lines += [f"{label}", "", "| update | behaviour entropy | learner entropy (start) | KL(learner ‖ behaviour) at start | zero PPO gradient at start | clip fraction | approx KL |", "|---:|---:|---:|---:|---:|---:|---:|"]
        for i in range(min(len(r["side"]["updates"]) for r in recs)):
            def col(name: str, i: int = i) -> float:
                return float(np.mean([r["side"]["updates"][i][name] for r in recs]))

            lines.append(
                f"| {i + 1} | {col('entropy_behaviour'):.3f} | {col('entropy_learner_start'):.3f} | {col('kl_learner_behaviour_start'):.4f} | "
                f"{col('zero_gradient_start'):.3f} | {col('cap_fraction'):.3f} | {col('approx_kl'):.4f} |"
            )
        lines.append("")
    if staleness is not None and (staleness / ENV).exists():
        lines += ["## The staleness grid's LunarLander runs (population engine, 200k steps, 5 seeds)", ""]
        lines += staleness_controls(staleness)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", action="append", choices=["main", "ctrl", "long", "report"], required=True)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--long-seeds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "runs" / "lunarlander-lag"))
    parser.add_argument("--staleness", default=str(ROOT / "runs" / "staleness"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    for part in args.part:
        if part == "report":
            continue
        for specs in populations(part, out, args.seeds, args.long_seeds):
            started = time.time()
            results = execute_population(specs, _SideRecords())
            statuses = [r["status"] for r in results]
            print(f"[{part}] {specs[0].suite}: {len(specs)} members, {statuses.count('complete')} complete, "
                  f"{statuses.count('skipped')} skipped, {statuses.count('failed')} failed, {time.time() - started:.0f} s", flush=True)
            for r in results:
                if r["status"] == "failed":
                    print("  FAILED", r["relative_dir"], r.get("error"), flush=True)
    print(report(out, Path(args.staleness) if args.staleness else None))


if __name__ == "__main__":
    main()
