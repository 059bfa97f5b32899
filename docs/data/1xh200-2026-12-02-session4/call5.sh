# Session 4, device call 5 (issue 11): the single-pass kernel shipped (kAuto): kernel tests, the
# forked multiprocess suite at 2 ranks, loopback 2/4/8 (graph), compute-sanitizer (issue 10).
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/o5; rm -rf $L; mkdir -p $L
T0=$(date +%s); left() { echo $(( 560 - ($(date +%s) - T0) )); }
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 60 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -2 $L/kernel.log
step timeout 50 $S/tests/test_gpu_twoshot > $L/twoshot.log 2>&1; tail -2 $L/twoshot.log
for n in 2 4 8; do
  step timeout 100 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
done
for n in 2 4 8; do awk -F, 'NR>1 && ($1==8 || $1==2048 || $1==8192 || $1==32768 || $1==131072 || $1==524288 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-strided" || $3=="fast-share4-early") {printf "%d %s %s %s %s\n", '$n', $1, $3, $4, $8}' $L/lb$n.csv; done
grep -c ",OK$" $L/lb2.csv $L/lb4.csv $L/lb8.csv; grep -v ",OK$" $L/lb*.csv | grep -v bytes,count | head -3
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp step timeout 200 bash tests/gpu_suite.sh $S gtest > $L/suite-mp.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp.log | cut -c1-300
OUT=$L/sanitizer step timeout $(( $(left) - 10 )) bash tests/reliability/compute_sanitizer.sh $S > $L/sanitizer.log 2>&1
cat $L/sanitizer.log | cut -c1-300
(cd $L && tar czf $OUT/call.tgz .)
