# Session 4, device call 2 (issue 11): the floor probe one mode per process, then loopback 2/4/8
# with the register / vectors-per-thread shapes (graph), the kernel test.
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/o2; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
for m in 0 1 2 3 4 5 6 7 8 9 10; do
  for g in 50 500; do timeout 10 .device/probe/floor $m $g >> $L/probe.log 2>&1 || echo "mode $m G=$g rc=$?" >> $L/probe.log; done
done
cat $L/probe.log
step timeout 60 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -2 $L/kernel.log
for n in 2 4 8; do
  step timeout 100 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
done
for n in 2 4 8; do awk -F, 'NR>1 && ($1==8 || $1==131072 || $1==524288 || $1==2097152) {printf "%d %s %s %s %s\n", '$n', $1, $3, $4, $8}' $L/lb$n.csv; done
(cd $L && tar czf $OUT/call.tgz .)
