"""A rank killed (SIGKILL) or stopped (SIGSTOP) during a stream of small allreduces under torchrun,
with PyTorch's watchdog (TORCH_NCCL_ASYNC_ERROR_HANDLING): the job must end, never hang
(issue 10, evidence). Run by tests/gpu_suite.sh, part "faults", as
    torchrun --standalone --nproc_per_node=2 tests/reliability/fault_torch.py --fault kill|stop
with libnccl-lamport.so preloaded and a short NCCL_LAMPORT_TIMEOUT_MS.

Both ranks make 200 bf16 allreduces of 4096 elements (the Lamport path); rank 1 then signals
itself; rank 0 keeps calling and prints one FAULT_SURVIVOR line when PyTorch raises (or the
watchdog ends the process first: then torchrun reports it). Shared-GPU mode (tests/gpu/shared_gpu.h)
through common.local_device().
"""
import argparse
import datetime
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "torch"))
from common import local_device  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", choices=["kill", "stop"], required=True)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--limit", type=float, default=120.0, help="seconds rank 0 keeps calling")
    args = parser.parse_args()
    device = local_device()
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60),
                            device_id=torch.device("cuda", device))
    rank = dist.get_rank()
    t = torch.ones(4096, dtype=torch.bfloat16, device="cuda")
    for i in range(args.calls):
        dist.all_reduce(t)
        if i % 20 == 19:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"FAULT rank {rank}: {args.calls} calls done", flush=True)
    if rank == 1:
        print(f"FAULT rank 1: sending SIG{args.fault.upper()} to itself", flush=True)
        os.kill(os.getpid(), signal.SIGKILL if args.fault == "kill" else signal.SIGSTOP)
        time.sleep(3600)
        return
    time.sleep(0.5)
    start = time.monotonic()
    try:
        while time.monotonic() - start < args.limit:
            dist.all_reduce(t)
            torch.cuda.synchronize()
    except Exception as e:  # what PyTorch raises for the communicator's error
        print(f"FAULT_SURVIVOR rank 0: error after {time.monotonic() - start:.2f} s: "
              f"{type(e).__name__}: {str(e)[:300]}", flush=True)
        sys.exit(3)
    print(f"FAULT_SURVIVOR rank 0: no error within {args.limit:.0f} s", flush=True)
    sys.exit(4)


if __name__ == "__main__":
    main()
