# Session 4, device call 4 (issue 11): loopback 2/4/8 (graph) with the single-pass kernel and the
# barrier-free single-pass kernel as A/B shapes; the kernel test.
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/o4; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 60 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -2 $L/kernel.log
for n in 2 4 8; do
  step timeout 100 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
done
for n in 2 4 8; do awk -F, 'NR>1 && ($1==8 || $1==2048 || $1==8192 || $1==32768 || $1==131072 || $1==524288 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3 ~ /1pass/ || $3=="fast-share4-early") {printf "%d %s %s %s %s\n", '$n', $1, $3, $4, $8}' $L/lb$n.csv; done
(cd $L && tar czf $OUT/call.tgz .)
