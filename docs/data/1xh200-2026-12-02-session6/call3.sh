# Session 6, device call 3 (issue 11): kAuto takes the stash kernel wherever the single pass needs
# the late trigger or does not fit, and the stash kernel now clears what it received in place
# (dirtyBytes 0); A/B: the stash kernel with its groups prefetched by cp.async
# (fast-stash-prefetch). Kernel tests (incl. InPlaceClearHandsOverToTheOtherKernels), two-shot
# tests, loopback 2 ranks x3, 4 and 8, the forked suite at 2 ranks, large messages at 4 and 8.
# The build (Release, sm_90) travels as .device/stage.tar.xz (tests/stage_for_device.sh, then tar | xz).
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S
tar xJf .device/stage.tar.xz -C $S 2>/dev/null || python3 -c "import tarfile; tarfile.open('.device/stage.tar.xz').extractall('$S')"
L=/tmp/s6c3; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1; cat $L/gpu.txt
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" | tee -a $L/steps.txt; }
step timeout 150 $S/tests/test_gpu_kernel > $L/kernel.log 2>&1; tail -1 $L/kernel.log; grep -E "^\[ *FAILED|OppositeOrder|InPlace" $L/kernel.log | head -8
step timeout 90 $S/tests/test_gpu_twoshot > $L/twoshot.log 2>&1; tail -1 $L/twoshot.log
for i in 1 2 3; do
  step timeout 60 $S/bench/nccl-lamport-bench --loopback 2 --max-bytes 2M --mode graph --csv $L/lb2-run$i.csv > $L/lb2-run$i.log 2>&1
  awk -F, 'NR>1 && ($1==8 || $1==32768 || $1==131072 || $1==262144 || $1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-nostash" || $3=="fast-stash-prefetch" || $3=="fast-share4-early") {printf "%s:%s=%s ", $1, $3, $4} ' $L/lb2-run$i.csv; echo
done
for n in 4 8; do
  step timeout 90 $S/bench/nccl-lamport-bench --loopback $n --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
  awk -F, 'NR>1 && ($1==8 || $1==131072 || $1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-nostash" || $3=="fast-stash-prefetch" || $3=="twoshot") {printf "%s:%s=%s ", $1, $3, $4}' $L/lb$n.csv; echo
done
grep -c ",OK$" $L/*.csv; grep -v ",OK$" $L/*.csv | grep -v bytes,count | head -3
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=170 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp2 \
  step timeout 180 bash tests/gpu_suite.sh $S gtest > $L/suite-mp2.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp2.log | cut -c1-300
for n in 4 8; do
  GTEST_FILTER='MultiProcess.LargeMessages*:MultiProcess.CommInfoAndRouting:MultiProcess.SpecialValues' \
  NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=$n GTEST_TIMEOUT=110 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp$n \
    step timeout 120 bash tests/gpu_suite.sh $S gtest > $L/suite-mp$n.log 2>&1
  grep -E '^gtest|gpu_suite:' $L/suite-mp$n.log | cut -c1-300
done
(cd $L && tar czf $OUT/call.tgz .)
