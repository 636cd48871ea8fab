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
# hs-connectors writes its FP8 hidden-state files. ~300 MB, ~7 s from the wheel cache.
REFERENCE_TRAINERS := specforge==0.2.0 speculators==0.9.0 hs-connectors==0.9.0
REFERENCE_DEPS := openai==3.57.0 datasets==5.2.0 sniffio==1.3.1 multiprocess==0.70.19 pandas==3.1.1 pyarrow==26.0.1 dill==0.4.1 xxhash==4.1.0

.PHONY: venv test test-fast demo bench clean sshd-deps lint engine-rules log-grammar bytecode

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

# openssh-server for the SSH tests (a real sshd on 127.0.0.1); skipped when not root.
sshd-deps:
	@if [ ! -x /usr/sbin/sshd ] && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client tmux) >/dev/null; \
	fi
	@if ! command -v tmux >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux) >/dev/null; \
	fi

# Two pytest-xdist workers, a module at a time (--dist loadscope: module fixtures, servers and the
# sshd, are set up once per module), longest modules first (tests/fixtures/schedule.py): most of the
# suite's wall time is waiting on servers, sshd sessions and subprocesses, which two workers overlap.
# --durations=25: the slowest tests, printed in CI's output so a slow one shows.
test: venv sshd-deps lint bytecode
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadscope --no-loadscope-reorder --durations=25 $(PYTEST_ARGS)

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

# Regenerate workbench/engine/rules.json: the capture-rule extractor over every sglang release's wheel
# from 0.4.9 to the newest on PyPI (wheels cached in ~/.cache/eagle-workbench).
engine-rules: venv
	$(BIN)/python -m workbench.engine.build_table

# Regenerate workbench/logs/grammar.json: every log statement of every SGLang release from 0.4.9 and
# every vLLM release from 0.9.0 to the newest on PyPI, read from the wheels (cached with the ones above).
log-grammar: venv
	$(BIN)/python -m workbench.logs.grammar_build

# Every benchmarks/*_bench.py prints JSON with its figures and floors.
bench: venv
	@for f in benchmarks/*_bench.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV)
