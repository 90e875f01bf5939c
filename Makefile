# Two entry points (see README.md): `make inspect` and `make test`.
# Both create the pinned environment in .venv/ on first use (dev/ensure-env.sh).
PY := .venv/bin/python
ARGS ?=

.PHONY: env inspect test bench
env:
	@bash dev/ensure-env.sh

inspect: env
	@$(PY) scripts/inspect_core_api.py $(ARGS)

test: env
	@$(PY) -m pytest $(ARGS)

bench: env
	@for b in bench/*.py; do $(PY) $$b || exit 1; done

# The release index (references/index/releases/): Megatron Core 0.12.3 ... 0.19.2 compiled with ast
# from the mirror's git tags and the 0.19.2 wheel (dev/build_release_index.py).
.PHONY: index index-releases
index: index-releases
index-releases: env
	@MEGATRON_WHEEL_CACHE=$${MEGATRON_WHEEL_CACHE:-.cache/wheels} $(PY) dev/build_release_index.py
