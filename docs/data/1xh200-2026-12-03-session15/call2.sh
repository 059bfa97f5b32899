# Session 15, call 2: the dispatch fixes of this session (grouped calls launch at the outermost
# ncclGroupEnd, simulated groups run nothing, refused revoke, finalize before the first call under
# tuner activation, NCCL's pointer checks, cudaStreamPerThread), 2 ranks sharing the GPU.
#  A. The new tests with 5c4ebf1's object (before the fixes) and with the new one:
#     GroupLaunch.* (expect old: both fail; new: pass), Errors.InvalidArgumentsGiveNcclsResultCode
#     (its new pageable-host cases: old fails, new passes), and under tuner activation
#     Lifecycle.FinalizeThenDestroy (its new never-called communicator E: old fails, new passes).
#  B. The new object, preloaded build: groups (8), errors (5), comm-kinds (9 + 1 skipped: needs 2
#     GPUs), multiprocess (10), lifecycle FinalizeThenDestroy.
#  C. The same in the tuner activation build (NCCL_TUNER_PLUGIN alone).
# carry: .device/stage.tar.xz .device/device-env.sh .device/old-lib-5c4ebf1.so.xz
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s15c2; rm -rf $L; mkdir -p $L
O=/tmp/s15c2-old; rm -rf $O; cp -r $S $O; xz -dc .device/old-lib-5c4ebf1.so.xz > $O/lib/libnccl-lamport.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so $O/lib/libnccl-lamport.so
t0=$(date +%s)
F='GroupLaunch.*:Errors.InvalidArgumentsGiveNcclsResultCode'
for v in old new; do
  D=$S; [ $v = old ] && D=$O
  GTEST_FILTER="$F" NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=100 \
    GTESTS="$D/tests/test_gpu_groups $D/tests/test_gpu_errors" OUT=$L/A-$v timeout 220 bash tests/gpu_suite.sh $D gtest > $L/A-$v.log 2>&1
  echo "A preloaded ($v object): rc=$? $(( $(date +%s) - t0 ))s"
  grep -hE '^\[ +(OK|FAILED) +\]' $L/A-$v/gtest-*.log | sort | uniq | cut -c1-160
  grep -hE 'rank [0-9]+: ' $L/A-$v/gtest-*.log | sort | uniq | cut -c1-240 | head -6
  GTEST_FILTER=Lifecycle.FinalizeThenDestroy NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=100 \
    TUNER_GTESTS="$D/tests/tuner/test_gpu_lifecycle" TUNER_GTESTS_ONLY=1 OUT=$L/A-tuner-$v \
    timeout 150 bash tests/gpu_suite.sh $D tuner > $L/A-tuner-$v.log 2>&1
  echo "A tuner FinalizeThenDestroy ($v object): rc=$? $(( $(date +%s) - t0 ))s"
  grep -hE '^\[ +(OK|FAILED) +\]|finalized before' $L/A-tuner-$v/*.log | sort | uniq | cut -c1-200 | head -4
done
G="$S/tests/test_gpu_groups $S/tests/test_gpu_errors $S/tests/test_gpu_comm_kinds $S/tests/test_gpu_multiprocess"
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/B timeout 400 bash tests/gpu_suite.sh $S gtest > $L/B.log 2>&1
echo "B preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/B.log | cut -c1-200
T="$S/tests/tuner/test_gpu_groups $S/tests/tuner/test_gpu_errors $S/tests/tuner/test_gpu_comm_kinds $S/tests/tuner/test_gpu_multiprocess"
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 TUNER_GTESTS="$T" TUNER_GTESTS_ONLY=1 OUT=$L/C \
  timeout 400 bash tests/gpu_suite.sh $S tuner > $L/C.log 2>&1
echo "C tuner activation: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^tuner gtest|gpu_suite:' $L/C.log | cut -c1-200 | tail -6
(cd $L && tar czf $OUT/call.tgz .)
