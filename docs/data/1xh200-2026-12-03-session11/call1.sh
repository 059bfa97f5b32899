# Session 11, call 1: a diagnostic, not a timing. Does some SM finish its block of the 2 MB stash
# kernel (2 ranks, bf16, loopback) systematically later than the others? The scratch build
# (diag-blockstamps.diff on d34dc85, built with -DLAMPORT_EXP_BLOCKSTAMPS, same 50 registers and
# grid as main) prints, for one call in 512 of each rank, one line per block: its SM, its start
# (globaltimer, ns) and the cycles from its start to the end of its publish and of its work.
# Blocks 0 - 115 hold four vectors per thread, 116 - 131 three. Expect: if per-SM spread is
# systematic, the same SMs are slowest in every sampled call; if not, the slowest move at random.
# Then main's bench at 2 MB, three runs, to show the machine times as before (about 5.17 us).
# carry: .device/diag.tar.xz .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
D=.device; tar xJf .device/diag.tar.xz -C $D
L=/tmp/s11c1; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 120 $D/diag/bench/nccl-lamport-bench --loopback 2 -b 2M -e 2M --mode graph --csv $L/diag-lb2.csv > $L/diag-lb2.log 2>&1
echo "diag bench rc=$? lines=$(grep -c LAMPORT_DIAG $L/diag-lb2.log)"
for i in 1 2 3; do
  timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 2M -e 2M --mode graph --csv $L/main-lb2-$i.csv > $L/main-lb2-$i.log 2>&1
  echo "main run $i rc=$? $(awk -F, '$3=="fast" || $3=="baseline" {printf "%s:%s:%s ", $3, $4, $NF}' $L/main-lb2-$i.csv)"
done
(cd $L && tar czf $OUT/call.tgz .)
