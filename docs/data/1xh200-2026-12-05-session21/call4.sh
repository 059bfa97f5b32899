# Session 21, call 4: d587bfe (the iterator fix in plugin/comm/pending_children.cc after call 1):
# preloaded comm_kinds (non-blocking splits), lifecycle (20 abort cycles), multiprocess; tuner comm_kinds.
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=$OUT/c4; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
G=""; for t in comm_kinds lifecycle multiprocess; do G="$G $S/tests/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/A timeout 200 bash tests/gpu_suite.sh $S gtest > $L/A.log 2>&1
echo "A preloaded: rc=$? $(( $(date +%s) - t0 ))s"; grep -E '^gtest' $L/A.log | sort -u | cut -c1-220
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 TUNER_GTESTS="$S/tests/tuner/test_gpu_comm_kinds" TUNER_GTESTS_ONLY=1 \
  OUT=$L/B timeout 120 bash tests/gpu_suite.sh $S tuner > $L/B.log 2>&1
echo "B tuner: rc=$? $(( $(date +%s) - t0 ))s"; grep -E 'tuner gtest' $L/B.log | sort -u | cut -c1-220
rm -rf $L/A/results $L/B/results $L/A/logs.tgz $L/B/logs.tgz 2>/dev/null
