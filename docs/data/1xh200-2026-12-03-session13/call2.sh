# Session 13, call 2: main's final build once more on today's machine: test_gpu_kernel and
# test_gpu_twoshot once each, then three loopback runs at 2 ranks to 2 MB (graph, bf16) and one at
# 4 and 8 ranks. Expect 22/22, 12/12, every check OK, 2 MB at 2 ranks 5.16 - 5.20 us against a
# baseline of about 6.5.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s13c2; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
timeout 120 $S/tests/test_gpu_kernel > $L/test_gpu_kernel.log 2>&1; echo "test_gpu_kernel rc=$?"
grep -E '^\[  (PASSED|FAILED) +\]' $L/test_gpu_kernel.log | head -5
timeout 60 $S/tests/test_gpu_twoshot > $L/test_gpu_twoshot.log 2>&1; echo "test_gpu_twoshot rc=$?"
grep -E '^\[  (PASSED|FAILED) +\]' $L/test_gpu_twoshot.log | head -5
for i in 1 2 3; do
  timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 256K --max-bytes 2M --mode graph --csv $L/lb2-$i.csv > $L/lb2-$i.log 2>&1
  echo "loopback 2 run $i rc=$?"
done
for n in 4 8; do
  timeout 90 $S/bench/nccl-lamport-bench --loopback $n -b 8 --max-bytes 2M --mode graph --csv $L/lb$n.csv > $L/lb$n.log 2>&1
  echo "loopback $n rc=$?"
done
head -1 $L/lb2-1.csv; grep -hE '(^|,)2097152,' $L/lb2-*.csv | cut -c1-160 | head -40; grep -ciE 'fail|mismatch|error' $L/*.log
(cd $L && tar czf $OUT/call.tgz .)
