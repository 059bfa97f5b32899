# Session 17, call 3: main after the displaced-tuner chaining for NCCL 2.21-2.27 (tuner/) and the
# documentation fixes; device code unchanged since b88b521. 2 ranks sharing the GPU.
#  A. Preloaded forked suite: multiprocess, comm_kinds, errors (expect 10/10, 9 + 1 skipped, 5/5).
#  B. gpu_suite part tuner (only NCCL_TUNER_PLUGIN set; NCCL 2.28.9 calls the tuner through v5,
#     whose displaced-tuner search the change touches). Expect PASS, 14 of 14 entries hooked.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s17c3; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
G=""; for t in multiprocess comm_kinds errors; do G="$G $S/tests/test_gpu_$t"; done
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/A timeout 200 bash tests/gpu_suite.sh $S gtest > $L/A.log 2>&1
echo "A preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/A.log | sort -u | cut -c1-170
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 TUNER_GTESTS="$S/tests/tuner/test_gpu_multiprocess" OUT=$L/B \
  timeout 360 bash tests/gpu_suite.sh $S tuner > $L/B.log 2>&1
echo "B suite tuner: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |gpu_suite:|hooked|keeps answering' $L/B.log | cut -c1-200 | tail -10
rm -rf $L/A/results $L/B/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
