# Session 5, device call 4 (issue 11): the two-shot tests on the final launcher, and three more
# loopback runs at 2 ranks (graph) for the spread of the 512 KB and 2 MB figures.
set -u
source .device/device-env.sh
S=.device/stage
L=/tmp/s5c4; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 90 $S/tests/test_gpu_twoshot > $L/twoshot.log 2>&1; tail -2 $L/twoshot.log
for i in 1 2 3; do
  step timeout 60 $S/bench/nccl-lamport-bench --loopback 2 --max-bytes 2M --mode graph --csv $L/lb2-run$i.csv > $L/lb2-run$i.log 2>&1
  awk -F, 'NR>1 && ($1==8 || $1==2048 || $1==8192 || $1==32768 || $1==131072 || $1==524288 || $1==2097152) && ($3=="baseline" || $3=="fast") {printf "run'$i' %s %s %s %s\n", $1, $3, $4, $8}' $L/lb2-run$i.csv
done
grep -c ",OK$" $L/lb2-run*.csv; grep -v ",OK$" $L/lb2-run*.csv | grep -v bytes,count | head -3
(cd $L && tar czf $OUT/call.tgz .)
