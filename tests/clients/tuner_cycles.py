"""Create / use / destroy cycles of a communicator made by a pynccl-style client (ctypes), for the
tuner-activation mode (SPEC 4a): run it with NCCL_TUNER_PLUGIN naming libnccl-tuner-lamport.so
and nothing else (no LD_PRELOAD, no LD_AUDIT).

    torchrun --standalone --nproc_per_node=2 tests/clients/tuner_cycles.py --lib LIB \
        [--cycles 1000] [--budget-s 480] [--expect-lamport]

Each cycle, per rank: ncclGetUniqueId on rank 0, shared over a gloo group; ncclCommInitRank; one
bf16 sum allreduce of 4096 fresh elements (the cycle number is the input's salt), checked against
a float64 reference and across ranks (bit-identical); ncclCommDestroy. Since each cycle destroys
the process's only communicator, NCCL unloads its tuner and loads it again at the next init (NCCL
2.28's plugin reference count), so every cycle goes through the tuner's init, the set-up inside
it, the bind at the first hooked call, and the tear-down. With --expect-lamport every cycle's
communicator must be eligible and its allreduce must be counted as a Lamport call.

Resources (open fds, threads, VmRSS, free device memory) are sampled after the warm-up cycles and
every 100 cycles; at the end they must be back within a small slack of the first sample.
Prints "tuner-cycles: N of M cycles, ..." per rank; exits 1 on any failure or if the time budget
ran out before M cycles (the count done is printed).
"""
import argparse
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from common import NCCL_DTYPE, NCCL_OP, LamportApi, local_device, make_input, reference, within_reference  # noqa: E402
from pynccl_ctypes_check import Nccl, NcclUniqueId  # noqa: E402

WARMUP_CYCLES = 20
FD_SLACK, THREAD_SLACK = 2, 2
RSS_SLACK_MIB = 32.0
DEVICE_SLACK_MIB = 64.0


def resources():
    """(open fds, threads, VmRSS MiB, free device MiB) of this process."""
    fds = len(os.listdir("/proc/self/fd"))
    threads = rss = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024.0
    free, _ = torch.cuda.mem_get_info()
    return fds, threads, rss, free / (1 << 20)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True, help="library path or name, as given to ctypes.CDLL")
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--budget-s", type=float, default=480.0, help="stop (and fail) after this long")
    parser.add_argument("--expect-lamport", action="store_true")
    args = parser.parse_args()

    local_rank = local_device()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    nccl = Nccl(args.lib)
    api = LamportApi(nccl.lib)
    stream = torch.cuda.current_stream()
    failures = []

    def fail(text):
        failures.append(text)
        print(f"rank {rank}: FAIL {text}", flush=True)

    n, dtype = 4096, torch.bfloat16
    recv = torch.empty(n, dtype=dtype, device=f"cuda:{local_rank}")
    samples = []
    t0 = time.time()
    done = 0
    lamport_cycles = 0
    for cycle in range(args.cycles):
        # One decision for both ranks, so that they always run the same number of cycles.
        stop = torch.tensor([1 if time.time() - t0 > args.budget_s else 0])
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop.item():
            break
        uid = NcclUniqueId()
        if rank == 0:
            nccl.check(nccl.getUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        box = [ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid))]
        dist.broadcast_object_list(box, src=0)
        ctypes.memmove(ctypes.addressof(uid), box[0], ctypes.sizeof(uid))
        comm = ctypes.c_void_p()
        nccl.check(nccl.commInitRank(ctypes.byref(comm), world, uid, rank), f"cycle {cycle}: ncclCommInitRank")

        send = make_input(rank, n, dtype, cycle)
        recv.fill_(float("nan"))  # poisoned: a call that writes nothing fails the check
        nccl.check(nccl.allReduce(ctypes.c_void_p(send.data_ptr()), ctypes.c_void_p(recv.data_ptr()), n,
                                  NCCL_DTYPE[dtype], NCCL_OP["sum"], comm, ctypes.c_void_p(stream.cuda_stream)),
                   f"cycle {cycle}: ncclAllReduce")
        stream.synchronize()
        ref, scale = reference(world, n, dtype, cycle, "sum")
        ok, nbad, err = within_reference(recv, ref, scale, dtype, world)
        if not ok:
            fail(f"cycle {cycle}: {nbad} of {n} elements off the float64 reference (max error {err:.3g})")
        # Bit-identical across ranks: every rank must hold the same bits.
        bits = recv.view(torch.int16).to(torch.int64).cpu()
        gathered = [torch.empty_like(bits) for _ in range(world)]
        dist.all_gather(gathered, bits)
        if any(not torch.equal(g, gathered[0]) for g in gathered):
            fail(f"cycle {cycle}: the ranks' results differ")
        info = api.comm_info(comm.value) if api.present else None
        on_lamport = info is not None and info["eligible"] and info["lamportCalls"] == 1
        lamport_cycles += int(on_lamport)
        if args.expect_lamport and not on_lamport:
            fail(f"cycle {cycle}: not on the Lamport path "
                 f"({'no nccl-lamport API in the process' if info is None else info})")
        nccl.check(nccl.commDestroy(comm), f"cycle {cycle}: ncclCommDestroy")
        done += 1
        if done == WARMUP_CYCLES or done % 100 == 0:
            samples.append((done, *resources()))
        if len(failures) > 5:
            break

    elapsed = time.time() - t0
    if samples and samples[-1][0] != done:
        samples.append((done, *resources()))
    for s in samples:
        print(f"rank {rank}: after {s[0]} cycles: fds {s[1]}, threads {s[2]}, VmRSS {s[3]:.1f} MiB, "
              f"free device memory {s[4]:.1f} MiB", flush=True)
    if len(samples) >= 2:
        first, last = samples[0], samples[-1]
        if last[1] > first[1] + FD_SLACK:
            fail(f"open fds grew from {first[1]} to {last[1]}")
        if last[2] > first[2] + THREAD_SLACK:
            fail(f"threads grew from {first[2]} to {last[2]}")
        if last[3] > first[3] + RSS_SLACK_MIB:
            fail(f"VmRSS grew from {first[3]:.1f} to {last[3]:.1f} MiB")
        if last[4] < first[4] - DEVICE_SLACK_MIB:
            fail(f"free device memory fell from {first[4]:.1f} to {last[4]:.1f} MiB")
    if done < args.cycles:
        fail(f"only {done} of {args.cycles} cycles within the {args.budget_s:.0f} s budget")
    print(f"rank {rank}: tuner-cycles: {done} of {args.cycles} cycles in {elapsed:.1f} s "
          f"({1000 * elapsed / max(done, 1):.0f} ms a cycle), {lamport_cycles} on the Lamport path, "
          f"{len(failures)} failures", flush=True)
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
