#!/usr/bin/env bash
# Host-code sanitizers on the CPU tests (issue 10, evidence): a build with
# NCCL_LAMPORT_SANITIZE=address,undefined runs every CPU test but those that load our object into
# an uninstrumented interpreter (ctypes, Python) or inspect the release binaries; a build with
# NCCL_LAMPORT_SANITIZE=thread runs the registry / set-up / tear-down scenarios (stand-in NCCL,
# several threads): shim_lifecycle.*, and shim_setup_waits' SetupWaits.*, SetupRounds.*,
# SetupStops.*, TunerBind.*, SetupOverExchange.*. Any report fails the run (halt_on_error).
# Sanitizer builds load NCCL without RTLD_DEEPBIND (the runtimes refuse it: real_nccl.cc).
# Usage: tests/reliability/sanitize.sh [asan|tsan|all] [BUILD_PREFIX (default build-)]
# ASAN_TARGETS / ASAN_TESTS (a ctest -R regex): a subset for the ASan build, where time is short.
# Needs no GPU. About 15 min per build on 2 cores (kernels are compiled too: nvcc, not instrumented).
set -euo pipefail
cd "$(dirname "$0")/../.."
which="${1:-all}"
prefix="${2:-build-}"
jobs="${JOBS:-2}"

configure_and_build() {  # dir sanitizers [targets]
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DNCCL_LAMPORT_SANITIZE="$2" ${CMAKE_EXTRA:-} >/dev/null
  # By default every target but the GPU tests and the benchmark (nothing here runs them).
  local targets="${3:-}"
  [ -n "$targets" ] ||
    targets=$(cmake --build "$1" --target help | sed -n 's/^\.\.\. \([A-Za-z0-9_.-]*\).*/\1/p' |
              grep -vE '^(all|clean|depend|edit_cache|rebuild_cache|install|install/.*|list_install_components|test|test_gpu_.*|nccl-lamport-bench)$' |
              grep -vE '\.(o|i|s)$')
  # shellcheck disable=SC2086
  cmake --build "$1" -j "$jobs" --target $targets
}

# ctest with up to 3 tries per test: the scenarios' timings (tens of ms) are tight for a 5-15x
# slower instrumented build on a busy machine. A sanitizer report is never retried away: it fails
# the test (halt_on_error) and the run fails if any output has one (pattern $2).
run_ctest() {  # dir pattern ctest-args...
  local dir="$1" pattern="$2" log
  shift 2
  log=$(mktemp "$dir/sanitize-ctest-XXXX.log")
  ctest --test-dir "$dir" --repeat until-pass:3 --output-on-failure "$@" >"$log" 2>&1
  local rc=$?
  grep -E "tests passed|Failed|Not Run" "$log" | tail -12
  if grep -qE "$pattern" "$log"; then
    echo "sanitizer reports in $log:"
    grep -E -A12 "$pattern" "$log" | head -60
    return 1
  fi
  return $rc
}

slow_ready='shim_lifecycle\.(destroy-in-progress|allreduce-in-progress|abort-one-of-batch)'
# Under ASan every dlopen is made by the runtime's interceptor, so the loader takes libasan.so for
# the caller. These tests check what depends on the caller: a program's DT_RUNPATH applies to its
# own dlopen by name only (DT_RPATH still applies: those tests run), and the audit module tells the
# plugin's own dlopen("libnccl.so.2") by its requester (path_then_name_audit greps for that line).
asan_dlopen_caller='shim_runpath\.dlopen_runpath|shim_dlopen\.path_then_name_audit'
# shim_tuner_activation.twocopies loads two copies of one stand-in NCCL into one process, as a
# process with two NCCLs has: ASan reports their identical exported globals as an ODR violation,
# which is the situation under test. It runs on its own, with that one check off.
two_copies='shim_tuner_activation\.twocopies'
# shim_lifecycle.call-races-exchange-start parks the main thread in a signal handler while it
# waits for a mutex; TSan holds an asynchronous signal back until the thread has left its
# pthread_mutex_lock interceptor, which cannot happen there (tried: "could not be parked").
tsan_unsuitable='shim_lifecycle\.call-races-exchange-start'
status=0
if [ "$which" = asan ] || [ "$which" = all ]; then
  dir="${prefix}asan"
  configure_and_build "$dir" "address,undefined" "${ASAN_TARGETS:-}"
  # verify_asan_link_order=0: the tests preload our instrumented object before the executable's
  # own ASan runtime. protect_shadow_gap=0: what the CUDA runtime needs under ASan.
  ASAN_OPTIONS="verify_asan_link_order=0:protect_shadow_gap=0:detect_leaks=1:halt_on_error=1" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    run_ctest "$dir" "AddressSanitizer|runtime error|LeakSanitizer" -L cpu ${ASAN_TESTS:+-R "$ASAN_TESTS"} \
      -E "ctypes|shared_object_symbols|runpath_rules|shared_object|kernel_cpu|$asan_dlopen_caller|$slow_ready|$two_copies" || status=1
  ASAN_OPTIONS="verify_asan_link_order=0:protect_shadow_gap=0:detect_leaks=1:halt_on_error=1:detect_odr_violation=0" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    run_ctest "$dir" "AddressSanitizer|runtime error|LeakSanitizer" -R "$two_copies" || status=1
  FAKE_READY_MS=1000 ASAN_OPTIONS="verify_asan_link_order=0:protect_shadow_gap=0:detect_leaks=1:halt_on_error=1" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    run_ctest "$dir" "AddressSanitizer|runtime error|LeakSanitizer" -R "$slow_ready" || status=1
fi
if [ "$which" = tsan ] || [ "$which" = all ]; then
  dir="${prefix}tsan"
  configure_and_build "$dir" "thread" "nccl-lamport shim_lifecycle_scenarios shim_lifecycle_concurrency shim_lifecycle_faults shim_setup_waits"
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
    run_ctest "$dir" "ThreadSanitizer" -R 'shim_lifecycle|SetupWaits|SetupRounds|SetupStops|TunerBind|SetupOverExchange' \
      -E "$slow_ready|$tsan_unsuitable" || status=1
  # These call before the stand-in NCCL's communicator is ready (30 ms by default): more
  # than an instrumented init takes here, so they get 1 s.
  FAKE_READY_MS=1000 TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
    run_ctest "$dir" "ThreadSanitizer" -R "$slow_ready" || status=1
fi
exit $status
