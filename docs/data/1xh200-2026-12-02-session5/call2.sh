# Session 5, device call 2 (issue 11): the kernel tests with the A/B correctness test of the
# shared-memory stash and the register caps, then loopback 2/4/8 (graph) with fast-stash.
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/s5c2; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 150 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -2 $L/kernel.log; grep -E "^\[ *(FAILED|OK) .*AbKernels" $L/kernel.log
for n in 2 4 8; do
  step timeout 120 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
done
for n in 2 4 8; do awk -F, 'NR>1 && ($1==8 || $1==32768 || $1==131072 || $1==262144 || $1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-t128" || $3=="fast-stash" || $3=="fast-strided") {printf "%d %s %s %s %s\n", '$n', $1, $3, $4, $8}' $L/lb$n.csv; done
grep -c ",OK$" $L/lb2.csv $L/lb4.csv $L/lb8.csv; grep -v ",OK$" $L/lb*.csv | grep -v bytes,count | head -3
(cd $L && tar czf $OUT/call.tgz .)
