# Session 11, call 2: repeats on the unchanged tree (code of 2c8777f, staged in session 10), to
# look for a result that moves between runs (a race) where one run would not show it:
# test_gpu_kernel (22 tests: every kernel variant, sizes, graphs, special values, opposite-order
# communicators, capped grids) ten times shuffled, test_gpu_twoshot five times shuffled, then the
# forked multiprocess tests with 4 ranks sharing the GPU. Expect 220/220, 60/60, 10/10.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s11c2; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
timeout 330 $S/tests/test_gpu_kernel --gtest_repeat=10 --gtest_shuffle > $L/test_gpu_kernel.log 2>&1; echo "test_gpu_kernel x10 rc=$? $(( $(date +%s) - t0 ))s"
grep -cE '^\[       OK \]' $L/test_gpu_kernel.log; grep -E '^\[  FAILED  \]|Shuffle' $L/test_gpu_kernel.log | sort | uniq -c | head -12
t0=$(date +%s)
timeout 90 $S/tests/test_gpu_twoshot --gtest_repeat=5 --gtest_shuffle > $L/test_gpu_twoshot.log 2>&1; echo "test_gpu_twoshot x5 rc=$? $(( $(date +%s) - t0 ))s"
grep -cE '^\[       OK \]' $L/test_gpu_twoshot.log; grep -E '^\[  FAILED  \]' $L/test_gpu_twoshot.log | head -5
t0=$(date +%s)
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=4 GTEST_TIMEOUT=150 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/suite4 \
  timeout 170 bash tests/gpu_suite.sh $S gtest > $L/suite4.log 2>&1
echo "shared-GPU multiprocess 4 ranks rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'PASS|FAIL|passed|gpu_suite:' $L/suite4.log | cut -c1-200 | tail -8
(cd $L && tar czf $OUT/call.tgz .)
