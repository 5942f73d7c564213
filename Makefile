# floodmark: the front door. `make chaos` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
STAMP  := build/.deps-stamp
PYTEST := $(PYTHON) -m pytest

.PHONY: deps chaos test test-chaos test-chaos-sim lint typecheck unit images bench clean fuzz

$(STAMP): pyproject.toml scripts/install-deps.sh
	PYTHON=$(PYTHON) bash scripts/install-deps.sh
	@mkdir -p build && touch $(STAMP)

deps: $(STAMP)

images: deps
	floodmark images

## Run the default chaos test on a Docker cluster; prints the verdict and the report path.
chaos: images
	floodmark run --cluster docker

## The test suite: lint (ruff, import-linter layers), types, unit + integration tests (chaos suite excluded).
# (-n auto: one worker per core; the tests on real infrastructure share one of them, see
# tests/conftest.py. --durations: the slowest tests in the log, to see where CI's minutes go)
test: deps lint typecheck
	$(PYTEST) -q -m "not chaos" -n auto --dist loadgroup --durations=15

lint: deps
	$(PYTHON) -m ruff check floodmark tests bench
	lint-imports

typecheck: deps
	$(PYTHON) -m mypy

## Unit tests only (fast, no ZooKeeper/Docker/root/Spark/browser).
unit: deps
	$(PYTEST) -q -n auto -m "not real_infrastructure"

## The chaos regression matrix used in CI (Docker), and the simulator's variant corpus.
test-chaos: images
	$(PYTEST) -q -m chaos tests/chaos --durations=15

## The simulator's part of test-chaos alone (every variant's catching seed; no Docker).
test-chaos-sim: deps
	$(PYTEST) -q -m chaos tests/chaos/test_sim_corpus.py

bench: deps
	@for b in bench/bench_*.py; do echo "== $$b"; $(PYTHON) $$b || exit 1; done

clean:
	floodmark cleanup || true
	rm -rf build .pytest_cache .mypy_cache .ruff_cache test-artifacts

## The long fuzz run for nightly use: 10,000 generated and mutated inputs per reader; failing
## inputs are kept in tests/fuzz_regressions/ (replayed by `make test`).
fuzz: deps
	$(PYTHON) scripts/fuzz.py --examples $${FUZZ_EXAMPLES:-10000}
