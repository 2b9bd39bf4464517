"""The process engine: one run in this process, through the SB3 class, into its run folder.

``execute_run(spec)`` builds the vectorized environments, the agent and its collector
(:func:`build_training`), trains with evaluations on the environment's schedule, and writes
``config.json``, ``progress.csv``, ``eval.csv``, TensorBoard events, ``summary.json`` and finally the
``COMPLETE`` marker, each atomically (:mod:`adaptive_po.bench.run_folder`). A run that raises or
produces a non-finite loss leaves a ``FAILED`` file with its traceback instead; it never raises.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any, Callable

from adaptive_po import contract
from adaptive_po.bench.divergence import check_finite, compact_traceback, error_line
from adaptive_po.bench.recorder import RunRecorder, nonfinite_reason
from adaptive_po.environments import resolve_backend, resolve_device
from adaptive_po.bench.run_folder import (
    RunSettings,
    RunSpec,
    completed_summary,
    config_for,
    fail_run_folder,
    interrupt_run_folder,
    finish_run_folder,
    read_settings,
    start_run_folder,
)


#: the live progress of runs on the process engine (the ``train`` command's progress bar): each
#: listener is called as ``listener(timesteps, updates, last_eval_return)`` after every update and
#: every evaluation of a run trained in this process (``last_eval_return``: None before the first)
PROGRESS_LISTENERS: list[Callable[[int, int, float | None], None]] = []


def _report_progress(recorder: RunRecorder, timesteps: int) -> None:
    if PROGRESS_LISTENERS:
        last = recorder.evaluations[-1]["eval_return_mean"] if recorder.evaluations else None
        for listener in list(PROGRESS_LISTENERS):
            listener(int(timesteps), len(recorder.progress), last)


def _make_callback(model, recorder: RunRecorder, evaluate):  # type: ignore[no-untyped-def]
    from stable_baselines3.common.callbacks import BaseCallback

    class RunCallback(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.episodes = 0

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", ()):
                if "episode" in info:
                    self.episodes += 1
            if recorder.evaluation_due(self.num_timesteps):
                evaluate(self.num_timesteps)
            return True

    callback = RunCallback()

    def on_update(stats: dict[str, float]) -> None:
        update = len(recorder.progress) + 1
        reason = nonfinite_reason(stats, update)
        if reason is not None:
            raise FloatingPointError(f"{reason}; statistics: {stats}")
        check_finite(model.policy.named_parameters(), f"after update {update}")
        buffer = model.ep_info_buffer or ()
        recorder.add_update(
            stats, timesteps=model.num_timesteps, episodes=callback.episodes,
            returns=[e["r"] for e in buffer], lengths=[e["l"] for e in buffer],
        )
        _report_progress(recorder, model.num_timesteps)

    model.add_update_listener(on_update)
    return callback


def build_training(spec: RunSpec, settings: RunSettings | None = None) -> tuple[Any, Any, Any, Any, str, str]:
    """``(model, train_env, eval_env, env_cfg, backend, env_id)`` of one run on the process engine:
    the SB3 class with the run's settings (``settings``, or read here) and data dials, its training
    and evaluation environments (normalized where the environment's config says so). The caller
    closes the environments."""
    import torch
    from stable_baselines3.common.vec_env import VecNormalize

    from adaptive_po.algorithms import BatchPolicyOptimization
    from adaptive_po.environments import make_vec_env
    from adaptive_po.hyperparams import VALUE_ALGORITHMS
    from adaptive_po.bench.variants import DEFAULT_PRECISION, learner_precision

    if learner_precision(spec.algo, spec.variant) != DEFAULT_PRECISION:  # the sweep refuses it when planning
        raise ValueError(f"variant {spec.variant!r}: the process engine trains in {DEFAULT_PRECISION} only")
    device = resolve_device(spec.device)
    if device == "cpu":
        torch.set_num_threads(1)
    settings = settings if settings is not None else read_settings(spec)
    env_cfg, hp, objective_kwargs = settings.env_cfg, settings.hp, settings.objective_kwargs
    backend, env_id = resolve_backend(env_cfg.ids, spec.backend)
    n_envs = hp.n_envs

    train_env = make_vec_env(env_id, n_envs, spec.seed, backend, training=True)
    eval_envs = min(env_cfg.eval_episodes, 10)
    eval_env = make_vec_env(env_id, eval_envs, spec.seed + 10_000, backend, training=False)
    if env_cfg.normalize:
        train_env = VecNormalize(train_env, gamma=hp.gamma)
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    try:
        if spec.algo in VALUE_ALGORITHMS:
            model = _pqn_model(spec, hp, train_env, device)
        else:
            model = BatchPolicyOptimization(
                hp.policy,
                train_env,
                objective=spec.algo,
                objective_kwargs=objective_kwargs,
                seed=spec.seed,
                device=device,
                dials=spec.dials,
                verbose=0,
                **hp.algorithm_kwargs(),
                **({"batch_scaling": hp.batch_scaling} if hp.batch_scaling is not None else {}),
            )
    except BaseException:
        train_env.close()
        eval_env.close()
        raise
    return model, train_env, eval_env, env_cfg, backend, env_id


def _pqn_model(spec: RunSpec, hp: Any, train_env: Any, device: str) -> Any:
    """The :class:`~adaptive_po.pqn.PQN` of one run from its environment's PQN settings (``hp``)."""
    from adaptive_po.batch_scaling import AfterABS
    from adaptive_po.pqn import PQN

    scaling = None if hp.batch_scaling is None else AfterABS(**hp.batch_scaling)
    return PQN(
        "MlpPolicy", train_env, seed=spec.seed, device=device, dials=spec.dials, batch_scaling=scaling,
        policy_kwargs={"network": hp.network, "net_arch": hp.net_arch, "width": hp.width}, **hp.algorithm_kwargs(),
    )


def _train(spec: RunSpec, run_dir: Path, settings: RunSettings) -> dict[str, Any]:
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import sync_envs_normalization

    model, train_env, eval_env, env_cfg, backend, env_id = build_training(spec, settings)
    recorder = RunRecorder(run_dir, spec.total_timesteps, env_cfg.eval_every)

    try:
        model.set_logger(configure(str(run_dir / contract.TENSORBOARD_DIR), ["tensorboard"]) if spec.tensorboard else configure(None, []))

        def evaluate(timesteps: int) -> dict[str, Any]:
            if env_cfg.normalize:
                sync_envs_normalization(train_env, eval_env)
            returns, _ = evaluate_policy(
                model, eval_env, n_eval_episodes=env_cfg.eval_episodes, deterministic=True, return_episode_rewards=True, warn=False
            )
            row = recorder.add_evaluation(timesteps, returns)
            model.logger.record("eval/mean_reward", row["eval_return_mean"])
            _report_progress(recorder, timesteps)
            return row

        callback = _make_callback(model, recorder, evaluate)
        evaluate(0)
        try:
            model.learn(spec.total_timesteps, callback=callback, tb_log_name="tb")
        except (ValueError, RuntimeError) as err:
            # a diverged update surfaces as the next forward pass's error (e.g. a distribution
            # refusing NaN logits, inside train(), before the update listener's check): name it
            where = f"during update {len(recorder.progress) + 1}"
            check_finite(model.policy.named_parameters(), where)
            if "invalid values" in str(err):
                raise FloatingPointError(f"non-finite policy output {where} (the update diverged): {error_line(err)}") from err
            raise
        recorder.write_progress(force=True)
        final = evaluate(model.num_timesteps)
        model.logger.dump(model.num_timesteps)
        return {
            "final_eval_return_mean": final["eval_return_mean"],
            "final_eval_return_std": final["eval_return_std"],
            "eval_episodes": final["eval_episodes"],
            "timesteps": int(model.num_timesteps),
            "updates": len(recorder.progress),
            "backend": backend,
            "env_id": env_id,
            "engine": "process",
        }
    finally:
        if recorder.progress:
            recorder.write_progress(force=True)
        train_env.close()
        eval_env.close()


def execute_run(spec: RunSpec | dict[str, Any]) -> dict[str, Any]:
    """Run one configuration into its folder; never raises. Returns a small result record.

    ``status`` is ``"skipped"`` (already complete with the same configuration), ``"complete"``
    or ``"failed"`` (``error`` holds the cause: the exception's type and first line).
    """
    if isinstance(spec, dict):
        spec = RunSpec.from_dict(spec)
    run_dir = spec.run_dir
    started = time.time()
    result: dict[str, Any] = {"run_dir": str(run_dir), "relative_dir": str(spec.relative_dir), "status": "failed"}
    try:
        settings = read_settings(spec)  # the environment file, read once for the whole run
        config = config_for(spec, settings)
        summary = completed_summary(spec, config)
        if summary is not None:
            return {**result, "status": "skipped", "final_return": summary.get("final_eval_return_mean"), "wall_time_s": 0.0}
        start_run_folder(spec, config)
        summary = finish_run_folder(spec, _train(spec, run_dir, settings), time.time() - started)
        return {
            **result,
            "status": "complete",
            "final_return": summary["final_eval_return_mean"],
            "wall_time_s": summary["wall_time_s"],
            "diverged": summary.get(contract.SUMMARY_DIVERGED),
        }
    except BaseException as err:  # noqa: BLE001 - a run must never take the sweep down
        if isinstance(err, KeyboardInterrupt):  # a stop, not the run's failure: left incomplete, redone
            interrupt_run_folder(spec)
            raise
        text = compact_traceback(traceback.format_exc())
        fail_run_folder(spec, text)
        # the cause in one line: the exception's type and message, never the tail of a tensor
        return {**result, "status": "failed", "error": error_line(text) if text.strip() else error_line(err), "traceback": text, "wall_time_s": time.time() - started}
