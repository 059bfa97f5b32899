# Session 4, device call 6 (issue 11): the forked multiprocess suite at 4 ranks on one GPU with the
# shipped kernel (K = 1, single pass where the grid holds the message).
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/o6; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=4 GTEST_TIMEOUT=155 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp4 \
  step timeout 165 bash tests/gpu_suite.sh $S gtest > $L/suite-mp4.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp4.log | cut -c1-300
grep -E '^\[ *(OK|FAILED) ' $L/mp4/gtest-test_gpu_multiprocess.log | cut -c1-200
(cd $L && tar czf $OUT/call.tgz .)
