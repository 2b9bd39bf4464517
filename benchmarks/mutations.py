"""The mutation table: do the fast tests catch a wrong line where it matters?

Each mutation is one single-line bug: a flipped sign, an off-by-one, a wrong operator, a dropped
term, swapped arguments, a wrong reduction, a wrong index. They are planted in the training step
(``adaptive_po/update.py``, ``objectives.py``, ``distributions.py``), and beyond it: in how data is
produced (the collector, the sampler, the rollout buffers, the staleness queue, the population
engine), in the bench (resume, the integrity records of complete runs, the grid's expansion), in
the analysis (Welch's t, Holm's adjustment, the equivalence test, the score normalization) and in
how a study's plan file is read (a slope's margin, a Holm family, the decision rule, the pilot's rule).
One at a time, in a copy of the repository (this checkout is never written to), the script plants
it and runs that mutation's own selection of fast tests (``-m "not slow"``, stopping at the first
failure): the tests that guard that part of the code, a file or a few test ids, so a collector bug
runs the collector's tests and an analysis bug the analysis tests. A mutation is *caught* when a
test fails, and *survives* when they all pass. It prints a Markdown table (file, the line as
written, the mutation, caught?, the first failing test) and exits 1 if any mutation survives.

A mutation is ``(path, exact original text, replacement, description, tests)``: the text must
occur exactly once in the file, or the script stops and says which one moved (the files are
refactored as the project goes; fix the anchor, keep the bug). Before the mutants, the unmutated
copy must pass the union of the selected tests (run once), and must be the copy that the tests
import (the project is installed in editable mode, pointing at this checkout). ``--tests``
replaces every mutation's selection with the one given.

Usage::

    python benchmarks/mutations.py                       # every mutation, each with its own tests
    python benchmarks/mutations.py --only 3              # the third mutation only
    python benchmarks/mutations.py --list                # the mutations, without running anything
    python benchmarks/mutations.py --out docs/mutations.md --tests tests/test_sb3_oracle.py
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the training step's fast test files (no ``slow`` marker needed), cheapest first: with ``-x`` a
#: mutant stops at its first failure, so the unit tests of the pure functions run before the
#: end-to-end oracles
DEFAULT_TESTS: tuple[str, ...] = (
    "tests/test_objectives.py",
    "tests/test_objectives_cited.py",
    "tests/test_update.py",
    "tests/test_sb3_oracle.py",
)

#: seconds one mutant's test run may take before it counts as a failure of the script itself
RUN_TIMEOUT = 900


@dataclass(frozen=True)
class Mutation:
    path: str  #: relative to the repository root
    original: str  #: exact text, found exactly once in the file
    replacement: str
    description: str  #: what bug this is, in words
    #: the fast tests (files, or ids ``file::test``) that guard this line, run on the mutant
    tests: tuple[str, ...] = DEFAULT_TESTS


UPDATE, OBJECTIVES, DISTRIBUTIONS = "adaptive_po/update.py", "adaptive_po/objectives.py", "adaptive_po/distributions.py"
COLLECTOR, SAMPLER, BUFFERS, STALENESS = "adaptive_po/collector.py", "adaptive_po/sampler.py", "adaptive_po/buffers.py", "adaptive_po/staleness.py"
POPULATION, POPULATION_ENGINE = "adaptive_po/population.py", "adaptive_po/bench/population_engine.py"
RESUME, CONTRACT, GRID = "adaptive_po/bench/resume.py", "adaptive_po/contract.py", "adaptive_po/bench/grid.py"
HYPOTHESIS, STATS = "adaptive_po/analysis/hypothesis.py", "adaptive_po/analysis/stats.py"

#: each part's guards, cheapest first (a file, or the few test ids that exercise the line)
COLLECTOR_TESTS = ("tests/test_collector.py", "tests/test_sampler.py::test_collector_records_the_sampler_or_the_learner")
SAMPLER_TESTS = ("tests/test_sampler.py",)
BUFFER_TESTS = (
    "tests/test_objectives_cited.py::test_vtrace_three_steps_with_a_terminal_in_the_middle",
    "tests/test_objectives_cited.py::test_vtrace_truncation_levels_and_last_done",
    "tests/test_update.py", "tests/test_collector.py",
)
STALENESS_TESTS = (
    "tests/test_population.py::test_the_replay_dial_trains_on_the_m_previous_rollouts_and_no_more",
    "tests/test_lag_path.py::test_the_stale_queue_is_the_one_both_engines_keep", "tests/test_collector.py",
)
POPULATION_TESTS = (
    "tests/test_population.py::test_the_lag_dial_gives_each_member_its_own_k_old_parameters",
    "tests/test_population.py::test_the_noise_dial_gives_each_member_its_own_noise_and_recording",
    "tests/test_population.py::test_population_run_folders_are_the_runners",
)
RESUME_TESTS = ("tests/test_bench.py::test_the_resume_plan_skips_complete_runs_and_redoes_damaged_ones",)
INTEGRITY_TESTS = (
    "tests/test_integrity.py::test_completion_records_every_file_a_result_depends_on",
    "tests/test_integrity.py::test_one_changed_byte_in_any_file_is_named",
    "tests/test_integrity.py::test_a_missing_or_edited_record_is_damage_not_a_pass",
)
GRID_TESTS = (
    "tests/test_bench.py::test_grid_expansion_and_folders", "tests/test_bench.py::test_bad_grid_is_rejected_before_compute",
    "tests/test_bench.py::test_seeds_parsing",
)
HYPOTHESIS_TESTS = (
    "tests/test_calibration.py::test_welch_matches_scipy",
    "tests/test_calibration.py::test_a_mean_over_tasks_of_one_task_is_welch_and_a_paired_sample_is_a_one_sample_t",
    "tests/test_calibration.py::test_holm_against_a_worked_example_and_nan_left_out",
    "tests/test_calibration.py::test_equivalence_needs_a_tight_interval_inside_the_margin",
    "tests/test_calibration.py::test_equivalence_is_refused_outside_the_margin_on_either_side",
    "tests/test_calibration.py::test_the_detectable_difference_is_found_with_80_percent_power",
)
NORMALIZATION_TESTS = ("tests/test_analysis.py::test_normalized_score",)
QUATRO_TESTS = ("tests/test_quatro.py",)
STUDY_TESTS = ("tests/test_study_plan.py",)
ENDPOINTS, PLAN, PILOT = "adaptive_po/analysis/endpoints.py", "adaptive_po/studies/plan.py", "adaptive_po/studies/pilot.py"
SEARCHED, SEARCHED_TESTS = "adaptive_po/bench/searched.py", ("tests/test_searched_study.py",)
SEARCHED_REPORT, SEARCHED_REPORT_TESTS = "adaptive_po/analysis/searched_report.py", ("tests/test_searched_report.py",)
PQN, BATCH_SCALING = "adaptive_po/pqn.py", "adaptive_po/batch_scaling.py"
PQN_TARGET_TESTS = (
    "tests/test_pqn.py::test_q_lambda_returns_by_hand_across_an_episode_end",
    "tests/test_pqn.py::test_targets_of_a_stored_rollout_bootstrap_a_time_limit_from_the_true_last_observation",
)
PQN_ACTING_TESTS = (
    "tests/test_pqn.py::test_epsilon_decays_linearly_then_stays",
    "tests/test_pqn.py::test_action_noise_perturbs_the_acting_q_values_before_the_argmax",
)
AFTER_ABS_TESTS = (
    "tests/test_pqn.py::test_after_abs_rollout_lengths_on_a_scripted_divergence_sequence",
    "tests/test_pqn.py::test_pqn_sets_each_rollout_from_the_last_updates_divergence",
)

MUTATIONS: tuple[Mutation, ...] = (
    # -- the minibatch loss (update.py) ------------------------------------------------------------
    Mutation(UPDATE, "entropy_loss = -torch.mean(entropy)", "entropy_loss = torch.mean(entropy)",
             "entropy bonus with the wrong sign (an entropy penalty)"),
    Mutation(UPDATE, "ent_coef * entropy_loss + vf_coef * value_loss", "ent_coef * entropy_loss + 0.5 * value_loss",
             "vf_coef ignored (SB3's default 0.5 hard-coded)"),
    Mutation(UPDATE, 'value_loss = torch.mean((minibatch["returns"] - values) ** 2)',
             'value_loss = torch.sum((minibatch["returns"] - values) ** 2)',
             "value loss summed, not averaged, over the minibatch"),
    Mutation(UPDATE, "values = start + torch.clamp(values - start, -clip_range_vf, clip_range_vf)",
             "values = torch.clamp(values - start, -clip_range_vf, clip_range_vf)",
             "value clipping drops the start value (clips the value itself around 0)"),
    Mutation(UPDATE, "if normalize_advantage:", "if True:",
             "normalize_advantage=False ignored (always normalized)"),
    Mutation(UPDATE, "return (advantages - advantages.mean()) / advantage_scale(advantages)",
             "return advantages / advantage_scale(advantages)",
             "advantage normalization does not subtract the mean"),
    Mutation(UPDATE, "if not objective.needs_kl:", "if objective.needs_kl:",
             "KL-to-behaviour gradient given to the wrong objectives (ESSPO's KL pull detached)"),
    Mutation(UPDATE, '"entropy": -entropy_loss', '"entropy": entropy_loss',
             "logged entropy with the wrong sign"),
    Mutation(UPDATE, "return ((torch.exp(log_ratio) - 1.0) - log_ratio).mean(-1)",
             "return ((torch.exp(log_ratio) - 1.0) + log_ratio).mean(-1)",
             "approx_kl (target_kl's early stop) with the wrong sign of log r"),
    # -- data preparation and statistics (update.py) --------------------------------------------------
    Mutation(UPDATE, "last_values, last_dones, gamma, gae_lambda)", "last_values, last_dones, gae_lambda, gamma)",
             "GAE with gamma and gae_lambda swapped"),
    Mutation(UPDATE, "rewards = rewards + gamma * truncation_values", "rewards = rewards + truncation_values",
             "time-limit bootstrap not discounted by gamma"),
    Mutation(UPDATE, 'stats["loss"] = column["loss"][..., -1]', 'stats["loss"] = column["loss"][..., 0]',
             "logged loss of the first minibatch, not the last (off by one)"),
    Mutation(UPDATE, 'torch.full_like(var_y, float("nan")), 1.0 - ratio)', 'torch.full_like(var_y, float("nan")), ratio)',
             "explained variance without the 1 - (reports the unexplained fraction)"),
    # -- the update loop (update.run_update) ---------------------------------------------------------------
    Mutation(UPDATE, "    for epoch in range(n_epochs):", "    for epoch in range(n_epochs - 1):",
             "one epoch too few per update (off by one)"),
    Mutation(UPDATE, "minibatch[\"replay_ess\"] = replay_ess", "minibatch[\"replay_ess\"] = torch.ones_like(replay_ess)",
             "the replayed batches' ESS never reaches the loss"),
    Mutation(UPDATE, "values=data[\"values\"][..., :n_fresh], returns=data[\"returns\"][..., :n_fresh],",
             "values=data[\"values\"], returns=data[\"returns\"],",
             "explained variance over the replayed batches too, not the fresh rollout only"),
    Mutation(UPDATE, "stats, stop = face.step(minibatch, arguments, clip_range_vf)",
             "stats, stop = face.step(minibatch, arguments, clip_range_vf)[0], False",
             "SB3's target_kl stop ignored (the epochs go on after the stop)"),
    Mutation(UPDATE, "arguments = {**schedule_values, **objective_state}", "arguments = dict(schedule_values)",
             "the objective's per-run state (adaptive KL-PPO's coefficient) never reaches the loss"),
    # -- the objectives (objectives.py) -------------------------------------------------------------------
    Mutation(OBJECTIVES, "- math.log(n) - torch.logsumexp(2.0 * shifted, 0)", "- math.log(n - 1) - torch.logsumexp(2.0 * shifted, 0)",
             "ESS divided by n - 1 instead of n (off by one)"),
    Mutation(OBJECTIVES, "weight64 = torch.minimum(ratio, e) if cap else ratio", "weight64 = torch.maximum(ratio, e) if cap else ratio",
             "ESS cap as a floor: max(rho, e_B) instead of min(rho, e_B)"),
    Mutation(OBJECTIVES, "kl_weight = (1.0 - e).to(batch.log_prob.dtype)", "kl_weight = e.to(batch.log_prob.dtype)",
             "KL weight e_B instead of 1 - e_B"),
    Mutation(OBJECTIVES, "loss = policy_term + kl_weight * _kl_values(batch, kl).mean() if regularizer",
             "loss = policy_term - kl_weight * _kl_values(batch, kl).mean() if regularizer",
             "ESS objective's KL pull with the wrong sign (a push away from pi_b)"),
    Mutation(OBJECTIVES, "ratio * batch.advantages, torch.clamp(ratio, 1.0 - clip_range, 1.0 + clip_range) * batch.advantages",
             "ratio * batch.advantages, torch.clamp(ratio, 1.0 - clip_range, 1.0) * batch.advantages",
             "PPO clip's upper bound 1 instead of 1 + clip_range"),
    Mutation(OBJECTIVES, "clipped = ((ratio.detach() - 1.0).abs() > clip_range)", "clipped = ((ratio.detach() - 1.0) > clip_range)",
             "PPO's clip fraction counts only ratios above 1 + clip_range (abs dropped)"),
    Mutation(OBJECTIVES, "torch.exp(torch.clamp(-log_ratio, -SAMPLED_KL_CLAMP", "torch.exp(torch.clamp(log_ratio, -SAMPLED_KL_CLAMP",
             "sampled KL estimator with exp(+log r) instead of exp(-log r)"),
    Mutation(OBJECTIVES, "loss = policy_term + (dual * penalty).mean()", "loss = policy_term - (dual * penalty).mean()",
             "after QUATRO's log-ratio term with the wrong sign (a push away from pi_old)", QUATRO_TESTS),
    Mutation(OBJECTIVES, "penalty = ratio * log_ratio - ratio + 1.0", "penalty = ratio * log_ratio + ratio - 1.0",
             "after QUATRO's per-sample KL estimate r log r + r - 1 (not zero-mean at pi_old)", QUATRO_TESTS),
    Mutation(OBJECTIVES, "inside = tilted_kl(unit, torch.exp(middle)) <= radius", "inside = tilted_kl(unit, torch.exp(middle)) >= radius",
             "after QUATRO's dual bisected the wrong way (the multiplier runs to an end of its range)", QUATRO_TESTS),
    Mutation(UPDATE, "query_length = batches[0].rewards.shape[-2]", "query_length = batches[0].rewards.shape[-1]",
             "after QUATRO's queries cut by n_envs instead of n_steps (lanes mixed up)", QUATRO_TESTS),
    Mutation(UPDATE, "else query_dual / advantage_scale(advantages)", "else query_dual",
             "after QUATRO's multiplier not rescaled with the minibatch's normalized advantages", QUATRO_TESTS),
    # -- the distributions (distributions.py) -------------------------------------------------------------
    Mutation(DISTRIBUTIONS, "/ (2.0 * var) - log_std - _HALF_LOG_2PI", "/ var - log_std - _HALF_LOG_2PI",
             "Gaussian log-prob without the 2 in (a - mu)^2 / (2 sigma^2)"),
    Mutation(DISTRIBUTIONS, "var = torch.exp(2.0 * log_std)", "var = torch.exp(log_std)",
             "Gaussian variance exp(log_std) (the std) instead of exp(2 log_std)"),
    Mutation(DISTRIBUTIONS, "return (0.5 + _HALF_LOG_2PI + log_std).sum(-1)", "return (0.5 + _HALF_LOG_2PI - log_std).sum(-1)",
             "Gaussian entropy decreasing in the std (sign of log_std flipped)"),
    Mutation(DISTRIBUTIONS, "return -(log_p.exp() * log_p).sum(-1)", "return -(log_p.exp() * log_p).mean(-1)",
             "categorical entropy averaged, not summed, over the actions"),
    Mutation(DISTRIBUTIONS, "return (log_p.exp() * (log_p - log_q)).sum(-1)", "return (log_q.exp() * (log_p - log_q)).sum(-1)",
             "categorical KL weighted by q instead of p"),
    Mutation(DISTRIBUTIONS, "mean_term = ((mean_p - mean_q) * torch.exp(-log_std_q)) ** 2",
             "mean_term = ((mean_p - mean_q) * torch.exp(-log_std_p)) ** 2",
             "Gaussian KL's mean term scaled by p's std, not q's (swapped)"),
    Mutation(DISTRIBUTIONS, "- 1.0) - (log_std_p - log_std_q)).sum(-1)", "- 1.0) + (log_std_p - log_std_q)).sum(-1)",
             "Gaussian KL's log-std term with the wrong sign"),
    # -- the staleness queue (staleness.py, both engines) ---------------------------------------------
    Mutation(STALENESS, "self.replayed: deque[Rollout] = deque(maxlen=max(self.replay, 1))",
             "self.replayed: deque[Rollout] = deque(maxlen=self.replay + 1)",
             "replay keeps m + 1 old rollouts, not m", STALENESS_TESTS),
    Mutation(STALENESS, "self.snapshots: deque[Snapshot] = deque(maxlen=max(self.lags) + 1)",
             "self.snapshots: deque[Snapshot] = deque(maxlen=max(self.lags))",
             "the snapshot queue one short of the longest lag (off by one)", STALENESS_TESTS),
    Mutation(STALENESS, "return [max(0, self.updates - lag) for lag in self.lags]",
             "return [max(0, self.updates - lag - 1) for lag in self.lags]",
             "every actor one update staler than its lag (off by one)", STALENESS_TESTS),
    # -- the collector (collector.py) ------------------------------------------------------------------
    Mutation(COLLECTOR, "return ActorStep(actions, sampler.log_prob(actions), sampler.logits)",
             "return ActorStep(actions, distribution.log_prob(actions), sampler.logits)",
             "the actual recording stores the clean policy's log-prob beside the sampler's logits", COLLECTOR_TESTS),
    Mutation(COLLECTOR, "return ActorStep(actions, sampler.log_prob(actions).sum(-1), perturbed)",
             "return ActorStep(actions, sampler.log_prob(actions).sum(-1), clean_params)",
             "Box actions: the noisy log-prob recorded with the clean Gaussian's parameters", COLLECTOR_TESTS),
    Mutation(COLLECTOR, "self._actor.load_state_dict(self._stale.snapshots[self._stale.acting_slots()[0]])",
             "self._actor.load_state_dict(self._stale.snapshots[-1])",
             "the lagged actor loads the newest parameters (the lag ignored)", COLLECTOR_TESTS),
    Mutation(COLLECTOR, "if self.dials.action_noise == 0.0 and self.dials.sampler_temperature == 1.0 and self._sampler is None:",
             "if self.dials.action_noise == 0.0 and self._sampler is None:",
             "the sampling temperature ignored when there is no noise and no low-precision sampler", COLLECTOR_TESTS),
    Mutation(COLLECTOR, "source = dict(self.acting_policy.named_parameters())", "source = dict(self._learner.named_parameters())",
             "the low-precision sampler copies the learner, not the lagged acting parameters",
             ("tests/test_sampler.py::test_sampler_precision_follows_the_lagged_acting_parameters", *COLLECTOR_TESTS)),
    # -- the sampler (sampler.py) ------------------------------------------------------------------------
    Mutation(SAMPLER, "scale = torch.where(amax > 0, amax / finfo_max, torch.ones_like(amax))",
             "scale = torch.where(amax > 0, finfo_max / amax, torch.ones_like(amax))",
             "fp8 scale inverted: max_representable / amax", SAMPLER_TESTS),
    Mutation(SAMPLER, "reduce_dims = tuple(range(batch_dims, w.dim()))", "reduce_dims = tuple(range(w.dim()))",
             "one fp8 scale over every member, not one per member", SAMPLER_TESTS),
    Mutation(SAMPLER, "params[..., d:] + torch.log(t)], dim=-1)", "params[..., d:] - torch.log(t)], dim=-1)",
             "Gaussian temperature divides the std instead of multiplying it", SAMPLER_TESTS),
    Mutation(SAMPLER, "return params / temperature", "return params * temperature",
             "logits multiplied by the temperature, not divided", SAMPLER_TESTS),
    # -- GAE and V-trace (update.py), the rollout buffers (buffers.py) -------------------------------------
    Mutation(UPDATE, "next_non_terminal = 1.0 - episode_starts[step + 1]", "next_non_terminal = 1.0 - episode_starts[step]",
             "GAE cuts at the episode start of this step, not the next (off by one)", BUFFER_TESTS),
    Mutation(UPDATE, "cs = np.exp(np.minimum(log_rhos64, math.log(c_bar)))", "cs = np.exp(np.minimum(log_rhos64, math.log(rho_bar)))",
             "V-trace's traces truncated at rho_bar, not c_bar", BUFFER_TESTS),
    Mutation(UPDATE, "advantages[step] = rewards64[step] + gamma * next_non_terminal * next_vs - values64[step]",
             "advantages[step] = rewards64[step] + gamma * next_non_terminal * next_values - values64[step]",
             "V-trace advantage bootstraps on V(s_t+1), not the target v_t+1", BUFFER_TESTS),
    Mutation(BUFFERS, "return 2 * int(np.prod(action_space.shape))", "return int(np.prod(action_space.shape))",
             "a Box behaviour distribution stored with room for its mean only, not mean and log-std", BUFFER_TESTS),
    # -- the population engine (population.py, bench/population_engine.py) ------------------------------
    Mutation(POPULATION_ENGINE, "[Member(r.spec.seed, **r.spec.dials.to_dict()) for r in runs]",
             "[Member(r.spec.seed, **runs[0].spec.dials.to_dict()) for r in runs]",
             "every member gets the first run's dials", POPULATION_TESTS),
    Mutation(POPULATION, "name: torch.stack([history[slot][name][m] for m, slot in enumerate(slots)]) for name in self.params",
             "name: torch.stack([history[slots[0]][name][m] for m, slot in enumerate(slots)]) for name in self.params",
             "every member acts with the first member's lag", POPULATION_TESTS),
    Mutation(POPULATION, "recorded = torch.where(record_actual, sampler, clean)", "recorded = torch.where(record_actual, clean, sampler)",
             "the recording dial inverted: the clean policy recorded where the sampler's is asked for", POPULATION_TESTS),
    # -- the bench: resume, integrity, the grid -------------------------------------------------------------
    Mutation(RESUME, "kinds = {RUN_NEW, RUN_DAMAGED} | ({RUN_CHANGED} if redo_changed else set())",
             "kinds = {RUN_NEW} | ({RUN_CHANGED} if redo_changed else set())",
             "a damaged complete run is skipped, not redone", RESUME_TESTS),
    Mutation(RESUME, "if not changed or redo_changed:", "if not changed:",
             "--redo-changed still refused: changed runs are never replaced", RESUME_TESTS),
    Mutation(CONTRACT, "for name in CHECKED_FILES:", "for name in CHECKED_FILES[1:]:",
             "the integrity check skips the first recorded file (config.json)", INTEGRITY_TESTS),
    Mutation(CONTRACT, 'if actual["bytes"] != expected.get("bytes"):', 'if actual["bytes"] < expected.get("bytes"):',
             "a file grown since completion passes the size check", INTEGRITY_TESTS),
    Mutation(GRID, "for a in grid.algos for v in variants[a] for c in conditions for s in grid.seeds)",
             "for a in grid.algos for v in variants[a] for c, s in zip(conditions, grid.seeds))",
             "the grid zips conditions with seeds instead of crossing them", GRID_TESTS),
    Mutation(GRID, "        return list(range(n))", "        return list(range(1, n + 1))",
             "--seeds N counts from 1, not 0", GRID_TESTS),
    # -- the analysis: Welch, Holm, the equivalence test, normalization --------------------------------------
    Mutation(HYPOTHESIS, "return float(2 * _stats.t.sf(abs(self.estimate) / self.se, self.df))",
             "return float(_stats.t.sf(abs(self.estimate) / self.se, self.df))",
             "Welch's p one-sided, not two-sided", HYPOTHESIS_TESTS),
    Mutation(HYPOTHESIS, "terms.append((mean, float(np.sqrt(var)), float(n - 1), sign / k))",
             "terms.append((mean, float(np.sqrt(var)), float(n), sign / k))",
             "Welch's degrees of freedom from n, not n - 1 (off by one)", HYPOTHESIS_TESTS),
    Mutation(HYPOTHESIS, "running = max(running, min(1.0, (m - rank) * p[i]))", "running = min(1.0, (m - rank) * p[i])",
             "Holm's adjusted p-values not kept monotone (the step-down's running max dropped)", HYPOTHESIS_TESTS),
    Mutation(HYPOTHESIS, "return float(max(lower, upper))", "return float(min(lower, upper))",
             "equivalence (TOST) shown by either one-sided test, not both", HYPOTHESIS_TESTS),
    # -- a study's plan file read by the generic report (studies/plan.py, analysis/endpoints.py) ---------
    Mutation(PLAN, "return self.margin / math.log2(1 + max(self.lags)) if self.kind == \"slope\" and not self.over else self.margin",
             "return self.margin if self.kind == \"slope\" and not self.over else self.margin",
             "a slope's margin not put per unit of log2(1 + lag) (the plan's margin taken as the slope's)", STUDY_TESTS),
    Mutation(ENDPOINTS, "for row in family(members, [diffs[e.id] for e in members]):",
             "for row in [r for e, d in zip(members, [diffs[e.id] for e in members]) for r in family([e], [d])]:",
             "a plan's Holm family ignored (each endpoint adjusted alone)", STUDY_TESTS),
    Mutation(ENDPOINTS, "if any(holds(terms) for terms in decision.supported):", "if any(holds(terms[:1]) for terms in decision.supported):",
             "the decision rule reads the first term of each alternative only (supported on a slope win alone)", STUDY_TESTS),
    Mutation(PILOT, "hurts = hurt >= rule.hurt_at_least and hurt >= rule.hurt_at_least_se * se",
             "hurts = hurt >= rule.hurt_at_least",
             "the pilot's rule without its standard-error condition", ("tests/test_minatar_learning.py", *STUDY_TESTS)),
    Mutation(STATS, "span = ref - r", "span = ref",
             "normalization divides by the reference, not reference - random", NORMALIZATION_TESTS),
    # -- a searched design trained from its plan file (bench/searched.py; variant names in contract.py) -----
    Mutation(CONTRACT, 'pairs["learning_rate"] = "x" + format(float(f"{value * factor:.6g}"), "g")', 'pairs["learning_rate"] = "x" + format(float(f"{factor:.6g}"), "g")',
             "a learning-rate part's factor replaces the tuned learning rate instead of multiplying it", SEARCHED_TESTS),
    Mutation(SEARCHED, 'lags=tuple(lag for lag in p["lags"] if lag not in cuts.get("lags", ())),', 'lags=tuple(p["lags"]),',
             "a searched part sweeps the lags its plan's cut order cut", SEARCHED_TESTS),
    Mutation(SEARCHED_REPORT, "return None if after is None else [(after, 1.0), (before, -1.0)]",
             "return None if after is None else [(before, 1.0), (after, -1.0)]",
             "the generic report's retuning tax with its sign flipped (fresh pick minus lag-k pick)", SEARCHED_REPORT_TESTS),
    Mutation(SEARCHED_REPORT, 'diffs = [welch(r["at"][top], r["at"][1.0]) for r in tested_rows]',
             'diffs = [welch(r["at"][top], r["at"][top]) for r in tested_rows]',
             "the learning-rate table's drop taken against itself, not against x1", SEARCHED_REPORT_TESTS),
    # -- PQN and the after-ABS dial -------------------------------------------------------------------
    Mutation(PQN, "returns[t] = rewards[t] + gamma * not_done * (q_lambda * returns[t + 1] + (1.0 - q_lambda) * next_max_q[t])",
             "returns[t] = rewards[t] + gamma * (q_lambda * returns[t + 1] + (1.0 - q_lambda) * not_done * next_max_q[t])",
             "Q(lambda)'s done mask on the bootstrap only: the return leaks across an episode's end", PQN_TARGET_TESTS),
    Mutation(PQN, "batch.rewards + self.gamma * truncation_values, next_max_q", "batch.rewards, next_max_q",
             "PQN's time-limit truncations not bootstrapped from the true last observation", PQN_TARGET_TESTS),
    Mutation(PQN, "return max(start + (final - start) * timesteps / duration, final)",
             "return max(start + (final - start) * timesteps / total_timesteps, final)",
             "epsilon decays over the whole budget, not its exploration fraction", PQN_ACTING_TESTS),
    Mutation(PQN, "acting = epsilon_greedy_log_probs(q_values + self.dials.action_noise * noise, self.epsilon)",
             "acting = epsilon_greedy_log_probs(q_values, self.epsilon)",
             "PQN's action noise drawn but not added to the acting Q-values", PQN_ACTING_TESTS),
    Mutation(BATCH_SCALING, "steps = self.base * round(multiples)", "steps = round(self.c / divergence)",
             "after ABS: the rollout length not a whole multiple of base", AFTER_ABS_TESTS),
)


class AnchorError(RuntimeError):
    """A mutation's original text is not in its file exactly once."""


def repository_files(root: Path) -> list[str]:
    """Tracked and untracked-but-not-ignored files of ``root`` that exist (the working tree as
    it is now, other people's uncommitted edits included)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root, check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted({name for name in out.split("\0") if name and (root / name).is_file()})


def copy_repository(root: Path, destination: Path) -> None:
    for name in repository_files(root):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    # tests and docs refer to ../shared (the reference texts) beside the checkout
    shared = root.parent / "shared"
    if shared.exists() and not (destination.parent / "shared").exists():
        (destination.parent / "shared").symlink_to(shared, target_is_directory=True)


def locate(mutation: Mutation, text: str) -> int:
    """The offset of the mutation's original text, which must occur exactly once."""
    count = text.count(mutation.original)
    if count != 1:
        where = "not found" if count == 0 else f"found {count} times"
        raise AnchorError(
            f"{mutation.path}: the original text {mutation.original!r} is {where}; it must occur exactly once "
            f"(has the file been refactored? update the anchor in benchmarks/mutations.py, keeping the bug: "
            f"{mutation.description})"
        )
    return text.index(mutation.original)


def line_as_written(mutation: Mutation, text: str) -> tuple[int, str, str]:
    """The (1-based) line number, and the stripped line that holds the original text, as written
    and as mutated."""
    offset = locate(mutation, text)
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    line = text[start : end if end >= 0 else len(text)]
    return text.count("\n", 0, offset) + 1, line.strip(), line.replace(mutation.original, mutation.replacement, 1).strip()


def check_anchors(root: Path, mutations: list[tuple[int, Mutation]]) -> None:
    problems = []
    for _, mutation in mutations:
        try:
            locate(mutation, (root / mutation.path).read_text())
        except AnchorError as error:
            problems.append(str(error))
        if "\n" in mutation.original or "\n" in mutation.replacement:
            problems.append(f"{mutation.path}: mutation {mutation.original!r} spans lines; keep it to one line")
        if mutation.original == mutation.replacement:
            problems.append(f"{mutation.path}: mutation {mutation.original!r} changes nothing")
    if problems:
        raise AnchorError("\n".join(problems))


def child_environment(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant of the same size within the same second: no stale .pyc
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def check_imports_the_copy(copy: Path) -> None:
    """Fail loudly unless ``import adaptive_po`` inside the copy imports the copy (the installed
    package is an editable install of this checkout)."""
    code = "import adaptive_po, sys; sys.stdout.write(adaptive_po.__file__)"
    result = subprocess.run([sys.executable, "-c", code], cwd=copy, env=child_environment(copy), capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"importing adaptive_po in the copy failed:\n{result.stderr}")
    imported = Path(result.stdout).resolve()
    if not imported.is_relative_to(copy.resolve()):
        raise RuntimeError(f"inside the copy {copy}, adaptive_po is imported from {imported}, not from the copy")


_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def run_tests(copy: Path, tests: list[str]) -> tuple[bool, str, str]:
    """``(passed, first failing test id, output)`` of the selected tests in the copy."""
    command = [
        sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-m", "not slow",
        "-rfE", "--no-header", *tests,
    ]
    try:
        result = subprocess.run(
            command, cwd=copy, env=child_environment(copy), capture_output=True, text=True, timeout=RUN_TIMEOUT
        )
    except subprocess.TimeoutExpired as error:
        output = (error.stdout or b"").decode(errors="replace") if isinstance(error.stdout, bytes) else (error.stdout or "")
        return False, f"(timed out after {RUN_TIMEOUT} s)", output
    output = result.stdout + result.stderr
    if result.returncode == 0:
        return True, "", output
    match = _FAILED.search(output)
    if match:
        return False, match.group(1), output
    if result.returncode == 5:
        raise RuntimeError(f"no test was collected from {tests}:\n{output[-2000:]}")
    return False, f"(pytest exit status {result.returncode})", output


def markdown_table(rows: list[dict[str, str]]) -> str:
    escape = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = [
        "| # | file:line | line as written | mutation (the line as mutated) | caught? | first failing test |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['n']} | {row['file']} | `{escape(row['line'])}` | {escape(row['mutation'])} | "
            f"{row['caught']} | {escape(row['test'])} |"
        )
    return "\n".join(lines) + "\n"


def selected_tests(mutation: Mutation, override: list[str] | None) -> list[str]:
    """The tests run on ``mutation``'s mutant: ``--tests`` where given, else its own selection."""
    return list(override) if override else list(mutation.tests)


def union_of_tests(mutations: list[tuple[int, Mutation]], override: list[str] | None) -> list[str]:
    """Every test the mutants run, each once, in first-use order (what the unmutated copy must pass)."""
    return list(dict.fromkeys(test for _, mutation in mutations for test in selected_tests(mutation, override)))


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)  # mkstemp's 0600 is for the temporary name only
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", nargs="+", help="test files (or ids) to run on every mutant, instead of each mutation's own")
    parser.add_argument("--only", type=int, action="append", metavar="N", help="run mutation N only (1-based; repeatable)")
    parser.add_argument("--out", type=Path, help="also write the Markdown table to this file (atomically)")
    parser.add_argument("--list", action="store_true", help="list the mutations and check their anchors; run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy (its path is printed)")
    args = parser.parse_args(argv)

    numbered = list(enumerate(MUTATIONS, start=1))
    if args.only:
        unknown = [n for n in args.only if not 1 <= n <= len(MUTATIONS)]
        if unknown:
            parser.error(f"--only takes 1 to {len(MUTATIONS)}, got {unknown}")
        numbered = [(n, m) for n, m in numbered if n in set(args.only)]
    check_anchors(ROOT, numbered)  # before any copying: a moved anchor is the likeliest failure
    if args.list:
        for n, mutation in numbered:
            number, line, _ = line_as_written(mutation, (ROOT / mutation.path).read_text())
            print(f"{n:2d}. {mutation.path}:{number}: {line}\n    -> {mutation.description}\n    tests: {' '.join(selected_tests(mutation, args.tests))}")
        return 0

    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="mutations-"))
    copy = workdir / ROOT.name
    try:
        copy_repository(ROOT, copy)
        check_anchors(copy, numbered)  # the copy is what is mutated (the files may have moved since)
        check_imports_the_copy(copy)
        baseline = union_of_tests(numbered, args.tests)
        print(f"copy of {ROOT} in {copy}; the unmutated copy runs {' '.join(baseline)}", file=sys.stderr)
        passed, failing, output = run_tests(copy, baseline)
        if not passed:
            print(output[-4000:], file=sys.stderr)
            raise RuntimeError(f"the unmutated copy fails the selected tests ({failing}): fix that first")
        print(f"unmutated: the selected tests pass ({time.monotonic() - started:.0f} s)", file=sys.stderr)

        rows = []
        for n, mutation in numbered:
            path = copy / mutation.path
            original_text = path.read_text()
            number, line, mutated = line_as_written(mutation, original_text)
            path.write_text(original_text.replace(mutation.original, mutation.replacement, 1))
            mutant_started = time.monotonic()
            try:
                passed, failing, _ = run_tests(copy, selected_tests(mutation, args.tests))
            finally:
                path.write_text(original_text)
            verdict = "survived" if passed else "caught"
            print(f"{n:2d}. {verdict:8s} {time.monotonic() - mutant_started:5.1f} s  {mutation.description}  {failing}", file=sys.stderr)
            rows.append({
                "n": str(n), "file": f"{mutation.path}:{number}", "line": line,
                "mutation": f"`{mutated}`: {mutation.description}",
                "caught": "yes" if not passed else "**NO**", "test": failing or "-",
            })
    finally:
        if args.keep:
            print(f"kept the copy in {copy}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    survivors = [row for row in rows if row["caught"] != "yes"]
    table = markdown_table(rows)
    summary = (
        f"\n{len(rows) - len(survivors)} of {len(rows)} mutations caught by "
        + (f"`{' '.join(args.tests)}`" if args.tests else "each mutation's own selection of tests")
        + f" (fast tests only; {time.monotonic() - started:.0f} s).\n"
    )
    print(table + summary)
    if args.out:
        write_atomically(args.out, table + summary)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
