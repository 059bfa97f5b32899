# Session 16, call 3: main at 1be7f44 (the stash kernel's stores reverted to session 15's), 2 ranks
# sharing the GPU where forked. Call 2's suite ran out of its 340 s inside the tuner part and its
# log archive was too large to come back; this call runs what that left open, with small logs.
#  A. test_gpu_kernel and test_gpu_twoshot on the reverted kernel (expect 22/22 and 16/16).
#  B. Loopback 2 ranks, 8 B - 2 MB graph, one run (expect every row OK; ~1.35 us at 8 B, ~5.16 at 2 MB).
#  C. gpu_suite tuner part alone (expect PASS).
#  D. Which lines reached stdout in call 2's NCCL_DEBUG_FILE run (expect none of NCCL's or ours).
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s16c3; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
for t in kernel twoshot; do
  timeout 60 $S/tests/test_gpu_$t > $L/A-$t.log 2>&1
  echo "A test_gpu_$t: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED) ' $L/A-$t.log | tr '\n' ' ')"
done
timeout 40 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/B-lb2.csv > $L/B-lb2.log 2>&1
echo "B loopback 2: rc=$? $(( $(date +%s) - t0 ))s $(grep '^# build' $L/B-lb2.log)"
python3 - $L/B-lb2.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows),
      " ".join(f"{b}: {t[(b,'fast')]:.2f}/{t[(b,'baseline')]:.2f}" for b in ('8', '2048', '131072', '524288', '2097152')))
PY
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 TUNER_GTESTS="$S/tests/tuner/test_gpu_multiprocess" OUT=$L/C \
  timeout 330 bash tests/gpu_suite.sh $S tuner > $L/C.log 2>&1
echo "C suite tuner: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'part |gpu_suite:|hooked|ON on' $L/C.log | cut -c1-200 | tail -8
mkdir -p $L/D
env NCCL_LAMPORT_TEST_SHARED_GPU=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_LAMPORT_REQUIRE_NVLINK=0 \
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE=$L/D/dbg.%h.%p.log PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 \
  timeout 60 torchrun --standalone --nproc_per_node=2 tests/clients/pynccl_ctypes_check.py \
  --lib "$(realpath $S/lib/libnccl-lamport.so)" --label lamport-path --expect-lamport --out $L/D/pyn > $L/D/stdout.log 2>&1
echo "D rc=$? stdout lines with ' NCCL ':"; grep ' NCCL ' $L/D/stdout.log | cut -c1-160 | head -4
for f in $L/D/dbg.*; do echo "  $(basename $f): ours $(grep -c 'Lamport: ' $f), ON $(grep -c 'Lamport one-shot ON' $f)"; done
rm -rf $L/D/pyn $L/C/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
