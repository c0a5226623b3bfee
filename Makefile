# The README's two commands, `make bench` and `make test`, set everything up on a fresh machine:
# a local virtual environment with torch installed first (a pinned CPU wheel; see README), then the project.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed-stamp
# make bench: PROFILE=quick|full, REGIME=warm|fresh-pages (timing regime), THP=1 for the huge-page variant,
# BENCH=<regex> to select cells, RESUME=1 to carry on where a killed run of this commit stopped, RATIO_PROCESSES=N
# for the paired ratios' replicate processes.
# Unset, the command's own defaults (benchmarks/profiles.py's DEFAULT_PROFILE, benchmarks/allocator.py's
# DEFAULT_REGIME) apply.
PROFILE ?=
REGIME ?=
# BENCH reaches the command through the environment ("$$BENCH"), so a selection with quotes in it, such as
# BENCH="'gather', 'example', 'cpu'" (one cell of asv's names), arrives as typed.
BENCH ?=
export BENCH
PROFILE_FLAG = $(if $(PROFILE),--profile $(PROFILE))
ifneq ($(filter bench bench-full bench-fresh-pages bench-thp bench-commits,$(MAKECMDGOALS)),)  # checked where they are read: THP=always in the environment is no typo for make test
$(foreach flag,RESUME THP,$(if $(filter-out 0 1,$($(flag))),$(error $(flag)=$($(flag)): must be 1, 0 or empty)))
endif
BENCH_FLAGS = $(PROFILE_FLAG) $(if $(REGIME),--regime $(REGIME)) $(if $(filter 1,$(THP)),--thp) $(if $(BENCH),--bench "$$BENCH") \
	$(if $(filter 1,$(RESUME)),--resume) $(if $(RATIO_PROCESSES),--ratio-processes $(RATIO_PROCESSES))

.DEFAULT_GOAL := help

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):[^#]*## /\1\t/' | \
		awk -F'\t' '{printf "  make %-18s %s\n", $$1, $$2}'

.PHONY: help venv cpp test test-fast lint browser summary bench bench-full bench-fresh-pages bench-thp bench-commits bench-cost bench-pytest agreement context test-strategy \
	memprofile report regress regress-validate advise asv-check gpu-check gpu-check-prepare mutation-check variance clean

# The torch asked for, recorded so that another TORCH_SPEC reinstalls into an existing .venv instead of keeping the
# torch it has (the file changes only when the spec does, so the stamp stays valid otherwise).
TORCH_STAMP := $(VENV)/.torch-spec
$(TORCH_STAMP): FORCE
	@mkdir -p $(VENV)
	@if [ "$$(cat $@ 2>/dev/null)" != "$(TORCH_SPEC)" ]; then echo "$(TORCH_SPEC)" > $@; fi

.PHONY: FORCE
FORCE:

# torch through pip (pip takes the local CPU wheel and applies the machine's constraints; uv does neither), then
# the project and its extras through uv, which resolves and installs them in a third of pip's time and compiles
# their bytecode in parallel (the processes the tests start import from it; PYTHONDONTWRITEBYTECODE may be set).
$(STAMP): pyproject.toml $(TORCH_STAMP)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)" "uv>=0.5"
	$(VENV)/bin/uv pip install --python $(PY) --quiet --compile-bytecode -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)  ## set up .venv (torch first, then the project with its extras)

# The cpp strategy's kernel, built once per source, compiler, flags, torch and CPU and cached (impls/cpp.py), so that
# no test or benchmark pays the build; without a C++ compiler the strategy refuses every input and this says why.
cpp: venv  ## build the cpp strategy's kernel (cached; a second call only loads it)
	$(PY) -m unfold_bench.cli build-cpp

lint: venv  ## ruff, and the GitHub workflows against their schema (check-jsonschema, offline)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

# Two pytest workers (pytest-xdist), the cores' threads split between them (tests/conftest.py): compiling
# (torch.compile) is mostly single-threaded, so two processes share a 2-core machine. Tests are handed out one at
# a time to whichever worker is free, the slow ones first and the longest of them before the others
# (tests/conftest.py), so both workers stay busy until the end.
PYTEST_WORKERS ?= 2
PYTEST_FLAGS ?= -n $(PYTEST_WORKERS) --dist load --maxschedchunk 1

test: lint cpp  ## ruff, then the whole test suite in two workers (what CI runs)
	$(PY) -m pytest $(PYTEST_FLAGS)

# The inner loop: every strategy's parity on every config, its random problems (but the compiling strategies'),
# gradcheck, validation, views, caveats, capabilities, the reports. Leaves out the tests marked slow: the compiling
# strategies' random problems, PyTorch's OpInfo samples, Triton's interpreter, the harness end to end (every quick
# cell, asv runs, the gate's processes, the cold compile), a killed run, the allocator's processes, the defects'
# reproducers, torch.func on the compiled strategies, the commands' entry points, the site in chromium, the
# gate's paired processes, the mutation check, the decision rule's simulation, advise end to end.
test-fast: cpp  ## the tests not marked slow, for the inner loop (make test runs them all)
	@echo "make test-fast: the tests not marked slow (compiles, processes, Triton's interpreter, the browser); make test runs them all"
	$(PY) -m pytest $(PYTEST_FLAGS) -m "not slow" -q

# Every test of one strategy, slow ones included (tests/conftest.py's --strategy: its parameters, its module, its
# name in a test's): make test-strategy NAME=gather
test-strategy: cpp  ## every test naming one strategy: make test-strategy NAME=<name>
	@test -n "$(NAME)" || (echo "usage: make test-strategy NAME=<strategy>" && exit 2)
	$(PY) -m pytest $(PYTEST_FLAGS) -q --strategy "$(NAME)"

# The site's browser test runs wherever a Chrome or Chromium and its chromedriver are on the PATH (GitHub's hosted
# runners have Google Chrome); make test never installs one and the test says why it skipped. `make browser`
# installs Debian's chromium and chromium-driver (as root).
browser:  ## install Debian's chromium and chromedriver for the site's browser test (as root)
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then echo "chromium and chromedriver found"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium and chromium-driver for the site's browser test"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			chromium chromium-driver >/dev/null) || (echo "chromium could not be installed" && exit 1); \
	else echo "chromium/chromedriver missing and not installable here (apt-get as root is needed)" && exit 1; fi

# The asv suite on this machine in the current environment, one asv run per config, then a summary, the
# capability matrix (reports/capabilities/), then the website (reports/site/index.html); exits with bench's status
# (2: a benchmark failed or an installed plugin was set aside; 64: bench ran nothing, a usage error or a --strategy
# that cannot be loaded, and then nothing else runs), else 1 where a capability fails undeclared.
bench: cpp  ## the asv suite on this machine (PROFILE, REGIME, BENCH, RESUME, RATIO_PROCESSES), the capability matrix, the site
	$(PY) -m unfold_bench.cli bench $(BENCH_FLAGS); status=$$?; [ $$status -ne 64 ] || exit 64; \
		$(PY) -m unfold_bench.cli capabilities || [ $$status -ne 0 ] || status=1; \
		$(PY) -m unfold_bench.cli report; exit $$status

# CI regression gate: both revisions' calls alternated inside each of several processes (docs/regression-gate.md); exit 1
# on a regression, 2 on a failed benchmark. make regress BASE=origin/main [HEAD=HEAD] [BENCH=<regex>]
regress: venv  ## the regression gate: make regress BASE=origin/main [HEAD=rev] [BENCH=regex]
	@test -n "$(BASE)" || (echo "usage: make regress BASE=<rev> [HEAD=<rev>] [BENCH=<regex>]" && exit 2)
	@$(PY) -m unfold_bench.cli regress '$(BASE)' '$(or $(HEAD),HEAD)' $(PROFILE_FLAG) $(if $(BENCH),--bench "$$BENCH") \
		$(REGRESS_ARGS); status=$$?; if [ $$status -ne 0 ]; then echo "make regress: the gate exited $$status \
		(1: a regression, 2: it could not judge; make reports any failure as its own 2: read the gate's status in \
		its verdict file)"; fi; exit $$status

# Measure the gate here: 10 A/A and 10 injected runs of the CI subset (hours; docs/regression-gate.md);
# VALIDATE_ARGS="--aa 3 --injected 3" for fewer. Writes $(VALIDATE_OUT) and each run's table beside it: name it
# after the machine, as the committed ones are (VALIDATE_OUT=docs/gate-validation-amd.txt).
VALIDATE_OUT ?= docs/gate-validation.txt
regress-validate: venv  ## measure the gate's false alarms and catches on this machine (long): VALIDATE_OUT=docs/...
	$(PY) -m unfold_bench.cli validate-gate --out $(VALIDATE_OUT) $(VALIDATE_ARGS)

# Which strategy to ship for your own layers: make advise ARGS="--input-shape 64,128,56,56 --kernel-size 3 --stride 2"
# or ARGS="--model torchvision.models.resnet18 --input-shape 32,3,224,224" (unfold-bench advise --help).
advise: cpp  ## which strategy for your own layers: make advise ARGS="--input-shape ... --kernel-size ..."
	$(PY) -m unfold_bench.cli advise $(ARGS)

# The static website from every result in results/ (all machines, commits, profiles): reports/site/.
report: venv  ## rebuild the site (reports/site/) from every result in results/
	$(PY) -m unfold_bench.cli report

# An earlier run's summary, printed again under this checkout's reports: make summary PROFILE=full COMMIT=a6d50396
summary: venv  ## print a run's summary again from results/: [MACHINE=...] [PROFILE=full] [COMMIT=<hash prefix>]
	$(PY) -m unfold_bench.cli summary $(if $(MACHINE),--machine "$(MACHINE)") $(PROFILE_FLAG) $(if $(COMMIT),--commit "$(COMMIT)")

# The configs' real batch size (256 for All-CNN-C).
bench-full:  ## make bench at the configs' real batch sizes
	$(MAKE) bench PROFILE=full

# The same suite timed with every output on first-touched memory (recorded as the machine name + -freshpages).
bench-fresh-pages:  ## make bench with every output on first-touched memory
	$(MAKE) bench REGIME=fresh-pages

# A few cells timed by the harness and by torch.utils.benchmark in one run, same threads and regime: the ratios.
agreement: venv  ## the harness against torch.utils.benchmark on a few cells
	$(PY) -m unfold_bench.cli agreement $(AGREEMENT_ARGS)

# Each strategy against native in a loop each, alternating, after a pause and in the suite's blocks: what the call
# before costs.
context: venv  ## a call's time after itself, after native, after a pause and in the suite's blocks
	$(PY) -m unfold_bench.cli context $(CONTEXT_ARGS)

# The same suite with PyTorch's CPU allocations on transparent huge pages, recorded as a separate machine.
bench-thp:  ## make bench with PyTorch CPU allocations on transparent huge pages
	$(MAKE) bench THP=1

# asv builds a virtualenv per commit and benchmarks each commit of RANGE (e.g. RANGE=main~5..main).
bench-commits: venv  ## asv's own mode: a virtualenv per commit of RANGE, each benchmarked
	@test -n "$(RANGE)" || (echo "usage: make bench-commits RANGE=<git range> [PROFILE=quick|full]" && exit 2)
	$(PY) -m unfold_bench.cli bench $(BENCH_FLAGS) --commits '$(RANGE)'

# What the README's make bench costs from a fresh clone of HEAD with empty compile caches (this machine's package
# caches as they are): set up and benched, each step timed (unfold-bench cost; docs/targets.md). PROFILE=full for the
# full profile; COST_OUT=docs/cost-quick-amd.txt keeps the record (name it after its machine and profile).
bench-cost: venv  ## time the README's make bench from a fresh clone of HEAD (PROFILE, COST_OUT=docs/...)
	$(PY) -m unfold_bench.cli cost $(PROFILE_FLAG) $(if $(COST_OUT),--out $(COST_OUT))

# The same matrix with pytest-benchmark (quick profile unless UNFOLD_BENCH_PROFILE=full); pass
# PYTEST_ARGS='--benchmark-autosave' or '--benchmark-compare' to save or compare runs.
# Timed in the regime's environment (benchmarks/allocator.py), as make bench is: warm by default, REGIME=fresh-pages
# pins glibc's mmap threshold from the start.
bench-pytest: venv  ## the same matrix with pytest-benchmark (REGIME=fresh-pages for that regime)
	$(PY) -m benchmarks.allocator --regime $(or $(REGIME),warm) $(PY) -m pytest benchmarks/ --benchmark-only $(PYTEST_ARGS)

# Where one strategy's memory goes: make memprofile STRATEGY=native CONFIG=allcnnc-conv2 [PROFILE=full]
memprofile: venv  ## where one strategy's memory goes: STRATEGY=... CONFIG=...
	$(PY) -m unfold_bench.cli memprofile $(STRATEGY) $(CONFIG) $(PROFILE_FLAG) $(MEMPROFILE_ARGS)

# The prepared GPU check (docs/gpu-check.md): what a task lent a GPU machine runs. prepare puts the wheels the device
# lacks and the commit manifest in .gpu-check/ and prints the device call; gpu-check is its dry run here.
gpu-check-prepare: venv  ## the GPU check's carried files (.gpu-check/) and the device call to make
	$(PY) -m unfold_bench.cli gpu-check prepare

gpu-check: venv  ## the GPU check's dry run here: what it would run on a lent GPU, and whether it is ready
	$(PY) -m unfold_bench.cli gpu-check run --dry-run

# Every mutation of unfold_bench/commands/mutation_check.py, each test selection first run unmutated (make test runs a quick few).
mutation-check: cpp  ## break each figure on purpose and expect the tests that name it to fail (minutes)
	$(PY) -m unfold_bench.cli mutation-check --baseline

# The variance components of a few cells' paired ratios and the replication that resolves the gate's target.
variance: cpp  ## block, placement, process and run variance of chosen cells: make variance ARGS="--cells ..."
	$(PY) -m unfold_bench.cli variance $(ARGS)

asv-check: venv  ## asv's own check of the suite
	$(PY) -m asv check --python=same

clean:  ## remove .venv, caches, the site and asv state
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache *.egg-info .asv .benchmarks reports/site artifacts
