# Session 9, call 5: main's own GPU tests and benchmark on the final tree of this change (612407b;
# its kernel edits since a3c7954 are comments only). Kernel and two-shot tests, the forked
# multiprocess suite with 2 ranks sharing the GPU, and the 2-rank loopback sweep.
# Expect 22/22, 12/12, 10/10 and every variant OK, 2 MB about 5.17 us.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/c5; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in test_gpu_kernel test_gpu_twoshot; do timeout 150 $S/tests/$t > $L/$t.log 2>&1; echo "$t rc=$?"; tail -1 $L/$t.log; done
NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_LAMPORT_TEST_SHARED_GPU_RANKS=2 GTEST_TIMEOUT=200 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/mp2 \
  timeout 240 bash tests/gpu_suite.sh $S gtest > $L/mp2.log 2>&1; echo "mp2 rc=$?"
grep -E '^gtest|gpu_suite:' $L/mp2.log | cut -c1-300
timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/main-lb2.csv > $L/main-lb2.log 2>&1; echo "bench rc=$?"
awk -F, 'NR>1 && $3=="fast" {printf "%s:%s:%s ", $1, $4, $NF} END{print ""}' $L/main-lb2.csv
awk -F, 'NR>1 && $3!="fast" && $NF!="OK" {bad++} END{print "variants not OK:", bad+0}' $L/main-lb2.csv
(cd $L && tar czf $OUT/call.tgz .)
