# Device call 10: 1000 create/use/destroy cycles with NCCL_TUNER_PLUGIN alone (issue 9).
set -u
source .device/device-env.sh
L=/tmp/o10; rm -rf $L; mkdir -p $L
T0=$(date +%s)
TUNER_CYCLES=1000 TUNER_CYCLES_BUDGET_S=565 NCCL_LAMPORT_TEST_SHARED_GPU=1 OUT=$L/suite \
  timeout 585 bash tests/gpu_suite.sh .device/stage-lib tunercycles > $L/suite.log 2>&1
echo "rc=$? $(( $(date +%s)-T0 ))s" | tee $L/steps.txt
grep -E '^tuner|cycles|^part|gpu_suite:' $L/suite.log | tail -12 | cut -c1-300
(cd $L && tar czf $OUT/call.tgz .)
