"""Variants (an algorithm's knobs away from their defaults) and explicit data conditions in a sweep."""

import json
import subprocess
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
        ("ppo", "n_epochs=2", "factor"),
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
    out = subprocess.run(
        [sys.executable, "-m", "adaptive_po", "train", "--env", "CartPole-v1", "--algo", "cispo", "--variant", "eps_high=4",
         "--temperature", "1.2", "--precision", "fp8-e5m2", "--timesteps", "512", "--out", str(tmp_path), "--device", "cpu"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    run = tmp_path / "train/CartPole-v1/cispo@eps_high=4/lag0_noise0_replay0_T1.2_fp8-e5m2/seed-0"
    config = json.loads((run / contract.CONFIG_FILE).read_text())
    assert (config["sampler_temperature"], config["sampler_precision"], config["variant"]) == (1.2, "fp8-e5m2", "eps_high=4")
    assert config["objective_kwargs"]["eps_high"] == 4.0
    bad = subprocess.run(
        [sys.executable, "-m", "adaptive_po", "train", "--env", "CartPole-v1", "--precision", "fp4", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert bad.returncode == 2 and "fp4" in bad.stderr
