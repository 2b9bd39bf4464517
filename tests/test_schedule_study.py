"""The frozen study's extension under the authors' schedule: its search asks the schedule space its
plan file names (``docs/results/frozen-schedule/plan.toml``), and the corners table
(``adaptive_po.bench.schedule_study``) gives each schedule's optimizer steps. Its plan, calibration,
cuts and byte-for-byte replay by the generic runner: ``tests/test_searched_study.py``."""

from adaptive_po.bench import schedule_study as study
from adaptive_po.bench.config import get_env_config
from adaptive_po.bench.tuning import ONE_PASS, ask_new, make_study
from adaptive_po.bench.variants import apply_variant, parse_variant


def test_the_schedule_space_names_every_schedule_and_its_default_is_the_authors():
    space = study.plan_tasks_and_space()[1]
    assert space.variant("esspo", space.default("esspo")) == "batch_size=rollout,kl=sampled,n_epochs=1,n_steps=x0.0625"
    assert space.variant("ppo", space.default("ppo")) == "batch_size=rollout,n_epochs=1,n_steps=x0.0625"
    assert space.variant("esspo", {"learning_rate": 2.0, "n_steps": 1.0, "steps": ONE_PASS, "kl": "analytic"}) == "learning_rate=x2,n_epochs=1"
    pendulum = get_env_config("Pendulum-v1").hyperparams
    study_ = make_study("Pendulum-v1", "esspo", 0, 4, space=space)
    seen: set[str] = set()
    for _ in range(12):  # every asked variant is canonical and in the space
        _, variant = ask_new(study_, "esspo", seen, space=space)
        parsed = parse_variant("esspo", variant)
        hp, kwargs = apply_variant("esspo", variant, pendulum, {})
        assert parsed["n_epochs"][0] == "fix" and hp.n_epochs in (1, 2, 5)
        assert hp.n_steps * 16 in {int(1024 * f * 16) for f in space.rollout_factors}
        if "batch_size" in parsed:
            assert hp.batch_size == hp.n_envs * hp.n_steps  # whole-rollout steps
        else:
            assert hp.n_epochs == 1 and hp.batch_size == 64  # one pass of the Zoo minibatches
        assert 0.25 * 1e-3 <= hp.learning_rate <= 16 * 1e-3 + 1e-12
    assert len(seen) == 12
    ppo = make_study("Pendulum-v1", "ppo", 0, 4, space=space)
    assert all("kl=" not in ask_new(ppo, "ppo", set(), space=space)[1] for _ in range(4))


def test_the_corners_give_the_optimizer_steps_of_each_schedule():
    rows = {(r["env"], r["schedule"]): r for r in study.schedule_corners()}
    pendulum_zoo = rows[("Pendulum-v1", "the Zoo's (published study's default)")]
    assert pendulum_zoo["steps_per_update"] == 10 * 64 and pendulum_zoo["updates_per_run"] == 25
    one_step = rows[("Pendulum-v1", "rollout x0.0625, 1 whole-rollout step")]
    assert (one_step["rollout"], one_step["samples_per_step"], one_step["steps_per_run"]) == (256, 256, 391)
