# Two commands do all set-up on a machine with only python3 and pip:
#   make demo   build the bundled sample through Dagster and show what came out
#   make test   run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/seem demo

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV)
