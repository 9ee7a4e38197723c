# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs, idempotently.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast mutate docs bench lab lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/agentlab demo

test: $(STAMP) lint
	bash scripts/ensure-browser.sh
	$(MAKE) docs
	$(BIN)/python -m pytest -q

# The unit tier (tests/conftest.py marks each test unit, integration or slow), for edit loops: under two minutes.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m unit

# Mutation testing of the money and limit rules against the unit tier (two workers, niced: the machine is shared);
# the score goes in docs/benchmarks.md (add --write docs/benchmarks.md to replace its block).
# MUTATE lists the files (add one there); scripts/mutate.py says how a mutant is made and judged.
MUTATE ?= agentlab/budget.py agentlab/pricing.py $(wildcard agentlab/_account.py)
mutate: $(STAMP)
	nice -n 10 $(BIN)/python scripts/mutate.py --workers 2 $(MUTATE)

# The docs site (README as home, docs/*.md, the notebooks rendered, the API reference) in site/.
# Strict: a broken link or reference, or a public name without a docstring, fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict  # not --quiet: it hides the warnings strict counts

bench: $(STAMP)
	$(BIN)/python -m benchmarks --doc README.md --doc docs/benchmarks.md

# JupyterLab refuses to start as root without --allow-root (a container, CI): pass it only then.
lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/ $$(test "$$(id -u)" = 0 && echo --allow-root)

lint: $(STAMP)
	$(BIN)/ruff check agentlab tests scripts benchmarks
	$(BIN)/ruff format --check agentlab tests scripts benchmarks
	$(BIN)/mypy agentlab tests/user_types.py
	$(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) runs .pytest_cache site .cache
