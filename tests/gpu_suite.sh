#!/usr/bin/env bash
# The GPU-machine run: GPU tests, the benchmark, nccl-tests in every mode, and the real-client
# checks (torch.distributed, a vLLM/SGLang-style ctypes pynccl, JAX), with every log written under
# $OUT. Run from the repository root on a machine with >= 2 NVLink GPUs, after staging binaries
# with tests/stage_for_device.sh:
#   OUT=/tmp/out bash tests/gpu_suite.sh [STAGE_DIR] [PARTS]
# PARTS: comma list, run in the order given (default: all), of
#   gtest      the GPU test binaries (GTESTS: space-separated list; default every tests/test_*)
#   bench      nccl-lamport-bench
#   nccltests  tests/clients/nccltests_modes.sh: all_reduce_perf in every mode, other collectives,
#              tuner-only (NT_QUICK=1: fewer runs)
#   torch      tests/clients/torch/allreduce_check.py, stock vs preloaded
#   clients    tests/clients/torch/clients_check.py: init eager / lazy / non-blocking, each stock vs preloaded
#              (CLIENT_VARIANTS: space-separated subset of "eager lazy nonblocking")
#   pynccl     tests/clients/pynccl_ctypes_check.py: stock library, libnccl-lamport.so by path,
#              libnccl.so.2 by name under LD_AUDIT=libnccl-lamport-audit.so
#   jax        tests/clients/jax_psum_check.py, stock vs LD_AUDIT (skipped without jax)
#   tuner      tuner activation (SPEC 4a), only NCCL_TUNER_PLUGIN set (no LD_PRELOAD/LD_AUDIT):
#              tests/clients/tuner_entry_bytes.py (one GPU: NCCL's entry bytes unchanged with
#              NCCL_LAMPORT_ENABLE=0 and with the hooks not asked for; hooked, and the call
#              reaching our wrapper, by default), then allreduce_check.py
#              under torchrun with the hooks on, compared with stock: "entry points ... hooked"
#              on both ranks and "Lamport one-shot ON" required (logged at the first call, for the set-up in the tuner's
#              init); in shared-GPU mode NCCL_LAMPORT_TEST_SHARED_GPU=1 lets it past nNodes > 1
#              then clients_check.py (eager, lazy, non-blocking) and pynccl_ctypes_check.py with
#              --lib libnccl.so.2, each with NCCL_TUNER_PLUGIN alone, compared with stock runs,
#              then the forked gtest executables of the tuner-activation build (tests/tuner/:
#              multiprocess, errors, lifecycle, groups, comm_kinds, faults; not linked to the
#              plugin) with NCCL_TUNER_PLUGIN alone (LD_PRELOAD/LD_AUDIT unset): one line each
#              and an "N passed, M failed, K skipped" line; TUNER_GTESTS (paths, or none) picks
#              them, else GTESTS' names are mapped to tests/tuner/; TUNER_GTESTS_ONLY=1 runs only them
#   tunercycles tests/clients/tuner_cycles.py: TUNER_CYCLES (1000) create/use/destroy cycles of a
#              pynccl communicator with NCCL_TUNER_PLUGIN alone (not in the default list)
#   faults     tests/reliability/fault_torch.py under torchrun with PyTorch's watchdog: one rank
#              SIGKILLed / SIGSTOPped during Lamport calls; the job must end within FAULT_LIMIT s
#              (not in the default list; the native fault tests are test_gpu_faults, part gtest)
# NCCL_LAMPORT_TEST_SHARED_GPU=1: shared-GPU mode (tests/gpu/shared_gpu.h), for a machine with one GPU:
# the forked GPU tests and the two-rank Python checks put both ranks on GPU 0, each with its own
# NCCL_HOSTID (NCCL joins them over sockets on loopback), NCCL_LAMPORT_REQUIRE_NVLINK=0. Results
# are real, timings are not (the ranks' kernels are time-sliced): bench, nccltests and jax are
# skipped, and the in-process gtests skip themselves.
# NCCL_UNDER_TEST=torch (default: the NCCL of the machine's PyTorch) | system (the one ldconfig
# knows, /usr/lib/x86_64-linux-gnu/libnccl.so.2 first) | /abs/path/libnccl.so.2: the NCCL that the
# native binaries (gtest, bench, nccl-tests) and the stock pynccl run load. PyTorch processes
# always run on PyTorch's own NCCL.
# Per-rank result files go to $RESULTS (default /tmp/nccl-lamport-results), not $OUT.
# Prints one summary line per run, the time of each part, and "gpu_suite: N passed, M failed,
# K skipped" (a part with nothing to run is SKIPPED, never PASS); exits 1 if any part failed, 2 if no NCCL to test was found (nothing ran), 3 if
# STAGE_DIR holds no staged build (nothing ran; the message says how to stage one). Every log is
# packed into $OUT/logs.tgz.
set -u
STAGE=${1:-.device/stage}
PARTS=${2:-gtest,bench,nccltests,torch,clients,pynccl,jax,tuner}
if [ ! -f "$STAGE/lib/libnccl-lamport.so" ] || [ ! -f tests/gpu_suite.sh ]; then
  {
    [ -f tests/gpu_suite.sh ] || echo "gpu_suite: run me from the repository root (I use tests/clients/ and tests/gpu/)."
    [ -f "$STAGE/lib/libnccl-lamport.so" ] || {
      echo "gpu_suite: nothing staged: $STAGE/lib/libnccl-lamport.so does not exist."
      echo "  Build, then stage the binaries (from the repository root):"
      echo "    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j"
      echo "    bash tests/stage_for_device.sh build $STAGE"
      echo "  then run again: OUT=/tmp/out bash tests/gpu_suite.sh $STAGE [PARTS]"
    }
  } >&2
  exit 3
fi
OUT=${OUT:-/tmp/nccl-lamport-out}
RESULTS=${RESULTS:-/tmp/nccl-lamport-results}
mkdir -p "$OUT"
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
# The GPU machine's environment file (PyTorch's NCCL, NCCL_PKG_DIR), where one is staged.
# shellcheck disable=SC1091
[ -f .device/device-env.sh ] && source .device/device-env.sh
export NCCL_NVLS_ENABLE=0
SHARED_GPU=${NCCL_LAMPORT_TEST_SHARED_GPU:-0}
if [ "$SHARED_GPU" = 1 ]; then
  # Process-wide parts of the mode; each rank sets its own NCCL_HOSTID (shared_gpu.cc, common.py).
  export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
  export NCCL_LAMPORT_REQUIRE_NVLINK=${NCCL_LAMPORT_REQUIRE_NVLINK:-0}
fi
# nccl-tests needs libcudart.so: the toolkit's, or the one PyTorch's wheels ship.
CUDART_DIR=$(python3 -c 'import nvidia.cuda_runtime as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null)
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64${CUDART_DIR:+:$CUDART_DIR}"
SO=$(realpath "$STAGE/lib/libnccl-lamport.so")
AUDIT="$(dirname "$SO")/libnccl-lamport-audit.so"
NT=""
[ -d .third_party/nt-bin ] && NT=$(realpath .third_party/nt-bin)
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
part_fail=0
part_skip=0
fail() { part_fail=1; }
skip_part() { part_skip=1; }  # the part found nothing to run: SKIPPED, never PASS

pack_logs() {
  # The device tool returns at most 8 files: pack every log into one archive.
  (cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=bench.json --exclude=summary.txt ./*.log ./*.txt ./*.csv 2>/dev/null)
}

nccl_version() {  # the version code a libnccl reports, without touching a GPU
  python3 - "$1" <<'EOF' 2>/dev/null || echo "?"
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
v = ctypes.c_int()
lib.ncclGetVersion(ctypes.byref(v))
print(v.value)
EOF
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
} >"$OUT/machine.txt" 2>&1
note "machine: $(head -2 "$OUT/machine.txt" | tail -1)"

# Which NCCL is under test.
NCCL_UNDER_TEST=${NCCL_UNDER_TEST:-torch}
case $NCCL_UNDER_TEST in
  torch)
    NCCL_LIB=""
    # Without the device env file: PyTorch's wheel NCCL, found the way device-env.sh finds it.
    [ -z "${NCCL_PKG_DIR:-}" ] &&
      NCCL_PKG_DIR=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
    [ -n "${NCCL_PKG_DIR:-}" ] && [ -e "$NCCL_PKG_DIR/lib/libnccl.so.2" ] && NCCL_LIB=$(realpath "$NCCL_PKG_DIR/lib/libnccl.so.2")
    if [ -z "$NCCL_LIB" ]; then
      note "nccl: SKIPPED: PyTorch's NCCL (NCCL_PKG_DIR/lib/libnccl.so.2) not found; set NCCL_PKG_DIR or use NCCL_UNDER_TEST=system|/abs/libnccl.so.2"
      pack_logs
      exit 2
    fi
    ;;
  system)
    NCCL_LIB=""
    if [ -e /usr/lib/x86_64-linux-gnu/libnccl.so.2 ]; then
      NCCL_LIB=/usr/lib/x86_64-linux-gnu/libnccl.so.2
    else
      NCCL_LIB=$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" { print $NF; exit }')
    fi
    note "nccl: ldconfig -p: $(ldconfig -p 2>/dev/null | grep -c 'libnccl\.so\.2') libnccl.so.2 entries; using '${NCCL_LIB:-none}'"
    if [ -z "$NCCL_LIB" ]; then
      note "nccl: SKIPPED: no system NCCL"
      pack_logs
      exit 2
    fi
    NCCL_LIB=$(realpath "$NCCL_LIB")
    ;;
  /*)
    NCCL_LIB=$(realpath "$NCCL_UNDER_TEST")
    ;;
  *)
    note "nccl: NCCL_UNDER_TEST=$NCCL_UNDER_TEST: want torch, system or an absolute path"
    exit 2
    ;;
esac
NCCL_LIB_DIR=$(dirname "$NCCL_LIB")
# Native binaries find the NCCL under test first.
NCCL_LDLP="$NCCL_LIB_DIR:$LD_LIBRARY_PATH"
note "nccl: NCCL_UNDER_TEST=$NCCL_UNDER_TEST -> $NCCL_LIB (version code $(nccl_version "$NCCL_LIB")); PyTorch's: ${NCCL_PKG_DIR:-none}"
[ "$SHARED_GPU" = 1 ] && note "mode: shared GPU (NCCL_LAMPORT_TEST_SHARED_GPU=1): ${NCCL_LAMPORT_TEST_SHARED_GPU_RANKS:-2} forked ranks (Python checks: 2) on one GPU, time-sliced; no timings"
note "object: $SO; audit module: $([ -f "$AUDIT" ] && echo "$AUDIT" || echo "none beside it")"

# --- helpers for the Python parts ------------------------------------------------------------

# torch_run LABEL LOG EXPECT [VAR=VALUE...] -- SCRIPT ARGS...
# torchrun with 2 processes. EXPECT: stock (no nccl-lamport log line), lamport (a communicator
# logged "Lamport one-shot ON"), any. One summary line; a failure marks the part failed.
torch_run() {
  local label=$1 log=$2 expect=$3
  shift 3
  local -a envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  local out
  out=$(mktemp)
  echo "=== $label: ${envs[*]+${envs[*]}} torchrun --standalone --nproc_per_node=2 $*" >>"$log"
  # The caller's variables come last, so that they win (NCCL_DEBUG=WARN for long runs).
  env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 ${envs[@]+"${envs[@]}"} \
    timeout "${TORCH_TIMEOUT:-300}" torchrun --standalone --nproc_per_node=2 "$@" >"$out" 2>&1
  local rc=$?
  cat "$out" >>"$log"
  # Worst status per scenario over both ranks, in order of appearance.
  local scen counts on lam lamport_lines why=""
  scen=$(awk 'match($0, /SCENARIO [a-z_]+: (PASS|FAIL)/) {
      split(substr($0, RSTART + 9, RLENGTH - 9), a, ": ")
      if (!(a[1] in st)) names[++n] = a[1]
      if (!(a[1] in st) || a[2] == "FAIL") st[a[1]] = a[2]
    }
    END { for (i = 1; i <= n; i++) printf "%s=%s ", names[i], st[names[i]] }' "$out")
  counts=$(awk 'match($0, /: [0-9]+ passed, [0-9]+ failed/) {
      split(substr($0, RSTART + 2, RLENGTH - 2), a, " "); p += a[1]; f += a[3]; seen = 1
    }
    END { if (seen) printf "checks %d passed %d failed (both ranks)", p, f }' "$out")
  on=$(grep -c "Lamport one-shot ON" "$out")
  lam=$(sed -nE 's/.* ([0-9]+) allreduce calls ran on Lamport kernels, ([0-9]+) went to NCCL.*/\1 \2/p' "$out" |
    awk '{ l += $1; n += $2 } END { printf "%d/%d", l, n }')
  lamport_lines=$(grep -c "Lamport: " "$out")
  [ "$rc" -eq 0 ] || why+=" rc=$rc"
  case $expect in
    stock) [ "$lamport_lines" -eq 0 ] || why+=" stock run has $lamport_lines nccl-lamport log lines" ;;
    lamport) [ "$on" -gt 0 ] || why+=" no 'Lamport one-shot ON' in the log" ;;
  esac
  if grep -q "SCENARIO [a-z_]*: FAIL" "$out"; then why+=" a scenario failed"; fi
  local status=PASS
  if [ -n "$why" ]; then
    status=FAIL
    fail
    grep -E "FAIL|Error|error:" "$out" | grep -v "NCCL INFO" | head -5 | sed 's/^/    /' | tee -a "$summary"
  fi
  note "$label: $status rc=$rc ${scen}${counts} | Lamport ON lines=$on, calls lamport/nccl at destroy=$lam${why:+ (FAIL:$why)}"
  rm -f "$out"
}

# compare_dirs LABEL BASELINE PLUGIN LOG
compare_dirs() {
  echo "=== compare $1: $2 vs $3" >>"$4"
  python3 tests/clients/torch/compare_runs.py "$2" "$3" --ranks 2 --label "$1" >>"$4" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || fail
  note "compare $1: $([ "$rc" -eq 0 ] && echo PASS || echo FAIL) rc=$rc $(tail -1 "$4")"
}

# --- parts -----------------------------------------------------------------------------------

# gtest_one LABEL EXE LOG [env ARGS...]: one gtest executable under its time limit, the NCCL under
# test first on the library path, through env with ARGS (VAR=VALUE, -u VAR); one summary line.
# A failure marks the part failed; the exit status is returned.
gtest_one() {
  local label=$1 t=$2 log=$3 name limit rc
  shift 3
  name=$(basename "$t")
  limit=${GTEST_TIMEOUT:-150}
  # 1000 create/destroy cycles take about 10 minutes (NCCL's own split and destroy).
  # A shorter NCCL_LAMPORT_TEST_CYCLE_BUDGET_S shortens that limit too.
  local cycles_limit=870
  [ -n "${NCCL_LAMPORT_TEST_CYCLE_BUDGET_S:-}" ] && cycles_limit=$((NCCL_LAMPORT_TEST_CYCLE_BUDGET_S + 120))
  [ "$name" = test_gpu_lifecycle ] && [ "$limit" -lt "$cycles_limit" ] && [ -z "${GTEST_FILTER:-}" ] && limit=$cycles_limit
  env "$@" LD_LIBRARY_PATH="$NCCL_LDLP" timeout "$limit" "$t" >"$log" 2>&1
  rc=$?
  # A test killed at its limit may leave forked ranks on the GPU: they carry the executable's
  # name (matched exactly, at most 15 characters as the kernel keeps it, so never a shell).
  [ "$rc" -eq 124 ] && pkill -KILL -x "${name:0:15}" 2>/dev/null && echo "killed ranks left by $name" >>"$log"
  [ "$rc" -eq 0 ] || fail
  note "$label $name: rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tr '\n' ' ')"
  return "$rc"
}

# gpu_tests_passed EXE_NAME LOG: how many tests that need a GPU passed in LOG: those of the
# test_gpu_* executables but their CPU-only argument checks (LamportLaunchValidation, also run under
# ctest's cpu label), and those of Gpu* suites in any executable (test_topology).
gpu_tests_passed() {
  awk -v exe="$1" '/^\[       OK \] / { suite = $4; sub(/\..*/, "", suite)
      if (suite ~ /^Gpu/ || (exe ~ /^test_gpu_/ && suite != "LamportLaunchValidation")) n++ }
    END { print n + 0 }' "$2"
}

run_gtest() {
  local ran=0 gpu_passed=0 log n
  for t in ${GTESTS:-"$STAGE"/tests/test_*}; do
    if [ ! -x "$t" ] || [ -d "$t" ]; then
      # A name asked for in GTESTS that is no executable is a mistake, not a pass.
      [ -n "${GTESTS:-}" ] && { note "gtest $t: not an executable path (GTESTS takes paths)"; fail; }
      continue
    fi
    ran=$((ran + 1))
    log="$OUT/gtest-$(basename "$t").log"
    gtest_one gtest "$t" "$log"
    n=$(gpu_tests_passed "$(basename "$t")" "$log")
    gpu_passed=$((gpu_passed + n))
  done
  [ "$ran" -gt 0 ] || { note "gtest: SKIPPED: no test executable found"; skip_part; return; }
  # The CPU tests staged beside the GPU ones pass anywhere: without one GPU test passed (no GPU,
  # or every GPU test skipped itself) the part is SKIPPED, never PASS.
  note "gtest: $gpu_passed GPU tests passed"
  [ "$gpu_passed" -gt 0 ] || { note "gtest: SKIPPED: no GPU test ran (every one skipped)"; skip_part; }
}

# The forked gtest executables of the tuner-activation build (staged in tests/tuner/: not linked to
# libnccl-lamport.so, tests/gpu/activation_mode.h) with only NCCL_TUNER_PLUGIN set. TUNER_GTESTS:
# paths (default: every tests/tuner/test_*; "none": skip); else GTESTS, each mapped to its
# tests/tuner/ namesake (names without one, the in-process and CPU tests, are listed and left out).
tuner_gtests() {
  local tuner_so=$1 list t name log passed=0 failed=0 skipped=0
  if [ -n "${TUNER_GTESTS:-}" ]; then
    [ "$TUNER_GTESTS" = none ] && { note "tuner gtest: not asked for (TUNER_GTESTS=none)"; tuner_gtests_ran=0; return; }
    list=$TUNER_GTESTS
  elif [ -n "${GTESTS:-}" ]; then
    list=""
    for t in $GTESTS; do
      name=$(basename "$t")
      if [ -x "$STAGE/tests/tuner/$name" ]; then
        list+=" $STAGE/tests/tuner/$name"
      else
        note "tuner gtest $name: no tuner-activation build (only the forked GPU tests have one)"
      fi
    done
  else
    list=$(ls "$STAGE"/tests/tuner/test_* 2>/dev/null)
  fi
  for t in $list; do
    if [ ! -x "$t" ] || [ -d "$t" ]; then
      note "tuner gtest $t: not an executable path"
      failed=$((failed + 1))
      fail
      continue
    fi
    log="$OUT/gtest-tuner-$(basename "$t").log"
    if ! gtest_one "tuner gtest" "$t" "$log" -u LD_PRELOAD -u LD_AUDIT NCCL_TUNER_PLUGIN="$tuner_so"; then
      failed=$((failed + 1))
    elif grep -q '^\[  PASSED  \] 0 tests' "$log"; then
      skipped=$((skipped + 1))  # every test SKIPPED (no GPU): not a pass
    else
      passed=$((passed + 1))
    fi
  done
  if [ $((passed + failed + skipped)) -eq 0 ]; then
    note "tuner gtest: FAIL: no executable in $STAGE/tests/tuner (stage a build with tests/stage_for_device.sh)"
    fail
  else
    note "tuner gtest: $passed passed, $failed failed, $skipped skipped (executables, NCCL_TUNER_PLUGIN=$tuner_so alone)"
  fi
  tuner_gtests_ran=$((passed + failed))
}

run_bench() {
  LD_LIBRARY_PATH="$NCCL_LDLP" timeout 300 "$STAGE/bench/nccl-lamport-bench" --json "$OUT/bench.json" --csv "$OUT/bench.csv" >"$OUT/bench.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || fail
  note "bench: rc=$rc"
  cat "$OUT/bench.log"
}

run_nccltests() {
  if [ -z "$NT" ]; then
    note "nccl-tests: SKIPPED: no binaries in .third_party/nt-bin (all_reduce_perf, all_gather_perf, reduce_scatter_perf, sendrecv_perf)"
    skip_part
    return
  fi
  LD_LIBRARY_PATH="$NCCL_LDLP" bash tests/clients/nccltests_modes.sh "$SO" "$NT" "$OUT"
  rc=$?
  [ "$rc" -eq 0 ] || fail
  cat "$OUT/nccltests-summary.txt" >>"$summary"
}

run_torch() {
  local tlog="$OUT/torch.log"
  : >"$tlog"
  torch_run "torch stock" "$tlog" stock -- tests/clients/torch/allreduce_check.py --out "$RESULTS/torch-stock"
  torch_run "torch lamport" "$tlog" lamport "LD_PRELOAD=$SO" -- tests/clients/torch/allreduce_check.py --out "$RESULTS/torch-lamport"
  compare_dirs torch "$RESULTS/torch-stock" "$RESULTS/torch-lamport" "$tlog"
}

run_clients() {
  local clog="$OUT/clients.log" variant expect
  : >"$clog"
  for variant in ${CLIENT_VARIANTS:-eager lazy nonblocking}; do
    local -a vargs=(--init eager)
    local -a venv=()
    expect=(lamport --expect-lamport)
    case $variant in
      lazy) vargs=(--init lazy) ;;
      nonblocking)
        vargs=(--init eager --nonblocking --scenarios "eager_init,new_group,async,ddp")
        venv=(TORCH_NCCL_USE_COMM_NONBLOCKING=1)
        # Non-blocking communicators: results must match; whether they are accelerated is reported.
        expect=(any)
        ;;
    esac
    torch_run "clients stock-$variant" "$clog" stock ${venv[@]+"${venv[@]}"} -- \
      tests/clients/torch/clients_check.py "${vargs[@]}" --out "$RESULTS/clients-stock-$variant"
    torch_run "clients lamport-$variant" "$clog" "${expect[0]}" ${venv[@]+"${venv[@]}"} "LD_PRELOAD=$SO" -- \
      tests/clients/torch/clients_check.py "${vargs[@]}" "${expect[@]:1}" --out "$RESULTS/clients-lamport-$variant"
    compare_dirs "clients $variant" "$RESULTS/clients-stock-$variant" "$RESULTS/clients-lamport-$variant" "$clog"
  done
}

run_pynccl() {
  local plog="$OUT/pynccl.log" script=tests/clients/pynccl_ctypes_check.py
  local exports="$RESULTS/pynccl-exports.txt"
  : >"$plog"
  local -a lamport_env=()
  # PyTorch has loaded its own NCCL in these processes; nccl-lamport uses the loaded one, so the
  # system NCCL can only be named (NCCL_LAMPORT_NCCL_PATH applies when none is loaded yet).
  [ "$NCCL_UNDER_TEST" = torch ] || lamport_env=("NCCL_LAMPORT_NCCL_PATH=$NCCL_LIB")
  torch_run "pynccl stock ($NCCL_LIB)" "$plog" stock -- \
    "$script" --lib "$NCCL_LIB" --label stock --expect-stock --exports-file "$exports" --out "$RESULTS/pynccl-stock"
  # As VLLM_NCCL_SO_PATH=/abs/libnccl-lamport.so (SGLANG_NCCL_SO_PATH alike) would load it.
  torch_run "pynccl lamport by path" "$plog" lamport ${lamport_env[@]+"${lamport_env[@]}"} -- \
    "$script" --lib "$SO" --label lamport-path --expect-lamport --exports-file "$exports" --out "$RESULTS/pynccl-lamport-path"
  compare_dirs "pynccl stock vs path" "$RESULTS/pynccl-stock" "$RESULTS/pynccl-lamport-path" "$plog"
  if [ -f "$AUDIT" ]; then
    # A client that dlopens "libnccl.so.2" by name (pynccl's default, JAX/XLA), redirected.
    torch_run "pynccl libnccl.so.2 under LD_AUDIT" "$plog" lamport "LD_AUDIT=$AUDIT" ${lamport_env[@]+"${lamport_env[@]}"} -- \
      "$script" --lib libnccl.so.2 --label lamport-audit --expect-lamport --exports-file "$exports" \
      --out "$RESULTS/pynccl-lamport-audit"
    compare_dirs "pynccl stock vs audit" "$RESULTS/pynccl-stock" "$RESULTS/pynccl-lamport-audit" "$plog"
  else
    note "pynccl libnccl.so.2 under LD_AUDIT: SKIPPED: no $AUDIT"
  fi
}

run_jax() {
  local jlog="$OUT/jax.log" script=tests/clients/jax_psum_check.py
  if ! python3 -c 'import jax' >/dev/null 2>&1; then
    note "jax: SKIPPED: no jax in this Python"
    skip_part
    return
  fi
  if [ ! -f "$AUDIT" ]; then
    note "jax: SKIPPED: no $AUDIT"
    skip_part
    return
  fi
  : >"$jlog"
  echo "=== jax stock" >>"$jlog"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 300 python3 "$script" --out "$RESULTS/jax-stock.npz" >>"$jlog" 2>&1
  local rc1=$?
  if grep -q "SKIPPED" "$jlog"; then
    note "jax: SKIPPED: $(grep -m1 SKIPPED "$jlog")"
    skip_part
    return
  fi
  echo "=== jax LD_AUDIT=$AUDIT" >>"$jlog"
  LD_AUDIT="$AUDIT" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 300 python3 "$script" --out "$RESULTS/jax-audit.npz" >>"$jlog" 2>&1
  local rc2=$?
  python3 "$script" --compare "$RESULTS/jax-stock.npz" "$RESULTS/jax-audit.npz" >>"$jlog" 2>&1
  local rc3=$?
  local on
  on=$(grep -c "Lamport one-shot ON" "$jlog")
  local status=PASS
  if [ "$rc1" -ne 0 ] || [ "$rc2" -ne 0 ] || [ "$rc3" -ne 0 ] || [ "$on" -eq 0 ]; then
    status=FAIL
    fail
  fi
  note "jax: $status stock rc=$rc1, audit rc=$rc2, compare rc=$rc3, Lamport ON lines=$on | $(grep -E '^jax (psum|compare)' "$jlog" | tr '\n' ' ')"
}

run_tuner() {
  local tlog="$OUT/tuner.log" script=tests/clients/tuner_entry_bytes.py
  local tuner_so
  tuner_so="$(dirname "$SO")/libnccl-tuner-lamport.so"
  # TUNER_GTESTS_ONLY=1: only the gtest executables (the client checks take minutes of their own).
  if [ "${TUNER_GTESTS_ONLY:-0}" = 1 ]; then
    tuner_gtests "$tuner_so"
    [ "$tuner_gtests_ran" -eq 0 ] && skip_part  # every test SKIPPED: the part is not a pass
    return
  fi
  : >"$tlog"
  local -a cases=("unchanged NCCL_LAMPORT_ENABLE=0 NCCL_LAMPORT_TUNER_HOOKS=1"
                  "unchanged NCCL_LAMPORT_TUNER_HOOKS=0"
                  "hooked NCCL_LAMPORT_ENABLE=1")  # the default: NCCL_TUNER_PLUGIN alone hooks
  local c expect rc line
  for c in "${cases[@]}"; do
    read -ra words <<<"$c"
    expect=${words[0]}
    echo "=== ${words[*]:1} NCCL_TUNER_PLUGIN=$tuner_so $script --lib $NCCL_LIB --expect $expect" >>"$tlog"
    env "${words[@]:1}" NCCL_TUNER_PLUGIN="$tuner_so" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
      LD_LIBRARY_PATH="$NCCL_LDLP" timeout 120 python3 "$script" --lib "$NCCL_LIB" --expect "$expect" >>"$tlog" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || fail
    line=$(grep -E "^tuner-entry-bytes" "$tlog" | tail -1)
    note "tuner entry bytes (${words[*]:1}): rc=$rc ${line:-no result line}"
  done
  # PyTorch's processes run on PyTorch's NCCL: that is the one the tuner hooks.
  local hooks=(NCCL_TUNER_PLUGIN="$tuner_so")  # the default: NCCL_TUNER_PLUGIN alone
  local before
  before=$(grep -c "entry points of .* hooked" "$tlog")
  torch_run "tuner torch stock" "$tlog" stock -- tests/clients/torch/allreduce_check.py --out "$RESULTS/tuner-stock"
  torch_run "tuner torch hooks" "$tlog" lamport "${hooks[@]}" -- tests/clients/torch/allreduce_check.py --out "$RESULTS/tuner-hooks"
  local hooked
  hooked=$(( $(grep -c "entry points of .* hooked" "$tlog") - before ))
  if [ "$hooked" -lt 2 ]; then
    note "tuner torch hooks: FAIL: 'entry points ... hooked' on $hooked of 2 ranks"
    fail
  fi
  compare_dirs "tuner stock vs hooks" "$RESULTS/tuner-stock" "$RESULTS/tuner-hooks" "$tlog"
  # The PyTorch client scenarios (eager, lazy, non-blocking; new_group, async, graphs, DDP) and a
  # pynccl bound to the real libnccl.so.2 by name, with NCCL_TUNER_PLUGIN alone; each compared
  # with a stock run (reused from the clients / pynccl parts when they ran first).
  local variant
  for variant in ${CLIENT_VARIANTS:-eager lazy nonblocking}; do
    local -a vargs=(--init eager) venv=() expect=(lamport --expect-lamport)
    case $variant in
      lazy) vargs=(--init lazy) ;;
      nonblocking)
        vargs=(--init eager --nonblocking --scenarios "eager_init,new_group,async,ddp")
        venv=(TORCH_NCCL_USE_COMM_NONBLOCKING=1)
        expect=(lamport)  # eligible or not is reported per group; results must match
        ;;
    esac
    [ -d "$RESULTS/clients-stock-$variant" ] ||
      torch_run "clients stock-$variant" "$tlog" stock ${venv[@]+"${venv[@]}"} -- \
        tests/clients/torch/clients_check.py "${vargs[@]}" --out "$RESULTS/clients-stock-$variant"
    torch_run "tuner clients $variant" "$tlog" "${expect[0]}" ${venv[@]+"${venv[@]}"} "${hooks[@]}" -- \
      tests/clients/torch/clients_check.py "${vargs[@]}" "${expect[@]:1}" --out "$RESULTS/tuner-clients-$variant"
    compare_dirs "tuner clients $variant vs stock" "$RESULTS/clients-stock-$variant" \
      "$RESULTS/tuner-clients-$variant" "$tlog"
  done
  local script_p=tests/clients/pynccl_ctypes_check.py
  [ -d "$RESULTS/tuner-pynccl-stock" ] ||
    torch_run "pynccl stock (libnccl.so.2)" "$tlog" stock -- \
      "$script_p" --lib libnccl.so.2 --label stock --expect-stock --out "$RESULTS/tuner-pynccl-stock"
  torch_run "tuner pynccl libnccl.so.2" "$tlog" lamport "${hooks[@]}" -- \
    "$script_p" --lib libnccl.so.2 --label tuner --expect-lamport --out "$RESULTS/tuner-pynccl"
  compare_dirs "tuner pynccl vs stock" "$RESULTS/tuner-pynccl-stock" "$RESULTS/tuner-pynccl" "$tlog"
  tuner_gtests "$tuner_so"
}

# NCCL_TUNER_PLUGIN alone, TUNER_CYCLES (1000) create/use/destroy cycles of a pynccl communicator,
# the process's only one, so NCCL unloads and reloads the tuner every cycle (TUNER_CYCLES_BUDGET_S).
run_tunercycles() {
  local clog="$OUT/tuner-cycles.log" tuner_so
  tuner_so="$(dirname "$SO")/libnccl-tuner-lamport.so"
  : >"$clog"
  TORCH_TIMEOUT=$(( ${TUNER_CYCLES_BUDGET_S:-480} + 90 )) torch_run "tuner cycles" "$clog" any NCCL_TUNER_PLUGIN="$tuner_so" NCCL_DEBUG=WARN -- \
      tests/clients/tuner_cycles.py --lib libnccl.so.2 --cycles "${TUNER_CYCLES:-1000}" \
      --budget-s "${TUNER_CYCLES_BUDGET_S:-480}" --expect-lamport
  grep -E "tuner-cycles:|after [0-9]+ cycles" "$clog" | sed 's/^/    /' | tee -a "$summary"
}

run_faults() {
  local flog="$OUT/faults.log"
  : >"$flog"
  for fault in kill stop; do
    local out t0 rc status=PASS why=""
    out=$(mktemp)
    t0=$SECONDS
    echo "=== fault $fault" >>"$flog"
    LD_PRELOAD="$SO" TORCH_NCCL_ASYNC_ERROR_HANDLING=1 NCCL_LAMPORT_TIMEOUT_MS=3000 NCCL_DEBUG=INFO \
      NCCL_DEBUG_SUBSYS=INIT PYTHONUNBUFFERED=1 \
      OMP_NUM_THREADS=1 timeout -k 10 "${FAULT_LIMIT:-180}" torchrun --standalone --nproc_per_node=2 \
      tests/reliability/fault_torch.py --fault "$fault" >"$out" 2>&1
    rc=$?
    cat "$out" >>"$flog"
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && why+=" the job did not end within ${FAULT_LIMIT:-180} s"
    grep -q "FAULT rank 1: sending" "$out" || why+=" the fault never happened"
    grep -q "Lamport one-shot ON" "$out" || grep -q "calls ran on Lamport kernels" "$out" ||
      why+=" no sign of the Lamport path (NCCL_DEBUG=INFO shows it)"
    [ -n "$why" ] && status=FAIL && fail
    note "fault $fault (torchrun): $status in $((SECONDS - t0)) s, rc=$rc |$(grep -m1 FAULT_SURVIVOR "$out" | cut -c1-160)$why"
    rm -f "$out"
  done
}

IFS=, read -ra parts <<<"$PARTS"
parts_passed=0
parts_failed=0
parts_skipped=0
suite_t0=$SECONDS
for part in "${parts[@]}"; do
  if ! declare -F "run_$part" >/dev/null; then
    note "part $part: unknown (known: gtest bench nccltests torch clients pynccl jax tuner tunercycles faults)"
    parts_failed=$((parts_failed + 1))
    continue
  fi
  part_fail=0
  part_skip=0
  t0=$SECONDS
  if [ "$SHARED_GPU" = 1 ] && [[ " bench nccltests jax " == *" $part "* ]]; then
    note "part $part: SKIPPED in shared-GPU mode (needs one GPU per rank)"
    parts_skipped=$((parts_skipped + 1))
    continue
  fi
  "run_$part"
  if [ "$part_fail" -eq 0 ] && [ "$part_skip" -eq 1 ]; then
    parts_skipped=$((parts_skipped + 1))
    note "part $part: SKIPPED in $((SECONDS - t0)) s"
  elif [ "$part_fail" -eq 0 ]; then
    parts_passed=$((parts_passed + 1))
    note "part $part: PASS in $((SECONDS - t0)) s"
  else
    parts_failed=$((parts_failed + 1))
    note "part $part: FAIL in $((SECONDS - t0)) s"
  fi
done
note "gpu_suite: $((SECONDS - suite_t0)) s in all"
note "gpu_suite: $parts_passed passed, $parts_failed failed, $parts_skipped skipped"
echo "=== summary"
cat "$summary"
pack_logs
[ "$parts_failed" -eq 0 ]
