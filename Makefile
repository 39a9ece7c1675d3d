# poetsim: two commands set everything up on a fresh Debian machine with Python 3.11.
#   make demo   install, then run the main job
#   make test   install, then run the test suite (what CI runs)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

DEMO   := build/demo/resnet18
GUARD  := build/guard/mcu

.PHONY: setup debian demo test test-slow guard bench clean

setup: $(STAMP) debian

# Python packages go into a local virtual environment; re-run when pyproject.toml changes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,torch]'
	touch $(STAMP)

# From Debian, installed only when missing (needs root): GLPK's glpsol (glpk-utils), and chromium
# for the browser test (Playwright drives it; its own browser download is not used).
debian:
	@missing=""; \
	command -v glpsol >/dev/null 2>&1 || missing="$$missing glpk-utils"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# The main job: the paper's ResNet-18 study, swept afresh, and its report.
demo: setup
	$(BIN)/poetsim validate scenarios/*.yaml
	rm -rf $(DEMO)
	$(BIN)/poetsim sweep scenarios/resnet18.yaml --out $(DEMO)
	$(BIN)/poetsim compare $(DEMO)
	$(BIN)/poetsim report $(DEMO)
	@echo "report: $(DEMO)/report.html (results shipped in results/resnet18/)"

test: setup guard
	$(BIN)/python -m pytest -q

# The energy regression guard: a small sweep checked against the committed baseline.
guard: setup
	rm -rf $(GUARD)
	$(BIN)/poetsim sweep scenarios/mcu.yaml --out $(GUARD)
	$(BIN)/poetsim check $(GUARD) --baseline results/baselines/mcu.csv

test-slow: setup
	$(BIN)/python -m pytest -q -m slow

# Speed and memory targets: CSVs under results/bench/ (BENCH="solver simulator sweep" picks).
bench: setup
	$(BIN)/python -m benchmarks $(BENCH)

clean:
	rm -rf $(VENV) .pytest_cache build
