# Session 7, device call 5 (issue 11): the final tree of session 6 (f8f2383, as calls 1 and 4):
# the full forked multiprocess suite at 4 ranks on one GPU (shared-GPU mode). With call 1 (2 ranks)
# and call 4 (8 ranks) every multiprocess test has then passed at 2, 4 and 8 ranks on this tree.
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S
tar xJf .device/stage.tar.xz -C $S 2>/dev/null || python3 -c "import tarfile; tarfile.open('.device/stage.tar.xz').extractall('$S')"
L=/tmp/s7c5; rm -rf $L; mkdir -p $L
step() { local t0=$(date +%s); "$@"; echo "[step rc=$? $(( $(date +%s)-t0 ))s] $*" >> $L/steps.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/gpu.txt
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=4 GTEST_TIMEOUT=480 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp4 \
  step timeout 485 bash tests/gpu_suite.sh $S gtest > $L/suite-mp4.log 2>&1
grep -E '^gtest|gpu_suite:' $L/suite-mp4.log | cut -c1-300
grep -E '^\[ *(OK|FAILED|SKIPPED) ' $L/mp4/gtest-test_gpu_multiprocess.log | cut -c1-200; cat $L/steps.txt
(cd $L && tar czf $OUT/call.tgz .)
