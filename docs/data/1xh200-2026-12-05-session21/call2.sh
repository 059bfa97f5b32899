# Session 21, call 2: tuner activation suite, pynccl, loopback 4/8 (HEAD), then issue 11's 2 MB
# floor diagnostic (scratch build: fe7c2d9 + /work/notes/scratch-floor-diag.diff, never committed;
# kernels/ and bench/ unchanged since fe7c2d9).
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=$OUT/c2; mkdir -p $L
t0=$(date +%s)
T=""; for t in comm_kinds errors lifecycle multiprocess groups faults; do T="$T $S/tests/tuner/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 TUNER_GTESTS="$T" TUNER_GTESTS_ONLY=1 OUT=$L/B timeout 300 bash tests/gpu_suite.sh $S tuner > $L/B.log 2>&1
echo "B tuner gtest: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'tuner gtest' $L/B.log | sort -u | cut -c1-220
NCCL_LAMPORT_TEST_SHARED_GPU=1 OUT=$L/C timeout 90 bash tests/gpu_suite.sh $S pynccl > $L/C.log 2>&1
echo "C pynccl: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |compare' $L/C.log | cut -c1-200 | sort -u
for n in 4 8; do
  timeout 60 $S/bench/nccl-lamport-bench --loopback $n -b 8 --max-bytes 2M --mode graph --csv $L/D-lb$n.csv > $L/D-lb$n.log 2>&1
  echo "D loopback $n: rc=$? $(( $(date +%s) - t0 ))s"
  python3 - $L/D-lb$n.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows),
      " ".join(f"{b}: {t.get((b,'fast'),0):.2f}/{t.get((b,'baseline'),0):.2f}" for b in ('8', '131072', '2097152')))
PY
done
mkdir -p /tmp/c2 && tar xJf .device/scratch.tar.xz -C /tmp/c2
B=/tmp/c2/scratch/bench/nccl-lamport-bench
i=0
for size in 2M 2M 2M 1M 512K 128K 8; do
  i=$((i+1))
  SCRATCH_DIAG=1 timeout 60 $B --loopback 2 -b $size --max-bytes $size --mode graph --csv $L/E$i-$size.csv > $L/E$i-$size.log 2>&1
  echo "E floor $size run $i: rc=$? $(( $(date +%s) - t0 ))s"
  python3 - $L/E$i-$size.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("  ", "  ".join(f"{r['variant']}={float(r['graph_us']):.2f}({r['check']})" for r in rows if r['graph_us']))
PY
done
find $L -name '*.npz' -o -name '*.npy' | xargs rm -f 2>/dev/null
rm -rf $L/B/results $L/C/results 2>/dev/null
du -sh $L
