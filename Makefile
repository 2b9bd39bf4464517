# adaptive-po: every target sets itself up. `make test` and `make bench` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
# The CPU build of torch lies on this machine's disk; an unpinned torch would pull a CUDA build.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.adaptive-po-installed
export OMP_NUM_THREADS ?= 1

.PHONY: setup test bench bench-fresh-data fresh-data-report fresh-data-from-table fresh-data-trace fresh-data-diagnosis bench-tuned tuned-report tuned-from-table bench-minatar minatar-report minatar-from-table classic-from-table gpu-check bench-full bench-staleness bench-paper bench-sensitivity paper-report mismatch bench-atari plot perf readme readme-staleness engines clean-runs help

help:
	@echo "make bench       quick suite (Pendulum, LunarLander; esspo vs ppo; lag 0 and 16; 5 seeds) + report"
	@echo "make test        the test suite"
	@echo "make bench-full  classic suite: 5 envs x all algorithms x 5 seeds x lags x noise (hours)"
	@echo "make bench-staleness  4 classic envs x esspo, ppo, decoupled-ppo, tis-pg x lags 0-64 x 5 seeds (~1 h), its report into docs/results/staleness and the README"
	@echo "make bench-paper the paper's conditions: 10 objectives x fresh, lag 16, T=1.2, fp8 (own / learner log-probs) x 3 envs x 5 seeds, report into docs/results/paper"
	@echo "make bench-sensitivity  the tuning tax: each objective over its own and the shared knobs x 4 conditions x 2 envs x 3 seeds"
	@echo "make paper-report  the paper report (IQM, profiles, tuning tax) from runs/paper, runs/sensitivity, runs/staleness"
	@echo "make mismatch    the KL and ESS each sampler level induces on trained CartPole and Pendulum policies"
	@echo "make bench-tuned equal tuning, held-out selection: esspo and ppo each get a 6-trial Optuna search (lr, epochs, batch size, own knobs) on Pendulum and LunarLander, fresh and lag 16, seeds 100-101; default and selected configs scored on seeds 0-4; report into docs/results/tuned"
	@echo "make bench-fresh-data  issue 21: esspo, its two pre-registered variants and ppo on the diagnosis tasks (paper conditions) and held-out tasks, 5 seeds (~1 h); verdicts into docs/results/fresh-data"
	@echo "make fresh-data-trace  issue 21's diagnosis: per-epoch traces inside updates (Pendulum, CartPole) and the diagnosis report and figure"
	@echo "make tuned-from-table  the tuned report and README block rebuilt from docs/results/tuned's committed tables"
	@echo "make bench-minatar  MinAtar tier: 5 games x esspo, ppo, decoupled-ppo x lag 0, 4 x 5 seeds, plus PPO at the published step (reference check), on 2 CPU cores (about 2 h); report into docs/results/minatar"
	@echo "make bench-atari Atari-5 suite at 10M frames on one GPU (CPU only: a smoke grid, said so)"
	@echo "make gpu-check   GPU speeds: CartPole populations of 256/1,024, ALE CNN populations of 8/16/32 vs the process engine, peak memory"
	@echo "make classic-from-table  the staleness and paper suites' per-task verdicts, per-run tables and README blocks from the committed docs/results/paper/runs.csv (no runs/)"
	@echo "make engines     the quick suite on the process engine too; per-cell CIs of both engines (docs/results/engines.md)"
	@echo "make plot        figures, tables and report.md from runs/ (SUITE=quick)"
	@echo "make perf        speed benchmarks (env throughput, learner time per update, runs per hour of both engines)"
	@echo "make readme      regenerate the README's results section from runs/quick/report"

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
# them one by one in this process.
TEST_WORKERS ?= auto
test: $(STAMP)
	$(VPY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

SUITE ?= quick
WORKERS ?=
bench: $(STAMP)
	$(VPY) -m adaptive_po bench --suite quick $(if $(WORKERS),--workers $(WORKERS))

bench-full: $(STAMP)
	$(VPY) -m adaptive_po bench --suite classic $(if $(WORKERS),--workers $(WORKERS))

bench-staleness: $(STAMP)
	status=0; $(VPY) -m adaptive_po bench --suite staleness $(if $(WORKERS),--workers $(WORKERS)) || status=$$?; \
	$(VPY) -m adaptive_po readme --report runs/staleness/report --figures docs/results/staleness --section staleness --brief && exit $$status

readme-staleness: $(STAMP)
	$(VPY) -m adaptive_po readme --report runs/staleness/report --figures docs/results/staleness --section staleness --brief

bench-paper: $(STAMP)
	status=0; $(VPY) -m adaptive_po bench --suite paper $(if $(WORKERS),--workers $(WORKERS)) || status=$$?; \
	$(MAKE) paper-report && exit $$status

bench-sensitivity: $(STAMP)
	status=0; $(VPY) -m adaptive_po bench --suite sensitivity $(if $(WORKERS),--workers $(WORKERS)) || status=$$?; \
	$(MAKE) paper-report && exit $$status

# whichever of the three sweeps exist feed one report (docs/results/paper) and the README's paper section
paper-report: $(STAMP)
	$(VPY) -m adaptive_po.analysis.paper $(wildcard runs/paper runs/sensitivity runs/sensitivity-* runs/staleness) --out docs/results/paper

mismatch: $(STAMP)
	$(VPY) benchmarks/sampler_mismatch.py --out docs/results/sampler_mismatch.md

# the MinAtar tier (the minatar extra, GPL-3.0, is part of the set-up): runs the suite and publishes
# its report into docs/results/minatar and the README's MinAtar block. A suite target publishes
# even when some runs failed (they are scored and counted), then exits with the bench's status.
bench-minatar: $(STAMP)
	status=0; $(VPY) -m adaptive_po bench --suite minatar --no-report $(if $(WORKERS),--workers $(WORKERS)) || status=$$?; \
	$(VPY) -m adaptive_po bench --suite minatar-reference --no-report $(if $(WORKERS),--workers $(WORKERS)) || status=$$?; \
	$(MAKE) minatar-report && exit $$status

minatar-report: $(STAMP)
	$(VPY) -m adaptive_po.analysis runs/minatar --out docs/results/minatar
	$(VPY) -m adaptive_po.analysis.minatar --runs runs/minatar --reference-runs runs/minatar-reference --out docs/results/minatar --readme README.md

# equal tuning with held-out selection: an Optuna search per objective and task on seeds 100-101
# (fresh and lag-16 data), then default and selected configurations scored on seeds 0-4; the
# report publishes even when runs failed (they are scored at the random score), then the status
tuned-report: $(STAMP)
	$(VPY) -m adaptive_po.analysis.tuned --runs runs/tuning-search runs/tuning-score --out docs/results/tuned --readme README.md

bench-tuned: $(STAMP)
	status=0; $(VPY) -m adaptive_po tune $(if $(WORKERS),--workers $(WORKERS)) || status=$$?; \
	$(MAKE) tuned-report && exit $$status

# issue 21: why the ESS objective loses on fresh data. The traces inside updates (process engine,
# seeds 0-2; resumable: a finished trace is kept) and the diagnosis report and figure built from them
fresh-data-trace: $(STAMP)
	$(VPY) -m adaptive_po trace --envs Pendulum-v1 --algos esspo,ppo --lags 0,16 --seeds 0,1,2 --timesteps 100000 --out docs/results/fresh-data/trace
	$(VPY) -m adaptive_po trace --envs CartPole-v1 --algos esspo,ppo --lags 0 --seeds 0,1,2 --timesteps 100000 --every 5 --out docs/results/fresh-data/trace
	$(VPY) -m adaptive_po trace --envs Pendulum-v1 --algos esspo-batch-ess,esspo-forward-kl --lags 0 --seeds 0,1,2 --timesteps 100000 --out docs/results/fresh-data/trace
	$(MAKE) fresh-data-diagnosis

fresh-data-diagnosis: $(STAMP)
	$(VPY) -m adaptive_po.analysis.fresh_data diagnosis --traces docs/results/fresh-data/trace --out docs/results/fresh-data

# the pre-registered variants (docs/results/fresh-data/preregistration.md) against esspo and ppo:
# the diagnosis tasks under the paper's conditions, then held-out tasks; publishes even when runs failed
bench-fresh-data: $(STAMP)
	status=0; $(VPY) -m adaptive_po bench --suite fresh-data --no-report $(if $(WORKERS),--workers $(WORKERS)) || status=$$?; \
	$(VPY) -m adaptive_po bench --suite fresh-data-heldout --no-report $(if $(WORKERS),--workers $(WORKERS)) || status=$$?; \
	$(VPY) -m adaptive_po bench --suite fresh-data-heldout --suite-name fresh-data-heldout-lag16 --envs LunarLander-v3,LunarLanderContinuous-v3 --lags 16 --no-report $(if $(WORKERS),--workers $(WORKERS)) || status=$$?; \
	$(FRESH_DATA_REPORT) && exit $$status

# (the report is called directly, not through $$(MAKE): a `make -n` would run a recipe line holding it)
FRESH_DATA_REPORT = $(VPY) -m adaptive_po.analysis.fresh_data results --runs runs/fresh-data runs/fresh-data-heldout runs/fresh-data-heldout-lag16 --out docs/results/fresh-data --readme README.md
fresh-data-report: $(STAMP)
	$(FRESH_DATA_REPORT)

# the variants' verdicts and README block rebuilt from the committed per-run table alone (no runs/)
fresh-data-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.fresh_data results --table docs/results/fresh-data/per_run.csv --out docs/results/fresh-data --readme README.md

# the tuned report and its README block rebuilt from the committed tables alone (no runs/)
tuned-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.tuned --tables docs/results/tuned --out docs/results/tuned --readme README.md

# the MinAtar verdicts and reference check rebuilt from the committed per-run table alone (no runs/)
minatar-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.minatar --table docs/results/minatar/per_run.csv --out docs/results/minatar --readme README.md

# the staleness and paper suites' verdicts (docs/results/{staleness,paper}/verdicts.md, per_run.csv) and
# the README's two verdict blocks, rebuilt from the committed run table alone (no runs/)
classic-from-table: $(STAMP)
	$(VPY) -m adaptive_po.analysis.classic --table docs/results/paper/runs.csv --out docs/results --readme README.md

# one GPU: the Atari-5 suite with CNN populations (the dry run prints its estimate); no GPU: the
# smoke grid (one game, 4,096 steps per run), said so before it starts
bench-atari: $(STAMP)
	@if $(VPY) -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then \
	  $(VPY) -m adaptive_po bench --suite atari --device cuda $(if $(WORKERS),--workers $(WORKERS)); \
	else \
	  echo "bench-atari: no CUDA device here, so this is the Atari smoke grid (suite atari-smoke: Phoenix-v5, esspo and ppo, lag 0 and 4, 4,096 steps per run), not the Atari-5 suite; run it on a GPU machine for results"; \
	  $(VPY) -m adaptive_po bench --suite atari-smoke --device cpu $(if $(WORKERS),--workers $(WORKERS)); \
	fi

# the GPU check: CartPole populations of 256 and 1,024, ALE CNN populations of 8, 16, 32 vs one
# process-engine run, peak GPU memory (under 8 minutes on one GPU; `--tiny` runs it on a CPU)
gpu-check: $(STAMP)
	$(VPY) benchmarks/gpu_check.py

plot: $(STAMP)
	$(VPY) -m adaptive_po.analysis runs/$(SUITE)

perf: $(STAMP)
	$(VPY) benchmarks/throughput.py
	$(VPY) benchmarks/learner.py
	$(VPY) benchmarks/engines_speed.py
	$(VPY) benchmarks/engines_speed.py --envs Breakout-MinAtar --members 16 --steps 49152 --process-runs 2

# The quick suite through the process engine too (runs/quick-process), then both engines' per-cell
# final-return CIs side by side. Needs `make bench` first (runs/quick, population engine).
engines: $(STAMP)
	$(VPY) -m adaptive_po bench --suite quick --engine process --suite-name quick-process --no-report $(if $(WORKERS),--workers $(WORKERS))
	$(VPY) benchmarks/engines_agree.py runs/quick runs/quick-process --out docs/results/engines.md

readme: $(STAMP)
	$(VPY) -m adaptive_po readme --report runs/quick/report --readme README.md

clean-runs:
	rm -rf runs/quick runs/quick-process runs/tuning-search runs/tuning-score runs/classic runs/staleness runs/paper runs/sensitivity runs/atari
