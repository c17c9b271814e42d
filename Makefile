# Two commands for a fresh machine (see README):  make demo   |   make test
# Everything installs into .venv (created if missing). PJRT_DEVICE defaults to the CPU.
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.13 || command -v python3.10 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.ptxla_perf-installed
export PJRT_DEVICE ?= CPU
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: setup demo test test-fast test-stress test-compat bench browser clean

setup: $(STAMP)

# MMF 1.0.0rc10 pins torch 1.5 in its metadata: it and transformers 2.3 go in with --no-deps, with the packages
# they really import pinned in requirements-mmf.txt (README: "Why MMF is installed this way").
# constraints.txt: the exact versions measured here (Python 3.11), so `make test` runs against what was measured.
$(STAMP): pyproject.toml setup.py requirements-mmf.txt constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 13) else "ptxla_perf needs Python 3.10-3.13 (set PYTHON=/path/to/python3.11; 3.11 is the version tested here)")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[all]"
	$(PY) -m pip install --quiet --no-deps -r requirements-mmf.txt
	touch $@

demo: setup
	$(PY) -m ptxla_perf.run

# Headless Chromium for the TensorBoard browser test (Debian's package; installed when we can).
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ; } || \
	  echo "note: chromium not installed; the browser test will say how to install it"

# Two workers (pytest-xdist); tests that share one real run (xdist_group marks) stay on one worker.
PYTEST_WORKERS ?= -n 2 --dist loadgroup

test: setup browser
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS)

test-fast: setup
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) -m "not slow and not browser"

# The timing-sensitive test files beside two CPU-burning processes of this target's own (README: "Tests under
# load"): what they assert must hold on a busy machine. The burners are killed when the target ends, pass or fail.
STRESS_TESTS ?= tests/test_breakdown.py tests/test_launch_thread.py tests/test_input_bound.py \
	tests/test_issue31_xla.py tests/test_issue31_jax.py tests/test_newuser_30.py tests/test_profile_findings.py \
	tests/test_jax_adapter.py tests/test_timing_verdicts.py 'tests/test_corpus.py::test_corpus_report_matches_truth[xla_ddp_bucket_rebuild]'
BURNERS ?= 2
STRESS_ARGS ?=

test-stress: setup
	@set -e; pids=; trap 'kill $$pids 2>/dev/null || true' EXIT INT TERM; \
	for i in $$(seq $(BURNERS)); do $(PY) -c 'while True: pass' & pids="$$pids $$!"; done; \
	echo "test-stress: $(BURNERS) CPU burners ($$pids) beside the timing-sensitive tests"; \
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) $(STRESS_ARGS) $(STRESS_TESTS)

# The oldest supported framework versions (README: "Supported versions"), each against a real subset of the suite:
# - jax leg: a venv of its own with no torch (pip's cache makes a rebuild cheap), jax as in .ci/compat-jax.txt;
# - torch_xla leg: torch_xla 2.8 + torch 2.8 installed --no-deps into a venv that reuses the main venv's packages
#   (a .pth line): torch 2.8's CUDA libraries (~4 GB) are the main venv's, so only torch and torch_xla download.
COMPAT_JAX   ?= .venv-compat-jax
COMPAT_XLA   ?= .venv-compat-xla28
COMPAT_JAX_TESTS ?= tests/test_jax_adapter.py tests/test_without_torch.py tests/test_doctor.py
COMPAT_XLA_TESTS ?= tests/test_profile_findings.py tests/test_oom.py tests/test_doctor.py
MAIN_SITE = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

$(COMPAT_JAX)/.installed: pyproject.toml setup.py .ci/compat-jax.txt
	test -x $(COMPAT_JAX)/bin/python || $(PYTHON) -m venv $(COMPAT_JAX)
	$(COMPAT_JAX)/bin/python -m pip install --quiet -c .ci/compat-jax.txt -e ".[jax,test]"
	touch $@

$(COMPAT_XLA)/.installed: $(STAMP) .ci/compat-torch_xla.txt
	test -x $(COMPAT_XLA)/bin/python || $(PYTHON) -m venv --without-pip $(COMPAT_XLA)
	echo "$(MAIN_SITE)" > "$$($(COMPAT_XLA)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_main_venv.pth"
	$(PY) -m pip --python $(COMPAT_XLA)/bin/python install --quiet --no-deps -r .ci/compat-torch_xla.txt
	$(PY) -m pip --python $(COMPAT_XLA)/bin/python install --quiet --no-deps --no-build-isolation -e .
	touch $@

test-compat: setup $(COMPAT_JAX)/.installed $(COMPAT_XLA)/.installed
	$(COMPAT_JAX)/bin/python -c 'import jax, importlib.util as u; assert not u.find_spec("torch"); print("jax leg: jax", jax.__version__, "(no torch)")'
	$(COMPAT_JAX)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) $(COMPAT_JAX_TESTS)
	$(COMPAT_XLA)/bin/python -c 'import torch, torch_xla; print("torch_xla leg: torch", torch.__version__, "torch_xla", torch_xla.__version__)'
	$(COMPAT_XLA)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) $(COMPAT_XLA_TESTS)

bench: setup
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/analyze.py

clean:
	rm -rf $(VENV) $(COMPAT_JAX) $(COMPAT_XLA) outputs multirun build *.egg-info
