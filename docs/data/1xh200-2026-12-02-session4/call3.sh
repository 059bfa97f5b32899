# Session 4, device call 3 (issue 11): one vector per data thread shipped (K = 1): kernel tests,
# the forked multiprocess suite at 2 ranks (shared GPU), loopback 2/4/8 (graph).
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/o3; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 60 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -2 $L/kernel.log
step timeout 50 $S/tests/test_gpu_twoshot > $L/twoshot.log 2>&1; tail -2 $L/twoshot.log
for n in 2 4 8; do
  step timeout 100 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
done
for n in 2 4 8; do awk -F, 'NR>1 && ($1==8 || $1==2048 || $1==8192 || $1==32768 || $1==131072 || $1==524288 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3 ~ /fast-k/ || $3=="fast-share4-early" || $3=="twoshot") {printf "%d %s %s %s %s\n", '$n', $1, $3, $4, $8}' $L/lb$n.csv; done
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=240 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp step timeout 280 bash tests/gpu_suite.sh $S gtest > $L/suite-mp.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp.log | cut -c1-300
(cd $L && tar czf $OUT/call.tgz .)
