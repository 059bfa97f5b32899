# Session 5, device call 1 (issue 11): kernel tests of the tree with wide blocks from 128 KB and the
# register-capped A/B shapes, loopback 2/4/8 (graph), then the forked multiprocess suite at 8 ranks
# on one GPU (shared-GPU mode) with whatever time is left.
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/s5c1; rm -rf $L; mkdir -p $L
T0=$(date +%s); left() { echo $(( 575 - ($(date +%s) - T0) )); }
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
step timeout 60 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -2 $L/kernel.log
for n in 2 4 8; do
  step timeout 100 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
done
for n in 2 4 8; do awk -F, 'NR>1 && ($1==8 || $1==32768 || $1==131072 || $1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-t128" || $3=="fast-t256" || $3=="fast-cap5" || $3=="fast-cap7" || $3=="twoshot" || $3=="twoshot-t256") {printf "%d %s %s %s %s\n", '$n', $1, $3, $4, $8}' $L/lb$n.csv; done
grep -c ",OK$" $L/lb2.csv $L/lb4.csv $L/lb8.csv; grep -v ",OK$" $L/lb*.csv | grep -v bytes,count | head -3
grep -m3 -i "nccl version\|NCCL 2" $L/lb2.log
T=$(( $(left) - 15 ))
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=8 GTEST_TIMEOUT=$(( T - 5 )) GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp8 \
  step timeout $T bash tests/gpu_suite.sh $S gtest > $L/suite-mp8.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp8.log | cut -c1-300
grep -E '^\[ *(OK|FAILED|SKIPPED) ' $L/mp8/gtest-test_gpu_multiprocess.log | cut -c1-200
(cd $L && tar czf $OUT/call.tgz .)
