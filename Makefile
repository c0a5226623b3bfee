# The README's two commands, `make bench` and `make test`, set everything up on a fresh machine:
# a local virtual environment with torch installed first (a pinned CPU wheel; see README), then the project.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
BATCH ?= 8
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint
	$(PY) -m pytest

bench: venv
	$(PY) scripts/quick_table.py --batch-size $(BATCH)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache *.egg-info
