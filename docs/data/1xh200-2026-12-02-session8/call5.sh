# Session 8, call 5: fewer serial groups per thread at 2 MB. Calls 3-4 (Nsight Compute) showed the
# stash kernel latency-bound (L2 throughput about 25 % of peak, one block of 288 threads per SM and
# rank, each data thread walking 4 groups one after the other); the block-size runs of session 7
# fit about 0.7 µs per extra group. A quarter of the device holds 4 groups a thread at 2 MB because
# the stash kernel's 50 registers allow 4 blocks per SM. Scratch builds (experiments-call5.diff):
# the 2-rank stash kernel under a register cap only (__maxnreg__, no block-size bound), and the
# one-shot data threads per block from 1 MB set here:
#   m = 40 registers, 288 data threads (5 blocks of 320 per SM: 165 blocks, 3 groups at 2 MB)
#   n = 40 registers, 192 data threads (7 blocks of 224 per SM: 231 blocks, 3 groups)
#   o = 32 registers (ptxas: 16 bytes spilled), 256 data threads (7 blocks: 231 blocks, 3 groups)
# Expect, if the latency model holds, 2 MB well below main's 5.17 µs; otherwise no change.
# carry: .device/stage.tar.xz .device/exp/exp.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S .device/x
tar xJf .device/stage.tar.xz -C $S && tar xJf .device/exp/exp.tar.xz -C .device/x
L=/tmp/c5; rm -rf $L; mkdir -p $L
X=.device/x
timeout 120 $X/exp-m/tests/test_gpu_kernel > $L/m-kernel.log 2>&1; echo "m test_gpu_kernel rc=$?"; tail -1 $L/m-kernel.log
B="--loopback 2 -b 512K --max-bytes 2M --mode graph"
for r in 1 2 3; do
  timeout 30 $S/bench/nccl-lamport-bench $B --csv $L/main-lb2-run$r.csv > /dev/null 2>&1; echo "main run$r rc=$?"
  for b in m n o; do timeout 30 $X/exp-$b/bench/nccl-lamport-bench $B --csv $L/$b-lb2-run$r.csv > $L/$b-lb2-run$r.log 2>&1; echo "$b run$r rc=$?"; done
done
timeout 90 $X/exp-m/bench/nccl-lamport-bench --loopback 4 -b 512K --max-bytes 2M --mode graph --csv $L/m-lb4.csv > /dev/null 2>&1; echo "m lb4 rc=$?"
for f in $L/*-lb2-run*.csv $L/*-lb4.csv; do
  awk -F, -v f=$(basename $f .csv) 'NR>1 && ($1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="twoshot") {printf "%s %s:%s=%s:%s ", f, $1, $3, $4, $NF}' $f; echo
done
tail -3 $L/m-lb2-run1.log
(cd $L && tar czf $OUT/call.tgz .)
