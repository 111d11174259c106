# Two commands on a fresh machine (python3 >= 3.11 and make):
#   make run    virtualenv, install, migrate SQLite, demo data, serve on 127.0.0.1:8000 (uvicorn, every route, + a Celery worker)
#   make run-recorded   the same, with the recorded model (not Claude) answering live turns
#   make test   the test suite (SQLite; set DATABASE_URL for PostgreSQL)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1:8000
RECORDED_PORT ?= 8765

# What the static checks (ruff, mypy) cover in CI: the whole tree
# (pyproject.toml excludes .venv and var).
CHECKED ?= .

.PHONY: install run run-address-free run-recorded test bench check lock clean

# The dev group: runtime + tests, benchmarks, checks. requirements/*-constraints.txt pin every
# package, direct and transitive; a server installs requirements/runtime.txt only (docs/deploying.md).
$(BIN)/.installed: $(wildcard requirements/*.txt)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed: make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements/dev.txt
	touch $@

install: $(BIN)/.installed

# The demo serves with DEBUG on (local only) so the server serves the admin's CSS.
# Live turns run in one Celery worker beside uvicorn (at nice 10, so the pages and the API come first:
# docs/deploying.md#plain-requests-first-priorities-and-sizes), on the embedded broker under
# var/broker/ unless CELERY_BROKER_URL is set (docs/job-engine.md); both stop together.
# Both write their metrics to one multiprocess folder, emptied first, so /metrics of the
# web (with METRICS_TOKEN set) shows the worker's turns too (docs/metrics.md).
# One `make run` per var/: a second one (another HOST) would start a second embedded worker on the same
# broker file and empty the first one's metrics. The running one holds RUN_LOCK (an flock, inherited by
# uvicorn: it goes when the server stops, however it stops); a second one stops before touching anything.
RUN_LOCK ?= $(CURDIR)/var/make-run.lock
run_lock = $(BIN)/python devtools/run_lock.py "$(RUN_LOCK)" \
	"make run: another make run is serving from this folder (it holds $(RUN_LOCK)); two would share one embedded broker and one metrics folder: stop it first" $(1)

run: export DJANGO_DEBUG ?= true
run: export PROMETHEUS_MULTIPROC_DIR ?= $(CURDIR)/var/metrics
run: install
	@$(call run_lock)
	mkdir -p "$$PROMETHEUS_MULTIPROC_DIR" && rm -f "$$PROMETHEUS_MULTIPROC_DIR"/*.db
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py setup_demo --base-url http://$(HOST)
	nice -n 10 $(BIN)/celery -A silvia.celery worker --loglevel WARNING --without-gossip --without-mingle & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker' EXIT INT TERM; \
	$(call run_lock,$(abspath $(BIN))/python -m uvicorn silvia.asgi:application --http httptools --loop uvloop --lifespan off --host $(word 1,$(subst :, ,$(HOST))) --port $(word 2,$(subst :, ,$(HOST))))

# Stop at once, saying why, when an address a target serves on is taken: `$(call port_free,HOST:PORT,what,VAR)`.
# (Started anyway, the recorded model would fail among the migrate output and every live turn after it.)
# A 4th argument names the target in the message when the check is a rule of its own.
port_free = $(BIN)/python -c 'import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); h, p = sys.argv[1].rsplit(":", 1); s.bind((h, int(p)))' $(1) 2>/dev/null \
	|| { echo "make $(or $(4),$@): $(1) ($(2)) is taken by another process; stop it, or pick another address: make $(or $(4),$@) $(3)=..." >&2; exit 1; }

# `make run` checks HOST first too: taken, uvicorn would fail only after the demo's setup, with
# its error's text withheld by the log filter (docs/privacy.md), so the newcomer would not know why.
run: run-address-free
run-address-free: install
	@$(call port_free,$(HOST),the demo server,HOST,run)

# The demo with the RECORDED model (not Claude) answering live turns: no API key needed.
run-recorded: export DJANGO_DEBUG ?= true
run-recorded: install
	@$(call port_free,127.0.0.1:$(RECORDED_PORT),the recorded model,RECORDED_PORT)
	@$(call port_free,$(HOST),the demo server,HOST)
	$(BIN)/python manage.py serve_recorded_model --port $(RECORDED_PORT) & pid=$$!; \
	trap 'kill $$pid 2>/dev/null' EXIT INT TERM; \
	ANTHROPIC_BASE_URL=http://127.0.0.1:$(RECORDED_PORT) $(MAKE) run

# Test-only JavaScript: axe-core, which the browser tests inject for their accessibility check, and
# the Vercel AI SDK (`ai`), whose own reader the AI SDK stream tests run (package.json; never served).
node_modules/.installed: package.json package-lock.json
	@command -v npm >/dev/null || { echo "The browser tests' accessibility check needs npm (apt-get install npm)" >&2; exit 1; }
	npm ci --no-audit --no-fund --silent
	touch $@

test: install node_modules/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Benchmarks run with DEBUG off (as served); a throwaway key lets settings load.
bench: export DJANGO_SECRET_KEY ?= bench-only-key-never-used-to-serve-Qm4Rt7Wx2Zp9Lk5Vn8Bc3Hd6Jf1Sg0
bench: install
	$(BIN)/python bench/run_all.py

# Static checks, as .ci/run runs them: lint, format, types, no missing migration.
check: export DJANGO_SECRET_KEY ?= check-only-key-never-used-to-serve-Zx8Cv5Bn2Mq7Wl4Ek9Rt6Yu3Io1Pa0
check: install
	$(BIN)/ruff check $(CHECKED)
	$(BIN)/ruff format --check $(CHECKED)
	$(BIN)/mypy $(CHECKED)
	$(BIN)/python manage.py makemigrations --check --dry-run

# Rewrite requirements/runtime-constraints.txt and dev-constraints.txt from fresh virtualenvs.
lock:
	$(PYTHON) requirements/lock.py

clean:
	rm -rf $(VENV) var node_modules .pytest_cache .hypothesis
