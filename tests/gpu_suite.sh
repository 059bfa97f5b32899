#!/usr/bin/env bash
# The GPU-machine run: GPU tests, the benchmark, nccl-tests under the preloaded object, and the
# PyTorch check, with every log written under $OUT. Run from the repository root on a machine
# with >= 2 NVLink GPUs, after staging binaries with tests/stage_for_device.sh:
#   OUT=/tmp/out bash tests/gpu_suite.sh [STAGE_DIR] [PARTS]
# PARTS: comma list, run in the order given, of gtest,bench,nccltests,torch (default: all);
# GTESTS: space-separated test binaries to run (default: every tests/test_* in the stage).
set -u
STAGE=${1:-.device/stage}
PARTS=${2:-gtest,bench,nccltests,torch}
OUT=${OUT:-/tmp/nccl-lamport-out}
mkdir -p "$OUT"
# shellcheck disable=SC1091
source .device/device-env.sh
export NCCL_NVLS_ENABLE=0
# nccl-tests needs libcudart.so: the toolkit's, or the one PyTorch's wheels ship.
CUDART_DIR=$(python3 -c 'import nvidia.cuda_runtime as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null)
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64:${CUDART_DIR:-}"
SO=$(realpath "$STAGE/lib/libnccl-lamport.so")
NT=$(realpath .third_party/nt-bin 2>/dev/null || echo "")
summary="$OUT/summary.txt"
note() { echo "$*" | tee -a "$summary"; }

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
} >"$OUT/machine.txt" 2>&1
note "machine: $(head -2 "$OUT/machine.txt" | tail -1)"

run_gtest() {
  for t in ${GTESTS:-"$STAGE"/tests/test_*}; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    timeout "${GTEST_TIMEOUT:-150}" "$t" >"$OUT/gtest-$name.log" 2>&1
    rc=$?
    note "gtest $name: rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/gtest-$name.log" | tr '\n' ' ')"
  done
}

run_bench() {
  timeout 300 "$STAGE/bench/nccl-lamport-bench" --json "$OUT/bench.json" --csv "$OUT/bench.csv" >"$OUT/bench.log" 2>&1
  note "bench: rc=$?"
  cat "$OUT/bench.log"
}

run_nccltests() {
  [ -n "$NT" ] || { note "nccl-tests: no binaries"; return; }
  ar="$NT/all_reduce_perf"
  log="$OUT/nccltests.log"
  : >"$log"
  run_nt() {  # label, env..., -- args
    local label=$1; shift
    echo "=== $label: $*" >>"$log"
    timeout 120 env "$@" >>"$log" 2>&1
    local rc=$?
    note "nccl-tests $label: rc=$rc $(grep -E 'Out of bounds values|Avg bus bandwidth' "$log" | tail -2 | tr -s ' ' | tr '\n' ' ')"
  }
  for dt in ${NT_DTYPES:-bfloat16 half float}; do
    run_nt "stock-g2-$dt" NCCL_LAMPORT_ENABLE=1 "$ar" -b 8 -e 16M -f 4 -g 2 -c 1 -d "$dt" -n 50 -w 10
    run_nt "lamport-g2-$dt" LD_PRELOAD="$SO" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$ar" -b 8 -e 16M -f 4 -g 2 -c 1 -d "$dt" -n 50 -w 10
  done
  run_nt "lamport-t2" LD_PRELOAD="$SO" "$ar" -b 8 -e 16M -f 4 -t 2 -c 1 -d bfloat16 -n 50 -w 10
  run_nt "stock-G50" "$ar" -b 8 -e 8M -f 4 -g 2 -c 1 -d bfloat16 -G 50 -n 20 -w 5
  run_nt "stock-G50-R2" "$ar" -b 8 -e 8M -f 4 -g 2 -c 1 -d bfloat16 -G 50 -n 20 -w 5 -R 2
  run_nt "lamport-G50" LD_PRELOAD="$SO" "$ar" -b 8 -e 8M -f 4 -g 2 -c 1 -d bfloat16 -G 50 -n 20 -w 5
  run_nt "lamport-t2-G10" LD_PRELOAD="$SO" "$ar" -b 8 -e 1M -f 8 -t 2 -c 1 -d half -G 10 -n 20 -w 5
}

run_torch() {
  tlog="$OUT/torch.log"
  rm -rf /tmp/torch-stock /tmp/torch-lamport
  PYTHONUNBUFFERED=1 timeout 150 torchrun --nproc_per_node=2 tests/torch/allreduce_check.py --out /tmp/torch-stock >"$tlog" 2>&1
  note "torch stock: rc=$?"
  LD_PRELOAD="$SO" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT PYTHONUNBUFFERED=1 timeout 150 \
    torchrun --nproc_per_node=2 tests/torch/allreduce_check.py --out /tmp/torch-lamport >>"$tlog" 2>&1
  note "torch lamport: rc=$? $(grep -c 'Lamport' "$tlog") Lamport log lines"
  python3 tests/torch/compare_runs.py /tmp/torch-stock /tmp/torch-lamport --ranks 2 >>"$tlog" 2>&1
  note "torch compare: rc=$? $(tail -1 "$tlog")"
}

IFS=, read -ra parts <<<"$PARTS"
for part in "${parts[@]}"; do
  "run_$part"
done
echo "=== summary"
cat "$summary"
# The device tool returns at most 8 files: pack every log into one archive.
(cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=bench.json --exclude=summary.txt ./*.log ./*.txt ./*.csv 2>/dev/null)
