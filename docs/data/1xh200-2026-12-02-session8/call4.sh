# Session 8, call 4: the same no-wait build and run as call 3, Nsight Compute's sections for three
# default one-shot kernels at 2 MB (speed of light, memory workload, occupancy, warp states).
# carry: .device/exp/exp.tar.xz .device/device-env.sh
set -u
source .device/device-env.sh
mkdir -p .device/x && tar xJf .device/exp/exp.tar.xz -C .device/x
L=/tmp/c4; rm -rf $L; mkdir -p $L
timeout 300 ncu --clock-control none --cache-control none -k regex:lamportOneShotFastKernel --launch-skip 20 --launch-count 3 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy \
  --section LaunchStats --section WarpStateStats --section SchedulerStats \
  .device/x/exp-h/bench/nccl-lamport-bench --loopback 2 -b 2M --max-bytes 2M --mode graph --no-check \
  --warmup 2 --reps 1 --graph-replays 1 > $L/ncu.txt 2> $L/ncu.err; echo "ncu rc=$?"
grep -E "Duration|Throughput|Hit Rate|Achieved Occupancy|Theoretical Occupancy|Registers|Grid Size|Block Size|Warp Cycles Per Issued|Stall|Busy|Bandwidth" $L/ncu.txt | head -60
(cd $L && tar czf $OUT/call.tgz .)
