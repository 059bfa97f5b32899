# Session 19, call 1: main at e87f4c3 (sm_90 Release), session 18's two refactors that never ran
# on the GPU (8718c66: one reader of NCCL's integer parameters, used by the block limit, NVTX and
# the pointer checks; e87f4c3: the set-up takes the block-limit note once). 2 ranks sharing the GPU.
#  A. Preloaded forked suite: comm_kinds (expect 11 pass, 1 skip), errors (9), multiprocess (10),
#     groups (8), lifecycle (20 abort cycles, without the 1000 create/destroy cycles; 4).
#  B. Tuner activation: tests/tuner/ comm_kinds, errors, lifecycle (expect as above).
#  C. pynccl part (expect PASS, bit-identical).
#  D. Loopback 2 ranks, 8 B - 2 MB graph, three runs (no kernel change; expect every row OK,
#     ~1.4 us at 8 B, ~5.18 at 2 MB, 2 MB ratio 1.25-1.27x).
# carry: .device/stage.tar.xz .device/device-env.sh .device/call.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s19c1; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
G=""; for t in comm_kinds errors multiprocess groups lifecycle; do G="$G $S/tests/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/A timeout 300 bash tests/gpu_suite.sh $S gtest > $L/A.log 2>&1
echo "A preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/A.log | sort -u | cut -c1-170
T=""; for t in comm_kinds errors lifecycle; do T="$T $S/tests/tuner/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 TUNER_GTESTS="$T" TUNER_GTESTS_ONLY=1 OUT=$L/B timeout 200 bash tests/gpu_suite.sh $S tuner > $L/B.log 2>&1
echo "B tuner gtest: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'tuner gtest' $L/B.log | sort -u | cut -c1-200
NCCL_LAMPORT_TEST_SHARED_GPU=1 OUT=$L/C timeout 90 bash tests/gpu_suite.sh $S pynccl > $L/C.log 2>&1
echo "C pynccl: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |compare' $L/C.log | cut -c1-200 | sort -u
for i in 1 2 3; do
  timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/D-lb2-$i.csv > $L/D-lb2-$i.log 2>&1
  echo "D loopback 2 run $i: rc=$? $(( $(date +%s) - t0 ))s $(grep '^# build' $L/D-lb2-$i.log)"
  python3 - $L/D-lb2-$i.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows),
      " ".join(f"{b}: {t[(b,'fast')]:.2f}/{t[(b,'baseline')]:.2f}" for b in ('8', '2048', '131072', '524288', '2097152')),
      f"2M x{t[('2097152','baseline')]/t[('2097152','fast')]:.3f}")
PY
done
rm -rf $L/A/results $L/B/results $L/C/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
