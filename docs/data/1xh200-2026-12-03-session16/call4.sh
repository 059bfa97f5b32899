# Session 16, call 4: main at bd61399 (the LeakSanitizer annotation in real_nccl.cc), preloaded
# forked multiprocess tests, 2 ranks sharing the GPU. Expect 10/10.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s16c4; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=110 GTESTS="$S/tests/test_gpu_multiprocess" OUT=$L/B \
  timeout 120 bash tests/gpu_suite.sh $S gtest > $L/B.log 2>&1
echo "preloaded multiprocess: rc=$?"; grep -E '^gtest' $L/B.log | cut -c1-120
