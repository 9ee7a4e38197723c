# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs, idempotently.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test docs bench lab lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/agentlab demo

test: $(STAMP)
	bash scripts/ensure-browser.sh
	$(BIN)/ruff check agentlab tests scripts benchmarks
	$(BIN)/ruff format --check agentlab tests scripts benchmarks
	$(BIN)/mypy agentlab
	$(BIN)/lint-imports --no-cache
	$(MAKE) docs
	$(BIN)/python -m pytest -q

# The docs site (README as home, docs/*.md, the notebooks rendered, the API reference) in site/.
# Strict: a broken link or reference, or a public name without a docstring, fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict  # not --quiet: it hides the warnings strict counts

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# JupyterLab refuses to start as root without --allow-root (a container, CI): pass it only then.
lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/ $$(test "$$(id -u)" = 0 && echo --allow-root)

lint: $(STAMP)
	$(BIN)/ruff check agentlab tests scripts benchmarks
	$(BIN)/ruff format --check agentlab tests scripts benchmarks
	$(BIN)/mypy agentlab
	$(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) runs .pytest_cache site .cache
