# Session 21, call 1: main at HEAD (a4152da, sm_90 Release): what sessions 20-21 changed in
# kernels/ plugin/ tuner/ and never ran on a GPU. 2 ranks sharing the GPU where forked.
#  K. test_gpu_kernel (incl. validation) 23/23, test_gpu_twoshot 16/16.
#  A. Preloaded forked suite: comm_kinds (12 + 1 skip; new LateWrittenSplitChildrenKeepTheirConfigsMaxCtas),
#     errors 9, multiprocess 10, groups 8, lifecycle 4 (20 abort cycles), faults, threads, singleprocess.
#  D. Loopback 2 ranks 8 B - 2 MB graph once (~1.35 us at 8 B, ~5.17 at 2 MB, 2 MB 1.25-1.27x).
# Logs straight under $OUT (a run killed at the limit still returns what it wrote).
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=$OUT/c1; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $L/machine.txt
md5sum $S/lib/libnccl-lamport.so | tee -a $L/machine.txt
t0=$(date +%s)
for t in kernel twoshot; do
  timeout 150 $S/tests/test_gpu_$t > $L/K-$t.log 2>&1
  echo "K $t: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/K-$t.log | tr '\n' ' ')"
done
G=""; for t in comm_kinds errors multiprocess groups lifecycle faults threads singleprocess; do G="$G $S/tests/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/A timeout 360 bash tests/gpu_suite.sh $S gtest > $L/A.log 2>&1
echo "A preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/A.log | sort -u | cut -c1-220
timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/D-lb2.csv > $L/D-lb2.log 2>&1
echo "D loopback 2: rc=$? $(( $(date +%s) - t0 ))s $(grep '^# build' $L/D-lb2.log)"
python3 - $L/D-lb2.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows),
      " ".join(f"{b}: {t.get((b,'fast'),0):.2f}/{t.get((b,'baseline'),0):.2f}" for b in ('8', '2048', '131072', '524288', '2097152')),
      f"2M x{t[('2097152','baseline')]/t[('2097152','fast')]:.3f}")
PY
find $L -name '*.npz' -o -name '*.npy' | xargs rm -f 2>/dev/null
rm -rf $L/A/results 2>/dev/null
du -sh $L
