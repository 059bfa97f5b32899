"""torch.distributed all_reduce check, run once with and once without libnccl-lamport.so preloaded.

Launch with torchrun (one process per GPU):
    torchrun --nproc_per_node=2 tests/torch/allreduce_check.py --out DIR
Each rank saves its results to DIR/rank<r>.pt; tests/torch/compare_runs.py compares two runs.
Covers eager all_reduce (sum, avg) for float32/float16/bfloat16 at odd and even sizes, an
async_op=True call, and an all_reduce captured in a CUDA graph and replayed.
"""
import argparse
import os

import torch
import torch.distributed as dist

SIZES = [1, 7, 1024, 4097, 65536, 262145, 1 << 20, 4 << 20]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def make_input(rank, n, dtype, salt):
    gen = torch.Generator().manual_seed(1_000_003 * rank + 7919 * n + salt)
    return torch.randn(n, generator=gen, dtype=torch.float32).to(dtype).cuda()


def log(rank, text):
    print(f"rank {rank}: {text}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--graph-replays", type=int, default=200)
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()
    results = {}

    for dtype in DTYPES:
        for n in SIZES:
            x = make_input(rank, n, dtype, 1)
            dist.all_reduce(x)
            results[f"sum/{dtype}/{n}"] = x.cpu()
            y = make_input(rank, n, dtype, 2)
            dist.all_reduce(y, op=dist.ReduceOp.AVG)
            results[f"avg/{dtype}/{n}"] = y.cpu()

    log(rank, "eager sum/avg done")
    z = make_input(rank, 12345, torch.bfloat16, 3)
    work = dist.all_reduce(z, async_op=True)
    work.wait()
    results["async/bf16/12345"] = z.cpu()

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
    torch.cuda.synchronize()
    log(rank, "graph replays done")

    os.makedirs(args.out, exist_ok=True)
    torch.save(results, os.path.join(args.out, f"rank{rank}.pt"))
    log(rank, "results saved")
    # NCCL waits in ncclCommDestroy for graphs that still hold its work: release ours first.
    del graph
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"rank {rank}: {len(results)} results saved to {args.out}", flush=True)


if __name__ == "__main__":
    main()
