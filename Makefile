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
	@$(PYTHON) -c 'import shutil; free = shutil.disk_usage(".").free / 2**30; free < 10 and print(f"note: {free:.1f} GB free here; .venv takes ~8.5 GB (torch pulls its CUDA libraries) and test-compat ~7 GB more: pip may stop with No space left on device")'
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
# ptxla_perf's bytecode, written once: the suite starts ~300 Python processes that import it, and where
# PYTHONDONTWRITEBYTECODE is set (as on our development machine) each would compile it again (~0.3 s of CPU each)
BYTECODE = $(PY) -m compileall -q ptxla_perf >/dev/null

test: setup browser
	$(BYTECODE)
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS)

test-fast: setup
	$(BYTECODE)
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
	$(BYTECODE); echo "test-stress: $(BURNERS) CPU burners ($$pids) beside the timing-sensitive tests"; \
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) $(STRESS_ARGS) $(STRESS_TESTS)

# The framework versions measured beside `make test`'s (README: "Supported versions"; ptxla_perf/model/versions.py), each
# against a real subset of the suite, each pinned by a pip freeze under .ci/:
# - jax (oldest): a venv of its own with no torch on the default Python, jax as in .ci/compat-jax.txt;
# - jax (newest) on Python 3.13 (3.12 if 3.13 is missing), no torch: .ci/compat-jax-new.txt;
# - torch_xla 2.8 + torch 2.8 installed --no-deps into a venv that reuses the main venv's packages (a .pth line):
#   torch 2.8's CUDA libraries (~4 GB) are the main venv's, so only torch and torch_xla download;
# - torch_xla 2.9 + torch 2.9 on Python 3.10, installed --no-deps from .ci/compat-torch_xla-py310.txt: the CUDA
#   libraries are pure-Python wheels (py3-none), the very versions torch 2.9.0 pins, so the venv links the main
#   venv's nvidia/ folder instead of downloading ~3 GB again (triton is not installed: the CPU never loads it).
# pip's cache (~/.cache/pip) is shared by all of them: a rebuild downloads nothing.
COMPAT_JAX   ?= .venv-compat-jax
COMPAT_JAX_NEW ?= .venv-compat-jax-new
COMPAT_XLA   ?= .venv-compat-xla28
COMPAT_XLA310 ?= .venv-compat-xla29-py310
COMPAT_JAX_TESTS ?= tests/test_jax_adapter.py tests/test_without_torch.py tests/test_doctor.py
COMPAT_JAX_NEW_TESTS ?= tests/test_jax_adapter.py tests/test_jax_compat.py tests/test_without_torch.py \
	tests/test_doctor.py tests/test_frame_lines.py
COMPAT_XLA_TESTS ?= tests/test_profile_findings.py tests/test_oom.py tests/test_doctor.py
# (test_oom's memory join needs jaxlib, which [torch_xla] does not install: the 2.8 leg runs it over the main venv)
COMPAT_XLA310_TESTS ?= tests/test_profile_findings.py::test_planted_problem_found_at_its_line \
	'tests/test_profile_findings.py::test_clean_loop_has_no_warnings[clean_loop.py]' \
	tests/test_torch_xla_private.py tests/test_doctor.py
MAIN_SITE = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# The other Pythons: the first candidate that runs, by its real path (pyenv's shim for a version that is not active
# exists but fails). Override: make test-compat PYTHON_NEW=/path/to/python3.13 PYTHON_310=/path/to/python3.10
first_python = $(shell for p in $(1); do "$$p" -c 'import sys; print(sys.executable)' 2>/dev/null && break; done)
PYTHON_NEW ?= $(call first_python,python3.13 $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3) python3.12 \
	$(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3))
PYTHON_310 ?= $(call first_python,python3.10 $(wildcard $(HOME)/.pyenv/versions/3.10*/bin/python3))

$(COMPAT_JAX)/.installed: pyproject.toml setup.py .ci/compat-jax.txt
	test -x $(COMPAT_JAX)/bin/python || $(PYTHON) -m venv $(COMPAT_JAX)
	$(COMPAT_JAX)/bin/python -m pip install --quiet -c .ci/compat-jax.txt -e ".[jax-recipes,test]"
	touch $@

# the newest jax first, as a user has it; then ours beside it (pyproject's [jax] has no cap: nothing is replaced)
$(COMPAT_JAX_NEW)/.installed: pyproject.toml setup.py .ci/compat-jax-new.txt
	@test -n "$(PYTHON_NEW)" || { echo "test-compat: no Python 3.13 or 3.12 found (set PYTHON_NEW=/path/to/python3.13)"; exit 1; }
	test -x $(COMPAT_JAX_NEW)/bin/python || $(PYTHON_NEW) -m venv $(COMPAT_JAX_NEW)
	$(COMPAT_JAX_NEW)/bin/python -m pip install --quiet -c .ci/compat-jax-new.txt jax jaxlib
	$(COMPAT_JAX_NEW)/bin/python -m pip install --quiet -c .ci/compat-jax-new.txt -e ".[jax,test]"
	touch $@

$(COMPAT_XLA)/.installed: $(STAMP) .ci/compat-torch_xla.txt
	test -x $(COMPAT_XLA)/bin/python || $(PYTHON) -m venv --without-pip $(COMPAT_XLA)
	echo "$(MAIN_SITE)" > "$$($(COMPAT_XLA)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_main_venv.pth"
	$(PY) -m pip --python $(COMPAT_XLA)/bin/python install --quiet --no-deps -r .ci/compat-torch_xla.txt
	$(PY) -m pip --python $(COMPAT_XLA)/bin/python install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(COMPAT_XLA310)/.installed: $(STAMP) .ci/compat-torch_xla-py310.txt
	@test -n "$(PYTHON_310)" || { echo "test-compat: no Python 3.10 found (set PYTHON_310=/path/to/python3.10)"; exit 1; }
	test -x $(COMPAT_XLA310)/bin/python || $(PYTHON_310) -m venv --without-pip $(COMPAT_XLA310)
	ln -sfn "$(MAIN_SITE)/nvidia" "$$($(COMPAT_XLA310)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia"
	$(PY) -m pip --python $(COMPAT_XLA310)/bin/python install --quiet --no-deps -r .ci/compat-torch_xla-py310.txt
	$(PY) -m pip --python $(COMPAT_XLA310)/bin/python install --quiet --no-deps --no-build-isolation -e .
	touch $@

test-compat: setup $(COMPAT_JAX)/.installed $(COMPAT_JAX_NEW)/.installed $(COMPAT_XLA)/.installed $(COMPAT_XLA310)/.installed
	$(COMPAT_JAX)/bin/python -c 'import sys, jax, importlib.util as u; assert not u.find_spec("torch"); print("jax leg: jax", jax.__version__, "(no torch), Python", sys.version.split()[0])'
	$(COMPAT_JAX)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) $(COMPAT_JAX_TESTS)
	$(COMPAT_JAX_NEW)/bin/python -c 'import sys, jax, importlib.util as u; assert not u.find_spec("torch"); print("newest jax leg: jax", jax.__version__, "(no torch), Python", sys.version.split()[0])'
	$(COMPAT_JAX_NEW)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) $(COMPAT_JAX_NEW_TESTS)
	$(COMPAT_XLA)/bin/python -c 'import sys, torch, torch_xla; print("torch_xla leg: torch", torch.__version__, "torch_xla", torch_xla.__version__, "Python", sys.version.split()[0])'
	$(COMPAT_XLA)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) $(COMPAT_XLA_TESTS)
	$(COMPAT_XLA310)/bin/python -c 'import sys, torch, torch_xla; print("Python 3.10 torch_xla leg: torch", torch.__version__, "torch_xla", torch_xla.__version__, "Python", sys.version.split()[0])'
	$(COMPAT_XLA310)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) $(COMPAT_XLA310_TESTS)

bench: setup
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/analyze.py

clean:
	rm -rf $(VENV) $(COMPAT_JAX) $(COMPAT_JAX_NEW) $(COMPAT_XLA) $(COMPAT_XLA310) outputs multirun build *.egg-info
