# Session 7, device call 2 (issue 11, 2 MB at 2 ranks): scratch builds, not committed code.
#  a: main + loopback variants with 192, 320, 384 and 448 data threads per block (bench only);
#  b: a + __nanosleep(32) between poll sweeps that found a sentinel (every kFast kernel);
#  c: a + __nanosleep(128) there.
# Three interleaved loopback runs of each at 2 ranks (256 KB - 2 MB), one at 4 ranks.
set -u
source .device/device-env.sh
mkdir -p .device/x && tar xJf .device/exp/exp.tar.xz -C .device/x
L=/tmp/s7c2; rm -rf $L; mkdir -p $L
for r in 1 2 3; do for b in a b c; do
  timeout 30 .device/x/exp-$b/bench/nccl-lamport-bench --loopback 2 -b 256K --max-bytes 2M --mode graph --csv $L/$b-lb2-run$r.csv > $L/$b-lb2-run$r.log 2>&1; echo "$b run$r rc=$?"
done; done
for b in a b; do timeout 40 .device/x/exp-$b/bench/nccl-lamport-bench --loopback 4 -b 256K --max-bytes 2M --mode graph --csv $L/$b-lb4.csv > $L/$b-lb4.log 2>&1; echo "$b lb4 rc=$?"; done
for b in a b c; do awk -F, -v b=$b 'NR>1 && $1==2097152 && ($3=="baseline" || $3=="fast") {printf "%s %s:%s=%s ", b, $1, $3, $4}' $L/$b-lb2-run1.csv; echo; done
(cd $L && tar czf $OUT/call.tgz .)
