# Session 15, call 3: everything after call 2, 2 ranks sharing the GPU.
#  A. Kernels (e3f4d9f): GpuLamportTwoShot.AGiveUpPublishesNoPartialSum with a test binary built on
#     the old two-shot kernel (expect a failure: partial sums, no error) and main's whole
#     test_gpu_twoshot and test_gpu_kernel (expect all pass: the PDL gate must leave PDL on for
#     this sm_90 build); the loopback benchmark at 2 ranks (expect about main's figures: 8 B
#     ~1.4 us, 2 MB ~5.2 us, every size checked OK).
#  B. The preloaded forked suite on the set-up changes (exchange rounds, deferred set-up bound,
#     tuner binding, slot clamp) and the group test's fixed bookkeeping: groups, errors,
#     comm-kinds, faults, lifecycle without the 1000 cycles (20 abort cycles; multiprocess ran in call 2).
#  C. The tuner activation build (its binding changed): groups, errors, comm-kinds,
#     lifecycle without the 1000 cycles.
# carry: .device/stage.tar.xz .device/device-env.sh .device/test_gpu_twoshot-old-kernel
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s15c3; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
timeout 60 .device/test_gpu_twoshot-old-kernel --gtest_filter='*AGiveUpPublishesNoPartialSum*' > $L/A-old-twoshot.log 2>&1
echo "A two-shot give-up, old kernel: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^\[ +(OK|FAILED) +\]|partial sums' $L/A-old-twoshot.log | cut -c1-160 | head -8
for t in twoshot kernel; do
  timeout 150 $S/tests/test_gpu_$t > $L/A-$t.log 2>&1
  echo "A test_gpu_$t: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED) ' $L/A-$t.log | tr '\n' ' ')"
done
$S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/A-lb2.csv > $L/A-lb2.log 2>&1
echo "A loopback 2: rc=$? $(( $(date +%s) - t0 ))s"
python3 - $L/A-lb2.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [r for r in rows if r['check'] != 'OK']
print("rows", len(rows), "not OK", len(bad))
for r in rows:
    if r['variant'] in ('baseline', 'fast') and r['bytes'] in ('8', '2048', '131072', '524288', '2097152'):
        print(r['bytes'], r['variant'], r['graph_us'], r['graph_x_baseline'])
PY
G=""; for t in groups errors comm_kinds faults lifecycle; do G="$G $S/tests/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 GTESTS="$G" OUT=$L/B timeout 250 bash tests/gpu_suite.sh $S gtest > $L/B.log 2>&1
echo "B preloaded: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^gtest' $L/B.log | cut -c1-170
T=""; for t in groups errors comm_kinds lifecycle; do T="$T $S/tests/tuner/test_gpu_$t"; done
GTEST_FILTER=-Lifecycle.CreateDestroyCycles NCCL_LAMPORT_TEST_ABORT_CYCLES=20 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  GTEST_TIMEOUT=150 TUNER_GTESTS="$T" TUNER_GTESTS_ONLY=1 OUT=$L/C timeout 200 bash tests/gpu_suite.sh $S tuner > $L/C.log 2>&1
echo "C tuner activation: rc=$? $(( $(date +%s) - t0 ))s"
grep -E '^tuner gtest' $L/C.log | cut -c1-170
grep -hE '^\[  FAILED  \] [A-Z]|rank [0-9]+: ' $L/B/gtest-*.log $L/C/*.log 2>/dev/null | grep -v " calls on " | sort | uniq | cut -c1-200 | head -20
(cd $L && tar czf $OUT/call.tgz .)
