# The two commands of the README: `make demo` and `make test`. Both run the idempotent setup first.
# Recipes source scripts/env.sh, which is bash.
SHELL  := /bin/bash
VENV   := .venv
PY     := $(VENV)/bin/python
SHARED ?= $(abspath ../shared)
export CHERENKOV_SHARED := $(SHARED)

.PHONY: setup demo test lint test-rust test-python bench-local bench wheel wheel-check fmt clean

setup:
	@bash scripts/setup.sh

# The demo compares cherenkov with uproot and ROOT: their setup installs them (ROOT: about 250 MB).
demo: setup
	bash scripts/setup-bench.sh && $(PY) -m cherenkov_lab.demo

test: setup lint test-rust test-python

# Checks that keep the code as it is: clippy with every warning an error, ruff's lint and format.
lint:
	. scripts/env.sh && cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

test-rust:
	. scripts/env.sh && cargo test --workspace --exclude cherenkov-python

test-python:
	. scripts/env.sh && $(PY) -m pytest -q

bench-local: setup
	$(PY) bench/local_read.py

bench: setup
	bash scripts/setup-bench.sh && $(PY) bench/lab.py

# A wheel for users (abi3, manylinux_2_28): `pip install target/wheels/cherenkov-*.whl`, no Rust needed.
wheel: setup
	$(VENV)/bin/pip install -q "ziglang>=0.13"
	. scripts/env.sh && $(VENV)/bin/maturin build --release --strip --zig --compatibility manylinux_2_28 --out target/wheels

# The wheel installed in a fresh venv reads a file over HTTP from the lab's nginx.
wheel-check: wheel
	$(PY) scripts/check_wheel.py $$(ls -t target/wheels/cherenkov-*.whl | head -1)

fmt:
	cargo fmt --all && $(VENV)/bin/ruff format .

clean:
	rm -rf target $(VENV) .setup-stamps
