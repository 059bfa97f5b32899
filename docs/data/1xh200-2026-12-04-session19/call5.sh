# Session 19, call 5: main at 9537faf, after the review of the memory-sync domain change: the GPU
# test now alternates the domain call by call on each stream (PDL between them) and checks that a
# captured launch's kernel node carries the domain asked for.
#  A. test_gpu_kernel (expect 23/23).
#  B. Loopback 2 ranks, 8 B - 2 MB, graph, once (every row OK; the baseline recorded in the
#     default domain in the JSON).
# carry: .device/stage.tar.xz .device/device-env.sh .device/call.sh
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s19c5; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
t0=$(date +%s)
timeout 150 $S/tests/test_gpu_kernel > $L/A-kernel.log 2>&1
echo "A test_gpu_kernel: rc=$? $(( $(date +%s) - t0 ))s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/A-kernel.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure|RemoteSyncDomain" $L/A-kernel.log | head -8
timeout 60 $S/bench/nccl-lamport-bench --loopback 2 -b 8 --max-bytes 2M --mode graph --csv $L/B-lb2.csv --json $L/B-lb2.json > $L/B-lb2.log 2>&1
echo -n "B rc=$? $(( $(date +%s) - t0 ))s $(grep '^# build' $L/B-lb2.log) "
python3 - $L/B-lb2.csv $L/B-lb2.json <<'PY'
import csv, sys, json
rows = list(csv.DictReader(open(sys.argv[1])))
t = {(r['bytes'], r['variant']): float(r['graph_us']) for r in rows if r['graph_us']}
v = {x['name']: x['remoteSyncDomain'] for x in json.load(open(sys.argv[2]))['variants']}
print("rows", len(rows), "not OK", sum(r['check'] != 'OK' for r in rows), "| fast/domain0/base:",
      " ".join(f"{b}: {t[(b,'fast')]:.2f}/{t[(b,'fast-domain0')]:.2f}/{t[(b,'baseline')]:.2f}" for b in ('8', '131072', '2097152')),
      "| remote:", {k: v[k] for k in ('baseline', 'fast', 'fast-domain0', 'fast-stash')})
PY
(cd $L && tar czf $OUT/call.tgz .)
ls -la $OUT
