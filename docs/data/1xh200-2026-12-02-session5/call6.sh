# Session 5, device call 6 (written, not run: no device time left). For the next session: the tree
# of 0ffaacc (kAuto without the stash; the opposite-order test of different kernels, including
# C on the opt-in stash kernel; the large-message test's crossover check):
# kernel tests, loopback 2/4 from 256 KB to 1 MB (x1.25), two standard 2-rank runs,
# 4 and 8 ranks, the forked suite at 2 ranks.
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/s5c6; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 100 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -1 $L/kernel.log; grep -E "^\[ *FAILED|OppositeOrderWithDifferent" $L/kernel.log | head -5
for n in 2 4; do
  step timeout 40 $S/bench/nccl-lamport-bench --loopback $n -b 256K -e 1M -f 1.25 --mode graph --csv $L/lb$n-mid.csv > $L/lb$n-mid.log 2>&1
  awk -F, 'NR>1 && ($3=="fast" || $3=="fast-stash" || $3=="fast-strided" || $3=="fast-stash") {printf "%d %s %s %s\n", '$n', $1, $3, $4}' $L/lb$n-mid.csv | paste -sd' ' | sed 's/ \([248] [0-9]* fast \)/\n\1/g'
done
for i in 1 2; do
  step timeout 40 $S/bench/nccl-lamport-bench --loopback 2 --max-bytes 2M --mode graph --csv $L/lb2-run$i.csv > $L/lb2-run$i.log 2>&1
  awk -F, 'NR>1 && ($1==8 || $1==2048 || $1==8192 || $1==32768 || $1==131072 || $1==262144 || $1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast") {printf "%s:%s=%s ", $1, $3, $4}' $L/lb2-run$i.csv; echo
done
for n in 4 8; do
  step timeout 40 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
  awk -F, 'NR>1 && ($1==8 || $1==32768 || $1==131072 || $1==262144 || $1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="twoshot") {printf "%s:%s=%s ", $1, $3, $4}' $L/lb$n.csv; echo
done
grep -c ",OK$" $L/*.csv; grep -v ",OK$" $L/*.csv | grep -v bytes,count | head -3
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=120 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp2 \
  step timeout 130 bash tests/gpu_suite.sh $S gtest > $L/suite-mp2.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp2.log | cut -c1-300 | sort -u
(cd $L && tar czf $OUT/call.tgz .)
