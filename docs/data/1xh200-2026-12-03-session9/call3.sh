# Session 9, call 3: stores cost time at 2 MB (call 1: without its recvbuff stores the stash kernel
# takes 4.83 us against 5.17), but not because they are strong (call 2). Do they slow the poll
# chain that follows them? Scratch builds (experiments-call3.diff): the stash kernel polls and
# reduces all its (up to 4) groups first and stores afterwards:
#   d1 = each group's output is stored at once, its in-place clear waits for the end;
#   d2 = outputs (kept in the stash's shared memory) and clears both wait for the end.
# Expect 2 MB below 5.17 if the stores held up the next group's poll; else no change.
# carry: .device/stage.tar.xz .device/exp/exp.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; X=.device/x; mkdir -p $S $X
tar xJf .device/stage.tar.xz -C $S && tar xJf .device/exp/exp.tar.xz -C $X
L=/tmp/c3; rm -rf $L; mkdir -p $L
for b in d1 d2; do timeout 150 $X/exp-$b/tests/test_gpu_kernel > $L/$b-kernel.log 2>&1; echo "$b test_gpu_kernel rc=$?"; tail -1 $L/$b-kernel.log; done
B="--loopback 2 -b 512K --max-bytes 2M --mode graph"
for r in 1 2 3 4; do
  timeout 40 $S/bench/nccl-lamport-bench $B --csv $L/main-lb2-run$r.csv > /dev/null 2>&1; echo "main run$r rc=$?"
  for b in d1 d2; do timeout 40 $X/exp-$b/bench/nccl-lamport-bench $B --csv $L/$b-lb2-run$r.csv > $L/$b-lb2-run$r.log 2>&1; echo "$b run$r rc=$?"; done
done
for n in 4 8; do
  for b in main d1 d2; do
    bin=$X/exp-$b/bench/nccl-lamport-bench; [ $b = main ] && bin=$S/bench/nccl-lamport-bench
    timeout 90 $bin --loopback $n -b 2M --max-bytes 2M --mode graph --csv $L/$b-lb$n.csv > /dev/null 2>&1; echo "$b lb$n rc=$?"
  done
done
for f in $L/*-lb2-run*.csv $L/*-lb4.csv $L/*-lb8.csv; do
  awk -F, -v f=$(basename $f .csv) 'NR>1 && ($1==1048576 || $1==2097152) && ($3=="baseline" || $3=="fast" || $3=="fast-nobound" || $3=="twoshot") {printf "%s:%s=%s:%s ", $1, $3, $4, $NF} END{print " " f}' $f
done
(cd $L && tar czf $OUT/call.tgz .)
