# Written in session 7, NOT RUN (no device time left): the next experiment on 2 MB at 2 ranks.
# The stash kernel issues each group's poll loads one group ahead (experiment-pipelined-poll.diff,
# scratch build, behind EXP_PIPELINE = the largest nRanks it applies to): group g + 1's loads are
# in flight while group g is tested, reduced, stored and cleared. ptxas (sm_90, bf16 sum): 2 ranks
# 52 registers against 50, no spills (same 4 blocks per SM); 4 ranks 74 against 48 (3 blocks per
# SM); 8 ranks 96 with spills. Session 6's batched kernel (every group loaded and polled at once)
# had spilled; this one does not at 2 ranks.
# Here, before the call (from the repository root, main built and staged as usual):
#   git worktree add --detach /work/exp HEAD && git -C /work/exp apply $PWD/docs/data/1xh200-2026-12-02-session7/experiment-pipelined-poll.diff
#   for x in "f 2" "g 4"; do set -- $x; cmake -S /work/exp -B /work/exp-$1 -DCMAKE_BUILD_TYPE=Release \
#     -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_CUDA_FLAGS=-DEXP_PIPELINE=$2" && \
#     cmake --build /work/exp-$1 -j2 --target nccl-lamport-bench test_gpu_kernel; done
#   mkdir -p .device/exp && (cd /work && tar cJf $OLDPWD/.device/exp/exp.tar.xz exp-f/bench/nccl-lamport-bench \
#     exp-f/lib exp-f/tests/test_gpu_kernel exp-g/bench/nccl-lamport-bench exp-g/lib)
# carry: .device/stage.tar.xz .device/exp/exp.tar.xz .device/device-env.sh
# Expect: if the reduce pass of 2 MB waits on one poll latency per group, f's "fast" at 2 MB below
# the control's 5.16 - 5.17 µs (5.12 is the ratio goal); otherwise no change. Every variant must
# check OK; test_gpu_kernel under f must pass 22/22.
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S .device/x
tar xJf .device/stage.tar.xz -C $S && tar xJf .device/exp/exp.tar.xz -C .device/x
L=/tmp/pipe; rm -rf $L; mkdir -p $L
timeout 90 .device/x/exp-f/tests/test_gpu_kernel > $L/f-kernel.log 2>&1; echo "f test_gpu_kernel rc=$?"; tail -1 $L/f-kernel.log
for r in 1 2 3; do
  timeout 30 $S/bench/nccl-lamport-bench --loopback 2 -b 256K --max-bytes 2M --mode graph --csv $L/main-lb2-run$r.csv > /dev/null 2>&1; echo "main run$r rc=$?"
  for b in f g; do timeout 30 .device/x/exp-$b/bench/nccl-lamport-bench --loopback 2 -b 256K --max-bytes 2M --mode graph --csv $L/$b-lb2-run$r.csv > /dev/null 2>&1; echo "$b run$r rc=$?"; done
done
for b in f g; do timeout 60 .device/x/exp-$b/bench/nccl-lamport-bench --loopback 4 -b 64K --max-bytes 2M --mode graph --csv $L/$b-lb4.csv > /dev/null 2>&1; echo "$b lb4 rc=$?"; done
timeout 60 $S/bench/nccl-lamport-bench --loopback 4 -b 64K --max-bytes 2M --mode graph --csv $L/main-lb4.csv > /dev/null 2>&1
for f in $L/*-lb2-run1.csv $L/*-lb4.csv; do awk -F, -v f=$(basename $f) 'NR>1 && ($1==524288 || $1==2097152) && ($3=="baseline" || $3=="fast") {printf "%s %s:%s=%s:%s ", f, $1, $3, $4, $NF}' $f; echo; done
(cd $L && tar czf $OUT/call.tgz .)
