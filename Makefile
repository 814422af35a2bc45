# Two commands do all set-up on a machine with only python3 and pip:
#   make demo   build the bundled sample through Dagster and show what came out
#   make test   run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test install browser clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/seem demo

# The UI test drives Debian's chromium (no browser download); only `make test` installs it.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  ($$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null) \
	    || echo "could not install chromium: the browser test will skip"; \
	else echo "no apt-get: the browser test will skip"; fi

test: $(STAMP) browser
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV)
