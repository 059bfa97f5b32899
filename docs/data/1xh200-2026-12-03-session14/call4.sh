# Session 14, call 4: the build of fd5aa5a (the destroy line of a communicator never called under
# tuner activation names it by commId instead of "comm (nil)"; every destroy goes through that
# code), 2 ranks sharing the GPU: the tuner activation build's comm-kinds and multiprocess tests
# with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT. Expect 9 passed + 1 skipped and 10/10 as in call 3,
# destroy lines ("allreduce calls ran on Lamport kernels") and none naming "(nil)".
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s14c4; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 \
  TUNER_GTESTS="$S/tests/tuner/test_gpu_comm_kinds $S/tests/tuner/test_gpu_multiprocess" TUNER_GTESTS_ONLY=1 OUT=$L/B \
  timeout 190 bash tests/gpu_suite.sh $S tuner > $L/B.log 2>&1
echo "tuner activation: rc=$? $(( $(date +%s) - t0 ))s"
grep -hE '^\[ +(OK|FAILED|SKIPPED) +\]' $L/B/gtest-*.log | grep -c OK
grep -hE '^\[ +(FAILED|SKIPPED) +\]' $L/B/gtest-*.log | head -4
echo "destroy lines: $(grep -rh 'allreduce calls ran on Lamport kernels' $L | wc -l), naming (nil): $(grep -rh 'allreduce calls ran on Lamport kernels' $L | grep -c '(nil)'), never called: $(grep -rh 'never called' $L | wc -l)"
grep -rh 'allreduce calls ran on Lamport kernels' $L | sed 's/^.*Lamport: //' | sort | uniq -c | sort -rn | head -4 | cut -c1-200
(cd $L && tar czf $OUT/call.tgz .)
