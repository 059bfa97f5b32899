# Session 18, call 2: main at df5ca4e (sm_90 Release): NCCL_P2P_DISABLE=1 / NCCL_P2P_LEVEL=LOC
# keep communicators on NCCL. 2 ranks sharing the GPU.
#  A. Preloaded: test_gpu_errors (the two new Errors/NcclP2pOff cases among them; expect 7 pass)
#     and test_gpu_multiprocess (the set-up's capable path unchanged; expect 10 pass).
#  B. Tuner activation (NCCL_TUNER_PLUGIN alone): tests/tuner/test_gpu_errors (expect 7 pass).
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s18c2; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
G="$S/tests/test_gpu_errors $S/tests/test_gpu_multiprocess"
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/A timeout 260 bash tests/gpu_suite.sh $S gtest > $L/A.log 2>&1
echo "A preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/A.log | sort -u | cut -c1-170
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 TUNER_GTESTS="$S/tests/tuner/test_gpu_errors" TUNER_GTESTS_ONLY=1 OUT=$L/B \
  timeout 200 bash tests/gpu_suite.sh $S tuner > $L/B.log 2>&1
echo "B tuner gtest: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |gpu_suite:|tuner gtest' $L/B.log | cut -c1-200 | tail -8
grep -h "NcclP2pOff\|NCCL_P2P" $L/A/*.log $L/B/*.log 2>/dev/null | sort | uniq -c | head -12
rm -rf $L/A/results $L/B/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
