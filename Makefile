# Two commands on a fresh machine (python3 >= 3.11 and make):
#   make run    virtualenv, install, migrate SQLite, demo data, serve on 127.0.0.1:8000 (uvicorn)
#   make run-recorded   the same, with the recorded model (not Claude) answering live turns
#   make test   the test suite (SQLite; set DATABASE_URL for PostgreSQL)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1:8000
RECORDED_PORT ?= 8765

.PHONY: install run run-recorded test bench clean

$(BIN)/.installed: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed: make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

install: $(BIN)/.installed

# The demo serves with DEBUG on (local only) so the server serves the admin's CSS.
run: export DJANGO_DEBUG ?= true
run: install
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py setup_demo --base-url http://$(HOST)
	$(BIN)/python -m uvicorn silvia.asgi:application --host $(word 1,$(subst :, ,$(HOST))) --port $(word 2,$(subst :, ,$(HOST)))

# The demo with the RECORDED model (not Claude) answering live turns: no API key needed.
run-recorded: install
	$(BIN)/python manage.py serve_recorded_model --port $(RECORDED_PORT) & pid=$$!; \
	trap 'kill $$pid' EXIT INT TERM; \
	ANTHROPIC_BASE_URL=http://127.0.0.1:$(RECORDED_PORT) $(MAKE) run

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
