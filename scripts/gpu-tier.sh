#!/usr/bin/env bash
# `vlcheck tier gpu` (vlcheck/runners/gpu_tier.sh; docs/gpu-tier.md), for a checkout: FAMILIES, GPUS,
# JOBS, SERVE, SHARD, RECORD, DEADLINE, CONFIG_TIMEOUT, COMPILE_CACHE and OUT are read as before;
# arguments go to pytest.
exec "${PYTHON:-python3}" -m vlcheck.cli tier gpu -- "$@"
