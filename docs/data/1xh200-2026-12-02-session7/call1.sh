# Session 7, device call 1 (issue 11): the call written at the end of session 6 and not run there,
# plus two more loopback runs at 2 ranks and one at 4 and 8 ranks. It checks the review fix of the in-place clear: a stash kernel that gives up (timeout, abort) hands the round's extent back to the next round's clear
# (atomicMax on dirtyBytes); the hand-over test now also checks the workspace invariant after
# every batch (expectOnlyLastRoundDirty), runs the baseline kernel, 3 ranks and capped grids; the
# timeout test covers the stash kernel. Kernel tests, one loopback run, the forked suite at 2 ranks.
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S
tar xJf .device/stage.tar.xz -C $S 2>/dev/null || python3 -c "import tarfile; tarfile.open('.device/stage.tar.xz').extractall('$S')"
L=/tmp/s7c1; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 60 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -1 $L/kernel.log; grep -E "^\[ *FAILED|InPlace|TimesOut" $L/kernel.log | head -8
step timeout 20 $S/bench/nccl-lamport-bench --loopback 2 --max-bytes 2M --mode graph --csv $L/lb2.csv > $L/lb2.log 2>&1
awk -F, 'NR>1 && ($1==8 || $1==131072 || $1==524288 || $1==2097152) && ($3=="baseline" || $3=="fast") {printf "%s:%s=%s ", $1, $3, $4}' $L/lb2.csv; echo; grep -c ",OK$" $L/lb2.csv
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=90 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp2 \
  step timeout 95 bash tests/gpu_suite.sh $S gtest > $L/suite-mp2.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp2.log | cut -c1-300
for r in 2 3; do step timeout 20 $S/bench/nccl-lamport-bench --loopback 2 --max-bytes 2M --mode graph --csv $L/lb2-run$r.csv > $L/lb2-run$r.log 2>&1; done
for n in 4 8; do step timeout 40 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1; grep -c ",OK$" $L/lb$n.csv; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(cd $L && tar czf $OUT/call.tgz .)
