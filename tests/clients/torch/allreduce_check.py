"""torch.distributed all_reduce check, run once with and once without libnccl-lamport.so preloaded.

Launch with torchrun (one process per GPU):
    torchrun --nproc_per_node=2 tests/clients/torch/allreduce_check.py --out DIR
Each rank saves its results to DIR/rank<r>.pt; tests/clients/torch/compare_runs.py compares two runs
(sum results must be bit-identical to stock NCCL; avg within tolerance: NCCL scales each input by
1/nRanks before summing, nccl-lamport scales the fp32 sum, which differs near half's subnormals).
Covers eager all_reduce (sum, avg) for float32/float16/bfloat16 at odd and even sizes, an
async_op=True call, and an all_reduce captured in a CUDA graph and replayed. Every result is also
checked against a float64 reference here; the exit status is 1 on any mismatch.
The wider client scenarios (lazy init, new_group, DDP, ...) are in clients_check.py.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import local_device, make_input, reference, save_results, within_reference  # noqa: E402

SIZES = [1, 7, 1024, 4097, 65536, 262145, 1 << 20, 4 << 20]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def log(rank, text):
    print(f"rank {rank}: {text}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--graph-replays", type=int, default=200)
    args = parser.parse_args()

    local_rank = local_device()
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()
    world = dist.get_world_size()
    results = {}
    exact = []
    bad = []

    def check(key, result, n, dtype, salt, op):
        ref, scale = reference(world, n, dtype, salt, op)
        ok, nbad, err = within_reference(result, ref, scale, dtype, world)
        if not ok:
            bad.append(key)
            log(rank, f"FAIL {key}: {nbad} of {n} elements off the float64 reference (max error {err:.3g})")

    for dtype in DTYPES:
        for n in SIZES:
            x = make_input(rank, n, dtype, 1)
            dist.all_reduce(x)
            results[f"sum/{dtype}/{n}"] = x.cpu()
            exact.append(f"sum/{dtype}/{n}")
            check(f"sum/{dtype}/{n}", x, n, dtype, 1, "sum")
            y = make_input(rank, n, dtype, 2)
            dist.all_reduce(y, op=dist.ReduceOp.AVG)
            results[f"avg/{dtype}/{n}"] = y.cpu()
            check(f"avg/{dtype}/{n}", y, n, dtype, 2, "avg")

    log(rank, "eager sum/avg done")
    z = make_input(rank, 12345, torch.bfloat16, 3)
    work = dist.all_reduce(z, async_op=True)
    work.wait()
    results["async/bf16/12345"] = z.cpu()
    exact.append("async/bf16/12345")
    check("async/bf16/12345", z, 12345, torch.bfloat16, 3, "sum")

    log(rank, "async done")
    # CUDA graph: capture one all_reduce on a static buffer, replay with new inputs each time.
    static = make_input(rank, 8192, torch.bfloat16, 4)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        dist.all_reduce(static)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(static)
    for i in range(args.graph_replays):
        static.copy_(make_input(rank, 8192, torch.bfloat16, 100 + i))
        graph.replay()
        if i % 50 == 0 or i == args.graph_replays - 1:
            torch.cuda.synchronize()
            results[f"graph/bf16/8192/{i}"] = static.cpu()
            exact.append(f"graph/bf16/8192/{i}")
            check(f"graph/bf16/8192/{i}", static, 8192, torch.bfloat16, 100 + i, "sum")
    torch.cuda.synchronize()
    log(rank, "graph replays done")

    save_results(args.out, rank, results, exact=exact)
    log(rank, "results saved")
    # NCCL waits in ncclCommDestroy for graphs that still hold its work: release ours first.
    del graph
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"rank {rank}: {len(results)} results saved to {args.out}; "
          f"{len(results) - len(bad)} match the float64 reference, {len(bad)} do not", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
