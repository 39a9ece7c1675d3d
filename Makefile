# poetsim: two commands set everything up on a fresh Debian machine with Python 3.11.
#   make demo   install, then run the main job
#   make test   install, then run the test suite (what CI runs)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup glpk demo test test-slow bench clean

setup: $(STAMP) glpk

# Python packages go into a local virtual environment; re-run when pyproject.toml changes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# GLPK's glpsol comes from Debian's glpk-utils; installed only when missing (needs root).
glpk:
	@command -v glpsol >/dev/null 2>&1 || { \
		echo "installing glpk-utils (glpsol) with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq glpk-utils >/dev/null; }

demo: setup
	$(BIN)/poetsim graph resnet18
	$(BIN)/poetsim validate scenarios/*.yaml

test: setup
	$(BIN)/python -m pytest -q

test-slow: setup
	$(BIN)/python -m pytest -q -m slow

bench: setup
	$(BIN)/python -m poetsim.bench

clean:
	rm -rf $(VENV) .pytest_cache
