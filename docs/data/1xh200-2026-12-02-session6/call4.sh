# Session 6, device call 4 (issue 11): the final tree (device code as in call 3; the hand-over test
# fixed to keep fp32 calls within a one-shot slot): kernel tests, one loopback run at 2 ranks, the
# full forked multiprocess suite at 8 ranks on one GPU (shared-GPU mode), then compute-sanitizer
# (memcheck, racecheck, synccheck) on the stash-kernel test and one shared-GPU test, in the time left.
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S
tar xJf .device/stage.tar.xz -C $S 2>/dev/null || python3 -c "import tarfile; tarfile.open('.device/stage.tar.xz').extractall('$S')"
L=/tmp/s6c4; rm -rf $L; mkdir -p $L
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
step timeout 150 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -1 $L/kernel.log; grep -E "^\[ *FAILED|InPlace" $L/kernel.log | head -8
step timeout 60 $S/bench/nccl-lamport-bench --loopback 2 --max-bytes 2M --mode graph --csv $L/lb2.csv > $L/lb2.log 2>&1
awk -F, 'NR>1 && ($1==8 || $1==2048 || $1==8192 || $1==32768 || $1==131072 || $1==524288 || $1==2097152) && ($3=="baseline" || $3=="fast") {printf "%s:%s=%s ", $1, $3, $4}' $L/lb2.csv; echo
grep -c ",OK$" $L/lb2.csv
T=$(( $(left) - 90 ))
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=8 GTEST_TIMEOUT=$(( T - 5 )) GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp8 \
  step timeout $T bash tests/gpu_suite.sh $S gtest > $L/suite-mp8.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp8.log | cut -c1-300
grep -E '^\[ *(OK|FAILED|SKIPPED) ' $L/mp8/gtest-test_gpu_multiprocess.log | cut -c1-200
KERNEL_FILTER='GpuLamportOneShot.StashAndRegisterCapsStayCorrectOnStridedGrids:LamportLaunchValidation.*' MP_FILTER='MultiProcess.CommInfoAndRouting' \
  OUT=$L/sanitizer step timeout $(( $(left) - 8 )) bash tests/reliability/compute_sanitizer.sh $S > $L/sanitizer.log 2>&1
cut -c1-300 $L/sanitizer.log
(cd $L && tar czf $OUT/call.tgz .)
