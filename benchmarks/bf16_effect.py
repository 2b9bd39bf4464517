"""What the ``precision=bf16`` learner does to results: returns, the lag-0 numerics mismatch, speed.

The population engine's learner can run its network under bfloat16 autocast (the variant
``precision=bf16``: parameters, Adam and the objective stay float32; the forward passes when acting,
evaluating and updating run in bf16). It is never the default; this script measures what choosing
it changes, on the cells where the step is bound by its matrix products (docs/results/perf.md):

* **returns**: CartPole-v1 and Acrobot-v1 (100k steps each), ``esspo`` and ``ppo``, lag 0 and lag 8,
  10 seeds, float32 against bf16 (``runs/bf16``, resumable: the bench's own sweep). Per cell, the mean
  final return of each precision and their difference (bf16 minus fp32, normalized by the
  environment's random and solved scores) with its Welch 95% interval and the verdict of the
  project's protocol (equivalence margin 0.1, Holm over the cells);
* **the lag-0 mismatch**: at lag 0 the learner's first ratio pi_theta / pi_b should be exactly 1;
  in bf16 the acting forward pass (a rollout's shapes) and the learner's (the update's) round
  differently. Its size at initialization: the largest |log ratio| and 1 - ESS of one batch;
* **speed**: each population's wall seconds per run, fp32 against bf16 (same sweep, so read as a
  rough ratio; ``make perf`` times the step itself).

Writes ``docs/results/bf16.md`` (``--no-write``: print only).

    python benchmarks/bf16_effect.py                  # about 25 core-minutes on the project's CPU machine
    python benchmarks/bf16_effect.py --seeds 3 --envs CartPole-v1 --no-write
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from adaptive_po.analysis import load_runs  # noqa: E402
from adaptive_po.analysis.hypothesis import MARGIN, holm, verdict, welch  # noqa: E402
from adaptive_po.contract import atomic_write_text  # noqa: E402

ENVS = {"CartPole-v1": 100_000, "Acrobot-v1": 100_000}
ALGOS = ("esspo", "ppo")
LAGS = (0, 8)
BF16 = "precision=bf16"
OUT = ROOT / "docs" / "results" / "bf16.md"


def specs(envs: list[str], seeds: int, out: str, timesteps: int | None = None) -> list:
    from adaptive_po.bench.run_folder import RunSpec
    from adaptive_po.dials import DataDials

    return [
        RunSpec("bf16", env, algo, seed, timesteps or ENVS[env], dials=DataDials(policy_lag=lag), variant=variant, out=out, device="cpu", tensorboard=False)
        for env in envs for algo in ALGOS for variant in ("", BF16) for lag in LAGS for seed in range(seeds)
    ]


def lag0_mismatch(env: str, precision: str) -> tuple[float, float]:
    """At lag 0, before any update (10 members at initialization with the action head at gain 1,
    compiled as the bench runs them):
    the largest ``1 - ESS`` and analytic KL(pi_theta || pi_b) that the first minibatch step sees, with
    the behaviour recorded by acting one step at a time (``(K, n_envs)`` observations, as the
    collector acts) and the learner's forward pass in the update's shapes. Both are 0 where the two
    forward passes round alike."""
    import math

    import roofline
    import torch

    from adaptive_po import distributions as D
    from adaptive_po.population import StackedRollout, _StackedFace
    from adaptive_po.update import replay_information, training_data

    learner, _, _, _, hp = roofline.build(env, 10, True, precision)
    # SB3 initializes the action head with gain 0.01, so initial logits are ~0 and round alike; a
    # trained policy's are not: the head at the hidden layers' gain (x100) stands in for one
    with torch.no_grad():
        for name in learner.params:
            if ".action_net." in name:
                learner.params[name].mul_(100.0)
                learner.acting_parameters()[name].mul_(100.0)
    k, e = learner.k, hp.n_envs
    t = max(1, math.ceil(hp.batch_size / e))
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(k, t, e, *learner.observation_space.shape, generator=g)
    acted = [learner.act(obs[:, step]) for step in range(t)]  # one collector step at a time
    actions, blp, params = (torch.stack([a[i] for a in acted], dim=1) for i in range(3))
    s = (k, t, e)
    rollout = StackedRollout(
        obs, actions, torch.randn(s, generator=g), torch.zeros(s), blp, params, torch.zeros(s, dtype=torch.bool),
        torch.zeros_like(obs), obs[:, 0], torch.zeros(k, e),
    )
    face = _StackedFace(learner, 0.0)  # a zero learning rate: the step measures, it does not move
    data = training_data(face, [rollout])
    data["proximal_log_prob"] = D.log_prob(learner.kind, face.dist_params(data), data["actions"]).detach()
    data["fresh"], replay_ess = replay_information(data["proximal_log_prob"], data["behaviour_log_prob"], t * e)
    minibatch = face.select(data, next(iter(face.minibatches(t * e))))
    minibatch["replay_ess"] = replay_ess
    stats, _ = face.step(minibatch, {**learner.objective_arguments(1.0), **learner.objective_state}, None)
    return float((1 - stats["ess"]).abs().max()), float(stats["kl_behaviour"].abs().max())


def report(root: Path, envs: list[str]) -> str:
    runs = load_runs(root)
    f = runs.finals
    lines = [
        "# The bf16 learner: what choosing it changes",
        "",
        f"Written by `benchmarks/bf16_effect.py` from the runs under `{root.name}/` of its results root; one machine's numbers.",
        "",
        "`precision=bf16` (a variant: its runs live in `<algo>@precision=bf16` and their `config.json` records",
        "`learner_precision`) runs the population engine's network under bfloat16 autocast when acting, evaluating",
        "and updating; parameters, Adam and the objective stay float32. Never the default.",
        "",
        f"## Final return, bf16 minus fp32 (normalized by random 0 and solved 1; equivalence margin {MARGIN}, Holm over the cells)",
        "",
        "| env | algo | lag | seeds | fp32 mean return | bf16 mean return | bf16 - fp32 (normalized) | 95% CI | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    cells, diffs = [], []
    for env in envs:
        g = f[f["env"] == env]
        rnd, solved = float(g["random_score"].iloc[0]), float(g["solved_threshold"].iloc[0])
        for algo in ALGOS:
            for lag in LAGS:
                cell = g[(g["base_algo"] == algo) & (g["policy_lag"] == lag)]
                fp32 = cell[cell["algo"] == algo]["final_eval_return_mean"].to_numpy(float)
                bf16 = cell[cell["algo"] == f"{algo}@{BF16}"]["final_eval_return_mean"].to_numpy(float)
                d = welch((bf16 - rnd) / (solved - rnd), (fp32 - rnd) / (solved - rnd))
                cells.append((env, algo, lag, len(fp32), len(bf16), fp32.mean(), bf16.mean()))
                diffs.append(d)
    p = holm([d.p_value() for d in diffs])
    p_eq = holm([d.p_equivalence(MARGIN) for d in diffs])
    for (env, algo, lag, n32, n16, m32, m16), d, pa, pe in zip(cells, diffs, p, p_eq):
        low, high = d.ci()
        word = verdict(d.estimate, pa, pe)
        word = {"win": "bf16 higher", "loss": "bf16 lower"}.get(word, word)
        lines.append(f"| {env} | {algo} | {lag} | {n32}/{n16} | {m32:.1f} | {m16:.1f} | {d.estimate:+.3f} | [{low:+.3f}, {high:+.3f}] | {word} |")
    lines += [
        "",
        "## The lag-0 numerics mismatch (initialized networks with the action head at gain 1, the first minibatch step, 10 members, compiled)",
        "",
        "| env | precision | max 1 - ESS | max KL(pi_theta, pi_b) |",
        "|---|---|---:|---:|",
    ]
    for env in envs:
        for precision in ("fp32", "bf16"):
            ess_gap, kl = lag0_mismatch(env, precision)
            lines.append(f"| {env} | {precision} | {ess_gap:.2e} | {kl:.2e} |")
    lines += [
        "",
        "## Wall seconds per run (the population's wall time over its members; one sweep, so a rough ratio)",
        "",
        "| env | algo | fp32 s per run | bf16 s per run | fp32 / bf16 |",
        "|---|---|---:|---:|---:|",
    ]
    for env in envs:
        for algo in ALGOS:
            seconds = {}
            for label in (algo, f"{algo}@{BF16}"):
                cell = f[(f["env"] == env) & (f["algo"] == label)]
                members = len(cell)
                seconds[label] = float(cell["wall_time_s"].max()) / members if members else float("nan")
            fp32, bf16 = seconds[algo], seconds[f"{algo}@{BF16}"]
            lines.append(f"| {env} | {algo} | {fp32:.1f} | {bf16:.1f} | {fp32 / bf16:.2f}x |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default=",".join(ENVS), help=f"comma-separated, of {list(ENVS)}")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--timesteps", type=int, default=None, help="every run's budget instead of the cells' (a smoke test)")
    parser.add_argument("--out", default=str(ROOT / "runs"), help="results root (the runs go into <out>/bf16)")
    parser.add_argument("--workers", type=int, default=None, help="jobs at once (default: one per core)")
    parser.add_argument("--no-write", action="store_true", help=f"print only; do not write {OUT.relative_to(ROOT)}")
    args = parser.parse_args()
    envs = [e for e in args.envs.split(",") if e]
    unknown = sorted(set(envs) - set(ENVS))
    if unknown:
        raise SystemExit(f"unknown envs {unknown}; this script measures {list(ENVS)}")
    if args.seeds < 2:
        raise SystemExit(f"--seeds must be at least 2 (a Welch interval needs two runs per arm), got {args.seeds}")
    from adaptive_po.bench.sweep import run_sweep

    result = run_sweep(specs(envs, args.seeds, args.out, args.timesteps), workers=args.workers, show_progress=False)
    if result.failed:
        raise SystemExit(f"{len(result.failed)} runs failed, e.g. {result.failed[0].get('relative_dir')}: {result.failed[0].get('error')}")
    text = report(Path(args.out) / "bf16", envs)
    print(text)
    if not args.no_write:
        atomic_write_text(OUT, text)


if __name__ == "__main__":
    main()
