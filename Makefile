# adaptive-po: every target sets itself up. `make test` and `make bench` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
# The CPU build of torch lies on this machine's disk; an unpinned torch would pull a CUDA build.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.adaptive-po-installed
export OMP_NUM_THREADS ?= 1

.PHONY: setup test bench bench-fresh-data fresh-data-report fresh-data-from-table fresh-data-trace fresh-data-diagnosis bench-tuned tuned-report tuned-from-table bench-minatar minatar-report minatar-from-table classic-from-table quick-from-table calibration reports-from-tables gpu-check bf16 bench-full bench-staleness bench-paper bench-sensitivity paper-report mismatch bench-atari plot perf readme readme-staleness engines mutations bench-r2vpo r2vpo-report r2vpo-from-table frozen-pilot bench-frozen frozen-from-table bench-frozen-schedule frozen-schedule-from-table bench-frozen-quatro frozen-quatro-from-table minatar-learning-pilot bench-minatar-learning minatar-learning-pilot-from-table minatar-learning-from-table minatar-stress-pilot minatar-stress-pilot-from-table bench-minatar-gymnax minatar-gymnax-from-table bench-ale-curves ale-curves-from-table bench-pqn-cleanrl pqn-cleanrl-from-table bench-pqn-minatar pqn-minatar-from-table bench-abs abs-from-table bench-pqn-staleness pqn-staleness-from-table clean-runs help

# Durations are the bench's own dry-run estimates (`adaptive-po bench --suite <suite> --dry-run`) on
# 2 CPU cores; tests/test_docs.py checks them against it.
help:
	@echo "make bench              the quick suite: Pendulum, LunarLander x esspo, ppo x lag 0, 16 x 5 seeds (40 runs, about 3 min on 2 CPU cores), then its report"
	@echo "make test               the test suite, on every core"
	@echo "make bench-full         the classic suite: 5 environments x all 17 algorithms x 5 seeds x lags 0-8 x noise 0, 0.5 (4,250 runs, about 12.2 h on 2 CPU cores)"
	@echo "make bench-staleness    4 classic environments x esspo, ppo, decoupled-ppo, tis-pg x lags 0-64 x 5 seeds (320 runs, about 18 min on 2 CPU cores); report into docs/results/staleness"
	@echo "make bench-paper        the paper's conditions: 10 objectives x fresh, lag 16, T=1.2, fp8 (own or learner log-probs) x 3 environments x 5 seeds (750 runs, about 29 min on 2 CPU cores); report into docs/results/paper"
	@echo "make bench-sensitivity  the tuning tax: each objective over its own and the shared knobs x 3 conditions x 2 environments x 3 seeds (792 runs, about 17 min on 2 CPU cores)"
	@echo "make paper-report       the paper report (IQM, profiles, tuning tax) from runs/paper, runs/sensitivity, runs/staleness"
	@echo "make bench-tuned        equal tuning, held-out selection: esspo and ppo each get a 6-trial Optuna search on Pendulum and LunarLander, fresh and lag 16, seeds 100-101 (96 search runs); default and selected configurations scored on seeds 0-4; report into docs/results/tuned"
	@echo "make bench-minatar      the MinAtar tier: 5 games x esspo, ppo, decoupled-ppo x lag 0, 4 x 5 seeds, plus PPO at the published step (170 runs, about 2.6 h on 2 CPU cores); report into docs/results/minatar"
	@echo "make bench-fresh-data   why the ESS objective trails PPO on fresh Pendulum: esspo, its two pre-registered variants and ppo on the diagnosis and held-out tasks, 5 seeds (300 runs, about 29 min on 2 CPU cores); verdicts into docs/results/fresh-data"
	@echo "make fresh-data-trace   the fresh-data diagnosis: per-epoch traces inside updates (Pendulum, CartPole), then its report and figure"
	@echo "make bench-atari        the Atari-5 games at 10M frames (90 runs, about 4.0 h on one GPU with 16 cores, ALE stepping only); without a GPU a smoke grid, said so"
	@echo "make gpu-check          GPU speeds: CartPole populations of 256/1,024, ALE CNN populations of 8/16/32 against the process engine, peak memory"
	@echo "make mismatch           the KL and ESS each sampler level induces on trained CartPole and Pendulum policies"
	@echo "make bf16               what the bf16 learner (variant precision=bf16) changes: returns against fp32 (CartPole, Acrobot; esspo, ppo; lags 0, 8; 10 seeds), the lag-0 mismatch, speed (docs/results/bf16.md)"
	@echo "make engines            the quick suite on the process engine too; both engines' per-cell CIs (docs/results/engines.md)"
	@echo "make classic-from-table, tuned-from-table, minatar-from-table, fresh-data-from-table, quick-from-table"
	@echo "make reports-from-tables every published verdict from the committed tables, and the calibration"
	@echo "                        a report's verdicts and its docs/results/README.md block, rebuilt from its committed tables (no runs/)"
	@echo "make plot               figures, tables and report.md from runs/ (SUITE=quick)"
	@echo "make bench-r2vpo        after R2VPO on the staleness grid: r2vpo x 4 classic environments x lags 0-64 x 5 seeds (80 runs, about 4 min on 2 CPU cores); verdicts against the published PPO runs into docs/results/r2vpo"
	@echo "make frozen-pilot       the frozen-tuning study's pilot: PPO alone at lags 0 and 8 on 6 candidate tasks (80 runs), then the pre-registered task selection (docs/results/frozen/pilot.md)"
	@echo "make bench-frozen       one slice (HOURS=2) of the frozen-tuning study: every arm tuned once on fresh data, frozen, swept over lags 0-64 on 10 held-out seeds, plus the lag-8 retuning tax; resumes from docs/results/frozen/per_run.csv, then its verdicts"
	@echo "make frozen-from-table  the frozen-tuning study's verdicts and figure from its committed tables"
	@echo "make bench-frozen-schedule one slice (HOURS=2) of the frozen study's extension: the update schedule searched again in a space built around the ESS objective's own (whole-rollout steps, k3 KL), decoupled-ppo as a comparator; resumes from docs/results/frozen-schedule/per_run.csv, then its verdicts"
	@echo "make frozen-schedule-from-table  the extension's verdicts and figure from its committed tables (and the published study's)"
	@echo "make bench-frozen-quatro   one slice (HOURS=2) of the frozen protocol for after-QUATRO and after-R2VPO (docs/results/frozen-quatro, trained from its plan file by the generic runner): tuned once, frozen, swept over lags 0-16 (64 and LunarLander-v3 cut by its 4 core-hour limit), the retuning tax at lag 8, the learning rate x4 and x16; resumes from its per_run.csv, then its verdicts"
	@echo "make frozen-quatro-from-table  that study's verdicts and figure from its committed tables"
	@echo "make minatar-learning-pilot  one slice (HOURS=2) of the MinAtar learning-budget pilot: ppo at lags 0 and 8 on the five games at 2M steps; then which games qualify (docs/results/minatar-learning)"
	@echo "make bench-minatar-learning  one slice (HOURS=2) of the MinAtar learning-budget study on the games the pilot selected; resumes from its committed per_run.csv"
	@echo "make minatar-learning-from-table  the MinAtar learning-budget study's pilot selection, verdicts and figures from its plan file and committed table"
	@echo "make minatar-stress-pilot  one slice (HOURS=2) of MinAtar's second pilot: ppo under lags 16 and 64, sampler temperature 1.2 and fp8 on Freeway and Asterix (24 runs of 2M), lag 0 read from the first pilot; then which (game, stressor) pairs qualify (docs/results/minatar-stress)"
	@echo "make minatar-stress-pilot-from-table  that pilot's selection (pilot.md, selection.json), verdicts and figure from its plan file and committed table"
	@echo "make bench-minatar-gymnax our ppo in gymnax's MinAtar configuration with gymnax-blines' settings and network: Breakout, SpaceInvaders x 5 seeds x 2M steps (10 runs), beside the published PPO (docs/results/minatar-gymnax)"
	@echo "make minatar-gymnax-from-table  that comparison's report and figure from its committed table"
	@echo "make bench-ale-curves   ALE's first learning curves on CPU: ppo and esspo on Breakout-v5 x 2 seeds x 1M agent steps (4 runs, about 1.5-2.5 core-hours each, one run per process; a run does not resume mid-way), then its report (docs/results/ale-curves)"
	@echo "make ale-curves-from-table  those curves' report and figure from the committed table"
	@echo "make bench-pqn-cleanrl  PQN with CleanRL's classic-control settings on CartPole-v1 and Acrobot-v1 x 5 seeds x 500k steps (10 runs, a few minutes each on one core), beside CleanRL's documented PQN (docs/results/pqn-cleanrl)"
	@echo "make pqn-cleanrl-from-table  that comparison's report and figure from its committed table"
	@echo "make bench-pqn-minatar  PQN on MinAtar beside ppo: pqn (its MinAtar preset) and ppo on Breakout and Freeway x 5 seeds x 2M steps, lag 0, one run per process (20 runs; the dry run estimates 5.1 CPU-core-hours), then the report with each arm's seconds per million steps (docs/results/pqn-minatar)"
	@echo "make pqn-minatar-from-table  that report and figure from its committed table"
	@echo "make bench-abs          the after-ABS dial's claim: pqn on Breakout and Freeway x 5 seeds x 2M steps with the dial (10 runs), a 4x wider network with and without it on Breakout x 3 seeds (6 runs; the arm with neither is bench-pqn-minatar's pqn), and ppo on CartPole-v1 with and without the dial at the staleness budget (10 runs); the dry runs estimate 7.6 CPU-core-hours and 5 CPU-core-minutes; report into docs/results/abs"
	@echo "make abs-from-table     that report from its committed table"
	@echo "make bench-pqn-staleness PQN under staleness: pqn on CartPole-v1, Acrobot-v1, LunarLander-v3 x lags 0, 4, 16 x 5 seeds at the staleness grid's budgets (45 runs; the dry run estimates 27 CPU-core-minutes), then return against lag (docs/results/pqn-staleness)"
	@echo "make pqn-staleness-from-table  that report and figure from its committed table"
	@echo "make mutations          80 one-line bugs planted in the training step (update, objectives, distributions), the data path (collector, sampler, buffers, staleness, population), the bench (resume, integrity, grid), the analysis (Welch, Holm, TOST, normalization), the studies' plan files (margins, Holm families, decision rule, pilot rule, a searched design's cuts, learning-rate reruns, tax and learning-rate table) and PQN (targets, epsilon, action noise, after ABS), each run against its own fast tests; the table into docs/results/mutations.md"
	@echo "make perf               speed benchmarks (the population step against the core's arithmetic into docs/results/perf.md, environment throughput, learner time per update, runs per hour of both engines, and with the peers extra our engine beside pure-JAX PPO, rejax)"
	@echo "make readme             the quick suite's figures and tables from runs/quick/report into docs/results/README.md"
	@echo "make clean-runs         delete the folders the bench targets write under runs/"
	@echo "WORKERS=n caps the concurrent jobs of a bench target (default: one per core)"

# The stamp depends on pyproject.toml: a second `make test` on a ready .venv reinstalls nothing.
$(STAMP): pyproject.toml
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet "$(TORCH_SPEC)"
	$(VPY) -m pip install --quiet -e ".[dev,distributed,zoo,minatar]"
	@touch $(STAMP)

setup: $(STAMP)

# Every core (pytest-xdist): tests of one xdist_group (the Ray tests, which share one local Ray
# instance) run on one worker; the slow end-to-end tests are handed out first. TEST_WORKERS=0 runs
# them one by one in this process. The 20 slowest tests are listed at the end (the suite's budget:
# 10 minutes of pytest on a quiet 2-core machine).
TEST_WORKERS ?= auto
test: $(STAMP)
	$(VPY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=20

SUITE ?= quick
WORKERS ?=
WORKERS_FLAG = $(if $(WORKERS),--workers $(WORKERS))
# the page the generated results blocks live in
RESULTS_README := docs/results/README.md

# $(call bench_then_publish,BENCHES,PUBLISH): run each `adaptive-po` command line named in BENCHES
# (names of variables, so that an argument may hold a comma) with $(WORKERS_FLAG), then PUBLISH even
# when runs failed (they are scored and counted), then exit with the benches' status. PUBLISH is a
# command, never $(MAKE): `make -n` runs a recipe line that holds $(MAKE), and would start the bench.
define bench_then_publish
status=0; $(foreach bench,$(1),$(VPY) -m adaptive_po $($(bench)) $(WORKERS_FLAG) || status=$$?;) $(2) && exit $$status
endef

bench: $(STAMP)
	$(VPY) -m adaptive_po bench --suite quick $(WORKERS_FLAG)

bench-full: $(STAMP)
	$(VPY) -m adaptive_po bench --suite classic $(WORKERS_FLAG)

# after R2VPO on the staleness grid (its own suite folder), its verdicts against the published PPO
# runs of that grid (docs/results/r2vpo); publishes even when runs failed, then the bench's status
R2VPO_BENCH = bench --suite staleness --algos r2vpo --suite-name staleness-r2vpo --no-report
R2VPO_REPORT = $(VPY) -m adaptive_po.analysis.reports.r2vpo --runs runs/staleness-r2vpo --baseline docs/results/staleness/per_run.csv --out docs/results/r2vpo
bench-r2vpo: $(STAMP)
	$(call bench_then_publish,R2VPO_BENCH,$(R2VPO_REPORT))

r2vpo-report: $(STAMP)
	$(R2VPO_REPORT)

r2vpo-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.r2vpo --table docs/results/r2vpo/per_run.csv --out docs/results/r2vpo

# the staleness grid, its report and its block in docs/results/README.md
STALENESS_BENCH = bench --suite staleness
STALENESS_README = $(VPY) -m adaptive_po readme --report runs/staleness/report --figures docs/results/staleness --section staleness --brief --readme $(RESULTS_README)
bench-staleness: $(STAMP)
	$(call bench_then_publish,STALENESS_BENCH,$(STALENESS_README))

readme-staleness: $(STAMP)
	$(STALENESS_README)

PAPER_BENCH = bench --suite paper
SENSITIVITY_BENCH = bench --suite sensitivity
bench-paper: $(STAMP)
	$(call bench_then_publish,PAPER_BENCH,$(PAPER_REPORT))

bench-sensitivity: $(STAMP)
	$(call bench_then_publish,SENSITIVITY_BENCH,$(PAPER_REPORT))

# whichever of the three sweeps exist feed one report (docs/results/paper); the shell looks for them
# when the report starts, after the bench made them (a $$(wildcard) would look before the bench runs)
PAPER_RUNS := runs/paper runs/sensitivity runs/sensitivity-* runs/staleness
PAPER_REPORT = $(VPY) -m adaptive_po.analysis.reports.paper $$(for d in $(PAPER_RUNS); do [ -d "$$d" ] && echo "$$d"; done) --out docs/results/paper
paper-report: $(STAMP)
	$(PAPER_REPORT)

mismatch: $(STAMP)
	$(VPY) benchmarks/sampler_mismatch.py --out docs/results/sampler_mismatch.md

# the bf16 learner's effect (160 runs into runs/bf16, resumable), into docs/results/bf16.md
bf16: $(STAMP)
	$(VPY) benchmarks/bf16_effect.py $(WORKERS_FLAG)

# the MinAtar tier (the minatar extra, GPL-3.0, is part of the set-up): runs the suite and the
# reference check, then publishes into docs/results/minatar and the MinAtar block of docs/results/README.md
MINATAR_BENCH = bench --suite minatar --no-report
MINATAR_REFERENCE_BENCH = bench --suite minatar-reference --no-report
MINATAR_SUITE_REPORT = $(VPY) -m adaptive_po.analysis runs/minatar --out docs/results/minatar
MINATAR_REPORT = $(VPY) -m adaptive_po.analysis.reports.minatar --runs runs/minatar --reference-runs runs/minatar-reference --out docs/results/minatar --readme $(RESULTS_README)
bench-minatar: $(STAMP)
	$(call bench_then_publish,MINATAR_BENCH MINATAR_REFERENCE_BENCH,$(MINATAR_SUITE_REPORT) && $(MINATAR_REPORT))

minatar-report: $(STAMP)
	$(MINATAR_SUITE_REPORT)
	$(MINATAR_REPORT)

# equal tuning with held-out selection: an Optuna search per objective and task on seeds 100-101
# (fresh and lag-16 data), then default and selected configurations scored on seeds 0-4
TUNE = tune
TUNED_REPORT = $(VPY) -m adaptive_po.analysis.reports.equal_tuning --runs runs/tuning-search runs/tuning-score --out docs/results/tuned --readme $(RESULTS_README)
tuned-report: $(STAMP)
	$(TUNED_REPORT)

bench-tuned: $(STAMP)
	$(call bench_then_publish,TUNE,$(TUNED_REPORT))

# the fresh-data diagnosis: why the ESS objective loses on fresh data. The traces inside updates
# (process engine, seeds 0-2; resumable: a finished trace is kept) and the diagnosis report and figure
fresh-data-trace: $(STAMP)
	$(VPY) -m adaptive_po trace --envs Pendulum-v1 --algos esspo,ppo --lags 0,16 --seeds 0,1,2 --timesteps 100000 --out docs/results/fresh-data/trace
	$(VPY) -m adaptive_po trace --envs CartPole-v1 --algos esspo,ppo --lags 0 --seeds 0,1,2 --timesteps 100000 --every 5 --out docs/results/fresh-data/trace
	$(VPY) -m adaptive_po trace --envs Pendulum-v1 --algos esspo-batch-ess,esspo-forward-kl --lags 0 --seeds 0,1,2 --timesteps 100000 --out docs/results/fresh-data/trace
	$(MAKE) fresh-data-diagnosis

fresh-data-diagnosis: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.fresh_data diagnosis --traces docs/results/fresh-data/trace --out docs/results/fresh-data

# the pre-registered variants (docs/results/fresh-data/preregistration.md) against esspo and ppo:
# the diagnosis tasks under the paper's conditions, then held-out tasks (lag 16 on the LunarLanders
# in a folder of its own)
FRESH_DATA_BENCH = bench --suite fresh-data --no-report
FRESH_DATA_HELDOUT_BENCH = bench --suite fresh-data-heldout --no-report
FRESH_DATA_HELDOUT_LAG16_BENCH = bench --suite fresh-data-heldout --suite-name fresh-data-heldout-lag16 --envs LunarLander-v3,LunarLanderContinuous-v3 --lags 16 --no-report
FRESH_DATA_REPORT = $(VPY) -m adaptive_po.analysis.reports.fresh_data results --runs runs/fresh-data runs/fresh-data-heldout runs/fresh-data-heldout-lag16 --out docs/results/fresh-data --readme $(RESULTS_README)
bench-fresh-data: $(STAMP)
	$(call bench_then_publish,FRESH_DATA_BENCH FRESH_DATA_HELDOUT_BENCH FRESH_DATA_HELDOUT_LAG16_BENCH,$(FRESH_DATA_REPORT))

fresh-data-report: $(STAMP)
	$(FRESH_DATA_REPORT)

# the *-from-table targets rebuild a report's verdicts and its block in docs/results/README.md from
# the committed tables alone (no runs/); the tests check that the committed files are their output

# the variants' verdicts
fresh-data-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.fresh_data results --table docs/results/fresh-data/per_run.csv --out docs/results/fresh-data --readme $(RESULTS_README)

# the equal-tuning report
tuned-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.equal_tuning --tables docs/results/tuned --out docs/results/tuned --readme $(RESULTS_README)

# the MinAtar verdicts and reference check
minatar-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.minatar --table docs/results/minatar/per_run.csv --out docs/results/minatar --readme $(RESULTS_README)

# the quick suite's verdicts in docs/results/quick/{report,results}.md and its block, from its per_run.csv
quick-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.reissue docs/results/quick --readme $(RESULTS_README)

# the level of the verdicts' test, measured by A/A draws from the committed per-run tables
calibration: $(STAMP)
	$(VPY) -m adaptive_po.analysis.calibration --results docs/results --out docs/results/calibration.md

# the frozen-tuning study (docs/results/frozen/preregistration.md): the pilot selects the tasks; the
# study runs in slices of HOURS, each resuming from the committed per-run table (a run in it is never
# run again), then writes its verdicts and figure from the tables
FROZEN := docs/results/frozen
HOURS ?= 2
FROZEN_REPORT = $(VPY) -m adaptive_po.analysis.study_report --results $(FROZEN)
frozen-pilot: $(STAMP)
	$(VPY) -m adaptive_po.bench.frozen pilot --results $(FROZEN) $(WORKERS_FLAG)

bench-frozen: $(STAMP)
	status=0; $(VPY) -m adaptive_po.bench.study study --results $(FROZEN) --hours $(HOURS) $(WORKERS_FLAG) || status=$$?; $(FROZEN_REPORT) && exit $$status

frozen-from-table: $(STAMP)
	$(FROZEN_REPORT)

# the frozen study's extension, the update schedule searched again around the ESS objective's own (docs/results/frozen-schedule/
# preregistration.md): one slice of HOURS, resuming from its committed per-run table, trained from its plan file by the
# generic runner (it replays the published searches byte for byte); its verdicts by the generic report of a searched design
FROZEN_SCHEDULE := docs/results/frozen-schedule
FROZEN_SCHEDULE_REPORT = $(VPY) -m adaptive_po.analysis.study_report --results $(FROZEN_SCHEDULE)
bench-frozen-schedule: $(STAMP)
	status=0; $(VPY) -m adaptive_po.bench.study study --results $(FROZEN_SCHEDULE) --hours $(HOURS) $(WORKERS_FLAG) || status=$$?; $(FROZEN_SCHEDULE_REPORT) && exit $$status

frozen-schedule-from-table: $(STAMP)
	$(FROZEN_SCHEDULE_REPORT)

# after-QUATRO and after-R2VPO on the frozen protocol (docs/results/frozen-quatro/preregistration.md,
# its plan file plan.toml): the generic runner trains the searched design from the plan, one slice of
# HOURS, resuming from the committed per-run table; `python -m adaptive_po.bench.study dry-run
# --results docs/results/frozen-quatro` gives its size and hours
FROZEN_QUATRO := docs/results/frozen-quatro
FROZEN_QUATRO_REPORT = $(VPY) -m adaptive_po.analysis.study_report --results $(FROZEN_QUATRO)
bench-frozen-quatro: $(STAMP)
	status=0; $(VPY) -m adaptive_po.bench.study study --results $(FROZEN_QUATRO) --hours $(HOURS) $(WORKERS_FLAG) || status=$$?; $(FROZEN_QUATRO_REPORT) && exit $$status

frozen-quatro-from-table: $(STAMP)
	$(FROZEN_QUATRO_REPORT)

# MinAtar at learning budgets (docs/results/minatar-learning/preregistration.md, its plan file
# plan.toml beside it): the pilot, then the study, each in slices of HOURS resuming from the
# committed per-run table; the generic runner and report (adaptive_po.bench.study,
# adaptive_po.analysis.study_report) under the commands the study's documents name
MINATAR_LEARNING := docs/results/minatar-learning
MINATAR_LEARNING_REPORT = $(VPY) -m adaptive_po.analysis.reports.minatar_learning --results $(MINATAR_LEARNING)
MINATAR_LEARNING_SELECT = $(VPY) -m adaptive_po.bench.minatar_learning select --results $(MINATAR_LEARNING)
minatar-learning-pilot: $(STAMP)
	status=0; $(VPY) -m adaptive_po.bench.minatar_learning pilot --results $(MINATAR_LEARNING) --hours $(HOURS) $(WORKERS_FLAG) || status=$$?; $(MINATAR_LEARNING_REPORT) && exit $$status

bench-minatar-learning: $(STAMP)
	status=0; $(VPY) -m adaptive_po.bench.minatar_learning study --results $(MINATAR_LEARNING) --hours $(HOURS) $(WORKERS_FLAG) || status=$$?; $(MINATAR_LEARNING_REPORT) && exit $$status

# the pilot's selection (pilot.md, selection.json) from the table alone
minatar-learning-pilot-from-table: $(STAMP)
	$(MINATAR_LEARNING_SELECT)

minatar-learning-from-table: minatar-learning-pilot-from-table
	$(MINATAR_LEARNING_REPORT)

# MinAtar's second design (docs/results/minatar-stress/preregistration.md, its plan file plan.toml):
# the pilot of stressors on the generic runner, in slices of HOURS resuming from the committed table
MINATAR_STRESS := docs/results/minatar-stress
MINATAR_STRESS_REPORT = $(VPY) -m adaptive_po.analysis.study_report --results $(MINATAR_STRESS)
minatar-stress-pilot: $(STAMP)
	status=0; $(VPY) -m adaptive_po.bench.study pilot --results $(MINATAR_STRESS) --hours $(HOURS) $(WORKERS_FLAG) || status=$$?; $(MINATAR_STRESS_REPORT) && exit $$status

minatar-stress-pilot-from-table: $(STAMP)
	$(VPY) -m adaptive_po.bench.study select --results $(MINATAR_STRESS)
	$(MINATAR_STRESS_REPORT)

# our MinAtar PPO in gymnax's configuration (no sticky actions, 1,000-step episodes) with gymnax-blines'
# hyper-parameters and network, beside their published PPO (the environment files live with the report)
MINATAR_GYMNAX_BENCH = bench --suite minatar --envs-dir docs/results/minatar-gymnax/envs --envs Breakout-MinAtar-gymnax,SpaceInvaders-MinAtar-gymnax --algos ppo --seeds 5 --lags 0 --timesteps 2000000 --suite-name minatar-gymnax --no-report
bench-minatar-gymnax: $(STAMP)
	$(call bench_then_publish,MINATAR_GYMNAX_BENCH,$(VPY) -m adaptive_po.analysis.reports.minatar_gymnax --runs runs/minatar-gymnax --out docs/results/minatar-gymnax)

minatar-gymnax-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.minatar_gymnax --table docs/results/minatar-gymnax/per_run.csv --out docs/results/minatar-gymnax

# ALE's first learning curves on CPU (one run per process: the Nature-CNN learner on 2 cores)
ALE_CURVES_BENCH = bench --suite atari --envs Breakout-v5 --algos ppo,esspo --seeds 2 --lags 0 --timesteps 1000000 --suite-name ale-curves --engine process --device cpu --no-report
bench-ale-curves: $(STAMP)
	$(call bench_then_publish,ALE_CURVES_BENCH,$(VPY) -m adaptive_po.analysis.reports.ale_curves --runs runs/ale-curves --out docs/results/ale-curves --add)

ale-curves-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.ale_curves --table docs/results/ale-curves/per_run.csv --out docs/results/ale-curves

# PQN with CleanRL's classic-control settings (the MLP preset) beside CleanRL's documented PQN
PQN_CLEANRL_BENCH = bench --suite classic --envs CartPole-v1,Acrobot-v1 --algos pqn --seeds 5 --lags 0 --noise 0 --timesteps 500000 --suite-name pqn-cleanrl --no-report
bench-pqn-cleanrl: $(STAMP)
	$(call bench_then_publish,PQN_CLEANRL_BENCH,$(VPY) -m adaptive_po.analysis.reports.pqn_cleanrl --runs runs/pqn-cleanrl --out docs/results/pqn-cleanrl)

pqn-cleanrl-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.pqn_cleanrl --table docs/results/pqn-cleanrl/per_run.csv --out docs/results/pqn-cleanrl

# PQN on MinAtar beside ppo at equal steps, with each arm's cost: both on the process engine (one run per
# process), so that each run's recorded wall time is its own
PQN_MINATAR_BENCH = bench --suite minatar --envs Breakout-MinAtar,Freeway-MinAtar --algos pqn,ppo --seeds 5 --lags 0 --timesteps 2000000 --suite-name pqn-minatar --engine process --no-report
PQN_MINATAR_REPORT = $(VPY) -m adaptive_po.analysis.reports.pqn_minatar
bench-pqn-minatar: $(STAMP)
	$(call bench_then_publish,PQN_MINATAR_BENCH,$(PQN_MINATAR_REPORT) --runs runs/pqn-minatar --out docs/results/pqn-minatar)

pqn-minatar-from-table: $(STAMP)
	$(PQN_MINATAR_REPORT) --table docs/results/pqn-minatar/per_run.csv --out docs/results/pqn-minatar

# the after-ABS dial's own claim: pqn with the dial (the variant batch_scaling=abs) on the two MinAtar games
# of bench-pqn-minatar x 5 seeds, and a 4x wider Q-network (width=x4) with and without it on Breakout-MinAtar
# x 3 seeds (a wide run costs ~7 default ones: 1,190 against 170 CPU-s per 1M steps, measured 2026-12-07);
# bench-pqn-minatar's pqn runs are the arm with neither (the report reads them from runs/pqn-minatar: run that target first); ppo with and without the
# dial on CartPole-v1 at the staleness grid's budget, both on the process engine
ABS_PQN_BENCH = bench --suite minatar --envs Breakout-MinAtar,Freeway-MinAtar --algos pqn --variant batch_scaling=abs --seeds 5 --lags 0 --timesteps 2000000 --suite-name abs --no-report
ABS_WIDE_BENCH = bench --suite minatar --envs Breakout-MinAtar --algos pqn --variant width=x4 --variant batch_scaling=abs,width=x4 --seeds 3 --lags 0 --timesteps 2000000 --suite-name abs --no-report
ABS_PPO_BENCH = bench --suite staleness --envs CartPole-v1 --algos ppo --variant '' --variant batch_scaling=abs --seeds 5 --lags 0 --suite-name abs --engine process --no-report
ABS_REPORT = $(VPY) -m adaptive_po.analysis.reports.abs_claim
bench-abs: $(STAMP)
	$(call bench_then_publish,ABS_PQN_BENCH ABS_WIDE_BENCH ABS_PPO_BENCH,$(ABS_REPORT) --runs runs/abs runs/pqn-minatar --out docs/results/abs)

abs-from-table: $(STAMP)
	$(ABS_REPORT) --table docs/results/abs/per_run.csv --out docs/results/abs

# PQN under staleness: lags 0, 4, 16 on the staleness grid's discrete tasks, at its budgets
PQN_STALENESS_BENCH = bench --suite staleness --envs CartPole-v1,Acrobot-v1,LunarLander-v3 --algos pqn --seeds 5 --lags 0,4,16 --suite-name pqn-staleness --no-report
PQN_STALENESS_REPORT = $(VPY) -m adaptive_po.analysis.reports.pqn_staleness
bench-pqn-staleness: $(STAMP)
	$(call bench_then_publish,PQN_STALENESS_BENCH,$(PQN_STALENESS_REPORT) --runs runs/pqn-staleness --out docs/results/pqn-staleness)

pqn-staleness-from-table: $(STAMP)
	$(PQN_STALENESS_REPORT) --table docs/results/pqn-staleness/per_run.csv --out docs/results/pqn-staleness

# every published verdict from the committed tables alone, then the prose's quotes and the README's
# answer table (docs/results/answer.toml) from them.
# abs-from-table joins this list when its table (docs/results/abs/per_run.csv) is committed
reports-from-tables: classic-from-table tuned-from-table minatar-from-table fresh-data-from-table r2vpo-from-table quick-from-table frozen-from-table frozen-schedule-from-table frozen-quatro-from-table minatar-learning-from-table minatar-stress-pilot-from-table minatar-gymnax-from-table pqn-cleanrl-from-table ale-curves-from-table pqn-minatar-from-table pqn-staleness-from-table calibration
	$(VPY) -m adaptive_po.analysis.quotes --fill $(RESULTS_README)
	$(VPY) -m adaptive_po.analysis.answer

# the staleness and paper suites' verdicts (docs/results/{staleness,paper}/verdicts.md, per_run.csv)
# and their two blocks, from the committed run table docs/results/paper/runs.csv
classic-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.reports.staleness_and_paper_verdicts --table docs/results/paper/runs.csv --out docs/results --readme $(RESULTS_README)

# one GPU: the Atari-5 suite with CNN populations (the dry run prints its estimate); no GPU: the
# smoke grid (one game, 4,096 steps per run), said so before it starts
bench-atari: $(STAMP)
	@if $(VPY) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then \
	  $(VPY) -m adaptive_po bench --suite atari --device cuda $(WORKERS_FLAG); \
	else \
	  echo "bench-atari: no CUDA device here, so this is the Atari smoke grid (suite atari-smoke: Phoenix-v5, esspo and ppo, lag 0 and 4, 4,096 steps per run), not the Atari-5 suite; run it on a GPU machine for results"; \
	  $(VPY) -m adaptive_po bench --suite atari-smoke --device cpu $(WORKERS_FLAG); \
	fi

# the GPU check: CartPole populations of 256 and 1,024, ALE CNN populations of 8, 16, 32 against one
# process-engine run, peak GPU memory (`--tiny` runs it on a CPU)
gpu-check: $(STAMP)
	$(VPY) benchmarks/gpu_check.py

plot: $(STAMP)
	$(VPY) -m adaptive_po.analysis runs/$(SUITE)

perf: $(STAMP)
	$(VPY) benchmarks/roofline.py
	$(VPY) benchmarks/throughput.py
	$(VPY) benchmarks/learner.py
	$(VPY) benchmarks/engines_speed.py
	$(VPY) benchmarks/engines_speed.py --envs Breakout-MinAtar --members 16 --steps 49152 --process-runs 2
	$(VPY) benchmarks/peers.py --out docs/results/perf.md

# Planted one-line bugs of the training step, each against the fast tests, in a copy of the tree (the
# checkout is never modified); exits 1 if a bug survives
mutations: $(STAMP)
	$(VPY) benchmarks/mutations.py --out docs/results/mutations.md

# The quick suite through the process engine too (runs/quick-process), then both engines' per-cell
# final-return CIs side by side. Needs `make bench` first (runs/quick, population engine).
engines: $(STAMP)
	$(VPY) -m adaptive_po bench --suite quick --engine process --suite-name quick-process --no-report $(WORKERS_FLAG)
	$(VPY) benchmarks/engines_agree.py runs/quick runs/quick-process --out docs/results/engines.md

# the quick suite's figures and tables (runs/quick/report) into docs/results/quick and its block
readme: $(STAMP)
	$(VPY) -m adaptive_po readme --report runs/quick/report --readme $(RESULTS_README)

# Every folder the bench targets write under runs/: each suite of adaptive_po/bench/suites.py, the
# tuner's two and the --suite-name folders above (tests/test_docs.py keeps the list complete).
# runs/README.md, the run-folder contract, stays.
RUN_FOLDERS := quick quick-process classic staleness paper sensitivity tuning tuning-search tuning-score minatar minatar-reference fresh-data fresh-data-heldout fresh-data-heldout-lag16 staleness-r2vpo atari atari-smoke frozen-pilot frozen-pilot-2 frozen-search frozen-score minatar-gymnax ale-curves minatar-stress-pilot pqn-cleanrl pqn-minatar abs pqn-staleness frozen-quatro-search frozen-quatro-r2vpo-search frozen-quatro-r2vpo-tax-search frozen-quatro-score frozen-quatro-lr
clean-runs:
	rm -rf $(addprefix runs/,$(RUN_FOLDERS))
