"""The population engine's harness side: many runs of one environment in one process.

:func:`execute_population` is :func:`adaptive_po.bench.process_engine.execute_run` for a *population*:
K runs that share the environment, the algorithm, the budget and the hyper-parameters, and differ
in seed and in the data dials (policy lag, action noise, behaviour recording). It trains them in
lockstep with :class:`adaptive_po.population.PopulationLearner` on one envpool pool of K x n_envs
environments, evaluates all members at once, and writes exactly the run folders the runner
writes (the contract in :mod:`adaptive_po.contract`), one per member. Like ``execute_run``
it never raises: a member that produces a non-finite loss or parameter, or whose files cannot be
written, is recorded as FAILED with its reason and the others go on.

Which runs can share a population: :func:`population_key`; splitting a sweep into populations:
:func:`group_populations`. MLP and CNN policies both stack (:func:`supports_population`); image
observations stay uint8 in the rollout storage (no float32 copy of every frame).
"""

from __future__ import annotations

import sys
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from adaptive_po.collector import env_actions, truncations
from adaptive_po import contract
from adaptive_po.bench.divergence import compact_traceback, error_line
from adaptive_po.bench.recorder import RunRecorder, nonfinite_reason
from adaptive_po.environments import resolve_backend, resolve_device
from adaptive_po.bench.jobs import population_key, seed_ranges
from adaptive_po.bench.process_settings import keep_freed_memory
from adaptive_po.bench.variants import learner_precision
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


def planned_steps(total_timesteps: int, rollout: int, batch_size: int, n_epochs: int) -> int:
    """The minibatch steps a run of ``total_timesteps`` takes (replayed data, which adds steps, aside):
    what decides whether compiling the stacked step pays (:func:`adaptive_po.compiled.compile_wanted`)."""
    return -(-total_timesteps // rollout) * n_epochs * -(-rollout // batch_size)


def add_scalars(writer: Any, scalars: dict[str, float], step: int) -> None:
    """Each ``tag: value`` as ``writer.add_scalar`` would log it, all in one event (one summary
    with a value per tag): a population logs an update's statistics for every member, and one
    event per statistic cost about 8 times as much."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value)) for tag, value in scalars.items()])
    writer._get_file_writer().add_summary(summary, step)


class _StackedNormalizer:
    """SB3's ``VecNormalize`` (observations and rewards, clip 10, eps 1e-8), one per member.

    Each member's running statistics see only its own environments, exactly as a separate
    ``VecNormalize`` around that member's ``n_envs`` environments would."""

    def __init__(self, k: int, obs_shape: tuple[int, ...], gamma: float) -> None:
        self.obs_mean = np.zeros((k, *obs_shape))
        self.obs_var = np.ones((k, *obs_shape))
        self.obs_count = np.full(k, 1e-4)
        self.ret_mean = np.zeros(k)
        self.ret_var = np.ones(k)
        self.ret_count = np.full(k, 1e-4)
        self.returns: np.ndarray | None = None
        self.gamma = gamma

    @staticmethod
    def _update(mean: np.ndarray, var: np.ndarray, count: np.ndarray, x: np.ndarray) -> None:
        """In place, per member: SB3's RunningMeanStd.update over the member's batch ``x[m]``."""
        batch_mean, batch_var, n = x.mean(axis=1), x.var(axis=1), x.shape[1]
        shape = (-1, *([1] * (mean.ndim - 1)))
        total = count + n
        delta = batch_mean - mean
        new_mean = mean + delta * (n / total).reshape(shape)
        m2 = var * count.reshape(shape) + batch_var * n + delta**2 * (count * n / total).reshape(shape)
        mean[...] = new_mean
        var[...] = m2 / total.reshape(shape)
        count[...] = total

    def observe(self, obs: np.ndarray) -> None:
        self._update(self.obs_mean, self.obs_var, self.obs_count, obs)

    def normalize(self, obs: np.ndarray, members: slice | np.ndarray = slice(None)) -> np.ndarray:
        """``(K, B, ...)`` raw observations -> normalized (``members`` selects the rows' members)."""
        mean, var = self.obs_mean[members], self.obs_var[members]
        return np.clip((obs - mean[:, None]) / np.sqrt(var[:, None] + 1e-8), -10.0, 10.0)

    def reward(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """``(K, E)`` raw rewards -> normalized, updating the discounted-return statistics."""
        if self.returns is None:
            self.returns = np.zeros_like(rewards, dtype=np.float64)
        self.returns = self.returns * self.gamma + rewards
        self._update(self.ret_mean, self.ret_var, self.ret_count, self.returns)
        out = np.clip(rewards / np.sqrt(self.ret_var[:, None] + 1e-8), -10.0, 10.0)
        self.returns[dones] = 0.0
        return out


@dataclass
class _MemberRun:
    """One member's bookkeeping: its folder, records and fate."""

    index: int
    spec: RunSpec
    config: dict[str, Any]
    recorder: RunRecorder
    episodes: int = 0
    episode_returns: deque = field(default_factory=lambda: deque(maxlen=100))
    episode_lengths: deque = field(default_factory=lambda: deque(maxlen=100))
    writer: Any = None
    failed: str | None = None  #: the reason's last line, once the member has failed
    failure: str = ""  #: the whole reason (the FAILED file's text)


class PopulationObserver:
    """Hooks into a population's training loop for diagnostics, without changing it: subclass and
    pass to :func:`execute_population`. The population object (its ``learner``, ``runs``,
    :meth:`_Population.episodes`) is handed to each hook; the learner takes update and epoch
    listeners of its own (:meth:`adaptive_po.population.PopulationLearner.add_update_listener`)."""

    def started(self, population: _Population) -> None:
        """Before the first evaluation (the learner is built, nothing trained)."""

    def evaluated(self, population: _Population, timesteps: int) -> None:
        """After each of the bench's evaluations (written to eval.csv)."""

    def finished(self, population: _Population) -> None:
        """After the last update and evaluation, when some member is still alive."""


class _Population:
    """The training loop of one population: collection, updates, evaluation, files."""

    def __init__(self, runs: list[_MemberRun], settings: RunSettings, observer: PopulationObserver | None = None) -> None:
        import torch

        from adaptive_po.compiled import compile_wanted
        from adaptive_po.environments import make_vec_env
        from adaptive_po.population import Member, PopulationLearner

        first = runs[0].spec
        self.runs = runs
        self.observer = observer or PopulationObserver()
        self.k = len(runs)
        self.device = resolve_device(first.device)
        if self.device == "cpu":
            torch.set_num_threads(1)
        keep_freed_memory()  # the training process's allocator, set by the bench (never by the library)
        self.env_cfg = env_cfg = settings.env_cfg
        hp, objective_kwargs = settings.hp, settings.objective_kwargs
        self.hp = hp
        self.total = first.total_timesteps
        self.backend, self.env_id = resolve_backend(env_cfg.ids, first.backend)
        self.n_envs = hp.n_envs
        self.n_eval = min(env_cfg.eval_episodes, 10)
        # one pool for all members: member m's env j is seeded base + m * n_envs + j (the sweep checks
        # that the seeds fit int32 before it starts: jobs.check_seeds)
        (_, base, _, _), (_, eval_base, _, _) = seed_ranges([r.spec.seed for r in runs], self.n_envs, self.n_eval, population=True)
        self.train_env = make_vec_env(self.env_id, self.k * self.n_envs, base, self.backend, training=True)
        self.eval_env = make_vec_env(self.env_id, self.k * self.n_eval, eval_base, self.backend, training=False)
        self.action_space = self.train_env.action_space
        obs_shape = self.train_env.observation_space.shape
        # observations are stored in the space's dtype (uint8 frames stay uint8) unless normalized
        self.obs_dtype = np.float32 if env_cfg.normalize else self.train_env.observation_space.dtype
        self.normalizer = _StackedNormalizer(self.k, obs_shape, hp.gamma) if env_cfg.normalize else None
        self.learner = PopulationLearner(
            self.train_env.observation_space,
            self.action_space,
            [Member(r.spec.seed, **r.spec.dials.to_dict()) for r in runs],
            objective=first.algo,
            objective_kwargs=objective_kwargs,
            device=self.device,
            policy=hp.policy,
            compile_step=compile_wanted(planned_steps(self.total, hp.n_steps * self.n_envs, hp.batch_size, hp.n_epochs), hp.policy),
            precision=learner_precision(first.algo, first.variant),
            **hp.algorithm_kwargs(),
        )
        self.torch = torch
        self.timesteps = 0
        from torch.utils.tensorboard import SummaryWriter

        for run in runs:
            if run.spec.tensorboard:
                run.writer = SummaryWriter(str(run.spec.run_dir / contract.TENSORBOARD_DIR))

    # -- helpers ------------------------------------------------------------------------------------
    def _split(self, x: np.ndarray, per: int) -> np.ndarray:
        return x.reshape(self.k, per, *x.shape[1:])

    def _env_actions(self, actions: Any) -> np.ndarray:
        return env_actions(actions.cpu().numpy().reshape(self.k * actions.shape[1], *actions.shape[2:]), self.action_space)

    def _tensor(self, x: np.ndarray) -> Any:
        return self.torch.as_tensor(np.asarray(x, dtype=np.float32), device=self.device)

    def _obs_tensor(self, x: np.ndarray) -> Any:
        """Observations as stored: the space's dtype (uint8 frames stay uint8), float32 if normalized."""
        return self.torch.as_tensor(np.asarray(x, dtype=self.obs_dtype), device=self.device)

    @property
    def live(self) -> list[_MemberRun]:
        return [r for r in self.runs if r.failed is None]

    def fail(self, run: _MemberRun, text: str) -> None:
        """Record ``run`` as FAILED with ``text`` and retire it; the others go on."""
        text = compact_traceback(text)
        run.failed = error_line(text) if text.strip() else "failed"  # the cause, not a tensor's tail
        run.failure = text
        fail_run_folder(run.spec, text)
        self.learner.retire(run.index)
        if run.writer is not None:
            run.writer.close()

    def guarded(self, run: _MemberRun, action: Callable[[], None]) -> None:
        """Run one member's own work (its files); an error fails that member only."""
        try:
            action()
        except Exception:  # noqa: BLE001 - one member's failure must not stop the others
            self.fail(run, traceback.format_exc())

    # -- evaluation ---------------------------------------------------------------------------------
    def episodes(self, act: Callable[[Any], Any]) -> tuple[list[list[float]], list[list[float]]]:
        """SB3's ``evaluate_policy`` protocol for every member at once, acting with ``act``
        (``(K, n_eval, ...)`` observation tensor -> actions): ``eval_episodes`` episodes over
        ``n_eval`` environments per member (environment ``j`` runs ``(episodes + j) // n_eval`` of
        them). Returns each member's episode returns and lengths, from the episode statistics.

        Only the environments that still owe episodes step (``step_some``): one that has run its
        episodes waits for the others instead of starting episodes nobody counts. Each environment
        has its own seeded generator, so an evaluation's episodes are those of stepping them all."""
        episodes = self.env_cfg.eval_episodes
        targets = np.array([(episodes + j) // self.n_eval for j in range(self.n_eval)])
        counts = np.zeros((self.k, self.n_eval), dtype=int)
        failed = np.array([r.failed is not None for r in self.runs])
        returns: list[list[float]] = [[] for _ in self.runs]
        lengths: list[list[float]] = [[] for _ in self.runs]
        obs = np.array(self.eval_env.reset())
        while (active := np.flatnonzero(((counts < targets) & ~failed[:, None]).reshape(-1))).size:
            o = self._split(obs, self.n_eval)
            if self.normalizer is not None:
                o = self.normalizer.normalize(o)
            with self.torch.no_grad():
                actions = act(self._obs_tensor(o))  # every environment's: one shape for a compiled pass
            stepped, _, dones, infos = self.eval_env.step_some(self._env_actions(actions)[active], active)
            obs[active] = stepped
            for row in np.flatnonzero(dones):
                m, j = divmod(int(active[row]), self.n_eval)
                if counts[m, j] < targets[j] and "episode" in infos[row]:
                    returns[m].append(float(infos[row]["episode"]["r"]))
                    lengths[m].append(float(infos[row]["episode"]["l"]))
                    counts[m, j] += 1
        return returns, lengths

    def evaluate(self, timesteps: int) -> None:
        """The bench's evaluation: :meth:`episodes` of each member's deterministic policy, into
        its eval.csv (and TensorBoard); then the observer's ``evaluated``."""
        returns, _ = self.episodes(self.learner.deterministic_actions)
        for run in self.live:

            def write(run: _MemberRun = run) -> None:
                row = run.recorder.add_evaluation(timesteps, returns[run.index])
                if run.writer is not None:
                    run.writer.add_scalar("eval/mean_reward", row["eval_return_mean"], timesteps)

            self.guarded(run, write)
        self.observer.evaluated(self, timesteps)

    # -- training -----------------------------------------------------------------------------------
    def _reset(self) -> np.ndarray:
        obs = self._split(self.train_env.reset(), self.n_envs)
        if self.normalizer is not None:
            self.normalizer.observe(obs)
            obs = self.normalizer.normalize(obs)
        return obs

    def collect(self, obs: np.ndarray, starts: np.ndarray):  # type: ignore[no-untyped-def]
        """One rollout of ``n_steps`` vector steps for every member; evaluations happen at the
        step where the budget crosses the next multiple of ``eval_every``, as the runner's
        callback does. Returns the rollout and the next ``(obs, episode_starts)``."""
        from adaptive_po.population import StackedRollout

        k, e, t = self.k, self.n_envs, self.hp.n_steps
        obs_shape = obs.shape[2:]
        store = {
            "observations": np.zeros((k, t, e, *obs_shape), self.obs_dtype),
            "rewards": np.zeros((k, t, e), np.float32),
            "episode_starts": np.zeros((k, t, e), np.float32),
            "timeout": np.zeros((k, t, e), bool),
            "timeout_observations": np.zeros((k, t, e, *obs_shape), self.obs_dtype),
        }
        actions_t, blp_t, params_t = [], [], []
        for step in range(t):
            store["observations"][:, step] = obs
            store["episode_starts"][:, step] = starts
            actions, blp, params = self.learner.act(self._obs_tensor(obs))
            actions_t.append(actions)
            blp_t.append(blp)
            params_t.append(params)
            new_obs, rewards, dones, infos = self.train_env.step(self._env_actions(actions))
            new_obs = self._split(new_obs, e)
            rewards = rewards.reshape(k, e)
            dones = dones.reshape(k, e)
            if self.normalizer is not None:
                self.normalizer.observe(new_obs)
                new_obs = self.normalizer.normalize(new_obs)
                rewards = self.normalizer.reward(rewards, dones)
            store["rewards"][:, step] = rewards
            for i in np.flatnonzero(dones):
                if "episode" in infos[i]:
                    run = self.runs[int(i) // e]
                    run.episodes += 1
                    run.episode_returns.append(infos[i]["episode"]["r"])
                    run.episode_lengths.append(infos[i]["episode"]["l"])
            for i, terminal_observation in truncations(dones.reshape(-1), infos):
                m, j = divmod(i, e)
                terminal = np.asarray(terminal_observation)[None, None]
                if self.normalizer is not None:
                    terminal = self.normalizer.normalize(terminal, np.array([m]))
                store["timeout"][m, step, j] = True
                store["timeout_observations"][m, step, j] = terminal[0, 0]
            obs, starts = new_obs, dones.astype(np.float32)
            self.timesteps += e
            # every member's recorder keeps the same schedule (one budget, one eval_every)
            if any([r.recorder.evaluation_due(self.timesteps) for r in self.runs]):
                self.evaluate(self.timesteps)
        stack = self.torch.stack
        rollout = StackedRollout(
            observations=self._obs_tensor(store["observations"]),
            actions=stack(actions_t, dim=1),
            rewards=self._tensor(store["rewards"]),
            episode_starts=self._tensor(store["episode_starts"]),
            behaviour_log_prob=stack(blp_t, dim=1),
            behaviour_params=stack(params_t, dim=1),
            timeout=self.torch.as_tensor(store["timeout"], device=self.device),
            timeout_observations=self._obs_tensor(store["timeout_observations"]),
            last_observation=self._obs_tensor(obs),
            last_dones=self._tensor(starts),
        )
        return rollout, obs, starts

    def record(self, stats: dict[str, Any]) -> None:
        """One progress row per live member; a non-finite loss or parameter fails the member."""
        values = {name: value.cpu().numpy() for name, value in stats.items()}
        acting = self.learner.acting_updates  # each member's own lag, logged as the SB3 face logs it
        finite = self.learner.finite_members().cpu().numpy()
        for run in self.live:
            member = {name: float(values[name][run.index]) for name in values}
            reason = nonfinite_reason(member, self.learner.updates_done, bool(finite[run.index]))
            if reason is not None:
                self.fail(run, f"FloatingPointError: {reason}\n")
                continue

            def log(run: _MemberRun = run, member: dict[str, float] = member) -> None:
                row = run.recorder.add_update(
                    member, timesteps=self.timesteps, episodes=run.episodes,
                    returns=list(run.episode_returns), lengths=list(run.episode_lengths),
                )
                if run.writer is None:
                    return
                scalars = {f"train/{name}": member[name] for name in (*contract.UPDATE_STATISTICS, "loss")}
                scalars["train/acting_update"] = float(acting[run.index])
                if row["rollout_return_mean"] is not None:
                    scalars["rollout/ep_rew_mean"] = row["rollout_return_mean"]
                    scalars["rollout/ep_len_mean"] = row["rollout_length_mean"]
                add_scalars(run.writer, scalars, self.timesteps)

            self.guarded(run, log)

    def write_progress(self) -> None:
        for run in self.live:
            self.guarded(run, lambda run=run: run.recorder.write_progress(force=True))

    def train(self) -> None:
        self.observer.started(self)
        # the first update's compilations now, built with the first act's (one compiler run)
        shape = self.train_env.observation_space.shape
        self.learner.compile_ahead(self._obs_tensor(np.zeros((self.k, self.n_envs, *shape), self.obs_dtype)))
        self.evaluate(0)
        obs = self._reset()
        starts = np.ones((self.k, self.n_envs), np.float32)
        while self.timesteps < self.total and self.live:
            rollout, obs, starts = self.collect(obs, starts)
            progress_remaining = max(0.0, 1.0 - self.timesteps / self.total)
            stats = self.learner.update(rollout, progress_remaining)
            self.record(stats)
        self.write_progress()
        if self.live:
            self.evaluate(self.timesteps)
            self.observer.finished(self)

    def summary(self, run: _MemberRun) -> dict[str, Any]:
        from adaptive_po.compiled import compile_fell_back

        final = run.recorder.evaluations[-1]
        return {
            "final_eval_return_mean": final["eval_return_mean"],
            "final_eval_return_std": final["eval_return_std"],
            "eval_episodes": final["eval_episodes"],
            "timesteps": int(self.timesteps),
            "updates": len(run.recorder.progress),
            "backend": self.backend,
            "env_id": self.env_id,
            "engine": "population",
            "population_size": self.k,
            # the numerics of the run: a compiled step rounds differently from the eager one, so the
            # same seed gives another run (ADAPTIVE_PO_COMPILE=0 reproduces an eager run)
            "step": "compiled" if self.learner.compile_step and not compile_fell_back() else "eager",
        }

    def close(self) -> None:
        for run in self.runs:
            if run.writer is not None:
                run.writer.close()
        self.train_env.close()
        self.eval_env.close()


def execute_population(specs: Sequence[RunSpec | dict[str, Any]], observer: PopulationObserver | None = None) -> list[dict[str, Any]]:
    """Train a population into its members' run folders; never raises. ``observer`` (diagnostics
    only) sees the training loop's events.

    Returns one record per spec, in order, shaped like :func:`~adaptive_po.bench.process_engine.execute_run`'s:
    ``{"run_dir", "relative_dir", "status": "skipped" | "complete" | "failed", "final_return",
    "wall_time_s", "error"?, "traceback"?}``. Complete members with the same configuration are
    skipped (resume works per run); the folders of the others are started afresh.
    """
    specs = [RunSpec.from_dict(s) if isinstance(s, dict) else s for s in specs]
    started = time.time()
    results: list[dict[str, Any]] = [
        {"run_dir": str(s.run_dir), "relative_dir": str(s.relative_dir), "status": "failed"} for s in specs
    ]
    runs: list[_MemberRun] = []
    population: _Population | None = None
    try:
        keys = {population_key(s) for s in specs}
        if len(keys) > 1:
            raise ValueError(f"these runs cannot share a population (they differ in more than seed and data dials): {sorted(map(str, keys))}")
        settings = read_settings(specs[0])  # one environment file and variant for every member
        for i, spec in enumerate(specs):
            config = config_for(spec, settings)
            summary = completed_summary(spec, config)
            if summary is not None:
                results[i] = {**results[i], "status": "skipped", "final_return": summary.get("final_eval_return_mean"), "wall_time_s": 0.0}
            else:
                recorder = RunRecorder(spec.run_dir, spec.total_timesteps, config["eval_freq"], started)
                runs.append(_MemberRun(len(runs), spec, config, recorder))
        for run in runs:
            start_run_folder(run.spec, run.config)
        if runs:
            population = _Population(runs, settings, observer)
            population.train()
        for run in runs:
            if run.failed is None:
                try:
                    finish_run_folder(run.spec, population.summary(run), time.time() - started)  # type: ignore[union-attr]
                except Exception:  # noqa: BLE001
                    population.fail(run, traceback.format_exc())  # type: ignore[union-attr]
        for run in runs:
            i = next(j for j, spec in enumerate(specs) if spec is run.spec)
            if run.failed is None:
                results[i] = {**results[i], "status": "complete", "final_return": run.recorder.evaluations[-1]["eval_return_mean"], "wall_time_s": time.time() - started}
            else:
                results[i] = {**results[i], "status": "failed", "error": run.failed, "traceback": run.failure, "wall_time_s": time.time() - started}
    except BaseException as err:  # noqa: BLE001 - a population must never take the sweep down
        text = compact_traceback(traceback.format_exc())
        last = error_line(text) if text.strip() else error_line(err)
        member = {id(r.spec): r for r in runs}
        for i, spec in enumerate(specs):
            if results[i]["status"] in ("skipped", "complete"):
                continue
            run = member.get(id(spec))
            if run is not None and run.failed is not None:  # failed on its own before the error
                results[i] = {**results[i], "error": run.failed, "traceback": run.failure, "wall_time_s": time.time() - started}
                continue
            if isinstance(err, KeyboardInterrupt):  # a stop, not the runs' failure: left incomplete, redone
                interrupt_run_folder(spec)
                continue
            fail_run_folder(spec, text)
            results[i] = {**results[i], "status": "failed", "error": last, "traceback": text, "wall_time_s": time.time() - started}
        if isinstance(err, KeyboardInterrupt):
            raise
    finally:
        if population is not None:
            population.close()
    compiled = sys.modules.get("adaptive_po.compiled")  # imported where a population was built
    reason = compiled.compile_fallback_reason() if compiled is not None else None
    if reason is not None and population is not None and population.learner.compile_step:
        # the runs trained eagerly although compiling was asked for: said by the sweep's driver too
        # (a worker's own line goes to its log only)
        for result in results:
            if result["status"] != "skipped":
                result["compile_fallback"] = reason
    return results
