# Session 9, call 2: call 1 found that dropping the stash kernel's 2 MB of recvbuff stores saves
# 0.34 us at 2 ranks 2 MB (4.83 against 5.17): stores cost time there. The publish stores are
# volatile (st.volatile, STRONG.SYS in SASS); the anchors publish with plain stores. Scratch build
# w (experiments-call2.diff, with call 1's code switched off): the kFast publish with weak 16-byte
# stores. Expect below 5.17 if strong stores cost more than weak ones, else no change.
# carry: .device/stage.tar.xz .device/exp/exp.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; X=.device/x; mkdir -p $S $X
tar xJf .device/stage.tar.xz -C $S && tar xJf .device/exp/exp.tar.xz -C $X
L=/tmp/c2; rm -rf $L; mkdir -p $L
timeout 150 $X/exp-w/tests/test_gpu_kernel > $L/w-kernel.log 2>&1; echo "w test_gpu_kernel rc=$?"; tail -1 $L/w-kernel.log
B="--loopback 2 -b 8 --max-bytes 2M --mode graph"
for r in 1 2 3 4; do
  timeout 60 $S/bench/nccl-lamport-bench $B --csv $L/main-lb2-run$r.csv > /dev/null 2>&1; echo "main run$r rc=$?"
  timeout 60 $X/exp-w/bench/nccl-lamport-bench $B --csv $L/w-lb2-run$r.csv > $L/w-lb2-run$r.log 2>&1; echo "w run$r rc=$?"
done
for n in 4 8; do
  timeout 90 $S/bench/nccl-lamport-bench --loopback $n -b 2M --max-bytes 2M --mode graph --csv $L/main-lb$n.csv > /dev/null 2>&1; echo "main lb$n rc=$?"
  timeout 90 $X/exp-w/bench/nccl-lamport-bench --loopback $n -b 2M --max-bytes 2M --mode graph --csv $L/w-lb$n.csv > /dev/null 2>&1; echo "w lb$n rc=$?"
done
for f in $L/*-lb2-run*.csv $L/*-lb4.csv $L/*-lb8.csv; do
  awk -F, -v f=$(basename $f .csv) 'NR>1 && ($3=="fast" || ($1==2097152 && ($3=="baseline" || $3=="twoshot"))) {printf "%s:%s=%s:%s ", $1, $3, $4, $NF} END{print " " f}' $f
done
(cd $L && tar czf $OUT/call.tgz .)
