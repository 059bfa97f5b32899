# Session 16, call 1.
#  A. Do L2 cache hints move the 2 MB stash kernel (2 ranks, bf16, loopback graph)? Scratch build
#     (exp-cache-hints.diff on a16dc45): LAMPORT_EXP_HINTS bits, stash kernel only:
#     1 = input loads ld.global.cs (evict-first), 8 = input loads ld.global.nc.L1::no_allocate,
#     2 = output stores st.global.cs, 4 = clears stored with an L2 evict_last policy.
#     Hints 0 = main's kernel. Two rounds of 0,1,2,4,8,7 at 2 MB, each run timing the baseline kernel
#     alongside. Expect: a hint matters only if it moves the ratio by more than the ~0.5 % spread;
#     the footprint (about 20 MB) fits in L2, so expect little.
#  B. Bench fixes (wt-bench, cherry-picked): the scratch build's bench (a16dc45's bench code) with
#     --loopback 4 -b 8 -e 16 (expect exit 1: two-shot refused); main's test_gpu_loopback_bench
#     (expect pass); main's bench --loopback 2, 8 B - 2 MB graph (expect ~1.4 us at 8 B, ~5.2 at
#     2 MB, every variant checked OK twice).
#  C. Resolution without static guards (plugin/loader, plugin/abi, plugin/interpose): the preloaded
#     forked suite, 2 ranks sharing the GPU: groups, errors, comm-kinds, lifecycle (20 abort cycles,
#     no 1000 cycles). Expect all pass (comm-kinds 1 skipped: needs 2 GPUs).
# carry: .device/exph.tar.xz .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
tar xJf .device/exph.tar.xz -C .device
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
X=.device/exph/bench/nccl-lamport-bench
L=/tmp/s16c1; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
for round in 1 2; do
  for h in 0 1 2 4 8 7; do
    LAMPORT_EXP_HINTS=$h timeout 60 $X --loopback 2 -b 2M -e 2M --mode graph --csv $L/A-h$h-r$round.csv > $L/A-h$h-r$round.log 2>&1
    echo "A round $round hints $h rc=$? $(awk -F, '($3=="fast" || $3=="baseline") {printf "%s:%s:%s ", $3, $4, $NF}' $L/A-h$h-r$round.csv)"
  done
done
echo "A done $(( $(date +%s) - t0 ))s"
timeout 60 $X --loopback 4 -b 8 -e 16 --mode graph > $L/B-old-lb4.log 2>&1
echo "B old bench --loopback 4 -e 16: rc=$? (expect 1) $(grep -c -i 'invalid' $L/B-old-lb4.log) lines name an invalid value"
timeout 200 $S/tests/test_gpu_loopback_bench > $L/B-test.log 2>&1
echo "B test_gpu_loopback_bench: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED) ' $L/B-test.log | tr '\n' ' ')"
timeout 200 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/B-lb2.csv --json $L/B-lb2.json > $L/B-lb2.log 2>&1
echo "B loopback 2: rc=$? $(( $(date +%s) - t0 ))s; $(grep '^# build' $L/B-lb2.log)"
python3 - $L/B-lb2.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [r for r in rows if r['check'] != 'OK']
print("rows", len(rows), "not OK", len(bad))
for r in rows:
    if r['variant'] in ('baseline', 'fast') and r['bytes'] in ('8', '2048', '131072', '524288', '2097152'):
        print(r['bytes'], r['variant'], r['graph_us'], r['graph_x_baseline'])
PY
G=""; for t in groups errors comm_kinds lifecycle; do G="$G $S/tests/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/C timeout 220 bash tests/gpu_suite.sh $S gtest > $L/C.log 2>&1
echo "C preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/C.log | cut -c1-170
(cd $L && tar czf $OUT/call.tgz .)
