"""Variants (an algorithm's knobs away from their defaults) and explicit data conditions in a sweep."""

import json
import sys

import pytest

from adaptive_po.dials import DataDials
from adaptive_po import contract
from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.run_folder import config_for, run_settings
from adaptive_po.bench.suites import OWN_KNOB_VARIANTS, PAPER_CONDITIONS, SUITES
from adaptive_po.bench.grid import Grid, expand_grid
from adaptive_po.bench.variants import apply_variant, make_variant, objective_knobs, parse_variant
from adaptive_po.hyperparams import LinearSchedule
from cli_here import cli_here  # a command line in this process


def test_objective_knobs_are_the_losses_own_keywords():
    assert objective_knobs("ppo") == ("clip_range",)
    assert objective_knobs("dapo") == ("clip_range", "clip_range_high")
    assert objective_knobs("cispo") == ("eps_high",)
    assert objective_knobs("kl-ppo") == ("kl_target",)  # kl_coef is state, not a knob
    assert objective_knobs("esspo") == ()  # kl, cap and regularizer are ablation switches
    assert objective_knobs("tis-pg") == ()  # its truncation is fixed by the entry


def test_apply_variant_keeps_schedules_and_scales_shared_knobs():
    hp = get_env_config("CartPole-v1").hyperparams  # clip lin_0.2, lr lin_1e-3, 20 epochs
    assert isinstance(hp.clip_range, LinearSchedule)
    new_hp, kwargs = apply_variant("ppo", "clip_range=0.3", hp, {"clip_range": hp.clip_range})
    assert kwargs["clip_range"] == LinearSchedule(0.3) and new_hp is hp
    new_hp, kwargs = apply_variant("ppo", "learning_rate=x2,n_epochs=x0.25", hp, {"clip_range": hp.clip_range})
    assert new_hp.n_epochs == 5 and new_hp.learning_rate == LinearSchedule(2e-3)
    assert kwargs["clip_range"] == hp.clip_range
    acrobot = get_env_config("Acrobot-v1").hyperparams  # 4 epochs, lr 3e-4 constant
    new_hp, _ = apply_variant("esspo", "learning_rate=x0.5,n_epochs=x0.25", acrobot, {})
    assert new_hp.n_epochs == 1 and new_hp.learning_rate == pytest.approx(1.5e-4)
    _, kwargs = apply_variant("cispo", "eps_high=4", acrobot, {})
    assert kwargs == {"eps_high": 4.0}


@pytest.mark.parametrize(
    "algo,variant,match",
    [
        ("ppo", "clip=0.3", "unknown knob 'clip'"),
        ("esspo", "clip_range=0.3", "unknown knob 'clip_range'"),
        ("ppo", "clip_range=abc", "not a number"),
        ("ppo", "clip_range=-1", "> 0"),
        ("ppo", "n_epochs=2.5", "whole number"),
        ("ppo", "n_epochs=0", "whole number"),
        ("ppo", "batch_size=64", "'rollout'"),
        ("ppo", "n_steps=64", "factor"),
        ("ppo", "kl=sampled", "unknown knob 'kl'"),
        ("esspo", "kl=analytic", "default is left out"),
        ("esspo", "kl=forward", "'forward'"),
        ("esspo-sampled-kl", "kl=sampled", "unknown knob 'kl'"),
        ("esspo", "n_epochs=2,batch_size=rollout", "canonical"),
        ("ppo", "n_epochs=x0.25,clip_range=0.3", "canonical"),
        ("ppo", "clip_range", "name=value"),
    ],
)
def test_bad_variants_are_refused_by_name(algo, variant, match):
    with pytest.raises(ValueError, match=match):
        parse_variant(algo, variant)


def test_the_sensitivity_suite_is_valid_and_one_knob_at_a_time():
    suite = SUITES["sensitivity"]
    for algo, variants in suite.variants.items():
        assert variants[0] == ""
        for v in variants:
            assert len(parse_variant(algo, v)) <= 2  # DAPO moves its two clip edges together
    assert set(OWN_KNOB_VARIANTS) == set(suite.algos)
    assert make_variant(clip_range=0.3, n_epochs="x0.25") == "clip_range=0.3,n_epochs=x0.25"


def test_a_grid_with_conditions_and_variants_names_every_run(tmp_path):
    specs = expand_grid(
        Grid(
            suite="paper", envs=["CartPole-v1"], algos=["ppo", "esspo"], seeds=[0, 1],
            conditions=[DataDials.from_condition(c) for c in PAPER_CONDITIONS], variants={"ppo": ["", "clip_range=0.3"]}, out=str(tmp_path), device="cpu",
        )
    )
    assert len(specs) == (2 + 1) * 5 * 2
    dirs = {str(s.relative_dir) for s in specs}
    assert len(dirs) == len(specs)
    assert "paper/CartPole-v1/ppo@clip_range=0.3/lag0_noise0_replay0_fp8-e4m3_blp-policy/seed-1" in dirs
    assert "paper/CartPole-v1/esspo/lag0_noise0_replay0_T1.2/seed-0" in dirs
    assert "paper/CartPole-v1/esspo/lag16_noise0_replay0/seed-0" in dirs
    spec = next(s for s in specs if s.variant)
    config = config_for(spec)
    assert config["variant"] == "clip_range=0.3" and config["objective_kwargs"]["clip_range"] == "lin_0.3"
    assert set(contract.RUN_KEYS) <= set(config)
    hp, kwargs = run_settings(spec, get_env_config("CartPole-v1").hyperparams)
    assert kwargs["clip_range"] == LinearSchedule(0.3)


@pytest.mark.parametrize(
    "grid_changes,match",
    [
        ({"conditions": [{"sampler_temperature": 0.0}]}, "temperature"),
        ({"conditions": [{"sampler_precision": "int4"}]}, "precision"),
        ({"conditions": [{"lag": 3}]}, "unknown data dial"),
        ({"conditions": []}, "no conditions"),
        ({"conditions": [{}, {"policy_lag": 0}]}, "listed twice"),
        ({"variants": {"ppo": ["clip=1"]}}, "unknown knob"),
        ({"variants": {"spo": ["eps=0.1"]}}, "not in the grid"),
    ],
)
def test_bad_grids_fail_before_compute(grid_changes, match, tmp_path):
    grid = dict(suite="paper", envs=["CartPole-v1"], algos=["ppo"], seeds=[0], conditions=[DataDials()], out=str(tmp_path))
    with pytest.raises(ValueError, match=match):
        changes = dict(grid_changes)
        if "conditions" in changes:  # as a suite writes them
            changes["conditions"] = [DataDials.from_condition(c) for c in changes["conditions"]]
        expand_grid(Grid(**{**grid, **changes}))


def test_train_cli_takes_the_sampler_dials_and_a_variant(tmp_path):
    out = cli_here(
        [sys.executable, "-m", "adaptive_po", "train", "--env", "CartPole-v1", "--algo", "cispo", "--variant", "eps_high=4",
         "--temperature", "1.2", "--precision", "fp8-e5m2", "--timesteps", "512", "--out", str(tmp_path), "--device", "cpu"],
    )
    assert out.returncode == 0, out.stderr
    run = tmp_path / "train/CartPole-v1/cispo@eps_high=4/lag0_noise0_replay0_T1.2_fp8-e5m2/seed-0"
    config = json.loads((run / contract.CONFIG_FILE).read_text())
    assert (config["sampler_temperature"], config["sampler_precision"], config["variant"]) == (1.2, "fp8-e5m2", "eps_high=4")
    assert config["objective_kwargs"]["eps_high"] == 4.0
    bad = cli_here(
        [sys.executable, "-m", "adaptive_po", "train", "--env", "CartPole-v1", "--precision", "fp4", "--out", str(tmp_path)],
    )
    assert bad.returncode == 2 and "fp4" in bad.stderr


# -- the update's schedule as a dial (k optimizer steps per rollout, each on the whole rollout) ------
def test_the_schedule_dial_sets_steps_per_rollout_on_the_whole_rollout():
    pendulum = get_env_config("Pendulum-v1").hyperparams  # 4 envs x 1024 steps, minibatch 64, 10 epochs
    hp, kwargs = apply_variant("esspo", "batch_size=rollout,kl=sampled,n_epochs=2,n_steps=x0.0625", pendulum, {})
    assert (hp.n_steps, hp.batch_size, hp.n_epochs) == (64, 256, 2) and kwargs == {"kl": "sampled"}
    # one pass of the Zoo minibatches over a shorter rollout; a minibatch longer than the rollout is cut to it
    hp, _ = apply_variant("ppo", "n_epochs=1,n_steps=x0.25", pendulum, {})
    assert (hp.n_steps, hp.batch_size, hp.n_epochs) == (256, 64, 1)
    hp, _ = apply_variant("ppo", "batch_size=x4,n_steps=x0.0625", pendulum, {})
    assert (hp.n_steps, hp.batch_size) == (64, 256)  # x4 of 64 = 256 = the new rollout
    hp, _ = apply_variant("ppo", "batch_size=x8,n_steps=x0.0625", pendulum, {})
    assert hp.batch_size == 256
    assert parse_variant("esspo", "batch_size=rollout,n_epochs=5") == {"batch_size": ("fix", "rollout"), "n_epochs": ("fix", 5)}
    assert make_variant(n_epochs=5, batch_size="rollout", kl="sampled", n_steps="x0.125", learning_rate="x4") == (
        "batch_size=rollout,kl=sampled,learning_rate=x4,n_epochs=5,n_steps=x0.125"
    )
    with pytest.raises(ValueError, match="under 2 samples"):
        apply_variant("ppo", "n_steps=x0.0001", get_env_config("Pendulum-v1").hyperparams.__class__(
            source="t", policy="MlpPolicy", n_envs=1, n_steps=4, batch_size=2, n_epochs=1, learning_rate=1e-3), {})


def test_a_run_config_shows_its_schedule_and_older_configs_are_unchanged(tmp_path):
    from adaptive_po.bench.run_folder import RunSpec

    spec = RunSpec("t", "Pendulum-v1", "esspo", 0, 4096, variant="batch_size=rollout,kl=sampled,n_epochs=2,n_steps=x0.0625", out=str(tmp_path))
    config = config_for(spec)
    assert config["hyperparams"]["n_steps"] == 64 and config["hyperparams"]["batch_size"] == 256
    assert config["objective_kwargs"]["kl"] == "sampled"
    assert config["update_schedule"] == {
        "rollout_samples": 256, "samples_per_step": 256, "minibatches_per_epoch": 1, "steps_per_update": 2,
        "ess_over": "the whole rollout (each step's batch)",
    }
    one_pass = config_for(RunSpec("t", "Pendulum-v1", "esspo", 0, 4096, variant="n_epochs=1,n_steps=x0.25", out=str(tmp_path)))
    assert one_pass["update_schedule"]["steps_per_update"] == 16 and one_pass["update_schedule"]["ess_over"] == "the minibatch"
    batch_ess = config_for(RunSpec("t", "Pendulum-v1", "esspo-batch-ess", 0, 4096, variant="n_epochs=1", out=str(tmp_path)))
    assert batch_ess["update_schedule"]["ess_over"] == "the whole update's batch"
    for variant in ("", "batch_size=x4,n_epochs=x0.5"):  # factors only: the configuration as before
        assert "update_schedule" not in config_for(RunSpec("t", "Pendulum-v1", "esspo", 0, 4096, variant=variant, out=str(tmp_path)))


def test_both_engines_train_the_authors_schedule_with_the_same_configuration(tmp_path):
    """``batch_size=rollout,n_epochs=2,n_steps=x0.5`` on CartPole (8 envs x 32 steps): rollouts of
    128 samples, two whole-rollout optimizer steps each; the SB3 face (process engine) and the
    population engine record the same configuration and the same number of updates."""
    from adaptive_po.bench.population_engine import execute_population
    from adaptive_po.bench.process_engine import execute_run
    from adaptive_po.bench.run_folder import RunSpec

    variant = "batch_size=rollout,kl=sampled,n_epochs=2,n_steps=x0.5"
    pop = [RunSpec("t", "CartPole-v1", "esspo", s, 768, variant=variant, dials=DataDials(policy_lag=1), out=str(tmp_path / "pop")) for s in (0, 1)]
    assert [r["status"] for r in execute_population(pop)] == ["complete", "complete"]
    single = RunSpec("t", "CartPole-v1", "esspo", 1, 768, variant=variant, dials=DataDials(policy_lag=1), out=str(tmp_path / "proc"))
    assert execute_run(single)["status"] == "complete"
    configs = [json.loads((d / "config.json").read_text()) for d in (pop[1].run_dir, single.run_dir)]
    for c in configs:
        c.pop("versions")
    assert configs[0] == configs[1]
    assert configs[0]["update_schedule"]["steps_per_update"] == 2 and configs[0]["update_schedule"]["samples_per_step"] == 128
    for d in (pop[1].run_dir, single.run_dir):
        summary = json.loads((d / "summary.json").read_text())
        assert summary["timesteps"] == 768
    assert json.loads((pop[1].run_dir / "summary.json").read_text())["updates"] == 6  # 768 / 128
    for d in (pop[1].run_dir, single.run_dir):  # one progress row per update of 128 samples
        rows = (d / "progress.csv").read_text().splitlines()[1:]
        assert [r.split(",")[:2] for r in rows] == [[str(u), str(128 * u)] for u in range(1, 7)]
