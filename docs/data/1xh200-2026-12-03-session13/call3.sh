# Session 13, call 3: the tuning-file reader's fix (a FIFO or a directory is refused at once, with
# a WARN, instead of an open that blocks the set-up; files over 64 KiB are refused) in the real
# object, in shared-GPU mode with 2 ranks. Two forked multiprocess tests (routing, special values)
# with NCCL_LAMPORT_TUNING_FILE naming:
#   1. a FIFO nobody writes (the old code would block every rank's set-up in open());
#   2. a directory;
#   3. a good file for 2 ranks of sm_90 (NCCL_DEBUG=INFO shows the line the reader prints).
# Expect PASS three times, "is not a regular file" WARNs in 1 and 2, the INFO line in 3.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s13c3; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
mkfifo $L/tuning.fifo; mkdir -p $L/tuning.dir
printf '{"version": 1, "nRanks": 2, "smArch": 90, "oneShotMaxBytes": 262144, "twoShotMaxBytes": 0}\n' > $L/tuning.json
run() {  # name, tuning path, NCCL_DEBUG
  local t0=$(date +%s)
  NCCL_LAMPORT_TUNING_FILE=$2 NCCL_DEBUG=$3 NCCL_DEBUG_SUBSYS=INIT,ENV \
  GTEST_FILTER='MultiProcess.CommInfoAndRouting:MultiProcess.SpecialValues' \
  NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=100 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/$1 \
    timeout 120 bash tests/gpu_suite.sh $S gtest > $L/$1.log 2>&1
  echo "$1: rc=$? $(( $(date +%s) - t0 ))s"
  grep -E 'gpu_suite: [0-9]+ passed' $L/$1.log
  mkdir -p $L/$1/x && tar xzf $L/$1/logs.tgz -C $L/$1/x 2>/dev/null
  echo "  lines naming the tuning file: $(grep -rh 'NCCL_LAMPORT_TUNING_FILE' $L/$1 $L/$1.log 2>/dev/null | wc -l)"
  grep -rh 'NCCL_LAMPORT_TUNING_FILE' $L/$1 $L/$1.log 2>/dev/null | sed 's/^.*NCCL \(WARN\|INFO\)/NCCL \1/' | sort | uniq -c | head -4
}
run fifo $L/tuning.fifo WARN
run dir $L/tuning.dir WARN
run good $L/tuning.json INFO
(cd $L && tar czf $OUT/call.tgz --exclude=tuning.fifo .)
