# Session 10, call 1: NCCL_LAMPORT_TEST_SHARED_GPU is now a knob of the object's table, read
# through the config parser, no longer a bare getenv in plugin/comm/tuner_setup.cc. Shared-GPU
# mode, 2 ranks, NCCL_TUNER_PLUGIN alone: the tuner part of the suite (entry bytes, torchrun,
# clients, pynccl, the forked multiprocess tests of the tuner build; they fail if any
# communicator is left on NCCL, so they fail if the knob is not seen). Then a repeat of the
# kernel tests (shuffled, 3 times; two-shot twice: a result that moves between runs is a race)
# and the 2-rank loopback sweep. Expect tuner part PASS as in session 7 call 6, 66/66 and 24/24
# kernel tests, every loopback variant OK, 8 B about 1.35 us and 2 MB about 5.17.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s10c1; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
NCCL_LAMPORT_TEST_SHARED_GPU=1 TUNER_GTESTS="$S/tests/tuner/test_gpu_multiprocess" GTEST_TIMEOUT=150 OUT=$L/tuner \
  timeout 330 bash tests/gpu_suite.sh $S tuner > $L/suite-tuner.log 2>&1
echo "tuner part rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'PASS|FAIL|part tuner|gpu_suite:' $L/suite-tuner.log | cut -c1-220 | tail -25
timeout 120 $S/tests/test_gpu_kernel --gtest_repeat=3 --gtest_shuffle > $L/test_gpu_kernel.log 2>&1; echo "test_gpu_kernel x3 rc=$?"
grep -cE '^\[       OK \]' $L/test_gpu_kernel.log; grep -E '^\[  FAILED  \]' $L/test_gpu_kernel.log | head -5
timeout 60 $S/tests/test_gpu_twoshot --gtest_repeat=2 --gtest_shuffle > $L/test_gpu_twoshot.log 2>&1; echo "test_gpu_twoshot x2 rc=$?"
grep -cE '^\[       OK \]' $L/test_gpu_twoshot.log; grep -E '^\[  FAILED  \]' $L/test_gpu_twoshot.log | head -5
timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/main-lb2.csv > $L/main-lb2.log 2>&1; echo "bench rc=$?"
awk -F, 'NR>1 && ($3=="fast" || $3=="baseline") {printf "%s:%s:%s:%s ", $1, $3, $4, $NF} END{print ""}' $L/main-lb2.csv
awk -F, 'NR>1 && $NF!="OK" {bad++} END{print "variants not OK:", bad+0}' $L/main-lb2.csv
(cd $L && tar czf $OUT/call.tgz .)
