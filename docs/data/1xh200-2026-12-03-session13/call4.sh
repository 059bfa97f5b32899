# Session 13, call 4: call 3 again on the build of 27724d7 (the reader moved to
# common/small_file.cc, which the displaced tuner's nccl.conf search uses too; the host
# rendezvous connects without blocking), then every forked multiprocess test of the tuner
# activation build (NCCL_TUNER_PLUGIN alone, no LD_PRELOAD: each communicator's ranks meet over
# the host rendezvous inside NCCL's init) with NCCL_LAMPORT_TUNING_FILE naming a FIFO (read inside
# NCCL's tuner init there). Expect call 3's results, then 10/10 with one "is not a regular file"
# WARN per rank and communicator.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
bash docs/data/1xh200-2026-12-03-session13/call3.sh
mv $OUT/call.tgz $OUT/call3-again.tgz
source .device/device-env.sh
S=.device/stage; L=/tmp/s13c4; rm -rf $L; mkdir -p $L
mkfifo $L/tuning.fifo
t0=$(date +%s)
NCCL_LAMPORT_TUNING_FILE=$L/tuning.fifo NCCL_DEBUG=WARN \
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=280 TUNER_GTESTS="$S/tests/tuner/test_gpu_multiprocess" TUNER_GTESTS_ONLY=1 OUT=$L/tuner \
  timeout 300 bash tests/gpu_suite.sh $S tuner > $L/tuner.log 2>&1
echo "tuner fifo: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'gpu_suite: [0-9]+ passed|passed|PASS|FAIL' $L/tuner.log | cut -c1-200 | tail -5
echo "  WARN lines naming the tuning file: $(grep -rh 'NCCL_LAMPORT_TUNING_FILE' $L/tuner $L/tuner.log 2>/dev/null | grep -c WARN)"
grep -rh 'NCCL_LAMPORT_TUNING_FILE' $L/tuner $L/tuner.log 2>/dev/null | sed 's/^.*NCCL WARN/NCCL WARN/' | sort | uniq -c | head -3
(cd $L && tar czf $OUT/call.tgz --exclude=tuning.fifo .)
