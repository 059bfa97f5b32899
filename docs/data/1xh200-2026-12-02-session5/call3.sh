# Session 5, device call 3 (issue 11): the stash kernel shipped (kAuto takes it where the single
# pass does not fit and registers + stash hold the message): kernel tests, loopback 2/4/8 (graph),
# the forked multiprocess suite at 2 ranks (shared GPU), compute-sanitizer on the stash test.
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/s5c3; rm -rf $L; mkdir -p $L
T0=$(date +%s); left() { echo $(( 560 - ($(date +%s) - T0) )); }
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 150 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -2 $L/kernel.log; grep -E "^\[ *(FAILED|OK) .*Stash" $L/kernel.log
for n in 2 4 8; do
  step timeout 120 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
done
for n in 2 4 8; do awk -F, 'NR>1 && ($1==8 || $1==2048 || $1==8192 || $1==32768 || $1==131072 || $1==262144 || $1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-nostash" || $3=="fast-t128" || $3=="twoshot") {printf "%d %s %s %s %s\n", '$n', $1, $3, $4, $8}' $L/lb$n.csv; done
grep -c ",OK$" $L/lb2.csv $L/lb4.csv $L/lb8.csv; grep -v ",OK$" $L/lb*.csv | grep -v bytes,count | head -3
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp \
  step timeout 200 bash tests/gpu_suite.sh $S gtest > $L/suite-mp.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp.log | cut -c1-300
KERNEL_FILTER='GpuLamportOneShot.StashAndRegisterCapsStayCorrectOnStridedGrids:LamportLaunchValidation.*' MP_FILTER='MultiProcess.CommInfoAndRouting' \
  OUT=$L/sanitizer step timeout $(( $(left) - 10 )) bash tests/reliability/compute_sanitizer.sh $S > $L/sanitizer.log 2>&1
cut -c1-300 $L/sanitizer.log
(cd $L && tar czf $OUT/call.tgz .)
