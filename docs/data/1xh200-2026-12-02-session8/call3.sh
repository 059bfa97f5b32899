# Session 8, call 3: where the bytes of 2 MB at 2 ranks go. Nsight Compute on the no-wait build of
# call 2 (exp-h: one poll load, never retried, so that kernels serialised by the profiler cannot
# wait on each other; the build of call 2 plus the same in the baseline kernel, experiments-call3.diff), L2 kept between kernels (--cache-control none) and clocks left alone:
# DRAM and L2 bytes and the duration of each one-shot kernel of a 2 MB loopback run.
# carry: .device/exp/exp.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
mkdir -p .device/x && tar xJf .device/exp/exp.tar.xz -C .device/x
L=/tmp/c3; rm -rf $L; mkdir -p $L
which ncu || ls /opt/nvidia/nsight-compute/*/ncu
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,launch__grid_size,launch__block_size
timeout 300 ncu --clock-control none --cache-control none -k regex:lamportOneShot --launch-count 300 \
  --metrics $M --csv --print-units base \
  .device/x/exp-h/bench/nccl-lamport-bench --loopback 2 -b 2M --max-bytes 2M --mode graph --no-check \
  --warmup 2 --reps 1 --graph-replays 1 > $L/ncu.csv 2> $L/ncu.err; echo "ncu rc=$?"
tail -3 $L/ncu.err; wc -l $L/ncu.csv
(cd $L && tar czf $OUT/call.tgz .)
