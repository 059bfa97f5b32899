# Session 19, call 4: main at ec73624, the memory-sync domain change as committed (call 3 ran it
# before the launcher's PDL and domain queries became one cached per-device query).
#  A. test_gpu_kernel (expect 23/23).
#  B. Loopback 2 ranks, 8 B - 2 MB, graph, once (expect every row OK; fast = fast-domain0 within noise).
#  C. Preloaded forked suite with NCCL_MEM_SYNC_DOMAIN=0 (the default domain, as NCCL's kernels
#     then): errors, multiprocess (expect 9 and 10 passed).
# carry: .device/stage.tar.xz .device/device-env.sh .device/call.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s19c4; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
timeout 150 $S/tests/test_gpu_kernel > $L/A-kernel.log 2>&1
echo "A test_gpu_kernel: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/A-kernel.log | tr '\n' ' ')"
grep -E "^\[  FAILED" $L/A-kernel.log | head -5
timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/B-lb2.csv > $L/B-lb2.log 2>&1
echo -n "B rc=$? $(( $(date +%s) - t0 ))s $(grep '^# build' $L/B-lb2.log) "
python3 - $L/B-lb2.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows), "| fast/domain0/base:",
      " ".join(f"{b}: {t[(b,'fast')]:.2f}/{t[(b,'fast-domain0')]:.2f}/{t[(b,'baseline')]:.2f}" for b in ('8', '2048', '131072', '524288', '2097152')),
      f"2M x{t[('2097152','baseline')]/t[('2097152','fast')]:.3f}")
PY
G=""; for t in errors multiprocess; do G="$G $S/tests/test_gpu_$t"; done
NCCL_MEM_SYNC_DOMAIN=0 NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/C timeout 200 bash tests/gpu_suite.sh $S gtest > $L/C.log 2>&1
echo "C preloaded, NCCL_MEM_SYNC_DOMAIN=0: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/C.log | sort -u | cut -c1-170
rm -rf $L/C/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz .)
ls -la $OUT
