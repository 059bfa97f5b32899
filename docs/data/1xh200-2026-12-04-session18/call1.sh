# Session 18, call 1: main at 2a75054 (sm_90 Release), the object session 17 could not run
# (3a5b908: NCCL 2.29/2.30 functions exported through the opaque trampolines; 2a75054:
# ncclResetDebugInit moved there). 2 ranks sharing the GPU where forked.
#  A. Kernels: test_gpu_kernel, test_gpu_twoshot (expect all pass; no kernel change).
#  B. Loopback 2 ranks, 8 B - 2 MB graph, three runs (expect every row OK; ~1.35 us at 8 B,
#     ~5.17 at 2 MB, 2 MB ratio 1.25-1.26x).
#  C. Preloaded forked suite: multiprocess, errors, comm_kinds (expect pass; comm-kinds 1 skip).
#  D. pynccl part: libnccl.so.2 preloaded and under LD_AUDIT (the audit path resolves every
#     exported name, the new opaque ones included; expect PASS, bit-identical).
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s18c1; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
for t in kernel twoshot; do
  timeout 120 $S/tests/test_gpu_$t > $L/A-$t.log 2>&1
  echo "A test_gpu_$t: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/A-$t.log | tr '\n' ' ')"
done
for i in 1 2 3; do
  timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/B-lb2-$i.csv > $L/B-lb2-$i.log 2>&1
  echo "B loopback 2 run $i: rc=$? $(( $(date +%s) - t0 ))s $(grep '^# build' $L/B-lb2-$i.log)"
  python3 - $L/B-lb2-$i.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows),
      " ".join(f"{b}: {t[(b,'fast')]:.2f}/{t[(b,'baseline')]:.2f}" for b in ('8', '2048', '131072', '524288', '2097152')),
      f"2M x{t[('2097152','baseline')]/t[('2097152','fast')]:.3f}")
PY
done
G=""; for t in multiprocess errors comm_kinds; do G="$G $S/tests/test_gpu_$t"; done
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/C timeout 200 bash tests/gpu_suite.sh $S gtest > $L/C.log 2>&1
echo "C preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/C.log | sort -u | cut -c1-170
NCCL_LAMPORT_TEST_SHARED_GPU=1 OUT=$L/D timeout 200 bash tests/gpu_suite.sh $S pynccl > $L/D.log 2>&1
echo "D suite pynccl: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |gpu_suite:|hooked|bit-identical|AUDIT|audit' $L/D.log | cut -c1-200 | tail -12
rm -rf $L/C/results $L/D/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
