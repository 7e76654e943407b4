# The two commands of README.md:
#   make demo   set up .venv, then run doctor on the shipped fixtures
#   make test   set up .venv, then run the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench docs clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,peers]'
	touch $(STAMP)

# Exit codes 1 (a FAIL) and 2 (something not judged) are the demo's point, not errors.
demo: setup
	@echo "== trainproof-lsp doctor fixtures/hf_runs (real HF Trainer runs made by fixtures/hf_runs/make_hf_runs.py)"
	@$(VENV)/bin/trainproof-lsp doctor fixtures/hf_runs; code=$$?; \
	  echo "(exit code $$code: 0 pass/warn, 1 a run FAILs, 2 something could not be judged)"; \
	  test $$code -le 2

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) benchmarks/bench_trainer_state.py
	$(PY) benchmarks/bench_tfevents.py

docs: setup
	$(PY) -m trainproof_lsp rules --markdown > docs/rules.md

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
