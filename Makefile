# Eugo Lab: two commands do all set-up on a fresh machine.
#   make lab    create .venv, install, start JupyterLab on courses/index.ipynb (127.0.0.1:8888)
#   make test   create .venv, install everything the tests need, run ruff and pytest
# Other targets: make bench (benchmarks vs peers, and the JIT differential test at length), make bench-quick, make gpu-check, make clean.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
PORT   ?= 8888
STAMP  := $(VENV)/.installed

.PHONY: lab test lint labext bench bench-quick gpu-check clean venv deps system-deps bytecode

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

venv: $(PY)

# Reinstall when the project's metadata changes.
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q -e ".[lab,courses,dask,ray,test,bench]"
	touch $(STAMP)

deps: $(STAMP)

# Bytecode for the package, as a wheel install has it: every local-pool worker imports eugo_lab
# in a fresh interpreter, and where PYTHONDONTWRITEBYTECODE is set (or the tree is read-only)
# each one would compile it from source again (~20 ms of CPU per worker start). Only changed
# files are recompiled.
bytecode: $(STAMP)
	@$(PY) -m compileall -q -j 0 eugo_lab >/dev/null

# Debian's Chromium for the browser tests (Playwright cannot download browsers here).
system-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
		else echo "chromium is missing: run 'sudo apt-get install -y chromium chromium-driver'"; exit 1; fi; \
	fi

# JupyterLab's app-level settings in this project's venv only: no "get notified about Jupyter news?"
# toast (fetching news would reach out to the internet; the learner's own settings still win).
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

$(LAB_OVERRIDES): | $(STAMP)
	@mkdir -p $(dir $@)
	@echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $@

# Loopback only; no update or news checks (they would reach out to the internet).
lab: deps bytecode $(LAB_OVERRIDES)
	$(VENV)/bin/jupyter lab --no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) \
		--ServerApp.root_dir=courses --ServerApp.allow_root=True --LabApp.news_url=None \
		--LabApp.default_url=/lab/tree/index.ipynb \
		--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate

lint: deps
	$(VENV)/bin/ruff check eugo_lab tests benchmarks conftest.py

# The JupyterLab extension: npm packages (from the package registry, at install time only), then the
# TypeScript type-check and lint, then the bundle the browser tests load (rebuilt from the sources),
# copied over the venv's share folder, which JupyterLab serves (pip install copied that day's build there).
labext: $(STAMP)
	cd labextension && PATH="$(abspath $(VENV))/bin:$$PATH" jlpm install
	cd labextension && PATH="$(abspath $(VENV))/bin:$$PATH" jlpm check
	cd labextension && PATH="$(abspath $(VENV))/bin:$$PATH" jlpm build:prod >/dev/null
	d=$(VENV)/share/jupyter/labextensions/eugo-lab-labextension; mkdir -p $$d && rm -rf $$d/static && \
		cp -r eugo_lab/labextension/. $$d/

# pytest exits 5 when it collects no test: that is a failure here, never a pass.
test: deps bytecode system-deps lint labext
	@rm -f .pytest-running; $(PY) -m pytest -q --durations=20 $(PYTEST_ARGS); rc=$$?; \
	if [ -f .pytest-running ]; then echo; echo "pytest ended (exit $$rc) without its summary; the last test phases:"; cat .pytest-running; fi; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

# The benchmarks (engines, then large results and arguments: benchmarks/memspeed.py), the what-if predictions against the fixed code's wall time, then the automatic JIT's differential test against CPython with 500 inputs a function (CI runs 16).
bench: deps bytecode
	$(PY) -m benchmarks.run
	$(PY) -m benchmarks.memspeed
	$(PY) -m benchmarks.whatif --rounds 5
	EUGO_JIT_DIFFERENTIAL_EXAMPLES=500 $(PY) -m pytest -q -p no:cacheprovider --timeout 3600 tests/jit/test_jit_differential.py

bench-quick: deps bytecode
	$(PY) -m benchmarks.run --quick

# On a machine with an NVIDIA GPU, in under 5 minutes: the GPU tests (CuPy, NVML, calibration, model vs
# measured crossovers within 2x, the report's CUDA-event times) and the crossover table for
# benchmarks/RESULTS.md (also saved to benchmarks/results/gpu_crossover.md). It uses the machine's own
# python3 when that has CuPy (no install, no network), else .venv with the gpu extra: see the script.
gpu-check:
	@bash tools/gpu_check.sh

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist *.egg-info
