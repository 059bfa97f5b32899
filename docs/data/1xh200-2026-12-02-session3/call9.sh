# Device call 9: df45bc9 on the GPU (kernel + two-shot tests with the corrected *-early variants),
# loopback 2/4/8 with the small-block variants, forked multiprocess/groups suite at 4 and 8 ranks
# in shared-GPU mode (time-sliced processes on GPU 0).
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/o9; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/gpu.txt
step timeout 60 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1
grep -E '^\[  (FAILED|PASSED) |tests ran' $L/kernel.log | head -5
step timeout 50 $S/tests/test_gpu_twoshot > $L/twoshot.log 2>&1
grep -E '^\[  (FAILED|PASSED) |tests ran' $L/twoshot.log | head -5
for n in 2 4 8; do step timeout 60 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --csv $L/lb$n.csv --json $L/lb$n.json > $L/lb$n.log 2>&1; done
grep -E "^ +(8|2K|8K|32K|128K|512K|1M|2M) +graph" $L/lb2.log | head -12
export NCCL_LAMPORT_TEST_SHARED_GPU=1
for n in 4 8; do
  G="$S/tests/test_gpu_multiprocess"; [ $n = 4 ] && G="$G $S/tests/test_gpu_groups"
  NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=$n GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/suite$n \
    step timeout 320 bash tests/gpu_suite.sh $S gtest > $L/suite$n.log 2>&1
  grep -E '^gtest|gpu_suite:' $L/suite$n.log | cut -c1-300
done
(cd $L && tar czf $OUT/call.tgz .)
