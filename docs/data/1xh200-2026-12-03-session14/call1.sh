# Result: the 560 s limit stopped it inside Lifecycle.CreateDestroyCycles (925 of 1000 cycles done,
# no failure); see docs/gpu-runs-1xh200-2026-12-03.md, fourteenth session, and call2.sh.
# Session 14, call 1 (session 13's call 5, which got no machine): the tear-down change of 0517d39 and 0000588 (finalize and destroy release
# nothing of ours unless NCCL takes them; a null communicator goes straight to NCCL) on the GPU, with 2 ranks
# sharing it: the forked lifecycle and comm-kinds tests (split, shrink, NOCOLOR, non-blocking
# destroy and abort before ready, revoke), where every communicator ends in ncclCommDestroy or
# ncclCommAbort; then the other forked GPU tests (errors, faults, groups, threads, single-process,
# multiprocess), which all end their communicators the same way. Expect every test passed or skipped
# as before (comm_kinds has one test that needs 2 GPUs).
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s14c1; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
G=""; for t in lifecycle comm_kinds errors faults groups threads singleprocess multiprocess; do G="$G $S/tests/test_gpu_$t"; done
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=200 GTESTS="$G" OUT=$L/suite \
  timeout 560 bash tests/gpu_suite.sh $S gtest > $L/suite.log 2>&1
echo "shared-GPU forked tests, 2 ranks: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest|gpu_suite:' $L/suite.log | cut -c1-200 | tail -12
grep -hE '^\[ +(OK|FAILED|SKIPPED) +\]' $L/suite/gtest-*.log | cut -c1-110
(cd $L && tar czf $OUT/call.tgz .)
