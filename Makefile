# poetsim: two commands set everything up on a fresh Debian machine with Python 3.11.
#   make demo   install, then run the main job
#   make test   install, then run the test suite (what CI runs)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

DEMO   := build/demo/resnet18
GUARD  := build/guard/mcu

.PHONY: setup debian demo test lint test-slow guard bench paper agreement device-study outside-graphs clean

setup: $(STAMP) debian

# Python packages go into a local virtual environment, the core with every extra (torch, solvers,
# browser, test); re-run when pyproject.toml changes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,torch,solvers,browser]'
	touch $(STAMP)

# From Debian, installed only when missing (needs root): the solvers GLPK (glpk-utils) and CBC
# (coinor-cbc), chromium for the browser test (Playwright drives it; its own browser download is
# not used), and for `poetsim device` the emulated Cortex-M (qemu-system-arm), the cross-compiler
# (gcc-arm-none-eabi) and its C library (libnewlib-arm-none-eabi); the host's gcc builds the
# runtime's decoder under sanitizers for the tests.
debian:
	@missing=""; \
	command -v glpsol >/dev/null 2>&1 || missing="$$missing glpk-utils"; \
	command -v cbc >/dev/null 2>&1 || missing="$$missing coinor-cbc"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v qemu-system-arm >/dev/null 2>&1 || missing="$$missing qemu-system-arm"; \
	command -v arm-none-eabi-gcc >/dev/null 2>&1 || missing="$$missing gcc-arm-none-eabi"; \
	[ -e /usr/lib/arm-none-eabi/newlib/libc_nano.a ] || missing="$$missing libnewlib-arm-none-eabi"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc"; \
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
	@echo "shipped results of this study: results/resnet18/; against its baseline: $(BIN)/poetsim check $(DEMO) --baseline results/baselines/resnet18.csv"

# The suite runs on one worker per core (pytest-xdist); each test module stays on one worker, so its
# module fixtures are built once.
test: setup lint guard
	$(BIN)/python -m pytest -q -n auto --dist loadscope

# Style, types and layers: ruff (pyproject.toml's [tool.ruff]), mypy over the package, its tests
# and its benchmarks ([tool.mypy]), and import-linter's contracts ([tool.importlinter]: who may
# import whom; docs/architecture.md).
lint: setup
	$(BIN)/ruff check poetsim benchmarks tests
	$(BIN)/ruff format --check poetsim benchmarks tests
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo --no-cache

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

# The POET paper's comparisons (docs/paper.md): its figures' scenarios swept, then one report.
PAPER := paper_fig3 paper_fig3_mcu paper_fig4 paper_fig5 paper_table3
paper: setup
	for s in $(PAPER); do $(BIN)/poetsim sweep scenarios/$$s.yaml --out build/paper/$$s || exit $$?; done
	$(BIN)/poetsim paper $(addprefix build/paper/,$(PAPER)) --html build/paper/paper.html

# The simulator against the optimiser on every shipped scenario (docs/cost-model.md).
agreement: setup
	$(BIN)/python -m benchmarks.simulator --shipped

# The device study (docs/device.md): every schedule of scenarios/device.yaml run on the emulated
# microcontrollers, measured beside predicted, then its report (shipped in results/device/).
device-study: setup
	rm -rf build/device
	$(BIN)/poetsim device sweep scenarios/device.yaml --out build/device
	$(BIN)/poetsim report build/device

# The outside architectures (poetsim.pytorch.architectures) captured at batch 8 into
# scenarios/graphs/outside/, which scenarios/outside.yaml sweeps; the same every time (random
# weights do not change a graph, only shapes do).
OUTSIDE_IMAGES := mobilenet_v1 mobilenet_v3_small shufflenet_v2 efficientnet_b0 densenet_bc resnext29 squeezenet1_1 vit_tiny
outside-graphs: setup
	for m in $(OUTSIDE_IMAGES); do \
		$(BIN)/poetsim import-torch poetsim.pytorch.architectures:$$m --input-shape 8,3,32,32 \
			--out scenarios/graphs/outside/$$m.json || exit $$?; \
	done
	$(BIN)/poetsim import-torch poetsim.pytorch.architectures:text_transformer --input-shape 8,64 \
		--input-dtype int64 --input-high 4096 --out scenarios/graphs/outside/text_transformer.json

clean:
	rm -rf $(VENV) .pytest_cache build
