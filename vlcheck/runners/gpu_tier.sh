#!/usr/bin/env bash
# `vlcheck tier gpu` (vlcheck/cli/tier_command.py) runs this with the variables below set from its
# options; PYTHON is the interpreter of the vlcheck that runs it, ENGINE_TESTS its engine tests
# (vlcheck/runners/tier/engine/), SNAPSHOTS its goldens: it runs from any folder.
# Run the GPU tier with one pytest process per family-config, spread over every GPU of the host
# (JOBS side by side on each GPU), and keep the evidence: a log and a JUnit XML per
# family-config, a summary with wall times and GPUs, and the goldens and GPU snapshots recorded.
# One process each, so that one family's crash, or an engine that dies and leaves vLLM's client
# waiting, costs that family only (killed after CONFIG_TIMEOUT). Side by side works for synthetic
# checkpoints: each engine takes a fixed 1 GiB KV cache (vlcheck/engine/engines.py SYNTHETIC_ENGINE_ARGS);
# keep JOBS=1 with --vlcheck-weights real.
# A family-config that needs k GPUs (--vlcheck-tp k; a configuration such as tp2; or the real model's
# tensor_parallel_size with real weights) gets k of them, each with a free slot (CUDA_VISIBLE_DEVICES per process).
# The longest family-configs start first (vlcheck/runners/gpu_durations.json), so the tail is short.
# Each engine's own output (vLLM's log, a dying process's last words) goes to logs/engines/; an
# engine that dies or hangs ends its family-config's tests at once, with those last words
# (vlcheck/engine/watchdog.py). The end is a table per family-config (vlcheck/runners/tier_table.py).
#   FAMILIES        space-separated families (default: every family with a synthetic recipe)
#   GPUS            space-separated device ids to use (default: every visible GPU)
#   JOBS            family-configs at a time on each GPU (default: CPU cores / GPUs, at least 1;
#                   1 with --vlcheck-weights real)
#   COMPILE_CACHE   a folder for the kernel caches (Triton, Inductor, vLLM's model-info and
#                   compile caches; default: their usual homes): keep it between runs of a CI
#                   runner and a fresh machine starts its engines warm
#   SHARD=i/n       only this runner's share of the families (vlcheck/runners/shard.py), for a CI job matrix
#   RECORD=1        record goldens and GPU snapshots (--vlcheck-update-goldens --snapshot-update)
#   SERVE           the family-configs whose engine also serves vLLM's OpenAI app for the served checks
#                   (vlcheck/runners/tier/engine/test_engine_served.py; --vlcheck-serve each; default: all; SERVE= for none). One
#                   engine serves the offline and the served checks (vlcheck/engine/shared_server.py)
#   CONFIG_TIMEOUT  seconds one family-config may take (default 600: a last resort behind the watchdog,
#                   which ends a dead or hung engine's family-config in seconds; a fresh H100's first
#                   wave of cold engines took 137-145 s to start, and chameleon's last test ended at 297 s)
#   DEADLINE        seconds after which no further family-config is started (default: none);
#                   the tier then ends within DEADLINE + CONFIG_TIMEOUT, and names what it left out
#   OUT             where the evidence goes (default: gpu-out)
# Extra arguments go to pytest (e.g. --vlcheck-weights seeded, --vlcheck-cache-off, --vlcheck-tp 2).
set -uo pipefail
(( BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501 )) || { echo "gpu-tier.sh needs bash >= 5.1 (wait -p)"; exit 2; }
out=${OUT:-gpu-out}
python=${PYTHON:-python3}
engine_tests=${ENGINE_TESTS:-$("$python" -c 'import vlcheck.runners.tier.engine as t, os; print(os.path.dirname(t.__file__))')}
snapshots=${SNAPSHOTS:-$("$python" -c 'from vlcheck.prompt.snapshots import SNAPSHOT_ROOT; print(SNAPSHOT_ROOT)')}
mkdir -p "$out/logs/engines"
export VLCHECK_CACHE=${VLCHECK_CACHE:-/tmp/vlcheck-cache} PYTHONUNBUFFERED=1 VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-INFO}
export VLCHECK_ENGINE_LOGS=$out/logs/engines VLCHECK_GOLDENS_SEEN=$out/goldens-seen
# Many processes side by side: torch's CPU thread pool in each would only contend for the cores.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [ -n "${COMPILE_CACHE:-}" ]; then
  mkdir -p "$COMPILE_CACHE"
  export TRITON_CACHE_DIR=$COMPILE_CACHE/triton TORCHINDUCTOR_CACHE_DIR=$COMPILE_CACHE/inductor \
         VLLM_CACHE_ROOT=$COMPILE_CACHE/vllm FLASHINFER_WORKSPACE_BASE=$COMPILE_CACHE
fi
record=()
[ "${RECORD:-0}" = 1 ] && record=(--vlcheck-update-goldens --snapshot-update)
serve=()
for selected in ${SERVE-all}; do serve+=(--vlcheck-serve "$selected"); done

visible_gpus() {
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then echo "${CUDA_VISIBLE_DEVICES//,/ }"
  else nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | tr '\n' ' '; fi
}
read -ra gpus <<< "${GPUS:-$(visible_gpus)}"
[ "${#gpus[@]}" -gt 0 ] || { echo "no GPU visible (name them: vlcheck tier gpu --gpus ID ..., or GPUS)"; exit 2; }
# getconf, not nproc: nproc obeys OMP_NUM_THREADS, set to 1 above
default_jobs=$(( $(getconf _NPROCESSORS_ONLN) / ${#gpus[@]} )); [ "$default_jobs" -ge 1 ] || default_jobs=1
[[ " $* " == *" --vlcheck-weights real "* ]] && default_jobs=1
jobs_per_gpu=${JOBS:-$default_jobs}

# The family-configs to run, longest first, with the GPUs each needs ("family kind gpus");
# their checkpoints are built here, once, before the jobs start.
configs=$("$python" - "${FAMILIES:-}" "${SHARD:-}" "$@" 2> "$out/logs/build.log" <<'PY'
import argparse, statistics, sys, time
from vlcheck.checkpoints.synthetic import NotBuildable, checkpoint_dir
from vlcheck.runners.shard import Shard, load_durations, select
from vlcheck.engine.engines import real_weights_available
from vlcheck.spec.registry import all_families
from vlcheck.spec.schema import config_id

wanted, shard = sys.argv[1].split(), sys.argv[2]
options = argparse.ArgumentParser(add_help=False)
options.add_argument("--vlcheck-weights", default="auto")
options.add_argument("--vlcheck-tp", type=int, default=1)
options.add_argument("--vlcheck-config", action="append", default=[])
opts, _ = options.parse_known_args(sys.argv[3:])
from vlcheck.configurations.registry import select as configurations
config_gpus = max(c.gpus for c in configurations(opts.vlcheck_config, "gpu"))  # tp2, encoder_dp: 2
specs = [s for name, s in all_families().items()
         if (not wanted or name in wanted) and s.synthetic is not None and not s.synthetic.unsupported]
specs = select(specs, Shard.parse(shard) if shard else None)
durations = load_durations()
configs = [(s, v) for s in specs for v in s.variants]
median = statistics.median(durations.values())
configs.sort(key=lambda sv: -durations.get(config_id(*sv), median))
for spec, variant in configs:
    t = time.perf_counter()
    try:
        path = checkpoint_dir(spec, variant)
    except NotBuildable as err:  # its tests skip saying why (the engines meet the same error)
        path = f"not buildable: {err}"
    print(f"{spec.name} {variant.kind}: {path} ({time.perf_counter() - t:.1f} s)", file=sys.stderr)
    real = opts.vlcheck_weights in ("auto", "real") and real_weights_available(variant) is not None
    print(f"{spec.name} {variant.kind} {max(opts.vlcheck_tp, config_gpus, variant.gpus_needed if real else 1)}")
PY
) || { echo "building the synthetic checkpoints failed:"; tail "$out/logs/build.log"; exit 1; }
echo "$(echo "$configs" | grep -c .) family-configs${SHARD:+ (shard $SHARD)}, GPUs ${gpus[*]}, JOBS=$jobs_per_gpu per GPU"

declare -A load=() held=()  # jobs running per GPU position; GPU positions per running pid
for i in "${!gpus[@]}"; do load[$i]=0; done

acquire() {  # k: the positions of the k least-loaded GPUs with a free slot, or fail
  local free
  free=$(for i in "${!gpus[@]}"; do [ "${load[$i]}" -lt "$jobs_per_gpu" ] && echo "${load[$i]} $i"; done | sort -n -k1,1 -k2,2 | head -n "$1" | cut -d' ' -f2)
  [ "$(echo "$free" | grep -c .)" -ge "$1" ] && echo $free
}

reap() {  # wait for one job, give back its GPUs; fails if that job failed
  local pid rc=0
  wait -n -p pid || rc=$?
  [ -n "${pid:-}" ] || return 0  # no job left
  [ -n "${held[$pid]+set}" ] || return "$rc"
  for i in ${held[$pid]}; do load[$i]=$(( load[$i] - 1 )); done
  unset "held[$pid]"
  return "$rc"
}

run_config() {  # family kind "gpu ids" pytest-args...
  local t=$(date +%s) log="$out/logs/$1-$2.log"
  CUDA_VISIBLE_DEVICES=${3// /,} timeout "${CONFIG_TIMEOUT:-600}" "$python" -m pytest -q -m gpu -p no:cacheprovider "${record[@]}" "${serve[@]}" -rfEsxX \
    --junitxml "$out/logs/$1-$2.xml" --vlcheck-family "$1" --vlcheck-variant "$2" "${@:4}" "$engine_tests" > "$log" 2>&1
  local rc=$?
  echo "$1 $2 rc=$rc $(( $(date +%s) - t ))s $(grep -aE '(passed|failed|skipped|error)' "$log" | tail -1) [gpu ${3// /,}]" >> "$out/summary.txt"
  tail -1 "$out/summary.txt"
  [ "$rc" = 0 ] || [ "$rc" = 5 ]
}

# One render fork server (vLLM imported once) for the served checks of every family-config process,
# not one each (vlcheck/served/shared_fork_server.py), unless VLCHECK_RENDER_FORK_SERVER names one
# already. Its socket lives in a short /tmp path: a Unix socket's path may not exceed 107 bytes.
fork_owner=
if [ -z "${VLCHECK_RENDER_FORK_SERVER:-}" ]; then
  fork_dir=$(mktemp -d /tmp/vlcheck-fork.XXXXXX)
  "$python" -m vlcheck.served.shared_fork_server "$fork_dir/fork-server.sock" > "$out/logs/render-fork.log" 2>&1 &
  fork_owner=$!
  until [ -S "$fork_dir/fork-server.sock" ] || ! kill -0 "$fork_owner" 2>/dev/null; do sleep 0.1; done
  if [ -S "$fork_dir/fork-server.sock" ]; then export VLCHECK_RENDER_FORK_SERVER=$fork_dir/fork-server.sock
  else echo "the shared render fork server did not start (each family-config starts its own):"; tail -5 "$out/logs/render-fork.log"; fi
fi

start=$(date +%s); failed=0
while read -r family kind need; do
  [ -n "$family" ] || continue
  # more GPUs than the host has: pinned to all of them, its tests skip with the reason
  [ "$need" -le "${#gpus[@]}" ] || need=${#gpus[@]}
  until slots=$(acquire "$need"); do reap || failed=1; done
  if [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - start )) -ge "$DEADLINE" ]; then
    echo "$family $kind not started: DEADLINE=${DEADLINE}s passed" | tee -a "$out/summary.txt"; failed=1; continue
  fi
  ids=$(for i in $slots; do echo -n "${gpus[$i]} "; done)
  run_config "$family" "$kind" "${ids% }" "$@" &
  held[$!]=$slots
  for i in $slots; do load[$i]=$(( load[$i] + 1 )); done
done <<< "$configs"
while [ "${#held[@]}" -gt 0 ]; do reap || failed=1; done
if [ -n "$fork_owner" ]; then
  kill "$fork_owner" 2>/dev/null; wait "$fork_owner" 2>/dev/null
  cp "$fork_dir/fork-server.log" "$out/logs/" 2>/dev/null; rm -rf "$fork_dir"
fi
echo "gpu tier: $(( $(date +%s) - start )) s wall, JOBS=$jobs_per_gpu per GPU, GPUs ${gpus[*]}${SHARD:+, shard $SHARD}" | tee -a "$out/summary.txt"
"$python" -m vlcheck.cli tier table "$out" | tee "$out/table.md"
tar czf "$out/evidence.tgz" -C "$snapshots" gpu_goldens test_hostile_gpu -C "$(cd "$out" && pwd)" goldens-seen 2>/dev/null || true
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$out/logs" "$out/goldens-seen"
exit "$failed"
