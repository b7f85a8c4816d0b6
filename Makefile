# Two entry points for a fresh machine (see README):
#   make demo   installs ancre in .venv and runs it on the bundled Axonix corpus
#   make test   installs the test extras (and Samba for the SMB tests), lints, checks types and
#               layers, and runs the whole suite
#   make check  the fast inner loop: lint, types, layers, unit and contract tests without Samba
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG := examples/axonix/ancre.toml
QUESTION := Quel est le code d'accès de la salle serveur de Baumont Industries ?
ROCHAT := Quel est le forfait mensuel du contrat de maintenance de l'étude Rochat ?

.PHONY: install demo test check lint typecheck layers budgets test-fast bench reference

$(BIN)/ancre: pyproject.toml setup.py
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "make: ancre needs Python 3.11 or later as $(PY) (make PY=python3.12 … to name another)" >&2; exit 1; }
	@$(PY) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "make: '$(PY) -m venv' failed: on Debian or Ubuntu install the venv module first: sudo apt install python3-venv" >&2; \
	  exit 1; }
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/ancre

install: $(BIN)/ancre

demo: install
	$(BIN)/ancre sync --config $(CONFIG)
	$(BIN)/ancre search "$(QUESTION)" --as alice --config $(CONFIG)
	$(BIN)/ancre search "$(QUESTION)" --as chloe --config $(CONFIG)
	$(BIN)/ancre acl explain --as chloe CLIENTS/test-deny-explicite.docx --config $(CONFIG)
	$(BIN)/ancre ask "$(ROCHAT)" --as alice --config $(CONFIG)
	$(BIN)/ancre ask "$(ROCHAT)" --as bruno --config $(CONFIG)
	$(BIN)/ancre report exposure --config $(CONFIG)

# The static checks, each its own target (`make check` runs them all, with the fast tests).
lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

layers: install
	$(BIN)/lint-imports

# Functions <= 60 lines, classes <= 400, no unlisted blind except; the exceptions, each with its
# reason, in pyproject.toml [tool.ancre.budgets] (docs/ARCHITECTURE.md "Budgets").
budgets: install
	$(BIN)/python tests/support/budgets.py

# Unit tests and the source contract (ancre.testing) run by every source but SMB (no DC, no network, no root).
FAST_TESTS := tests/unit tests/contract tests/examples/test_toy_contract.py -m "not slow" -k "not TestSmbSource"

test-fast: install
	$(BIN)/pytest -q $(FAST_TESTS)

# All five even when one fails (-k), two at a time (the static checks beside the tests), each
# target's output kept together.
check: install
	$(MAKE) --no-print-directory -k -j2 --output-sync=target lint typecheck layers budgets test-fast

test: install
	bash .ci/setup-test-deps.sh
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tests/support/budgets.py
	$(BIN)/pytest -q

bench: install
	$(BIN)/python tests/bench/run.py

# docs/CONFIGURATION.md from the settings models (tests/unit/test_configuration_reference.py checks it)
reference: install
	$(BIN)/python -m ancre.config reference -o docs/CONFIGURATION.md
