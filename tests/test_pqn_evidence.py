"""What PQN's evidence runs are selected by: ``batch_scaling=abs`` turns the after-ABS dial on for any
algorithm (and sends the run to the process engine), ``width=x<f>`` widens every hidden layer of PQN's
Q-network; anything else is refused for PQN, naming what it takes; ``bench --variant`` runs them."""

from __future__ import annotations

import re

import pytest

from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.jobs import plan_jobs
from adaptive_po.bench.run_folder import RunSpec, config_for, read_settings
from adaptive_po.bench.variants import apply_variant, make_variant, parse_variant
from adaptive_po.hyperparams import PQNHyperparams


# -- the variants -----------------------------------------------------------------------------------
def test_pqn_takes_the_dial_and_the_width_and_nothing_else() -> None:
    assert parse_variant("pqn", "batch_scaling=abs,width=x4") == {"batch_scaling": ("dial", "abs"), "width": ("scale", 4.0)}
    assert make_variant(width="x4", batch_scaling="abs") == "batch_scaling=abs,width=x4"
    assert parse_variant("ppo", "batch_scaling=abs") == {"batch_scaling": ("dial", "abs")}
    for algo, variant, named in [
        ("pqn", "n_epochs=x2", "pqn takes no variants but width=x<factor> and batch_scaling=abs"),
        ("pqn", "width=4", "width takes a factor such as x4, got '4'"),
        ("pqn", "width=x0", "must be a finite number > 0"),
        ("pqn", "batch_scaling=on", "batch_scaling takes one of ['abs']"),
        ("ppo", "width=x4", "unknown knob 'width' for ppo"),
        ("pqn", "width=x4,batch_scaling=abs", "write it as 'batch_scaling=abs,width=x4'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            parse_variant(algo, variant)


def test_the_variants_set_pqns_width_and_dial_keeping_the_files_knobs() -> None:
    hp = get_env_config("Breakout-MinAtar").pqn
    wide, _ = apply_variant("pqn", "batch_scaling=abs,width=x4", hp, {})
    assert (wide.width, wide.batch_scaling, wide.n_steps, wide.network) == (4.0, {}, 32, "minatar")
    knobs = PQNHyperparams.from_preset("classic", {"batch_scaling": {"t_max": 256}})
    assert apply_variant("pqn", "batch_scaling=abs", knobs, {})[0].batch_scaling == {"t_max": 256}
    # the policy objectives: the dial on, the environment's other settings untouched
    ppo = get_env_config("CartPole-v1").hyperparams
    dialled, kwargs = apply_variant("ppo", "batch_scaling=abs", ppo, {"clip_range": 0.2})
    assert dialled.batch_scaling == {} and dialled.n_steps == ppo.n_steps and kwargs == {"clip_range": 0.2}
    # config.json: the width only where a variant sets it (runs made before it still match on resume)
    assert "width" not in PQNHyperparams.from_preset("minatar").to_json()
    spec = RunSpec(suite="abs", env="Breakout-MinAtar", algo="pqn", seed=0, total_timesteps=8192, variant="width=x4")
    assert config_for(spec)["hyperparams"]["width"] == 4.0 and read_settings(spec).hp.width == 4.0


def test_width_multiplies_every_hidden_layer_of_the_q_network() -> None:
    from gymnasium import spaces
    from torch import nn

    from adaptive_po.pqn import QNetwork

    def widths(net: QNetwork) -> list[int]:
        return [m.out_channels if isinstance(m, nn.Conv2d) else m.out_features for m in net.layers if isinstance(m, (nn.Conv2d, nn.Linear))]

    grid = spaces.Box(0, 1, (4, 10, 10))
    assert widths(QNetwork(grid, 3, "minatar")) == [16, 128, 3]
    assert widths(QNetwork(grid, 3, "minatar", width=4)) == [64, 512, 3]  # conv 64 -> dense 512, the actions stay 3
    assert widths(QNetwork(spaces.Box(-1, 1, (4,)), 2, "mlp", width=0.5)) == [60, 42, 2]
    with pytest.raises(ValueError, match="PQN width must be a finite number > 0"):
        QNetwork(grid, 3, "minatar", width=0)


def test_a_dial_variant_goes_to_the_process_engine() -> None:
    specs = [RunSpec(suite="abs", env="CartPole-v1", algo="ppo", seed=s, total_timesteps=3000, variant=v) for v in ("", "batch_scaling=abs") for s in (0, 1)]
    jobs = plan_jobs(specs, "population")
    assert [(job.population, {s.variant for s in job.specs}) for job in jobs] == [(True, {""}), (False, {"batch_scaling=abs"}), (False, {"batch_scaling=abs"})]


def test_bench_runs_each_variant_given(capsys) -> None:
    from adaptive_po.cli import main

    code = main(["bench", "--suite", "minatar", "--envs", "Breakout-MinAtar", "--algos", "pqn", "--variant", "batch_scaling=abs", "--variant", "width=x4",
                 "--seeds", "1", "--lags", "0", "--timesteps", "8192", "--suite-name", "abs", "--dry-run", "--list-runs", "--no-report"])
    out = capsys.readouterr().out.split()
    assert code == 0 and out == ["abs/Breakout-MinAtar/pqn@batch_scaling=abs/lag0_noise0_replay0/seed-0", "abs/Breakout-MinAtar/pqn@width=x4/lag0_noise0_replay0/seed-0"]


def test_a_width_beyond_the_networks_limits_is_refused_before_compute() -> None:
    from adaptive_po.hyperparams import MAX_LAYER_WIDTH

    with pytest.raises(ValueError, match=re.escape(f"width x200: net_arch: a layer of 25,600 units is wider than the limit of {MAX_LAYER_WIDTH:,}")):
        apply_variant("pqn", "width=x200", get_env_config("Breakout-MinAtar").pqn, {})
