# Session 17, call 4: the displaced tuner behind a real NCCL (2.28.9, PyTorch's; tuner ABI v5),
# first time on the GPU machine. LD_PRELOAD=libnccl-lamport.so, NCCL_TUNER_PLUGIN unset, and
# NCCL_CONF_FILE naming the test fake tuner (tests/shim/hooks/fake_displaced_tuner.c, the v5-v7
# build: forces ring/simple where NCCL offers it) as NCCL_TUNER_PLUGIN: ours registers itself as
# NCCL's tuner, so the fake is the tuner it displaces. torch all_reduce check, 2 ranks sharing
# the GPU. Expect: each rank logs "tuner: ... keeps answering behind ours" (our INFO, TUNING),
# the Lamport ON line, and the check's own verdicts PASS (fp64 reference).
# carry: .device/stage.tar.xz .device/device-env.sh .device/fake
set -u
source .device/device-env.sh
S=.device/stage; mkdir -p $S && tar xJf .device/stage.tar.xz -C $S
L=/tmp/s17c4; rm -rf $L; mkdir -p $L
md5sum $S/lib/libnccl-lamport.so
F=$(realpath .device/fake/libshim_fake_displaced_tuner.so)
echo "NCCL_TUNER_PLUGIN=$F" > $L/nccl.conf
env NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_LAMPORT_REQUIRE_NVLINK=0 NCCL_LAMPORT_TEST_SHARED_GPU=1 \
  NCCL_CONF_FILE=$L/nccl.conf NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 \
  LD_PRELOAD=$(realpath $S/lib/libnccl-lamport.so) \
  timeout 240 torchrun --standalone --nproc_per_node=2 tests/clients/torch/allreduce_check.py --out $L/t --graph-replays 20 > $L/t.log 2>&1
echo "torch preloaded with a displaced tuner: rc=$?"
echo "keeps answering: $(grep -c 'keeps answering behind ours' $L/t.log); ON lines: $(grep -c 'Lamport one-shot ON' $L/t.log); tuner lines of NCCL: $(grep -c -i 'tuner' $L/t.log)"
grep -m2 'keeps answering behind ours' $L/t.log | cut -c1-220
grep -i -m4 'tuner' $L/t.log | grep -v 'keeps answering' | cut -c1-220
grep -E 'SCENARIO|passed, [0-9]+ failed|allreduce calls ran' $L/t.log | cut -c1-160 | head -12
rm -rf $L/t
(cd $L && tar czf $OUT/call.tgz .)
