# Session 7, device call 6 (issue 11): the final tree (f8f2383) with NCCL_TUNER_PLUGIN alone
# (no LD_PRELOAD, no LD_AUDIT), shared-GPU mode, 2 ranks: entry bytes, torchrun allreduce_check,
# the client and pynccl checks, then the forked multiprocess tests of the tuner-activation build.
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S
tar xJf .device/stage.tar.xz -C $S 2>/dev/null || python3 -c "import tarfile; tarfile.open('.device/stage.tar.xz').extractall('$S')"
L=/tmp/s7c6; rm -rf $L; mkdir -p $L
t0=$(date +%s)
NCCL_LAMPORT_TEST_SHARED_GPU=1 TUNER_GTESTS="$S/tests/tuner/test_gpu_multiprocess" GTEST_TIMEOUT=150 OUT=$L/tuner \
  timeout 330 bash tests/gpu_suite.sh $S tuner > $L/suite-tuner.log 2>&1
echo "rc=$? $(( $(date +%s) - t0 ))s"
grep -vE '^\s*$' $L/suite-tuner.log | cut -c1-250 | tail -40
(cd $L && tar czf $OUT/call.tgz .)
