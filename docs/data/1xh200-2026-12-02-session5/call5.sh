# Session 5, device call 5 (issue 11): the forked multiprocess suite on the final tree in
# shared-GPU mode: all of it at 2 ranks (with the new 1-6 MB test, which reaches the stash kernel),
# then at 4 and 8 ranks the new test, routing and special values.
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/s5c5; rm -rf $L; mkdir -p $L
T0=$(date +%s); left() { echo $(( 460 - ($(date +%s) - T0) )); }
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=170 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp2 \
  step timeout 180 bash tests/gpu_suite.sh $S gtest > $L/suite-mp2.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp2.log | cut -c1-300
grep -E '^\[ *(OK|FAILED|SKIPPED) ' $L/mp2/gtest-test_gpu_multiprocess.log | cut -c1-200
for n in 4 8; do
  T=$(( $(left) / (n == 4 ? 3 : 1) - 10 ))
  GTEST_FILTER='MultiProcess.LargeMessages*:MultiProcess.CommInfoAndRouting:MultiProcess.SpecialValues' \
  NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=$n GTEST_TIMEOUT=$(( T - 5 )) GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp$n \
    step timeout $T bash tests/gpu_suite.sh $S gtest > $L/suite-mp$n.log 2>&1
  grep -E '^gtest|gpu_suite:' $L/suite-mp$n.log | cut -c1-300
  grep -E '^\[ *(OK|FAILED|SKIPPED) ' $L/mp$n/gtest-test_gpu_multiprocess.log | cut -c1-200
done
(cd $L && tar czf $OUT/call.tgz .)
