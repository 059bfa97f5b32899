# Session 6, device call 2 (issue 11): the A/B stash kernel that clears what it received in place
# (kGridStridedStashInPlace, bf16, 2/4/8 ranks) against the stash kernel kAuto takes; kernel tests
# with the hand-over test (InPlaceClearHandsOverToTheOtherKernels); loopback 2 ranks x3, 4 and 8.
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S
tar xJf .device/stage.tar.xz -C $S 2>/dev/null || python3 -c "import tarfile; tarfile.open('.device/stage.tar.xz').extractall('$S')"
L=/tmp/s6c2; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 150 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -1 $L/kernel.log; grep -E "^\[ *FAILED|InPlace" $L/kernel.log | head -8
for i in 1 2 3; do
  step timeout 60 $S/bench/nccl-lamport-bench --loopback 2 --max-bytes 2M --mode graph --csv $L/lb2-run$i.csv > $L/lb2-run$i.log 2>&1
  awk -F, 'NR>1 && ($1==8 || $1==32768 || $1==131072 || $1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-stash" || $3=="fast-stash-inplace" || $3=="fast-share4-early") {printf "%s:%s=%s ", $1, $3, $4}' $L/lb2-run$i.csv; echo
done
for n in 4 8; do
  step timeout 90 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
  awk -F, 'NR>1 && ($1==8 || $1==131072 || $1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-strided" || $3=="fast-stash" || $3=="fast-stash-inplace" || $3=="twoshot") {printf "%s:%s=%s ", $1, $3, $4}' $L/lb$n.csv; echo
done
grep -c ",OK$" $L/*.csv; grep -v ",OK$" $L/*.csv | grep -v bytes,count | head -3
(cd $L && tar czf $OUT/call.tgz .)
