#!/usr/bin/env bash
# Evidence run for issue 10 (branch old58, NOT for main): the two GPU tests of defects 5 and 8
# against today's code (ce0b5a4) with exactly that defect's fix switched off, then against the
# same build with no switch (control). Run from the repository root on the GPU machine:
#   source .device/device-env.sh; bash .device/old58.sh /tmp/old58-logs
# .device/stage-old58/old58.tar.xz holds d5/, d8/, head/, each {lib/, tests/} as
# tests/stage_for_device.sh lays them out (tests' RUNPATH $ORIGIN/../lib -> libnccl-lamport.so).
# Launch as tests/gpu_suite.sh part gtest does in shared-GPU mode: no LD_PRELOAD (the test
# executables link libnccl-lamport.so ahead of libnccl), the NCCL under test (PyTorch's, from
# device-env.sh) first on LD_LIBRARY_PATH, both forked ranks on GPU 0.
# Prints one line per run: "<variant> <test>: OK/FAILED/SKIPPED (<ms>) rc=<rc>", then its failure lines.
# Expected: d5 Faults.NcclErrorAnswersTheNextSmallCall FAILED, d8 Errors.TwoCapturesOnOneCommStayValid
# FAILED, both PASSED under head.
set -u
LOGS=${1:?usage: bash .device/old58.sh LOG_DIR}
LIMIT=${OLD58_TIMEOUT:-120}  # per run; the tests' own limits: faults 120 s (launcher), errors 180 s
mkdir -p "$LOGS"
STAGE=$(mktemp -d /tmp/stage-old58.XXXXXX)
tar -C "$STAGE" -xJf .device/stage-old58/old58.tar.xz || { echo "old58: cannot unpack .device/stage-old58/old58.tar.xz"; exit 3; }

export NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_NVLS_ENABLE=0
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
export NCCL_LAMPORT_REQUIRE_NVLINK=${NCCL_LAMPORT_REQUIRE_NVLINK:-0}
[ -n "${NCCL_PKG_DIR:-}" ] || echo "old58: NCCL_PKG_DIR unset: source .device/device-env.sh first (the NCCL under test)"
export LD_LIBRARY_PATH="${NCCL_PKG_DIR:+$NCCL_PKG_DIR/lib:}${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64"

# run VARIANT TEST FILTER [VAR=VALUE...]
run() {
  local variant=$1 test=$2 filter=$3 log="$LOGS/$1-$2.log"
  shift 3
  # timeout signals its whole process group, so forked ranks of a test that hangs go too.
  env "$@" timeout -k 5 "$LIMIT" "$STAGE/$variant/tests/$test" --gtest_filter="$filter" >"$log" 2>&1
  local rc=$?
  local verdict
  verdict=$(grep -E "^\[ +(OK|FAILED|SKIPPED) +\] $filter \(" "$log" | sed -E 's/^\[ +([A-Z]+) +\].*\((.*)\)$/\1 (\2)/' | head -1)
  echo "$variant $filter: ${verdict:-NO VERDICT} rc=$rc$([ $rc -eq 124 ] && echo " (timed out after $LIMIT s)")"
  # What each test says when it fails (first lines only).
  grep -E '^fault |survivor:|captures:|rank [0-9]: |cannot be ordered|kernel launch failed' "$log" | head -6 | sed 's/^/    /'
}

run d5 test_gpu_faults Faults.NcclErrorAnswersTheNextSmallCall
# COLL INFO: our once-per-comm line says why two streams' calls were (not) ordered.
run d8 test_gpu_errors Errors.TwoCapturesOnOneCommStayValid NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL
run head test_gpu_faults Faults.NcclErrorAnswersTheNextSmallCall
run head test_gpu_errors Errors.TwoCapturesOnOneCommStayValid NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL
rm -rf "$STAGE"
