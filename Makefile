# Two commands on a fresh machine (python3 >= 3.11 and make):
#   make run    virtualenv, install, migrate SQLite, demo data, serve on 127.0.0.1:8000
#   make test   the test suite (SQLite; set DATABASE_URL for PostgreSQL)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1:8000

.PHONY: install run test bench clean

$(BIN)/.installed: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed: make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

install: $(BIN)/.installed

# The demo serves with DEBUG on (local only) so runserver serves the admin's CSS.
run: export DJANGO_DEBUG ?= true
run: install
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py setup_demo --base-url http://$(HOST)
	$(BIN)/python manage.py runserver $(HOST)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
