#!/usr/bin/env bash
# Run the GPU tier with one pytest process per family-config, and keep the evidence: a log per
# family-config, a summary with wall times, and the goldens and GPU snapshots recorded.
# One process each, because vLLM 0.24.0 did not start a second engine in a process whose first
# engine was shut down (measured on an H200: the second LLM() never returned).
#   FAMILIES  space-separated families (default: every family with a synthetic recipe)
#   RECORD=1  record goldens and GPU snapshots (--vlcheck-update-goldens --snapshot-update)
#   OUT       where the evidence goes (default: gpu-out)
# Extra arguments go to pytest (e.g. --vlcheck-weights seeded, --vlcheck-cache-off).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
export VLCHECK_CACHE=${VLCHECK_CACHE:-/tmp/vlcheck-cache} PYTHONUNBUFFERED=1 VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-WARNING}
record=()
[ "${RECORD:-0}" = 1 ] && record=(--vlcheck-update-goldens --snapshot-update)
configs=$(python3 - "${FAMILIES:-}" <<'PY'
import sys
from vlcheck.registry import all_families
wanted = sys.argv[1].split()
for name, spec in all_families().items():
    if (wanted and name not in wanted) or spec.synthetic is None or spec.synthetic.unsupported:
        continue
    for variant in spec.variants:
        print(f"{name} {variant.kind}")
PY
)
start=$(date +%s); failed=0
while read -r family kind; do
  [ -n "$family" ] || continue
  t=$(date +%s)
  timeout "${CONFIG_TIMEOUT:-300}" python3 -m pytest -q -m gpu -p no:cacheprovider "${record[@]}" -rfEsxX \
    --vlcheck-family "$family" --vlcheck-variant "$kind" "$@" tests > "$out/$family-$kind.log" 2>&1
  rc=$?; [ "$rc" = 0 ] || [ "$rc" = 5 ] || failed=1
  echo "$family $kind rc=$rc $(( $(date +%s) - t ))s $(grep -aE '(passed|failed|skipped)' "$out/$family-$kind.log" | tail -1)" \
    | tee -a "$out/summary.txt"
done <<< "$configs"
echo "gpu tier: $(( $(date +%s) - start )) s wall" | tee -a "$out/summary.txt"
tar czf "$out/evidence.tgz" snapshots/gpu_goldens snapshots/test_hostile_gpu 2>/dev/null || true
exit "$failed"
