# Session 9, call 4: a bound for one more idea. Stores at the end of the kernel cost time (call 3:
# moving the clears to the end, 5.42 against 5.17). Each thread still ends with its last group's
# output and in-place clear. Scratch build e (experiments-call4.diff): the stash kernel leaves its
# last group uncleared (wrong results from the fourth call, --no-check; the stale copies also end
# the waits on that group, so the bound is optimistic). If e is not clearly below 5.12 us, handing
# the last group's clear to the next call cannot reach the ratio goal.
# carry: .device/stage.tar.xz .device/exp/exp.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; X=.device/x; mkdir -p $S $X
tar xJf .device/stage.tar.xz -C $S && tar xJf .device/exp/exp.tar.xz -C $X
L=/tmp/c4; rm -rf $L; mkdir -p $L
B="--loopback 2 -b 512K --max-bytes 2M --mode graph"
for r in 1 2 3; do
  timeout 40 $S/bench/nccl-lamport-bench $B --csv $L/main-lb2-run$r.csv > /dev/null 2>&1; echo "main run$r rc=$?"
  timeout 40 $X/exp-e/bench/nccl-lamport-bench $B --no-check --csv $L/e-lb2-run$r.csv > $L/e-lb2-run$r.log 2>&1; echo "e run$r rc=$?"
done
for f in $L/*-lb2-run*.csv; do
  awk -F, -v f=$(basename $f .csv) 'NR>1 && ($1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-nobound") {printf "%s:%s=%s:%s ", $1, $3, $4, $NF} END{print " " f}' $f
done
(cd $L && tar czf $OUT/call.tgz .)
