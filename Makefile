# Two commands work on a fresh machine: `make demo` and `make test`. Each creates the virtual
# environment (.venv) on first use and installs npuopt with its test tools into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/npuopt info instances/example7.json
	$(BIN)/npuopt evaluate instances/example7.json --problem 2 --dir instances/example7_solution/Problem2

test: lint
	$(BIN)/python -m pytest -q

test-slow: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m slow

lint: $(BIN)/.installed
	$(BIN)/ruff check solver models heuristics instances tests
	$(BIN)/mypy solver models heuristics instances

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache
