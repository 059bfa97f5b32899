# Session 17, call 1: main at b88b521 (sm_90 Release), the object session 16 could not run (its
# call 4 got no machine). 2 ranks sharing the GPU where forked.
#  A. Kernels: test_gpu_kernel (with the residency tests), test_gpu_twoshot (expect all pass).
#  B. Loopback 2 ranks, 8 B - 2 MB graph (expect every row OK; ~1.35 us at 8 B, ~5.17 at 2 MB;
#     the build line names b88b521).
#  C. Preloaded forked suite: multiprocess, groups (with group launch), errors, comm_kinds (with
#     non-blocking comms), faults, lifecycle (20 abort cycles, without the 1000 create/destroy
#     cycles). Expect all pass (comm-kinds: 1 skipped, needs 2 GPUs).
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s17c1; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
for t in kernel twoshot; do
  timeout 120 $S/tests/test_gpu_$t > $L/A-$t.log 2>&1
  echo "A test_gpu_$t: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/A-$t.log | tr '\n' ' ')"
done
timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/B-lb2.csv > $L/B-lb2.log 2>&1
echo "B loopback 2: rc=$? $(( $(date +%s) - t0 ))s $(grep '^# build' $L/B-lb2.log)"
python3 - $L/B-lb2.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows),
      " ".join(f"{b}: {t[(b,'fast')]:.2f}/{t[(b,'baseline')]:.2f}" for b in ('8', '2048', '131072', '524288', '2097152')),
      f"2M x{t[('2097152','baseline')]/t[('2097152','fast')]:.3f}")
PY
G=""; for t in multiprocess groups errors comm_kinds faults lifecycle; do G="$G $S/tests/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/C timeout 380 bash tests/gpu_suite.sh $S gtest > $L/C.log 2>&1
echo "C preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/C.log | cut -c1-170
rm -rf $L/C/results 2>/dev/null
(cd $L && tar czf $OUT/call.tgz --exclude='*.npz' --exclude='*.npy' .)
ls -la $OUT
