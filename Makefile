# Two commands work on a fresh machine: `make demo` and `make test`. Each creates the virtual
# environment (.venv) on first use and installs npuopt with its test tools into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow lint bench clean package-check

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/cases.py

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/npuopt solve --out demo-out --time-limit 60
	$(BIN)/npuopt evaluate npuopt/instances/demo_conv.json --problem 3 --dir demo-out/Problem3

test: lint
	$(BIN)/python -m pytest -q

test-slow: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m slow

package-check: $(BIN)/.installed
	$(BIN)/python .ci/package_check.py

lint: $(BIN)/.installed
	$(BIN)/ruff check npuopt tests benchmarks .ci
	$(BIN)/mypy npuopt

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache
