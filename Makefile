# Two entry points (see README.md): `make inspect` and `make test`.
# Both create the pinned environment in .venv/ on first use (dev/ensure-env.sh).
PY := .venv/bin/python
ARGS ?=

.PHONY: env inspect test bench index index-references
env:
	@bash dev/ensure-env.sh

inspect: env
	@$(PY) scripts/inspect_core_api.py $(ARGS)

# pytest-xdist: one worker per core (at most 4), each test file whole on one worker (module
# fixtures and tests that read what earlier tests of their file recorded); TEST_WORKERS=0 runs
# in this process.
TEST_WORKERS ?= auto
test: env
	@$(PY) -m pytest -n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile $(ARGS)

bench: env
	@for b in bench/*.py; do $(PY) $$b || exit 1; done

# Compiled indexes (data read by the scripts), each rebuilt by one command; a test fails when one is stale.
# references/index/*.json: the references' Markdown parsed with markdown-it-py (dev/build_reference_index.py).
# references/index/releases/: Megatron Core 0.12.3 ... 0.19.2 compiled with ast from the mirror's git tags
# and the 0.19.2 wheel (dev/build_release_index.py).
.PHONY: index index-references index-releases
index: index-releases index-references

index-references: env
	@$(PY) dev/build_reference_index.py

index-releases: env
	@MEGATRON_WHEEL_CACHE=$${MEGATRON_WHEEL_CACHE:-.cache/wheels} $(PY) dev/build_release_index.py
