# Session 14, call 3: the two fixes of this session on the build of 972cd46, 2 ranks sharing the GPU.
#  A. CommKinds.SplitInsideAGroup (a blocking split inside ncclGroupStart/End) with the object of
#     0000588 (before the fix of e9a973e; expect a failure: the child is not accelerated) and with
#     the new one (expect a pass).
#  B. The tuner activation build (NCCL_TUNER_PLUGIN alone), after 972cd46 changed how the first
#     init decides and when the hooks count as installed: comm-kinds (SplitInsideAGroup included)
#     and multiprocess. Expect 9 passed + 1 skipped (needs 2 GPUs), and 10/10.
#  C. Preloaded: the threads and single-process tests (not run in calls 1 and 2), then
#     Lifecycle.CreateDestroyCycles with 250 cycles (NCCL_LAMPORT_TEST_CYCLES; call 1's limit cut the
#     1000-cycle run off before its verdict on device memory, RSS, fds and threads).
# carry: .device/stage.tar.xz .device/device-env.sh .device/old-lib-0000588.so.xz
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s14c3; rm -rf $L; mkdir -p $L
O=/tmp/s14c3-old; rm -rf $O; cp -r $S $O; xz -dc .device/old-lib-0000588.so.xz > $O/lib/libnccl-lamport.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so $O/lib/libnccl-lamport.so
t0=$(date +%s)
for v in old new; do
  D=$S; [ $v = old ] && D=$O
  GTEST_FILTER=CommKinds.SplitInsideAGroup NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=60 \
    GTESTS="$D/tests/test_gpu_comm_kinds" OUT=$L/A-$v timeout 80 bash tests/gpu_suite.sh $D gtest > $L/A-$v.log 2>&1
  echo "A ($v object): rc=$? $(( $(date +%s) - t0 ))s"
  grep -hE '^\[ +(OK|FAILED) +\]|not accelerated|FAIL' $L/A-$v/gtest-*.log | cut -c1-220 | head -4
done
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 TUNER_GTESTS="$S/tests/tuner/test_gpu_comm_kinds $S/tests/tuner/test_gpu_multiprocess" \
  TUNER_GTESTS_ONLY=1 OUT=$L/B timeout 200 bash tests/gpu_suite.sh $S tuner > $L/B.log 2>&1
echo "B (tuner activation): rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest|gpu_suite:' $L/B.log | cut -c1-200 | tail -4
G="$S/tests/test_gpu_threads $S/tests/test_gpu_singleprocess"
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=60 GTESTS="$G" OUT=$L/C1 timeout 90 bash tests/gpu_suite.sh $S gtest > $L/C1.log 2>&1
echo "C threads, single-process: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/C1.log | cut -c1-200
GTEST_FILTER=Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_CYCLES=250 NCCL_LAMPORT_TEST_NCCL_ALONE_CYCLES=20 \
  NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=200 GTESTS="$S/tests/test_gpu_lifecycle" OUT=$L/C2 \
  timeout 210 bash tests/gpu_suite.sh $S gtest > $L/C2.log 2>&1
echo "C 250 create/use/destroy cycles: rc=$? $(( $(date +%s) - t0 ))s"
grep -hE 'create/use/destroy cycles in|NCCL alone|^\[ +(OK|FAILED) +\]|leak|not given back|grew' $L/C2/gtest-*.log | cut -c1-260 | head -8
(cd $L && tar czf $OUT/call.tgz .)
