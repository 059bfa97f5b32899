# Session 17, call 5: the forked multiprocess tests with 4 ranks sharing the GPU, on the stage of
# calls 3 and 4 (352f5df; main since then changed documents only). The last 4-rank run was
# session 11's, the last 8-rank run session 13's; the plugin's dispatch, set-up and resolution
# code changed in sessions 14 to 17. Expect 10/10 in about 170 s.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s17c5; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=4 GTEST_TIMEOUT=330 \
  GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/A timeout 350 bash tests/gpu_suite.sh $S gtest > $L/A.log 2>&1
echo "A 4 ranks multiprocess: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/A.log | sort -u | cut -c1-170
grep -hE '^\[       OK \]' $L/A/gtest-test_gpu_multiprocess.log 2>/dev/null | cut -c1-120
rm -rf $L/A/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz .)
