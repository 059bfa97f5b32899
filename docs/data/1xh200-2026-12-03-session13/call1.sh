# Session 13, call 1: the forked multiprocess tests with 8 ranks sharing the GPU, on main's final
# code. The last 8-rank run was session 7's (f8f2383); since then 2c8777f moved the shared-GPU
# switch into the knob table, and that code has run at 2 and 4 ranks only. Session 7 took 449 s
# for 10/10. Expect 10/10 in about 450 s.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s13c1; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=8 GTEST_TIMEOUT=540 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/suite8 \
  timeout 560 bash tests/gpu_suite.sh $S gtest > $L/suite8.log 2>&1
echo "shared-GPU multiprocess 8 ranks rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'PASS|FAIL|gpu_suite:' $L/suite8.log | cut -c1-200 | tail -4
grep -E '^\[ +(OK|FAILED) +\]' $L/suite8/gtest-test_gpu_multiprocess.log | cut -c1-120
(cd $L && tar czf $OUT/call.tgz .)
