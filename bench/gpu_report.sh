#!/usr/bin/env bash
# One prepared command for a lent GPU machine (the `run` tool): install the carried megatron-core
# 0.19.2 wheel into /tmp/site, then record the inspector's GPU report under $OUT.
# Usage there: bash bench/gpu_report.sh   (with `.whl` carried; $OUT set by the tool)
set -uo pipefail
: "${OUT:?OUT must be set}"
py=${PYTHON:-python3}
"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi; } >"$OUT/nvidia-smi.txt" 2>&1
"$py" scripts/inspect_core_api.py --json --cuda --tiny-model --timeout 240 >"$OUT/gpu_report.json" 2>"$OUT/gpu_report.stderr.txt"
echo "json rc=$?"
"$py" scripts/inspect_core_api.py --cuda --tiny-model --timeout 240 >"$OUT/gpu_report.txt" 2>>"$OUT/gpu_report.stderr.txt"
echo "text rc=$?"
"$py" bench/bench_inspector.py --rounds 3 --json >"$OUT/bench_gpu_machine.json" 2>&1
echo "bench rc=$?"
cat "$OUT/gpu_report.txt"; cat "$OUT/bench_gpu_machine.json"
