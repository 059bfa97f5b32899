# Session 18, call 5: main at the final code commit of the session (sm_90 Release): the block
# limit combined at the tuner binding, NCCL's parameter readings. 2 ranks sharing the GPU.
#  A. Part tuner in full (NCCL_TUNER_PLUGIN alone: entry bytes, torch allreduce check with the
#     hooks, clients, pynccl by libnccl.so.2), with tests/tuner/test_gpu_comm_kinds as its
#     gtest (the CTA-cap tests bind through the changed code). Expect PASS.
#  B. pynccl part (expect PASS, bit-identical).
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s18c5; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 TUNER_GTESTS="$S/tests/tuner/test_gpu_comm_kinds" OUT=$L/A \
  timeout 330 bash tests/gpu_suite.sh $S tuner > $L/A.log 2>&1
echo "A tuner part: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |gpu_suite:|hooked|tuner gtest|Lamport one-shot ON' $L/A.log | cut -c1-200 | sort -u | tail -14
NCCL_LAMPORT_TEST_SHARED_GPU=1 OUT=$L/B timeout 80 bash tests/gpu_suite.sh $S pynccl > $L/B.log 2>&1
echo "B pynccl: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |compare' $L/B.log | cut -c1-200 | sort -u
rm -rf $L/A/results $L/B/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
