# `make run` serves the API with embedded defaults; `make test` runs the whole suite.
# Both install what is missing first (uv, then the locked dependencies).
SHELL := /bin/bash
UV_VERSION := 0.13.9
UV := $(shell uv --version >/dev/null 2>&1 && echo uv || echo python3 -m uv)

# `make demo`: the whole loop offline (user, checkout, events, access, e-mails); exits 0.
.PHONY: run demo reset test lint format install uv emails-preview bench image system-packages \
	web-client web-screenshots audit

uv:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"

# The first install takes a while (Postgres binaries, gRPC): say so, then how long it took.
install: uv
	@if [ -d .venv ]; then $(UV) sync --frozen --quiet; else \
	  echo "Installing the locked dependencies into .venv (first time only)..."; \
	  start=$$(date +%s); $(UV) sync --frozen --quiet && \
	  echo "  done in $$(( $$(date +%s) - start )) s"; fi

# `.env`'s settings, for the targets that run the product as a founder configured it.
WITH_ENV := set -a; if [ -f .env ]; then . ./.env || exit 1; fi; set +a;

run: install
	@$(WITH_ENV) exec $(UV) run --frozen python -m dev.server

# `make reset`: the local data (.data/: the embedded Postgres with its users, purchases and
# products, the outbox, the Stripe stand-in's catalogue and customers, the Auth stand-in's signing
# keys and sessions) deleted; the next `make run`
# starts empty and syncs the demo catalogue again.
reset:
	@set -a; if [ -f .env ]; then . ./.env || exit 1; fi; set +a; \
	  dir="$${DATA_DIR:-.data}"; \
	  case "$$(realpath -m -- "$$dir")" in /|"$$HOME"|"$$(pwd)") echo "Refusing to delete $$dir"; exit 1;; esac; \
	  if [ -e "$$dir" ]; then rm -rf -- "$$dir" && echo "Deleted $$dir (local database, users, purchases, outbox, the Stripe stand-in's objects, the Auth stand-in's keys and sessions)."; \
	  else echo "Nothing to delete: $$dir does not exist."; fi

demo: install
	@$(WITH_ENV) exec $(UV) run --frozen python -m dev.demo

# Four workers (pytest-xdist), each with its own Postgres and Pub/Sub emulator: most tests wait
# on servers, so four share two cores well (bench/README.md has the suite's timings). A module's tests stay on one worker, so the servers its fixtures start start once;
# modules go out in the suite's order, which puts the long ones first (tests/conftest.py).
TEST_WORKERS ?= 4
test: install system-packages
	@$(UV) run --frozen pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# Debian packages the suite drives: headless Chromium reads the local pipeline page as a person
# would, and Playwright drives the frontend's journeys in it (tests/web/); PgBouncer in transaction mode, serving TLS, stands in for Supabase's pooler (Supavisor).
# Installed when missing (as root, or through sudo).
SYSTEM_PACKAGES := chromium pgbouncer
system-packages:
	@missing=""; for p in $(SYSTEM_PACKAGES); do command -v $$p >/dev/null 2>&1 || [ -x /usr/sbin/$$p ] || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then \
	    echo "Installing$$missing from Debian's packages (first time only)..."; \
	    sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	    $$sudo apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi

lint: install
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen mypy .

# Every e-mail kind as `.env`'s brand renders it, its links on SITE_URL, about the catalogue's
# product while `make run` serves it (its .data/run.env names the database): HTML, text, then
# PNG screenshots (Chromium), in .data/emails; `make emails-preview OUT=docs/emails` refreshes
# the tracked gallery.
OUT ?= .data/emails
emails-preview: install
	@$(WITH_ENV) if [ -f .data/run.env ]; then . ./.data/run.env; fi; \
	  $(UV) run --frozen python -m dev.previews --out "$(OUT)"
	@dev/screenshot_emails.sh "$(OUT)"

# The frontend's typed client (web/js/api.js) generated again from the API's OpenAPI document:
# after adding or changing a route (a test fails until it is run).
web-client: install
	$(UV) run --frozen python -m dev.web_client

# The frontend's journeys in Chromium (tests/web/test_journeys.py, test_told.py), each page's screenshot
# written to docs/web/.
web-screenshots: install system-packages
	WEB_SCREENSHOTS=docs/web $(UV) run --frozen pytest -q -p no:cacheprovider tests/web/test_journeys.py \
	  tests/web/test_told.py tests/web/test_account.py

# The locked runtime dependencies against PyPI's advisory data (pip-audit, dev/audit.py): a
# known vulnerability with a fixed release fails, unless ops/audit-allow.toml excuses it with a
# reason and an expiry; exit 3 when PyPI could not be read for some package (nothing passes
# unread).
audit: install
	$(UV) run --frozen python -m dev.audit

format: install
	$(UV) run --frozen ruff format .
	$(UV) run --frozen ruff check --fix .

# Cost per event, side by side with stripe-sync-engine (bench/README.md); installs wrk and the
# npm package when missing. A few minutes; not part of `make test`.
bench: install
	$(UV) run --frozen python bench/cost.py $(BENCH_ARGS)

# The Dockerfile's image (saas-backend:local): Docker where a daemon runs, else podman on a local
# stand-in for python:3.11-slim, both installed from Debian when missing (dev/image.py).
image:
	@python3 dev/image.py
