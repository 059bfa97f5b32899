# Session 7, device call 4 (issue 11): the final tree of session 6 (f8f2383, as call 1): the full
# forked multiprocess suite at 8 ranks on one GPU (shared-GPU mode), the two-shot kernel tests,
# then compute-sanitizer (memcheck, racecheck, synccheck) on the default set, which includes the
# timeout test that now covers the stash kernel's give-up (atomicMax on dirtyBytes), plus the
# stash-kernel test, in the time left.
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S
tar xJf .device/stage.tar.xz -C $S 2>/dev/null || python3 -c "import tarfile; tarfile.open('.device/stage.tar.xz').extractall('$S')"
L=/tmp/s7c4; rm -rf $L; mkdir -p $L
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" >> $L/steps.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
step timeout 60 $S/tests/test_gpu_twoshot > $L/twoshot.log 2>&1; tail -1 $L/twoshot.log
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=8 GTEST_TIMEOUT=480 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp8 \
  step timeout 485 bash tests/gpu_suite.sh $S gtest > $L/suite-mp8.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp8.log | cut -c1-300
grep -E '^\[ *(OK|FAILED|SKIPPED) ' $L/mp8/gtest-test_gpu_multiprocess.log | cut -c1-200
KERNEL_FILTER='LamportLaunchValidation.*:GpuLamportWorkspace.*:GpuLamportOneShot.TimesOutWhenAPeerNeverLaunches:GpuLamportOneShot.AbortFlagStopsTheWait:GpuLamportOneShot.StashAndRegisterCapsStayCorrectOnStridedGrids' MP_FILTER='MultiProcess.CommInfoAndRouting' \
  OUT=$L/sanitizer step timeout $(( $(left) - 8 )) bash tests/reliability/compute_sanitizer.sh $S > $L/sanitizer.log 2>&1
cut -c1-300 $L/sanitizer.log; cat $L/steps.txt
(cd $L && tar czf $OUT/call.tgz .)
