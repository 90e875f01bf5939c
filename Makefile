# Two entry points (see README.md): `make inspect` and `make test`.
# Both create the pinned environment in .venv/ on first use (dev/ensure-env.sh).
PY := .venv/bin/python
ARGS ?=

.PHONY: env inspect test bench index index-references
env:
	@bash dev/ensure-env.sh

inspect: env
	@$(PY) scripts/inspect_core_api.py $(ARGS)

test: env
	@$(PY) -m pytest $(ARGS)

bench: env
	@for b in bench/*.py; do $(PY) $$b || exit 1; done

# Compiled indexes (JSON read by the scripts) are rebuilt from their Markdown; a test fails when one is stale.
index: index-references

index-references: env
	@$(PY) dev/build_reference_index.py
