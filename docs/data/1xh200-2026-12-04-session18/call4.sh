# Session 18, call 4: main at the CTA-cap follow-up (sm_90 Release): NVTX range for calls we take;
# the CTA cap follows NCCL_MAX_NCHANNELS and the 64-channel limit, pending and stopped set-ups
# keep it, notes go at destroy/abort; the CommKinds test fix of call 3. 2 ranks sharing the GPU.
#  A. Preloaded forked suite: comm_kinds (expect 11 pass, 1 skip), errors (9), multiprocess (10),
#     groups (8), lifecycle (20 abort cycles, without the 1000 create/destroy cycles; 4).
#  B. Tuner activation: tests/tuner/ comm_kinds, errors, lifecycle (expect as above).
#  C. pynccl part (expect PASS, bit-identical); whether nsys exists here.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s18c4; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
G=""; for t in comm_kinds errors multiprocess groups lifecycle; do G="$G $S/tests/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/A timeout 300 bash tests/gpu_suite.sh $S gtest > $L/A.log 2>&1
echo "A preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/A.log | sort -u | cut -c1-170
T=""; for t in comm_kinds errors lifecycle; do T="$T $S/tests/tuner/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 TUNER_GTESTS="$T" TUNER_GTESTS_ONLY=1 OUT=$L/B timeout 200 bash tests/gpu_suite.sh $S tuner > $L/B.log 2>&1
echo "B tuner gtest: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'tuner gtest' $L/B.log | sort -u | cut -c1-200
NCCL_LAMPORT_TEST_SHARED_GPU=1 OUT=$L/C timeout 90 bash tests/gpu_suite.sh $S pynccl > $L/C.log 2>&1
echo "C pynccl: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |compare' $L/C.log | cut -c1-200 | sort -u
echo "nsys: $(command -v nsys || echo none)"
grep -h -E "^\[ +(OK|FAILED) +\] .*(Cta)" $L/A/*.log $L/B/*.log 2>/dev/null | sort | uniq -c
rm -rf $L/A/results $L/B/results $L/C/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
