"""A run's identity and its folder's life: what a run is, what it records, whether it is done.

:class:`RunSpec` identifies one run (suite, environment, algorithm, seed, budget, its
:class:`~adaptive_po.dials.DataDials`, variant); :func:`config_for` is the resolved configuration
its ``config.json`` records; :func:`run_folder_state` decides on resume whether a complete run is
the same, damaged or changed; :func:`start_run_folder`, :func:`finish_run_folder` and
:func:`fail_run_folder` are the folder's life, written atomically (the contract in
``runs/README.md``). Both engines use them.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from adaptive_po import contract
from adaptive_po.dials import DataDials
from adaptive_po.contract import FAILED, STATUS_FILE
from adaptive_po.contract import atomic_write_json, is_complete
from adaptive_po.bench.divergence import divergence_of_file
from adaptive_po.bench.locks import claim_run_folder, owned_by_another, release_run_folder, wait_for_owner


@dataclass(frozen=True)
class RunSpec:
    """Everything that identifies one run. ``total_timesteps`` is resolved (never None here)."""

    suite: str
    env: str
    algo: str
    seed: int
    total_timesteps: int
    #: how the run's data is produced (validated on construction: ValueError naming the bad dial)
    dials: DataDials = field(default_factory=DataDials)
    #: knob values other than the defaults (adaptive_po.bench.variants); "" = the defaults
    variant: str = ""
    device: str = "cpu"
    backend: str = "auto"
    out: str = "runs"
    envs_dir: str | None = None
    #: write TensorBoard events into the run folder's tb/ (progress.csv holds the same statistics)
    tensorboard: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.dials, DataDials):
            raise TypeError(f"RunSpec.dials must be a DataDials, got {type(self.dials).__name__}")

    @property
    def condition(self) -> str:
        return self.dials.condition

    @property
    def algo_label(self) -> str:
        return contract.algo_label(self.algo, self.variant)

    @property
    def relative_dir(self) -> Path:
        return contract.run_relative_dir(self.suite, self.env, self.algo_label, self.condition, self.seed)

    @property
    def run_dir(self) -> Path:
        return Path(self.out) / self.relative_dir

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        """The inverse of :meth:`to_dict` (a spec travels to its worker as JSON)."""
        return cls(**{**data, "dials": DataDials.from_mapping(data.get("dials", {}))})


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("adaptive-po", "torch", "stable-baselines3", "gymnasium", "envpool", "numpy"):
        try:
            out[package.replace("-", "_")] = version(package)
        except PackageNotFoundError:
            out[package.replace("-", "_")] = "not installed"
    return out


# -- the run --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSettings:
    """A run's environment file and its settings, read once per run (or once per population: its
    members differ in seed and data dials only) and handed to everything that needs them: the
    configuration written to ``config.json``, the learner and its environments."""

    env_cfg: Any  #: the environment's :class:`~adaptive_po.bench.config.EnvConfig`
    hp: Any  #: the run's :class:`~adaptive_po.hyperparams.Hyperparams`, the variant's values in place (PQN: its ``PQNHyperparams``)
    objective_kwargs: dict[str, Any]  #: the objective's keyword arguments the variant sets


def read_settings(spec: RunSpec) -> RunSettings:
    """Read ``spec``'s environment file and apply its variant (:func:`run_settings`)."""
    from adaptive_po.bench.config import get_env_config
    from adaptive_po.hyperparams import VALUE_ALGORITHMS

    env_cfg = get_env_config(spec.env, spec.envs_dir)
    if spec.algo in VALUE_ALGORITHMS:  # PQN: its own settings, no objective; its variants set the dial and the width
        from adaptive_po.bench.variants import apply_variant

        return RunSettings(env_cfg, apply_variant(spec.algo, spec.variant, env_cfg.pqn, {})[0], {})
    hp, objective_kwargs = run_settings(spec, env_cfg.hyperparams)
    return RunSettings(env_cfg, hp, objective_kwargs)


def config_for(spec: RunSpec, settings: RunSettings | None = None) -> dict[str, Any]:
    """The resolved configuration written to ``config.json`` (and compared on resume); ``settings``
    (:func:`read_settings`) where the caller has read them already."""
    from adaptive_po.objectives import get_objective

    from adaptive_po.bench.variants import DEFAULT_PRECISION, learner_precision
    from adaptive_po.hyperparams import VALUE_ALGORITHMS

    settings = settings if settings is not None else read_settings(spec)
    env_cfg, hp, objective_kwargs = settings.env_cfg, settings.hp, settings.objective_kwargs
    if spec.algo in VALUE_ALGORITHMS:
        return {**_run_identity(spec, env_cfg, hp.n_envs, hp.network), "hyperparams": hp.to_json(),
                "objective_kwargs": {}, "advantage_estimator": "q-lambda", "algo_description": PQN_DESCRIPTION}
    objective = get_objective(spec.algo)
    precision = learner_precision(spec.algo, spec.variant)
    # recorded where a variant chooses it (float32 runs' configurations stay as they were)
    learner = {} if precision == DEFAULT_PRECISION else {"learner_precision": precision}
    # recorded where a variant names the update's schedule (n_steps, or epochs or the minibatch in
    # their own terms): how many optimizer steps an update takes and on how many samples each
    schedule = {"update_schedule": update_schedule(hp, objective)} if schedule_named(spec.algo, spec.variant) else {}
    return {
        **_run_identity(spec, env_cfg, hp.n_envs, hp.policy),
        # the environment's tuned knobs the objective does not take (ESSPO has no clip range) are
        # not recorded: they play no part in the run
        "hyperparams": {k: v for k, v in hp.to_json().items() if k not in unused_tuned_knobs(spec.algo)},
        "objective_kwargs": _json_friendly({**objective.kwargs, **objective_kwargs}),
        "advantage_estimator": objective.advantage_estimator,
        "algo_description": objective.description,
        **learner,
        **schedule,
    }


#: ``config.json``'s ``algo_description`` of PQN runs
PQN_DESCRIPTION = "PQN (arXiv 2407.04811): Q(lambda) targets, LayerNorm Q-network, epsilon-greedy, no target network or replay buffer"


def _run_identity(spec: RunSpec, env_cfg: Any, n_envs: int, policy: str) -> dict[str, Any]:
    """The keys of ``config.json`` every algorithm records alike: the run, its data dials, its
    environments and network (``policy``), the environment's scores and evaluation."""
    return {
        "run_format": contract.RUN_FORMAT,
        "suite": spec.suite,
        "env": spec.env,
        "algo": spec.algo,
        "seed": spec.seed,
        **spec.dials.to_dict(),
        "variant": spec.variant,
        "condition": spec.condition,
        "total_timesteps": spec.total_timesteps,
        "n_envs": n_envs,
        "policy": policy,
        "backend": spec.backend,
        "device": spec.device,
        "normalize": env_cfg.normalize,
        "random_score": env_cfg.random_score,
        "solved_threshold": env_cfg.solved_threshold,
        "eval_episodes": env_cfg.eval_episodes,
        "eval_freq": env_cfg.eval_every,
    }


def schedule_named(algo: str, variant: str) -> bool:
    """Whether ``variant`` names the update's schedule in the terms that came with the schedule
    dial (``n_steps``, ``n_epochs=<k>``, ``batch_size=rollout``); older variants' configurations
    stay as they were."""
    from adaptive_po.bench.variants import parse_variant

    parsed = parse_variant(algo, variant)
    return "n_steps" in parsed or any(kind == "fix" for kind, _ in parsed.values())


def update_schedule(hp: Any, objective: Any) -> dict[str, Any]:
    """One update in optimizer steps: ``steps_per_update`` (epochs x minibatches of the rollout),
    ``samples_per_step`` (the minibatch; the last one of an epoch may be shorter), and what the ESS
    objectives compute e over: the minibatch, which is the whole step's batch when the minibatch is
    the rollout, or the whole update's batch (``esspo-batch-ess``)."""
    rollout = hp.n_envs * hp.n_steps
    minibatches = -(-rollout // hp.batch_size)
    ess_over = "the whole update's batch" if objective.needs_batch_ess else (
        "the whole rollout (each step's batch)" if hp.batch_size >= rollout else "the minibatch"
    )
    return {
        "rollout_samples": rollout, "samples_per_step": min(hp.batch_size, rollout), "minibatches_per_epoch": minibatches,
        "steps_per_update": hp.n_epochs * minibatches, "ess_over": ess_over,
    }


def run_settings(spec: RunSpec, hp: Any) -> tuple[Any, dict[str, Any]]:
    """The run's hyper-parameters and objective keyword arguments: the environment's tuned values
    with the variant's in place (both engines build their learners from these)."""
    from adaptive_po.bench.variants import apply_variant
    from adaptive_po.objectives import get_objective

    return apply_variant(spec.algo, spec.variant, hp, hp.tuned_values(get_objective(spec.algo).tuned))


@functools.lru_cache(maxsize=None)
def unused_tuned_knobs(algo: str) -> frozenset[str]:
    """The environment-tuned hyper-parameters (``Hyperparams`` fields of role ``tuned``, such as
    ``clip_range``) that the objective ``algo`` does not declare (``ObjectiveSpec.tuned``): never
    passed to it, so neither recorded in ``config.json`` nor compared on resume."""
    import dataclasses

    from adaptive_po.hyperparams import VALUE_ALGORITHMS, Hyperparams
    from adaptive_po.objectives import get_objective

    if algo in VALUE_ALGORITHMS:  # its config.json records its own settings, none of PPO's
        return frozenset()
    tuned = {f.name for f in dataclasses.fields(Hyperparams) if f.metadata.get("role") == "tuned"}
    return frozenset(tuned - set(get_objective(algo).tuned))


def comparable_config(config: Mapping[str, Any], algo: str) -> dict[str, Any]:
    """``config`` as far as it decides what a run computes, in its JSON form (as ``config.json``
    holds it): without the objective's prose (``algo_description``: rewording it changes no
    result) and without the tuned knobs ``algo`` does not use (a run recorded before they were left
    out, ESSPO's ``config.json`` with ``hyperparams.clip_range``, is the same configuration)."""
    config = {k: v for k, v in json.loads(json.dumps(config, default=str)).items() if k != "algo_description"}
    hyperparams = config.get("hyperparams")
    unused = unused_tuned_knobs(algo)
    if not isinstance(hyperparams, dict) or not unused & set(hyperparams):
        return config
    return {**config, "hyperparams": {k: v for k, v in hyperparams.items() if k not in unused}}


def _json_friendly(values: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(values, default=repr))


#: what :func:`run_folder_state` finds in a run folder before a run starts
RUN_NEW = "new"  #: no complete run (absent, incomplete or failed): the run is (re)done
RUN_SAME = "same"  #: complete, intact, with the requested configuration: skipped
RUN_DAMAGED = "damaged"  #: complete, but its files fail the check: redone, with the reason printed
RUN_CHANGED = "changed"  #: complete and intact, made with another configuration: redone only on request


@dataclass(frozen=True)
class RunFolderState:
    """What a run folder holds, compared with the run requested for it."""

    kind: str
    summary: dict[str, Any] | None = None
    #: damaged: why; changed: the differing keys, ``"total_timesteps 2048 -> 2304"``
    reasons: tuple[str, ...] = ()


_ABSENT = object()


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def config_differences(recorded: dict[str, Any], requested: dict[str, Any], prefix: str = "") -> list[str]:
    """``["total_timesteps 2048 -> 2304", "hyperparams.learning_rate 0.0003 -> 0.001"]``: the keys
    of ``requested`` (nested mappings key by key) whose value in ``recorded`` differs. Keys only
    ``recorded`` has count at nested levels; at the top level they are ignored (``versions``)."""
    out = []
    for key, new in requested.items():
        old = recorded.get(key, _ABSENT)
        name = f"{prefix}{key}"
        if isinstance(new, dict) and isinstance(old, dict):
            out += config_differences(old, new, f"{name}.")
            out += [f"{name}.{k} {_shown(old[k])} -> (absent)" for k in old if k not in new]
        elif old != new:
            out.append(f"{name} {_shown(old)} -> {_shown(new)}")
    return out


def run_folder_state(spec: RunSpec, config: dict[str, Any] | None = None) -> RunFolderState:
    """Compare the run folder of ``spec`` with the run requested (``config``: :func:`config_for`).

    A complete run is never removed without its reason being known here: it is either the same
    run (skip it), damaged (:func:`~adaptive_po.contract.verify_complete_run` names why)
    or made with another configuration (the differing keys, old -> new)."""
    run_dir = spec.run_dir
    # a folder of the run's path that is a link (copied results, or planted) would send the run's
    # files outside the results: named and refused before anything runs
    contract.check_no_links(Path(spec.out) / spec.suite, run_dir)
    if not is_complete(run_dir):
        return RunFolderState(RUN_NEW)
    problem = contract.verify_complete_run(run_dir)
    if problem is not None:
        return RunFolderState(RUN_DAMAGED, reasons=(problem,))
    config = config if config is not None else config_for(spec)
    try:
        previous = json.loads(contract.read_regular_text(run_dir / contract.CONFIG_FILE))
        summary = json.loads(contract.read_regular_text(run_dir / contract.SUMMARY_FILE))
    except (OSError, ValueError) as err:
        return RunFolderState(RUN_DAMAGED, reasons=(f"{contract.CONFIG_FILE} or {contract.SUMMARY_FILE} cannot be read ({err})",))
    if not isinstance(previous, dict) or not isinstance(summary, dict):
        return RunFolderState(RUN_DAMAGED, reasons=(f"{contract.CONFIG_FILE} or {contract.SUMMARY_FILE} is not a JSON object",))
    requested = comparable_config(config, spec.algo)
    changes = config_differences(comparable_config(previous, spec.algo), requested)
    if changes:
        return RunFolderState(RUN_CHANGED, summary=summary, reasons=tuple(changes))
    return RunFolderState(RUN_SAME, summary=summary)


def completed_summary(spec: RunSpec, config: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The summary of a complete run with the same configuration as ``spec``, else ``None``
    (:func:`run_folder_state`: a damaged run, or one made with another configuration, is not
    trusted; whether it may be redone is the caller's decision, taken before it starts workers)."""
    state = run_folder_state(spec, config)
    return state.summary if state.kind == RUN_SAME else None


def start_run_folder(spec: RunSpec, config: dict[str, Any]) -> None:
    """A fresh folder for ``spec`` with its ``config.json`` (an earlier incomplete, failed or
    differently configured attempt is removed), owned by this process until the run ends.

    A folder that a live process other than this one owns (an orphaned worker of a killed sweep
    that has not died yet) is waited for, never removed under it: ``RunFolderBusy`` if it stays."""
    run_dir = spec.run_dir
    contract.check_no_links(Path(spec.out) / spec.suite, run_dir)
    if run_dir.exists():
        wait_for_owner(run_dir)
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    claim_run_folder(run_dir)
    atomic_write_json(run_dir / contract.CONFIG_FILE, {**config, "versions": _versions()})


def finish_run_folder(spec: RunSpec, summary: dict[str, Any], wall_time_s: float) -> dict[str, Any]:
    """Write ``summary.json`` and then ``COMPLETE``; returns the summary as written.

    The summary records the size and sha256 of ``config.json``, ``progress.csv`` and ``eval.csv``
    and ``COMPLETE`` those of the summary (:func:`~adaptive_po.contract.write_completion`,
    checked before the run is trusted), and whether the run diverged without a NaN
    (:data:`~adaptive_po.contract.SUMMARY_DIVERGED`,
    :func:`~adaptive_po.bench.divergence.divergence_reason`; null when it did not)."""
    run_dir = spec.run_dir
    summary = {
        **summary,
        "wall_time_s": round(wall_time_s, 3),
        "status": "complete",
        contract.SUMMARY_DIVERGED: divergence_of_file(run_dir / contract.PROGRESS_FILE),
    }
    summary = contract.write_completion(run_dir, summary, datetime.now(timezone.utc).isoformat())
    status_file = run_dir / STATUS_FILE
    if status_file.exists():
        status_file.unlink()
    release_run_folder(run_dir)
    return summary


def interrupt_run_folder(spec: RunSpec) -> None:
    """Leave the folder of a run that a stop (Ctrl-C, SIGTERM) interrupted as it is, incomplete:
    no ``FAILED`` (the analysis would score it at the random score as the objective's failure,
    which it is not), no ``COMPLETE``; only this process's claim on it goes. The analysis leaves
    an incomplete folder out, naming it, and the rerun trains the run again."""
    try:
        if spec.run_dir.is_dir():
            release_run_folder(spec.run_dir)
    except OSError:
        pass


def fail_run_folder(spec: RunSpec, text: str) -> None:
    """Leave ``FAILED`` with ``text`` (the error and its traceback) in the run folder, if possible;
    never in a folder that a live process other than this one owns (its run is not ours to mark),
    and never beside a ``COMPLETE`` marker.

    A run is complete from the moment its ``COMPLETE`` is written; an error after that (a stop,
    SIGTERM or Ctrl-C, reaching the worker while it tidies up, or an error before this attempt
    cleared the folder of an earlier complete run) is this process's, not the run's: marking the
    run FAILED would make it "both COMPLETE and FAILED", damaged, and a rerun would train it again
    after a stop. Its outcome still says failed; the folder is left as it is."""
    try:
        if owned_by_another(spec.run_dir) or os.path.lexists(spec.run_dir / contract.COMPLETE):
            return
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        contract.atomic_write_text(spec.run_dir / FAILED, text)
        release_run_folder(spec.run_dir)
    except OSError:
        pass


