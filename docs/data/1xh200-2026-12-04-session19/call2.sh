# Session 19, call 2: a scratch build of main (aea6925 + an A/B kernel, uncommitted when run):
# fast-stash-steal, the stash kernel whose last, partial group is reduced by the blocks that claim
# its chunks first (kernel review of session 19). The question: does it take 0.05 us or more off
# 2 MB at 2 ranks against the default in the same runs (issue 11 asks 1.267x the baseline)?
#  A. test_gpu_kernel (expect 22/22; the claiming kernel joins the strided-grid and in-place-clear
#     hand-over tests, its claim counter must be 0 after every batch).
#  B. Loopback 2 ranks, 256 KB - 2 MB, graph, six runs: fast / fast-stash-steal / baseline.
#  C. Loopback 4 and 8 ranks, 1 - 2 MB, once each (every variant checked).
# carry: .device/stage.tar.xz .device/device-env.sh .device/call.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s19c2; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
timeout 150 $S/tests/test_gpu_kernel > $L/A-kernel.log 2>&1
echo "A test_gpu_kernel: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/A-kernel.log | tr '\n' ' ')"
grep -E "FAILED|Failure" $L/A-kernel.log | head -5
for i in 1 2 3 4 5 6; do
  timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 256K --max-bytes 2M --mode graph --csv $L/B-lb2-$i.csv > $L/B-lb2-$i.log 2>&1
  echo -n "B run $i rc=$? $(( $(date +%s) - t0 ))s "
  python3 - $L/B-lb2-$i.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
bad = sum(r['check'] != 'OK' for r in rows)
out = []
for b in ('524288', '1048576', '2097152'):
    f, s, base = t[(b, 'fast')], t[(b, 'fast-stash-steal')], t[(b, 'baseline')]
    out.append(f"{b}: fast {f:.2f} steal {s:.2f} base {base:.2f} x{base/f:.3f}/x{base/s:.3f}")
print("rows", len(rows), "not OK", bad, " | ".join(out))
PY
done
for n in 4 8; do
  timeout 120 $S/bench/nccl-lamport-bench --loopback $n -b 1M --max-bytes 2M --mode graph --csv $L/C-lb$n.csv > $L/C-lb$n.log 2>&1
  echo -n "C loopback $n rc=$? $(( $(date +%s) - t0 ))s "
  python3 - $L/C-lb$n.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows),
      " | ".join(f"{b}: fast {t[(b,'fast')]:.2f} steal {t[(b,'fast-stash-steal')]:.2f} base {t[(b,'baseline')]:.2f}" for b in ('1048576', '2097152')))
PY
done
(cd $L && tar czf $OUT/call.tgz .)
ls -la $OUT
