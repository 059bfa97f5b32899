# Session 16, call 2: main at 38fc4d3 (sm_90 Release), 2 ranks sharing the GPU where forked.
#  A. Kernels (38fc4d3: evict-first output stores in the stash kernel; the old stores as A/B
#     variant kGridStridedStashWriteBack): test_gpu_kernel, test_gpu_twoshot (expect all pass).
#  B. Loopback 2 ranks, 8 B - 2 MB graph, three runs (expect every row OK; 2 MB: fast below
#     fast-stash-wb by about 1 %, and fast / baseline at or above issue 11's 1.267).
#  C. Plugin changes since session 15 (lock-free resolution, NVML load, NCCL_DEBUG_FILE routing):
#     gpu_suite gtest (multiprocess), pynccl, tuner (expect PASS in each).
#  D. NCCL_DEBUG_FILE end to end: pynccl by path under torchrun (2 ranks), NCCL_DEBUG=INFO,
#     NCCL_DEBUG_FILE=dbg.%h.%p.log. Expect no NCCL line on stdout; each rank's file holds NCCL's
#     lines and ours ("Lamport: ..."), the "Lamport one-shot ON" line among them.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s16c2; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
for t in kernel twoshot; do
  timeout 120 $S/tests/test_gpu_$t > $L/A-$t.log 2>&1
  echo "A test_gpu_$t: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED) ' $L/A-$t.log | tr '\n' ' ')"
done
for i in 1 2 3; do
  timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/B-lb2-$i.csv --json $L/B-lb2-$i.json > $L/B-lb2-$i.log 2>&1
  echo "B loopback 2 run $i: rc=$? $(( $(date +%s) - t0 ))s $(grep '^# build' $L/B-lb2-$i.log)"
done
python3 - $L/B-lb2-1.csv $L/B-lb2-2.csv $L/B-lb2-3.csv <<'PY'
import csv, sys
for f in sys.argv[1:]:
    rows = list(csv.DictReader(open(f)))
    bad = [r for r in rows if r['check'] != 'OK']
    t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
    line = f"rows {len(rows)} not OK {len(bad)} |"
    for b in ('8', '2048', '131072', '524288', '2097152'):
        line += f" {b}: fast {t[(b,'fast')]:.2f} base {t[(b,'baseline')]:.2f} x{t[(b,'baseline')]/t[(b,'fast')]:.3f}"
    line += f" | 2M wb {t[('2097152','fast-stash-wb')]:.2f} stash {t[('2097152','fast-stash')]:.2f}"
    print(line)
PY
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$S/tests/test_gpu_multiprocess" \
  TUNER_GTESTS="$S/tests/tuner/test_gpu_multiprocess" OUT=$L/C \
  timeout 340 bash tests/gpu_suite.sh $S gtest,pynccl,tuner > $L/C.log 2>&1
echo "C suite gtest,pynccl,tuner: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'gtest: [0-9]+ GPU tests passed|part |gpu_suite:' $L/C.log | cut -c1-200 | tail -10
mkdir -p $L/D
env NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_LAMPORT_REQUIRE_NVLINK=0 \
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE=$L/D/dbg.%h.%p.log PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 \
  timeout 100 torchrun --standalone --nproc_per_node=2 tests/clients/pynccl_ctypes_check.py \
  --lib "$(realpath $S/lib/libnccl-lamport.so)" --label lamport-path --expect-lamport --out $L/D/pyn > $L/D/stdout.log 2>&1
echo "D NCCL_DEBUG_FILE: rc=$? files $(ls $L/D/dbg.* 2>/dev/null | wc -l); stdout NCCL lines $(grep -c ' NCCL ' $L/D/stdout.log)"
for f in $L/D/dbg.*; do
  echo "  $(basename $f): NCCL lines $(grep -c ' NCCL INFO\| NCCL WARN' $f), ours $(grep -c 'Lamport: ' $f), ON $(grep -c 'Lamport one-shot ON' $f), first ours at line $(grep -n 'Lamport: ' $f | head -1 | cut -d: -f1)"
done
grep -E 'PASS|FAIL' $L/D/stdout.log | head -4
(cd $L && tar czf $OUT/call.tgz .)
