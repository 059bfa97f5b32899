# Session 17, call 6 (run as one command line from the repository root, the machine still warm
# after call 5): the forked multiprocess tests with 8 ranks sharing the GPU, without the two
# longest tests (CudaGraph500Replays, BackToBack3000: about 235 s of session 13's 422 s), which
# the device time left could not hold. Same stage as calls 3 to 5.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u; source .device/device-env.sh; S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s17c6; rm -rf $L; mkdir -p $L; t0=$(date +%s)
GTEST_FILTER=-MultiProcess.CudaGraph500Replays:MultiProcess.BackToBack3000 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=8 GTEST_TIMEOUT=320 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/A \
  timeout 340 bash tests/gpu_suite.sh $S gtest > $L/A.log 2>&1
echo "A 8 ranks multiprocess (without the two longest tests): rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/A.log | sort -u | cut -c1-170
grep -hE '^\[       OK \]|FAILED' $L/A/gtest-test_gpu_multiprocess.log | cut -c1-120
rm -rf $L/A/results; (cd $L && tar czf $OUT/call.tgz .)
