# Session 8, call 2: two scratch builds of kernels/lamport_oneshot_fast.cuh (experiments-call2.diff):
#   j = -DEXP_EARLYLAST: the late PDL trigger issued right after each data thread's last wait on peers
#       (non-aligned named barrier, then thread 0), before its last reduce/store/clear, instead of
#       after them; must pass test_gpu_kernel and test_gpu_twoshot.
#   h = -DEXP_NOSPIN: one poll load per peer vector and no wait (results wrong, --no-check): the
#       timing floor of the kernel's memory traffic and launch without any synchronisation.
# Built here: cmake -S <worktree with the diff> -B /work/exp-X -DCMAKE_BUILD_TYPE=Release
#   -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-D<macro>; packed into .device/exp/exp.tar.xz.
# carry: .device/stage.tar.xz .device/exp/exp.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S .device/x
tar xJf .device/stage.tar.xz -C $S && tar xJf .device/exp/exp.tar.xz -C .device/x
L=/tmp/c2; rm -rf $L; mkdir -p $L
X=.device/x
timeout 120 $X/exp-j/tests/test_gpu_kernel > $L/j-kernel.log 2>&1; echo "j test_gpu_kernel rc=$?"; tail -1 $L/j-kernel.log
timeout 120 $X/exp-j/tests/test_gpu_twoshot > $L/j-twoshot.log 2>&1; echo "j test_gpu_twoshot rc=$?"; tail -1 $L/j-twoshot.log
B="--loopback 2 -b 256K --max-bytes 2M --mode graph"
for r in 1 2 3 4 5; do
  timeout 30 $S/bench/nccl-lamport-bench $B --csv $L/main-lb2-run$r.csv > /dev/null 2>&1; echo "main run$r rc=$?"
  timeout 30 $X/exp-j/bench/nccl-lamport-bench $B --csv $L/j-lb2-run$r.csv > /dev/null 2>&1; echo "j run$r rc=$?"
  timeout 30 $X/exp-h/bench/nccl-lamport-bench $B --no-check --csv $L/h-lb2-run$r.csv > /dev/null 2>&1; echo "h run$r rc=$?"
done
for n in 4 8; do
  timeout 90 $S/bench/nccl-lamport-bench --loopback $n -b 64K --max-bytes 2M --mode graph --csv $L/main-lb$n.csv > /dev/null 2>&1; echo "main lb$n rc=$?"
  timeout 90 $X/exp-j/bench/nccl-lamport-bench --loopback $n -b 64K --max-bytes 2M --mode graph --csv $L/j-lb$n.csv > /dev/null 2>&1; echo "j lb$n rc=$?"
done
for f in $L/*-lb2-run*.csv $L/*-lb4.csv $L/*-lb8.csv; do
  awk -F, -v f=$(basename $f .csv) 'NR>1 && ($1==524288 || $1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="twoshot") {printf "%s %s:%s=%s:%s ", f, $1, $3, $4, $NF}' $f; echo
done
(cd $L && tar czf $OUT/call.tgz .)
