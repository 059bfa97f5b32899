# Session 7, device call 3 (issue 11, 2 MB at 2 ranks): scratch builds, not committed code.
#  a: control (call 2's a);
#  d: a without the stash kernel's in-place clear (results wrong from the 4th call on: timing of
#     the clear's upper bound only);
#  e: a with the stash kernel polling by 16-byte atomic exchange with the sentinel
#     (atom.exch.b128, sm_90): one L2 read-modify-write instead of a poll load and a clear store.
# Three interleaved loopback runs of each at 2 ranks (256 KB - 2 MB); e also at 4 and 8 ranks.
set -u
source .device/device-env.sh
mkdir -p .device/x && tar xJf .device/exp/exp.tar.xz -C .device/x
L=/tmp/s7c3; rm -rf $L; mkdir -p $L
for r in 1 2 3; do for b in a d e; do
  timeout 30 .device/x/exp-$b/bench/nccl-lamport-bench --loopback 2 -b 256K --max-bytes 2M --mode graph --csv $L/$b-lb2-run$r.csv > $L/$b-lb2-run$r.log 2>&1; echo "$b run$r rc=$?"
done; done
for n in 4 8; do for b in a e; do timeout 60 .device/x/exp-$b/bench/nccl-lamport-bench --loopback $n -b 64K --max-bytes 2M --mode graph --csv $L/$b-lb$n.csv > $L/$b-lb$n.log 2>&1; echo "$b lb$n rc=$?"; done; done
for b in a d e; do awk -F, -v b=$b 'NR>1 && $1==2097152 && ($3=="baseline" || $3=="fast") {printf "%s %s:%s=%s:%s ", b, $1, $3, $4, $NF}' $L/$b-lb2-run1.csv; echo; done
(cd $L && tar czf $OUT/call.tgz .)
