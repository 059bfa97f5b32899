# Session 4, device call 1: the floor probe (issue 11), kernel tests, loopback 2 ranks with chains of
# 50 and 500 calls, then the issue-9 re-run of the fixed comm_kinds / faults tests (tuner + linked).
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/o1; rm -rf $L; mkdir -p $L
T0=$(date +%s); left() { echo $(( 550 - ($(date +%s) - T0) )); }
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
step timeout 60 .device/probe/floor > $L/probe.log 2>&1; cat $L/probe.log
step timeout 60 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -3 $L/kernel.log
step timeout 50 $S/tests/test_gpu_twoshot > $L/twoshot.log 2>&1; tail -3 $L/twoshot.log
step timeout 60 $S/bench/nccl-lamport-bench --loopback 2 --max-bytes 2M --mode graph --csv $L/lb2.csv > $L/lb2.log 2>&1
step timeout 90 $S/bench/nccl-lamport-bench --loopback 2 --max-bytes 2M --mode graph --graph-calls 500 --graph-replays 1 --csv $L/lb2-g500.csv > $L/lb2-g500.log 2>&1
grep -E "^ *(8|2K|8K|32K|128K|512K|1M|2M) " $L/lb2.log $L/lb2-g500.log | cut -c1-200 | head -40
export NCCL_LAMPORT_TEST_SHARED_GPU=1
T=$S/tests/tuner
GTEST_TIMEOUT=150 GTEST_FILTER=-Lifecycle.CreateDestroyCycles:Lifecycle.AbortWithStuckPeerCycles TUNER_GTESTS_ONLY=1 \
  TUNER_GTESTS="$T/test_gpu_comm_kinds $T/test_gpu_faults" \
  OUT=$L/tuner step timeout 200 bash tests/gpu_suite.sh $S tuner > $L/suite-tuner.log 2>&1
grep -E 'gtest|^part|gpu_suite:' $L/suite-tuner.log | cut -c1-300
GTEST_TIMEOUT=150 GTESTS="$S/tests/test_gpu_comm_kinds $S/tests/test_gpu_faults" OUT=$L/linked \
  step timeout $(( $(left) - 10 )) bash tests/gpu_suite.sh $S gtest > $L/suite-linked.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-linked.log | cut -c1-300
(cd $L && tar czf $OUT/call.tgz .)
