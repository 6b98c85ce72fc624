#!/usr/bin/env bash
# Run the GPU tier with one pytest process per family-config, JOBS of them side by side on one
# GPU, and keep the evidence: a log and a JUnit XML per family-config, a summary with wall
# times, and the goldens and GPU snapshots recorded.
# One process each, so that one family's crash, or an engine that dies and leaves vLLM's client
# waiting, costs that family only (killed after CONFIG_TIMEOUT). Side by side works for synthetic
# checkpoints: each engine takes a fixed 1 GiB KV cache (vlcheck/engines.py SYNTHETIC_ENGINE_ARGS);
# keep JOBS=1 with --vlcheck-weights real.
#   FAMILIES        space-separated families (default: every family with a synthetic recipe)
#   JOBS            family-configs at a time (default 1)
#   RECORD=1        record goldens and GPU snapshots (--vlcheck-update-goldens --snapshot-update)
#   CONFIG_TIMEOUT  seconds one family-config may take (default 300)
#   DEADLINE        seconds after which no further family-config is started (default: none);
#                   the tier then ends within DEADLINE + CONFIG_TIMEOUT, and names what it left out
#   OUT             where the evidence goes (default: gpu-out)
# Extra arguments go to pytest (e.g. --vlcheck-weights seeded, --vlcheck-cache-off).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out/logs"
export VLCHECK_CACHE=${VLCHECK_CACHE:-/tmp/vlcheck-cache} PYTHONUNBUFFERED=1 VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-WARNING}
record=()
[ "${RECORD:-0}" = 1 ] && record=(--vlcheck-update-goldens --snapshot-update)

# The family-configs to run; their checkpoints are built here, once, before the jobs start.
configs=$(python3 - "${FAMILIES:-}" 2> "$out/logs/build.log" <<'PY'
import sys, time
from vlcheck.registry import all_families
from vlcheck.synthetic import checkpoint_dir
wanted = sys.argv[1].split()
for name, spec in all_families().items():
    if (wanted and name not in wanted) or spec.synthetic is None or spec.synthetic.unsupported:
        continue
    for variant in spec.variants:
        t = time.perf_counter()
        path = checkpoint_dir(spec, variant)
        print(f"{name} {variant.kind}: {path} ({time.perf_counter() - t:.1f} s)", file=sys.stderr)
        print(f"{name} {variant.kind}")
PY
) || { echo "building the synthetic checkpoints failed:"; tail "$out/logs/build.log"; exit 1; }
echo "$(echo "$configs" | wc -l) family-configs, JOBS=${JOBS:-1}"

run_config() {  # family kind
  local t=$(date +%s) log="$out/logs/$1-$2.log"
  timeout "${CONFIG_TIMEOUT:-300}" python3 -m pytest -q -m gpu -p no:cacheprovider "${record[@]}" -rfEsxX \
    --junitxml "$out/logs/$1-$2.xml" --vlcheck-family "$1" --vlcheck-variant "$2" "${@:3}" tests > "$log" 2>&1
  local rc=$?
  echo "$1 $2 rc=$rc $(( $(date +%s) - t ))s $(grep -aE '(passed|failed|skipped|error)' "$log" | tail -1)" >> "$out/summary.txt"
  tail -1 "$out/summary.txt"
  [ "$rc" = 0 ] || [ "$rc" = 5 ]
}

start=$(date +%s); failed=0; running=0
while read -r family kind; do
  [ -n "$family" ] || continue
  if [ "$running" -ge "${JOBS:-1}" ]; then wait -n || failed=1; running=$((running - 1)); fi
  if [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - start )) -ge "$DEADLINE" ]; then
    echo "$family $kind not started: DEADLINE=${DEADLINE}s passed" | tee -a "$out/summary.txt"; failed=1; continue
  fi
  run_config "$family" "$kind" "$@" & running=$((running + 1))
done <<< "$configs"
while [ "$running" -gt 0 ]; do wait -n || failed=1; running=$((running - 1)); done
echo "gpu tier: $(( $(date +%s) - start )) s wall, JOBS=${JOBS:-1}" | tee -a "$out/summary.txt"
tar czf "$out/evidence.tgz" snapshots/gpu_goldens snapshots/test_hostile_gpu 2>/dev/null || true
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$out/logs"
exit "$failed"
