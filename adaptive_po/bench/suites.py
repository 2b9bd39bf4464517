"""The benchmark tiers: which grid each ``--suite`` runs by default (each flag overrides)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from adaptive_po.bench.config import MAX_GRID_RUNS
from adaptive_po.dials import DataDials, dial_product
from adaptive_po.objectives import OBJECTIVES

#: the paper's headline data conditions ("Trust the Batch", arXiv 2605.12380): fresh data, a
#: 16-update-old actor, a sampling temperature of 1.2, and an fp8 sampler whose own log-probs are
#: recorded or whose learner's log-probs are trusted
PAPER_CONDITIONS: tuple[Mapping[str, Any], ...] = (
    {},
    {"policy_lag": 16},
    {"sampler_temperature": 1.2},
    {"sampler_precision": "fp8-e4m3"},
    {"sampler_precision": "fp8-e4m3", "behaviour_log_prob": "policy"},
)

#: shared knobs every algorithm is swept over in the sensitivity suite (factors of the Zoo values)
SHARED_VARIANTS: tuple[str, ...] = ("n_epochs=x0.25", "learning_rate=x0.5", "learning_rate=x2")


def sensitivity_variants(own: tuple[str, ...]) -> tuple[str, ...]:
    """The defaults (""), each of an algorithm's own knob settings, and each shared-knob change:
    one knob at a time away from the tuned configuration."""
    return ("", *own, *SHARED_VARIANTS)


#: each algorithm's own knob grid (the value equal to its default is the "" variant)
OWN_KNOB_VARIANTS: dict[str, tuple[str, ...]] = {
    "esspo": (),
    "ppo": ("clip_range=0.1", "clip_range=0.3", "clip_range=0.5"),
    "dapo": ("clip_range=0.1,clip_range_high=0.18", "clip_range=0.3,clip_range_high=0.38", "clip_range=0.5,clip_range_high=0.58"),
    "cispo": ("eps_high=1", "eps_high=4"),
    "spo": ("eps=0.1", "eps=0.3"),
    "kl-ppo": ("kl_target=0.003", "kl_target=0.03"),
    "r2vpo": ("variance_target=0.005", "variance_target=0.08", "dual_step=2.5", "dual_step=40"),
}


#: the five MinAtar games (Young & Tian 2019), YAML names (``adaptive_po/env_configs/<Game>-MinAtar.yaml``)
MINATAR_ENVS: tuple[str, ...] = ("Breakout-MinAtar", "Asterix-MinAtar", "Freeway-MinAtar", "Seaquest-MinAtar", "SpaceInvaders-MinAtar")


#: the Atari-5 subset (Aitchison, Sweetser & Hutter 2022): five games whose scores predict the
#: median human-normalized score over the 57 games
ATARI5_ENVS: tuple[str, ...] = ("BattleZone-v5", "DoubleDunk-v5", "NameThisGame-v5", "Phoenix-v5", "Qbert-v5")


#: the fresh-data test's arms: the ESS objective, its two pre-registered variants, and PPO
FRESH_DATA_ALGOS: tuple[str, ...] = ("esspo", "esspo-batch-ess", "esspo-forward-kl", "ppo")
#: the fresh-data test's held-out tasks: two discrete and one continuous classic task and a MinAtar game
FRESH_DATA_HELDOUT_ENVS: tuple[str, ...] = ("LunarLander-v3", "LunarLanderContinuous-v3", "MountainCar-v0", "Breakout-MinAtar")


@dataclass(frozen=True)
class Suite:
    name: str
    envs: tuple[str, ...]
    algos: tuple[str, ...]
    seeds: int
    lags: tuple[int, ...]
    noise: tuple[float, ...]
    replay: tuple[int, ...]
    description: str
    #: explicit data conditions (dicts of the collector's dials) instead of lags x noise x replay
    conditions: tuple[Mapping[str, Any], ...] | None = None
    #: per algorithm, the knob variants to run (adaptive_po.bench.variants); None: defaults only
    variants: Mapping[str, tuple[str, ...]] | None = None
    #: also write the paper analysis (analysis.reports.paper) into <suite>/paper
    paper_report: bool = False

    def data_conditions(self, **levels: Sequence[Any] | None) -> list[DataDials]:
        """The suite's data conditions, or those of the dial levels given (``policy_lag=[0, 4]``;
        None: not given). Its explicit conditions apply unless a dial is given; otherwise the
        product of the given levels and the suite's lags, noise and replay, at most
        :data:`~adaptive_po.bench.config.MAX_GRID_RUNS` of them."""
        if self.conditions and all(v is None for v in levels.values()):
            return [DataDials.from_condition(c) for c in self.conditions]
        axes = {"policy_lag": self.lags, "action_noise": self.noise, "replay": self.replay}
        return dial_product(limit=MAX_GRID_RUNS, **{**axes, **{k: v for k, v in levels.items() if v is not None}})


SUITES: dict[str, Suite] = {
    "quick": Suite(
        "quick",
        # tasks where the arms can differ at this budget: CartPole and Acrobot sit at or near the
        # ceiling for every PPO-family arm (docs/results/staleness/verdicts.md)
        envs=("Pendulum-v1", "LunarLander-v3"),
        algos=("esspo", "ppo"),
        seeds=5,
        lags=(0, 16),
        noise=(0.0,),
        replay=(0,),
        description="the question in minutes on 2 CPU cores: ESS objective vs tuned PPO, fresh vs 16-update-old actors, on two tasks that are not saturated (Pendulum, LunarLander)",
    ),
    "classic": Suite(
        "classic",
        envs=("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3", "Pendulum-v1"),
        algos=tuple(OBJECTIVES),
        seeds=5,
        lags=(0, 1, 2, 4, 8),
        noise=(0.0, 0.5),
        replay=(0,),
        description="the full classic-control grid (hours on a laptop; meant for bigger machines or a Ray cluster)",
    ),
    "staleness": Suite(
        "staleness",
        envs=("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "LunarLander-v3"),
        algos=("esspo", "ppo", "decoupled-ppo", "tis-pg"),
        seeds=5,
        lags=(0, 4, 16, 64),
        noise=(0.0,),
        replay=(0,),
        description="the staleness question on four classic tasks: four objectives x policy lags 0-64 (the dry run gives its size and time)",
    ),
    "paper": Suite(
        "paper",
        envs=("CartPole-v1", "Acrobot-v1", "Pendulum-v1"),
        algos=("esspo", "ppo", "decoupled-ppo", "tis-pg", "cispo", "dapo", "spo", "kl-ppo", "vtrace", "p3o"),
        seeds=5,
        lags=(0,),
        noise=(0.0,),
        replay=(0,),
        description="the paper's conditions: every objective at its default knobs, fresh vs lag 16 vs T = 1.2 vs an fp8 sampler (own or learner log-probs)",
        conditions=PAPER_CONDITIONS,
        paper_report=True,
    ),
    "sensitivity": Suite(
        "sensitivity",
        envs=("CartPole-v1", "Acrobot-v1"),
        algos=tuple(OWN_KNOB_VARIANTS),
        seeds=3,
        lags=(0,),
        noise=(0.0,),
        replay=(0,),
        description="the tuning tax: each algorithm over its own knobs and the shared ones, one at a time, under fresh, lag-16 and T = 1.2 data",
        # fp8 is left out: on these small MLPs it induces almost no mismatch (fresh-batch ESS
        # 0.9998 on a trained CartPole policy, docs/results/sampler_mismatch.md)
        conditions=PAPER_CONDITIONS[:3],
        variants={algo: sensitivity_variants(own) for algo, own in OWN_KNOB_VARIANTS.items()},
        paper_report=True,
    ),
    "tuning": Suite(
        "tuning",
        # the classic tasks that are not saturated at their budget (CartPole is; Acrobot is at lag 0
        # and lag 4, docs/results/staleness/verdicts.md, and left out to fit 2 cores)
        envs=("Pendulum-v1", "LunarLander-v3"),
        algos=("esspo", "ppo"),
        seeds=5,
        lags=(0, 16),
        noise=(0.0,),
        replay=(0,),
        description="equal tuning, held-out selection (`adaptive-po tune`): each objective's Optuna search over learning rate, epochs, batch size and its own knobs on search seeds 100-101, fresh and lag-16 data, Pendulum and LunarLander; default and selected configurations scored on seeds 0-4",
    ),
    "minatar": Suite(
        "minatar",
        envs=MINATAR_ENVS,
        algos=("esspo", "ppo", "decoupled-ppo"),
        seeds=5,
        lags=(0, 4),
        noise=(0.0,),
        replay=(0,),
        description="Atari-class evidence on 2 CPU cores: the five MinAtar games with the MinAtar CNN, fresh vs 4-update-old actors (needs the minatar extra; the dry run gives its time)",
    ),
    # the fresh-data test: why the ESS objective loses on fresh data. The pre-registered variants against the
    # original and PPO (docs/results/README.md, "Why the ESS objective loses on fresh data"): first the tasks of the
    # diagnosis under the paper's conditions (fp8 left out: it induces almost no mismatch on these
    # MLPs, docs/results/sampler_mismatch.md), then tasks that played no part in the diagnosis
    "fresh-data": Suite(
        "fresh-data",
        envs=("Pendulum-v1", "CartPole-v1", "Acrobot-v1"),
        algos=FRESH_DATA_ALGOS,
        seeds=5,
        lags=(0,),
        noise=(0.0,),
        replay=(0,),
        description="why the ESS objective loses on fresh data, on the tasks of the diagnosis: esspo, its two pre-registered variants and ppo x fresh, lag 16, T = 1.2 x 5 seeds",
        conditions=PAPER_CONDITIONS[:3],
    ),
    "fresh-data-heldout": Suite(
        "fresh-data-heldout",
        envs=FRESH_DATA_HELDOUT_ENVS,
        algos=FRESH_DATA_ALGOS,
        seeds=5,
        lags=(0,),
        noise=(0.0,),
        replay=(0,),
        description="why the ESS objective loses on fresh data, on held-out tasks (no part in the diagnosis): esspo, its two variants and ppo on fresh data x 5 seeds (make bench-fresh-data adds lag 16 on the LunarLanders)",
    ),
    "minatar-reference": Suite(
        "minatar-reference",
        envs=("Breakout-MinAtar", "Asterix-MinAtar", "Freeway-MinAtar", "SpaceInvaders-MinAtar"),
        algos=("ppo",),
        seeds=5,
        lags=(0,),
        noise=(0.0,),
        replay=(0,),
        description="the MinAtar reference check: our PPO at 320k steps, the step at which gymnax-blines logged its published PPO (Seaquest has none)",
    ),
    "atari": Suite(
        "atari",
        envs=ATARI5_ENVS,
        algos=("esspo", "ppo", "decoupled-ppo"),
        seeds=3,
        lags=(0, 4),
        noise=(0.0,),
        replay=(0,),
        description="the Atari-5 games at 10M frames with NatureCNN populations, fresh vs 4-update-old actors: sized for one GPU with 16 cores (the dry run prints the estimate)",
    ),
    "atari-smoke": Suite(
        "atari-smoke",
        envs=("Phoenix-v5",),
        algos=("esspo", "ppo"),
        seeds=1,
        lags=(0, 4),
        noise=(0.0,),
        replay=(0,),
        description="what `make bench-atari` runs without a GPU: one Atari-5 game, 4,096 steps per run, the whole path (CNN populations, uint8 frames, report) in minutes",
    ),
}


def get_suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        from adaptive_po.bench.config import did_you_mean

        raise ValueError(f"unknown suite {name!r};{did_you_mean(name, SUITES)} available: {sorted(SUITES)}") from None
