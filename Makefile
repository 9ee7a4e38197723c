# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs, idempotently.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench lab lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/agentlab demo

test: $(STAMP)
	bash scripts/ensure-browser.sh
	$(BIN)/ruff check agentlab tests
	$(BIN)/mypy agentlab
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

lint: $(STAMP)
	$(BIN)/ruff check agentlab tests
	$(BIN)/mypy agentlab
	$(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) runs .pytest_cache
