# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
SGLANG_VERSION := 0.5.23
# What sglang.srt.server_args needs to import (sglang itself is installed --no-deps: we only parse).
SGLANG_PARSE_DEPS := orjson psutil pybase64 requests packaging pillow starlette msgspec pydantic pyzmq tqdm ipython aiohttp

.PHONY: venv test test-fast demo bench clean sshd-deps

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]' --config-settings editable_mode=compat
	$(BIN)/pip install -q $(SGLANG_PARSE_DEPS)
	$(BIN)/pip install -q --no-deps sglang==$(SGLANG_VERSION)
	touch $(STAMP)

# openssh-server for the SSH tests (a real sshd on 127.0.0.1); skipped when not root.
sshd-deps:
	@if [ ! -x /usr/sbin/sshd ] && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client tmux) >/dev/null; \
	fi
	@if ! command -v tmux >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux) >/dev/null; \
	fi

# --durations=25: the slowest tests, printed in CI's output so a slow one shows
test: venv sshd-deps
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25 $(PYTEST_ARGS)

# everything that needs no lab world and no sshd (tests/fixtures/lab.py marks those slow / ssh), on
# two pytest-xdist workers: these tests share no server, port or cache, and half of their wall time
# is waiting (subprocesses, the TUI, notebooks), so two workers overlap it
test-fast: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow and not ssh" -n 2 --durations=10 $(PYTEST_ARGS)

demo: venv
	$(BIN)/eagle-workbench demo

# Every benchmarks/*_bench.py prints JSON with its figures and floors.
bench: venv
	@for f in benchmarks/*_bench.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV)
