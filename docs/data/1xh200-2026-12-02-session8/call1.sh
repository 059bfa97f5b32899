# Session 8, call 1: session 7's prepared experiment (next-call-pipelined-poll.sh there, same
# CPU prep and carry), plus main's test_gpu_kernel at a3c7954 (its test change had not run on a GPU).
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S .device/x
tar xJf .device/stage.tar.xz -C $S && tar xJf .device/exp/exp.tar.xz -C .device/x
L=/tmp/pipe; rm -rf $L; mkdir -p $L
timeout 90 $S/tests/test_gpu_kernel > $L/main-kernel.log 2>&1; echo "main test_gpu_kernel rc=$?"; tail -1 $L/main-kernel.log
timeout 90 .device/x/exp-f/tests/test_gpu_kernel > $L/f-kernel.log 2>&1; echo "f test_gpu_kernel rc=$?"; tail -1 $L/f-kernel.log
for r in 1 2 3; do
  timeout 30 $S/bench/nccl-lamport-bench --loopback 2 -b 256K --max-bytes 2M --mode graph --csv $L/main-lb2-run$r.csv > /dev/null 2>&1; echo "main run$r rc=$?"
  for b in f g; do timeout 30 .device/x/exp-$b/bench/nccl-lamport-bench --loopback 2 -b 256K --max-bytes 2M --mode graph --csv $L/$b-lb2-run$r.csv > /dev/null 2>&1; echo "$b run$r rc=$?"; done
done
for b in f g; do timeout 60 .device/x/exp-$b/bench/nccl-lamport-bench --loopback 4 -b 64K --max-bytes 2M --mode graph --csv $L/$b-lb4.csv > /dev/null 2>&1; echo "$b lb4 rc=$?"; done
timeout 60 $S/bench/nccl-lamport-bench --loopback 4 -b 64K --max-bytes 2M --mode graph --csv $L/main-lb4.csv > /dev/null 2>&1
for f in $L/*-lb2-run1.csv $L/*-lb4.csv; do awk -F, -v f=$(basename $f) 'NR>1 && ($1==524288 || $1==2097152) && ($3=="baseline" || $3=="fast") {printf "%s %s:%s=%s:%s ", f, $1, $3, $4, $NF}' $f; echo; done
(cd $L && tar czf $OUT/call.tgz .)
