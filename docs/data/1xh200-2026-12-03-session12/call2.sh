# Session 12, call 2: variant B of call 1 (experiment-pipelined-poll-b.diff, built with
# -DLAMPORT_EXP_PIPELINED_POLL -DLAMPORT_EXP_ISSUE_AFTER_SPIN; 54 registers, no stack frame): the
# next group's poll loads go out only once the current group's copies have all arrived, so no
# early load returns the sentinel and is spent. Call 1 (loads issued before the test) measured
# 2 MB 5.44 - 5.49 us against main 5.17 - 5.20. Same runs as call 1.
# carry: .device/stage.tar.xz .device/expb.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; X=.device/exp-stage; mkdir -p $S $X
tar xJf .device/stage.tar.xz -C $S && tar xJf .device/expb.tar.xz -C $X
L=/tmp/s12c2; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 120 $X/tests/test_gpu_kernel --gtest_brief=1 > $L/exp-kernel.log 2>&1; echo "exp test_gpu_kernel rc=$?"; tail -2 $L/exp-kernel.log
for r in 1 2 3; do
  for b in main exp; do
    B=$S; [ $b = exp ] && B=$X
    timeout 40 $B/bench/nccl-lamport-bench --loopback 2 -b 256K --max-bytes 2M --mode graph --csv $L/$b-lb2-run$r.csv > $L/$b-lb2-run$r.log 2>&1
    echo "$b run$r rc=$? $(awk -F, '($3=="fast" || $3=="baseline") && $1>=524288 {printf "%s:%s:%s:%s ", $1, $3, $4, $NF}' $L/$b-lb2-run$r.csv)"
  done
done
for b in main exp; do
  B=$S; [ $b = exp ] && B=$X
  timeout 60 $B/bench/nccl-lamport-bench --loopback 4 -b 512K --max-bytes 2M --mode graph --csv $L/$b-lb4.csv > /dev/null 2>&1
  echo "$b lb4 rc=$? $(awk -F, '($3=="fast" || $3=="baseline") {printf "%s:%s:%s:%s ", $1, $3, $4, $NF}' $L/$b-lb4.csv)"
done
(cd $L && tar czf $OUT/call.tgz .)
