# Session 11, call 3: call 2's last step again with a long enough timeout. Call 2 gave the forked
# multiprocess tests (4 ranks sharing the GPU) GTEST_TIMEOUT=150, but a full run takes about
# 160 s (session 7): they were killed in the 8th of 10 tests, with 7/7 passed before.
# Expect 10/10 in about 160 s.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s11c3; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=4 GTEST_TIMEOUT=300 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/suite4 \
  timeout 320 bash tests/gpu_suite.sh $S gtest > $L/suite4.log 2>&1
echo "shared-GPU multiprocess 4 ranks rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'PASS|FAIL|gpu_suite:' $L/suite4.log | cut -c1-200 | tail -4
grep -E '^\[ +(OK|FAILED) +\]' $L/suite4/gtest-test_gpu_multiprocess.log | cut -c1-120
(cd $L && tar czf $OUT/call.tgz .)
