# Device call 11: the forked gtest suite with NCCL_TUNER_PLUGIN alone (issue 9), the old-code
# evidence of issue 10 points 5 and 8 (branch old58, not main), then what the 8-rank shared-GPU
# multiprocess run of call 9 did not reach in its 150 s.
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/o11; rm -rf $L; mkdir -p $L
T0=$(date +%s); left() { echo $(( 545 - ($(date +%s) - T0) )); }
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
export NCCL_LAMPORT_TEST_SHARED_GPU=1
T=$S/tests/tuner
GTEST_TIMEOUT=150 GTEST_FILTER=-Lifecycle.CreateDestroyCycles:Lifecycle.AbortWithStuckPeerCycles TUNER_GTESTS_ONLY=1 \
  TUNER_GTESTS="$T/test_gpu_multiprocess $T/test_gpu_errors $T/test_gpu_faults $T/test_gpu_groups $T/test_gpu_comm_kinds $T/test_gpu_lifecycle" \
  OUT=$L/tuner step timeout 290 bash tests/gpu_suite.sh $S tuner > $L/suite-tuner.log 2>&1
grep -E 'gtest|^part|gpu_suite:' $L/suite-tuner.log | cut -c1-300
OLD58_TIMEOUT=60 step timeout $(( $(left) - 5 )) bash .device/old58.sh $L/old58 > $L/old58.log 2>&1
cat $L/old58.log | cut -c1-300
if [ $(left) -gt 40 ]; then
  NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=8 GTEST_TIMEOUT=$(( $(left) - 15 )) \
    GTEST_FILTER='MultiProcess.CudaGraph500Replays:MultiProcess.SplitCommunicatorAlternatingWithParent:*CountsLayoutsSumAvg*' \
    GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/suite8 step timeout $(( $(left) - 5 )) bash tests/gpu_suite.sh $S gtest > $L/suite8.log 2>&1
  grep -E '^gtest|gpu_suite:' $L/suite8.log | cut -c1-300
  grep -E '^\[ *(OK|FAILED) ' $L/suite8/gtest-test_gpu_multiprocess.log | cut -c1-200
fi
(cd $L && tar czf $OUT/call.tgz .)
