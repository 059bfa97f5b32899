# Session 14, call 5 (prepared for the next session: no device time was left): the changes of
# this session that have not run on a GPU, on main's build, 2 ranks sharing the GPU.
#  - b31adaa (plugin/loader): by path and under LD_AUDIT the real NCCL is found as before (pynccl
#    part: stock, libnccl-lamport.so by path, libnccl.so.2 by name under LD_AUDIT); the tuner
#    activation part (hooks installed, every client check, the tuner gtests), which the refusal
#    to hook after an unhooked resolve must leave untouched.
#  - 4bdbf11 (bench): --loopback 2 with --csv and --json (written through the new
#    replace-whole writer); a one-GPU --tune is refused with status 2.
#  - 62d6657 (tuner): the displaced-tuner search follows NCCL's rules (no nccl.conf there: it now
#    also tries libnccl-tuner.so, absent, so nothing is chained); the tuner part covers it.
#  - ec39cd3 (tuner/routing): the two-shot bound's new cap at 2^31 vectors changes nothing at 2
#    ranks; every routed call in the gtest and tuner parts goes through it.
#  - 928efa7 (tests/gpu_suite.sh): part gtest prints how many GPU tests passed (expect > 0: PASS).
# Expect: gtest PASS with "N GPU tests passed", pynccl PASS, tuner PASS (entry points hooked,
# Lamport one-shot ON on both ranks), loopback rc 0 with both files parsed, --tune rc 2.
# carry: .device/stage.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s14c5; rm -rf $L; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
NCCL_LAMPORT_TEST_SHARED_GPU=1 GTEST_TIMEOUT=150 GTESTS="$S/tests/test_gpu_multiprocess" \
  TUNER_GTESTS="$S/tests/tuner/test_gpu_multiprocess" OUT=$L/suite \
  timeout 420 bash tests/gpu_suite.sh $S gtest,pynccl,tuner > $L/suite.log 2>&1
echo "suite gtest,pynccl,tuner: rc=$? $(( $(date +%s) - t0 ))s"
grep -E 'gtest: [0-9]+ GPU tests passed|part |gpu_suite:' $L/suite.log | cut -c1-200 | tail -12
$S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 64K --mode graph --csv $L/lb.csv --json $L/lb.json > $L/lb.log 2>&1
echo "loopback 2 with --csv/--json: rc=$? $(( $(date +%s) - t0 ))s"
python3 -c "import json,csv,sys; d=json.load(open('$L/lb.json')); r=list(csv.reader(open('$L/lb.csv'))); print('json keys', len(d), 'csv rows', len(r))"
$S/bench/nccl-lamport-bench --tune $L/t.json > $L/tune.log 2>&1; echo "--tune on one GPU: rc=$? (expect 2)"; tail -1 $L/tune.log
(cd $L && tar czf $OUT/call.tgz .)
