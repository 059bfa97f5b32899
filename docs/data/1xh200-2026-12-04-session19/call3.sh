# Session 19, call 3: main plus the memory-sync domain change (uncommitted when run): every Lamport
# launch on sm_90+ goes to CUDA's remote memory-sync domain, where NCCL 2.28 launches its own
# kernels (NCCL_MEM_SYNC_DOMAIN, default 1); the loopback's fast-domain0 keeps the default domain.
#  A. test_gpu_kernel (expect 23/23, RemoteSyncDomainLaunchesStayCorrect new), test_gpu_twoshot (16/16).
#  B. Loopback 2 ranks, 8 B - 2 MB, graph, three runs: fast (remote) against fast-domain0 and the
#     baseline. Expect no difference beyond noise (both ranks in one domain, no compute beside).
#  C. Loopback 4 and 8 ranks once (every variant checked).
#  D. Preloaded forked suite, 2 ranks sharing the GPU: multiprocess, errors, comm_kinds (the
#     plugin's launches now carry the attribute); tuner comm_kinds; pynccl.
# carry: .device/stage.tar.xz .device/device-env.sh .device/call.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s19c3; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
for t in kernel twoshot; do
  timeout 150 $S/tests/test_gpu_$t > $L/A-$t.log 2>&1
  echo "A test_gpu_$t: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/A-$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED" $L/A-$t.log | head -5
done
for i in 1 2 3; do
  timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/B-lb2-$i.csv > $L/B-lb2-$i.log 2>&1
  echo -n "B run $i rc=$? $(( $(date +%s) - t0 ))s "
  python3 - $L/B-lb2-$i.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows), "| fast/domain0/base:",
      " ".join(f"{b}: {t[(b,'fast')]:.2f}/{t[(b,'fast-domain0')]:.2f}/{t[(b,'baseline')]:.2f}" for b in ('8', '2048', '32768', '131072', '524288', '2097152')),
      f"2M x{t[('2097152','baseline')]/t[('2097152','fast')]:.3f}")
PY
done
for n in 4 8; do
  timeout 150 $S/bench/nccl-lamport-bench --loopback $n -b 8 --max-bytes 2M --mode graph --csv $L/C-lb$n.csv > $L/C-lb$n.log 2>&1
  echo -n "C loopback $n rc=$? $(( $(date +%s) - t0 ))s "
  python3 - $L/C-lb$n.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows), "| fast/domain0/base:",
      " ".join(f"{b}: {t[(b,'fast')]:.2f}/{t[(b,'fast-domain0')]:.2f}/{t[(b,'baseline')]:.2f}" for b in ('8', '131072', '2097152')))
PY
done
G=""; for t in multiprocess errors comm_kinds; do G="$G $S/tests/test_gpu_$t"; done
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/D timeout 200 bash tests/gpu_suite.sh $S gtest > $L/D.log 2>&1
echo "D preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/D.log | sort -u | cut -c1-170
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 TUNER_GTESTS="$S/tests/tuner/test_gpu_comm_kinds" TUNER_GTESTS_ONLY=1 OUT=$L/E timeout 120 bash tests/gpu_suite.sh $S tuner > $L/E.log 2>&1
echo "E tuner gtest: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'tuner gtest' $L/E.log | sort -u | cut -c1-200
NCCL_LAMPORT_TEST_SHARED_GPU=1 OUT=$L/F timeout 90 bash tests/gpu_suite.sh $S pynccl > $L/F.log 2>&1
echo "F pynccl: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |compare' $L/F.log | cut -c1-200 | sort -u
rm -rf $L/D/results $L/E/results $L/F/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
