# A fresh machine needs python3 (with venv and pip), node/npm and make; nothing else.
#   make setup   .venv with the project and dev tools, plus the pinned Restate binaries
#   make test    the whole test suite (starts real restate-server / hypercorn processes); on
#                first use it installs Debian's chromium for the browser test (apt-get, root or sudo).
#                WORKERS=4 pytest processes share the tests, each with its own stack (WORKERS=1: one process)
#   make up      the local stack on :8080 (ingress) :9070 (admin) :9080 (service) :9100 (world) :9090 (inbound)
#   make down    stop it (Restate's data in .stack/ stays, so the next `up` resumes)
#   make restart-service  stop and start only the replenisher service; Restate and the world keep running
#   make console the manager's web console on :8090, over the running stack
#   make docs    the documentation site (docs/, mkdocs-material) into site/, failing on a broken link or anchor
# The service's ASGI server: make up SERVER=hypercorn (or granian, the default); make test SERVER=hypercorn
# runs the suite's service on it. Without it, REPLENISHER_SERVER decides, else the default (docs/operating/settings.md).
#   make test-repeat  the e2e and operator suites K times (K=5) on a clean clone of REV (HEAD), HOG=N busy processes
#                beside each round (HOG_ROUNDS=alternate: every other round); lists each test that failed at least
#                once, with its rounds and first lines, and ends with `test-repeat: rounds=K failed_tests=F`
#   make test-durations  the whole suite, both passes, recording each test's time in tests/durations.json (which
#                orders the tests longest first: commit it again when tests are added or change length)
#   make test-hypercorn  whole replenishments, the crash matrix and suspension with the service on hypercorn
# Pass stack options with STACK_ARGS, e.g. make up STACK_ARGS="--day-seconds 2 --catalogue demo",
# and pytest options with PYTEST_ARGS, e.g. make test PYTEST_ARGS="-k stack -x".
#   make injection    the adversarial suite on three real stacks (about 12 min on a loaded 2-core machine); ends with
#                     `injection: attacks=N real_stack=N asr_policy=0 asr_claude=0 asr_compromised=0 wedged=0`
#   make upgrade-check  every waiting run of the committed corpus (tests/fixtures/upgrade/, made by earlier code)
#                     replayed against this checkout on a private copy; ends with
#                     `upgrade-check: invocations=N replayed=R diverged=D outside_calls=C`, exit 1 if any diverged
#   make upgrade-corpus  a new corpus made by this code (a couple of minutes), to commit with a release
#   make evals        recorded real runs replayed against the offline policy and Claude (stand-in API); ends with
#                     `replay: runs=N turns=T agree=A diverged=D outside_calls=0`
#   make bench        benchmarks beside Temporal, DBOS and an asyncio floor (not part of `make test`)
#   make bench-quick  the same at smaller sizes (about ten minutes on a quiet machine); both write bench/results/ and end with
#                     `bench: cpu_per_replenishment_ms=X vs_floor=Fx vs_temporal=Ax ... engine_kb_per_waiting_run=K`
#   make bench-partitions restate-server with 1 and with 2 partitions, back to back (minutes); ends with
#                     `partitions: p1_cpu_ms=A p2_cpu_ms=B cpu_ratio=Rx ...`
#   make bench-loglet  restate-server with the replicated and with the local loglet, back to back (minutes);
#                     ends with `loglet: replicated_cpu_ms=A local_cpu_ms=B cpu_ratio=Rx ...`
#   make bench-servers    the service on hypercorn and on granian, back to back (minutes); ends with
#                     `servers: hypercorn_cpu_ms=H granian_cpu_ms=G cpu_ratio=Rx ... throughput_ratio=Tx`
#   make bench-versions BASE=REV  our service at commit REV and as this checkout is, back to back (minutes); ends with
#                     `versions: base_cpu_ms=B head_cpu_ms=H cpu_ratio=Rx ... throughput_ratio=Tx`
#   make bench-model-calls  only model calls per replenishment, Claude decider over the stand-in API (seconds);
#                     writes bench/results/partial/model_calls.json (the full runs put it in results.json)
#   make bench-scale  N watched SKUs ticking for three business days on a compressed clock (PLAN=full: N = 1,000,
#                     10,000 and 100,000, an estimated hour and a half; PLAN=quick or make bench-scale-quick: 1,000, under
#                     ten minutes); writes bench/results/scale-PLAN.json and ends with
#                     `scale: skus=N ticks=T late_p99_s=L cpu_ms_per_tick=C engine_mb=E skus_page_ms=P`
#                     (SERVICE_WORKERS=2: the service on two workers; `python -m bench.scale --service-workers 1 2 1 2`
#                     alternates one and two workers at each size)
#   make bench-engine-memory  what holds restate-server's memory at 1,000, 5,000 and 10,000 waiting runs, at RocksDB
#                     budgets of 256, 128 and 64 MiB (about ten minutes); writes bench/results/engine-memory.json and ends with
#                     `engine-memory: budget=B kb_per_waiting_run=K block_cache_kb=C rest_kb=O (...) last_step_kb=L (...)`
#   make bench-state-scan  Restate's SQL over 1,000 to 100,000 objects on 1 and 4 partitions, against a handler's
#                     read (about ten minutes); writes bench/results/state-scan-full.json and ends with
#                     `state-scan: rows=N point_sql_vs_handler=Rx point_sql_growth=Gx (from rows=M)`
#   make bench-list   the SKU list kept by key (the product's SkuList shards) at 1,000 to 100,000 SKUs: a page's
#                     time and CPU for each sort and filter, each page checked against the whole list (minutes);
#                     writes bench/results/list-shards-full.json and ends with
#                     `list-shards: skus=N page_ms=P page_ms_median=M put_ms=U shards=S`
#   make bench-receive  a streamed HTTP/2 body on granian and on hypercorn, nothing of ours (a minute or two): what a
#                     server costs per chunk, the cold wake's replay in miniature (the upstream report); ends with
#                     `receive: frames=F frame_bytes=B granian_us_per_frame=G hypercorn_us_per_frame=H ... _switches_per_frame=S`
#   make cluster-test the three-node cluster test (CI runs it after `make test`); ends with `cluster: runs=N ...`
#   make lambda-test  the Lambda tests, with deployment zips for both x86_64 and arm64

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Re-install when the dependencies change, not on every run.
INSTALLED := $(VENV)/.installed-pyproject
STACK_ARGS ?=
PYTEST_ARGS ?=
# make test REPLAY=0 skips the second, always-replay pass over the end-to-end tests.
REPLAY ?= 1
SERVER ?=
# The suites run in WORKERS pytest-xdist processes, each starting its own Restate, world and service on
# free ports. The tests mostly wait on the compressed clock and on Restate, so twice a 2-core machine's
# cores keeps it busy without starving the clock-bound tests; WORKERS=1 runs one process, as before.
# loadgroup: the slow tests first, one at a time to whichever worker is free, and a module's tests that
# share a module-scoped fixture together on one worker (tests/scheduling.py).
WORKERS ?= 4
# The suites start hundreds of Python processes (CLI calls, services, servers): with
# PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) none of them finds this package
# compiled, and each compiles it from source again (about 80 ms of CPU per process). The test targets
# let Python write the package's bytecode (__pycache__, ignored by git).
WRITE_BYTECODE := env -u PYTHONDONTWRITEBYTECODE
XDIST := $(if $(filter 0 1,$(WORKERS)),,-n $(WORKERS) --dist loadgroup --no-loadscope-reorder)
ifneq ($(SERVER),)
export REPLENISHER_SERVER := $(SERVER)
endif
# The service's worker processes: make up SERVICE_WORKERS=2, make test SERVICE_WORKERS=2 (else
# REPLENISHER_SERVICE_WORKERS, else 1; docs/operating/settings.md).
SERVICE_WORKERS ?=
ifneq ($(SERVICE_WORKERS),)
export REPLENISHER_SERVICE_WORKERS := $(SERVICE_WORKERS)
endif

export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup restate test-deps demo test test-hypercorn soak injection evals up down restart-service status console screenshots docs lint clean \
	bench bench-quick bench-setup bench-model-calls bench-servers bench-versions bench-partitions bench-loglet bench-scale bench-scale-quick bench-state-scan bench-engine-memory bench-receive bench-list \
	cluster-test lambda-test test-repeat test-durations upgrade-check upgrade-corpus

setup: $(INSTALLED) restate

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# Cheap when already installed: it only checks the cached binaries' version.
restate: $(INSTALLED)
	$(BIN)/python -m replenisher.stack.install

demo: setup
	$(BIN)/replenisher demo

# The console's browser test drives Debian's chromium (the path its fixture launches):
# installed through apt-get when missing, as root or with sudo (scripts/apt-ensure says how).
CHROMIUM := $(or $(REPLENISHER_TEST_CHROMIUM),/usr/bin/chromium)
test-deps:
	@scripts/apt-ensure chromium 'test -x $(CHROMIUM)'

# pytest exits 5 when it collected nothing; say so, and fail, rather than pass quietly.
test: setup test-deps
	@$(WRITE_BYTECODE) $(BIN)/pytest -q -ra $(XDIST) $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
	exit $$status
ifeq ($(REPLAY),1)
	@echo "== the end-to-end tests again in always-replay mode: Restate suspends after every await"
	@REPLENISHER_TEST_ALWAYS_REPLAY=1 $(WRITE_BYTECODE) $(BIN)/pytest -q -ra -m e2e $(XDIST) $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then status=0; fi; \
	exit $$status
endif

# The tests go to the workers longest first by this file's times (tests/scheduling.py); a test it does not know
# counts as the median one. Recorded again by running the suite with the recorder on.
test-durations:
	REPLENISHER_TEST_DURATIONS=$(CURDIR)/tests/durations.json $(MAKE) test

# Flakes before CI finds them: SUITES (the e2e and operator suites) K times on a clean clone of REV (HEAD),
# each round its own pytest session, with HOG=N busy processes beside every round (HOG_ROUNDS=alternate:
# the odd rounds only). Its last line: `test-repeat: rounds=K failed_tests=F`.
K ?= 5
HOG ?= 0
HOG_ROUNDS ?= every
REV ?= HEAD
SUITES ?= tests/e2e tests/operator
test-repeat: setup test-deps
	$(WRITE_BYTECODE) $(BIN)/python scripts/test_repeat.py --rounds $(K) --hog $(HOG) --hog-rounds $(HOG_ROUNDS) --rev $(REV) \
		--suites $(SUITES) -- $(XDIST) $(PYTEST_ARGS)

# The service on hypercorn, the other server it supports (the default is granian): whole
# replenishments, the crash matrix and the suspension tests, then the last two in always-replay
# mode. CI runs it after make test.
HYPERCORN_E2E := tests/e2e/test_replenishment.py tests/e2e/test_crash_matrix.py tests/e2e/test_suspension.py
test-hypercorn: setup
	REPLENISHER_SERVER=hypercorn $(WRITE_BYTECODE) $(BIN)/pytest -q -ra -m e2e $(XDIST) $(HYPERCORN_E2E) $(PYTEST_ARGS)
	REPLENISHER_SERVER=hypercorn REPLENISHER_TEST_ALWAYS_REPLAY=1 $(WRITE_BYTECODE) $(BIN)/pytest -q -ra -m e2e $(XDIST) \
		tests/e2e/test_crash_matrix.py tests/e2e/test_suspension.py $(PYTEST_ARGS)

# Three restate-server nodes on loopback behind a fail-over ingress, each SIGKILLed in turn under load. The
# summary line comes last: runs, node kills, duplicate orders, lost runs or messages.
cluster-test: setup
	@summary=$$(mktemp); \
	REPLENISHER_CLUSTER_TEST=1 REPLENISHER_CLUSTER_SUMMARY=$$summary \
		$(WRITE_BYTECODE) $(BIN)/pytest -q -ra -m cluster tests/deploy $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
	cat $$summary; rm -f $$summary; exit $$status

# The Lambda template, the zips for both architectures, and a replenishment through the handler.
lambda-test: setup
	REPLENISHER_LAMBDA_ARCHES=x86_64,arm64 $(BIN)/pytest -q -ra \
		tests/deploy/test_lambda_package.py tests/deploy/test_lambda_secret.py tests/deploy/test_lambda_e2e.py $(PYTEST_ARGS)

# The adversarial suite: every attack (tests/injection/attacks.py) through real processes, on one stack
# per decider (offline policy, a persuaded Claude and a compromised model over a stand-in API),
# judged from the world's records. INJECTION_ARGS="--only id,id --kinds policy" narrows it.
# Its last line is the result; non-zero exit if any attack got through, a SKU was left wedged,
# a positive control did not fire, or an attack did not go through the real stack.
INJECTION_ARGS ?=
injection: setup
	$(BIN)/python -m tests.injection.suite $(INJECTION_ARGS)

# The corpus of real runs (tests/fixtures/runs, recorded by scripts/record_runs.py) replayed against
# the offline policy (it must agree on every turn) and the Claude decider over the stand-in API.
# Ends with `replay: runs=N turns=T agree=A diverged=D outside_calls=0`.
evals: setup
	$(BIN)/python -m tests.replay.evals

# Runs waiting now must replay on the code about to ship: docs/deploying/upgrading.md. UPGRADE_ARGS passes
# options on, e.g. UPGRADE_ARGS="--candidate-app module:factory()"; `replenisher upgrade-check --from-stack`
# checks the local stack's own runs (stopped first with `make down`).
UPGRADE_CORPUS ?= tests/fixtures/upgrade/corpus.tar.gz
UPGRADE_ARGS ?=
upgrade-check: setup
	$(BIN)/replenisher upgrade-check $(UPGRADE_CORPUS) $(UPGRADE_ARGS)

upgrade-corpus: setup
	$(BIN)/python -m tests.upgrade.make_corpus $(UPGRADE_CORPUS)

# The chaos soak: SOAK_RUNS replenishments (and at least 20 faults) under random damage, then an
# audit against the world's records. make soak SOAK_RUNS=1000 for the long one.
SOAK_RUNS ?= 40
soak: setup
	$(BIN)/python -m bench.soak --runs $(SOAK_RUNS)

up: setup
	$(BIN)/python -m replenisher.stack up $(STACK_ARGS)

down: $(INSTALLED)
	$(BIN)/python -m replenisher.stack down $(STACK_ARGS)

restart-service: $(INSTALLED)
	$(BIN)/python -m replenisher.stack restart service $(STACK_ARGS)

console: $(INSTALLED)
	$(BIN)/replenisher console

# The docs' pictures of the console, the CLI and a replay (docs/screenshots/), from a small world
# on the test fixtures' stack (free ports, not the shared one), in Debian's Chromium.
screenshots: setup test-deps
	REPLENISHER_SCREENSHOT_DIR=docs/screenshots $(BIN)/pytest -q tests/operator/test_console_screenshots.py \
		tests/operator/test_console_browser.py tests/operator/test_replay_page.py \
		-k 'readme_screenshots or service_killed or replay_page'

status: $(INSTALLED)
	$(BIN)/python -m replenisher.stack status $(STACK_ARGS)

# The documentation site: docs/ with mkdocs.yml, built offline into site/ (gitignored). --strict fails
# on any warning: a page left out of the nav, a link or #anchor that does not resolve. The theme's
# notice about its future is not a warning of this build; NO_MKDOCS_2_WARNING leaves it out.
docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# ruff, then the package's import contracts (pyproject.toml: layers, the domain, no cycles).
lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

# The peers (Temporal, DBOS) and the measuring tools come from the `bench` extra; DBOS needs
# PostgreSQL's server binaries, installed from Debian's packages when missing (as root or with sudo).
BENCH_INSTALLED := $(VENV)/.installed-bench

$(BENCH_INSTALLED): pyproject.toml | $(INSTALLED)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

bench-setup: $(BENCH_INSTALLED) restate
	@scripts/apt-ensure postgresql 'ls /usr/lib/postgresql/*/bin/initdb'

bench: bench-setup
	$(BIN)/python -m bench --profile

bench-quick: bench-setup
	$(BIN)/python -m bench --quick

# The service on hypercorn and on granian, back to back: CPU per replenishment and throughput.
bench-servers: $(BENCH_INSTALLED) restate
	$(BIN)/python -m bench.servers

# A change against the commit before it (or any two commits): CPU per replenishment and throughput.
bench-versions: $(BENCH_INSTALLED) restate
	@test -n "$(BASE)" || { echo "make bench-versions needs BASE=<commit>, e.g. BASE=HEAD~1"; exit 2; }
	$(BIN)/python -m bench.versions --base "$(BASE)"

bench-partitions: $(BENCH_INSTALLED) restate
	$(BIN)/python -m bench.partitions

bench-loglet: $(BENCH_INSTALLED) restate
	$(BIN)/python -m bench.loglet

bench-engine-memory: $(BENCH_INSTALLED) restate
	$(BIN)/python -m bench.engine_memory --budgets "256 MiB" "128 MiB" "64 MiB"

# No peers: the bench's own packages and Restate are enough.
bench-model-calls: $(BENCH_INSTALLED) restate
	$(BIN)/python -m bench --model-calls

# N SKUs under watch on a stack of its own (bench/scale.py): only the project's own packages and Restate.
PLAN ?= full
bench-scale: setup
	$(BIN)/python -m bench.scale --plan $(PLAN)

bench-scale-quick: setup
	$(BIN)/python -m bench.scale --plan quick

# Restate alone (bench/state_scan.py): why a list of 100,000 SKUs cannot page through SQL.
bench-state-scan: setup
	$(BIN)/python -m bench.state_scan --plan full --partitions 1 4

# The SKU list's shards alone (bench/list_shards.py): how a 100,000-SKU list pages when kept by key.
bench-list: setup
	$(BIN)/python -m bench.list_shards --plan full

# The two servers alone (bench/asgi_receive.py): the project's own packages are enough.
bench-receive: setup
	$(BIN)/python -m bench.asgi_receive

# Stop a running stack first: deleting .stack under live processes would orphan them.
clean:
	@if [ -x $(BIN)/python ] && [ -f .stack/stack.json ]; then $(BIN)/python -m replenisher.stack down; fi
	rm -rf $(VENV) .stack
