# Session 17, call 2: main at b88b521 (same stage as call 1). 2 ranks sharing the GPU.
#  D. gpu_suite part pynccl (pynccl by path and under LD_AUDIT, bit-identical to stock where
#     required) and part tuner (tuner activation: 14 entry points hooked, torch/eager/lazy/
#     non-blocking clients, pynccl, multiprocess 10/10). Expect PASS in both; the tuner part took
#     about 250 s in session 16.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s17c2; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 TUNER_GTESTS="$S/tests/tuner/test_gpu_multiprocess" OUT=$L/D \
  timeout 560 bash tests/gpu_suite.sh $S pynccl,tuner > $L/D.log 2>&1
echo "D suite pynccl,tuner: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |gpu_suite:|hooked|bit-identical' $L/D.log | cut -c1-200 | tail -12
rm -rf $L/D/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
