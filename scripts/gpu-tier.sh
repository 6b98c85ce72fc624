#!/usr/bin/env bash
# Run the GPU tier and keep the evidence: the log with per-test durations, a JUnit file, and the
# goldens and GPU snapshots it recorded. Extra arguments go to pytest (e.g. --vlcheck-family X).
#   RECORD=1  record goldens and GPU snapshots (--vlcheck-update-goldens --snapshot-update)
#   OUT       where the evidence goes (default: gpu-out)
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
export VLCHECK_CACHE=${VLCHECK_CACHE:-/tmp/vlcheck-cache} PYTHONUNBUFFERED=1 VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-WARNING}
record=()
[ "${RECORD:-0}" = 1 ] && record=(--vlcheck-update-goldens --snapshot-update)
start=$(date +%s)
python3 -m pytest -m gpu --vlcheck-weights synthetic -p no:cacheprovider "${record[@]}" --durations=0 -rfEsxX \
  --junitxml="$out/junit.xml" "$@" tests 2>&1 | tee "$out/gpu.log"
status=${PIPESTATUS[0]}
echo "gpu tier: exit $status, $(( $(date +%s) - start )) s wall" | tee -a "$out/gpu.log"
tar czf "$out/evidence.tgz" snapshots/gpu_goldens snapshots/test_hostile_gpu 2>/dev/null || true
exit "$status"
