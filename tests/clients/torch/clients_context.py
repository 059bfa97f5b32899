"""The per-rank state of clients_check.py (class Ctx): all_reduce through torch.distributed with the
Lamport-path prediction (common.PathTally), checks against the float64 reference, the results
saved for compare_runs.py, the communicators' nccl-lamport counters, and a coalesced batch issued
and unwound on error (coalescing.py). Also how the ncclComm_t of a torch process group is found.
"""
import sys

import torch
import torch.distributed as dist

from coalescing import coalescing_ended, coalescing_manager, unwind_coalescing
from common import DTYPE_NAME, LamportApi, PathTally, reference, within_reference

TORCH_OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX}


def torch_comm_ptr(group=None):
    """(ncclComm_t of a process group as an int, None) or (None, why not).

    The pointer is ProcessGroupNCCL._comm_ptr() (the communicator of the current device). Since
    torch 2.0 a ProcessGroup is a wrapper and ProcessGroupNCCL is its CUDA backend,
    pg._get_backend(device); before, the group object was the ProcessGroupNCCL itself. Both are
    tried; no introspection is not a failure (an older or newer torch), only a note."""
    pg = group if group is not None else dist.group.WORLD
    holders, why = [], "no _comm_ptr on the group or its CUDA backend"
    get_backend = getattr(pg, "_get_backend", None)
    if callable(get_backend):
        for device in (torch.device("cuda", torch.cuda.current_device()), torch.device("cuda")):
            try:
                holders.append(get_backend(device))
                break
            except Exception as exc:  # noqa: BLE001
                why = f"_get_backend({device}): {type(exc).__name__}: {exc}"
    holders.append(pg)
    for holder in holders:
        fn = getattr(holder, "_comm_ptr", None)
        if fn is None:
            continue
        try:
            ptr = int(fn() if callable(fn) else fn)
        except Exception as exc:  # noqa: BLE001
            why = f"{type(holder).__name__}._comm_ptr(): {type(exc).__name__}: {exc}"
            continue
        if ptr:
            return ptr, None
        why = f"{type(holder).__name__}._comm_ptr() is 0 (no communicator yet)"
    return None, why


class Ctx:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.local_rank = torch.cuda.current_device()  # local_device() chose it (shared-GPU mode: rank % GPUs)
        self.results = {}
        self.exact = []
        self.rank_local = []
        self.failures = []
        self.api = LamportApi(None)
        # The API binds late under NCCL_TUNER_PLUGIN alone (the tuner loads with the first communicator).
        self.tally = PathTally(self.api, args.expect_lamport, self.fail)
        self.comms = {}  # id(group) or 0 -> comm pointer, once a collective has run on it
        self.comm_why = {}  # id(group) or 0 -> why torch gave no comm pointer
        self.info_log = []
        self.device = torch.device("cuda", torch.cuda.current_device())

    def log(self, text):
        # One write per line: both ranks share the launcher's stdout, and print() writes the text
        # and the newline separately (the lines of two ranks then run together).
        sys.stdout.write(f"rank {self.rank}: {text}\n")
        sys.stdout.flush()

    def fail(self, text):
        text = " | ".join(line.strip() for line in str(text).splitlines() if line.strip())
        self.failures.append(text)
        self.log(f"FAIL {text}")

    def record(self, key, tensor, exact=True, rank_local=False):
        self.results[key] = tensor.detach().cpu().clone()
        if exact:
            self.exact.append(key)
        if rank_local:
            self.rank_local.append(key)

    def comm(self, group=None):
        """The group's communicator, known only after a first collective (lazy init creates it)."""
        return self.comms.get(id(group) if group is not None else 0)

    def learn_comm(self, group=None):
        key = id(group) if group is not None else 0
        if key not in self.comms:
            ptr, why = torch_comm_ptr(group)
            if ptr:
                self.comms[key] = ptr
                self.comm_why.pop(key, None)
            else:
                self.comm_why[key] = why
        return self.comms.get(key)

    def forget_comm(self, group):
        key = id(group) if group is not None else 0
        self.comms.pop(key, None)
        self.comm_why.pop(key, None)

    def all_reduce(self, t, op="sum", group=None, async_op=False, label=""):
        self.tally.before_call(self.comm(group), t.numel(), t.dtype, op, label or f"{op}/{DTYPE_NAME[t.dtype]}")
        work = dist.all_reduce(t, op=TORCH_OPS[op], group=group, async_op=async_op)
        if not async_op:
            self.learn_comm(group)
        return work

    def coalesced_all_reduce(self, tensors, op="sum", group=None, label="coalesced"):
        """All-reduces `tensors` as one coalesced batch, as Megatron's and FSDP's fused paths issue
        them: with _coalescing_manager(group, device=, async_ops=True) as cm: all_reduce each;
        cm.wait(). The batch must be one dtype, one op and one device (allreduce_coalesced takes
        nothing else). Returns False, on every rank alike, where torch has no such manager. On an
        error the batch is unwound (see unwind_coalescing) before the error propagates."""
        manager = coalescing_manager()
        if manager is None:
            return False
        dtypes = sorted({str(t.dtype) for t in tensors})
        devices = sorted({str(t.device) for t in tensors})
        if len(dtypes) != 1 or len(devices) != 1:
            raise ValueError(f"{label}: a coalesced batch takes one dtype and one device, got {dtypes} on {devices}")
        device = tensors[0].device
        try:
            with manager(group=group, device=device, async_ops=True) as cm:
                for i, x in enumerate(tensors):
                    self.all_reduce(x, op, group=group, label=f"{label}/{i}")
        except BaseException as exc:
            notes = unwind_coalescing(group, device, close_group=not coalescing_ended(manager, exc))
            self.log(f"{label}: coalesced batch failed ({type(exc).__name__}); unwound: {'; '.join(notes)}")
            raise
        cm.wait()
        # With device= the manager's work is _end_coalescing's, which may be None (the batch then
        # ran on the communicator's stream, not waited for): wait for the whole device.
        torch.cuda.synchronize()
        return True

    def group_ok(self, group=None):
        """One small all_reduce on the group, checked: (True, "") or (False, why)."""
        try:
            x = torch.full((8,), float(self.rank + 1)).to(self.device)
            dist.all_reduce(x, group=group)
            torch.cuda.synchronize()
            got = x.cpu()
        except Exception as exc:  # noqa: BLE001
            return False, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        want = float(self.world * (self.world + 1) // 2)
        if bool((got == want).all()):
            return True, ""
        return False, f"an all_reduce of 8 floats gave {got.tolist()[:4]}..., want {want}"

    def check(self, key, result, n, dtype, salt, op):
        ref, scale = reference(self.world, n, dtype, salt, op)
        ok, nbad, err = within_reference(result, ref, scale, dtype, self.world)
        if not ok:
            self.fail(f"{key}: {nbad} of {n} elements off the float64 reference (max error {err:.3g})")
        return ok

    def counters(self, group=None):
        comm = self.comm(group)
        return self.api.comm_info(comm) if (comm and self.api.present) else None

    def no_counters_reason(self, group=None):
        if not self.api.present:
            return "nccl-lamport extension API absent in this process: stock NCCL"
        if not self.comm(group):
            why = self.comm_why.get(id(group) if group is not None else 0, "no collective has run on it yet")
            return f"torch gave no ncclComm_t for the group: {why}"
        return "ncclLamportGetCommInfo failed for the group's communicator"

    @staticmethod
    def counter_delta(before, after):
        ran = after["lamportCalls"] - (before["lamportCalls"] if before else 0)
        to_nccl = after["ncclCalls"] - (before["ncclCalls"] if before else 0)
        return ran, to_nccl

    def expect_counters(self, before, group, label):
        """With --expect-lamport: the group's communicator is eligible and ran Lamport calls."""
        after = self.counters(group)
        if after is None:
            self.info_log.append(f"{label}: no communicator counters ({self.no_counters_reason(group)})")
            return
        ran, to_nccl = self.counter_delta(before, after)
        self.info_log.append(f"{label}: known={after['known']} eligible={after['eligible']} lamport+={ran} "
                             f"nccl+={to_nccl} ({after['reason']})")
        if self.args.expect_lamport:
            if not after["eligible"]:
                self.fail(f"{label}: communicator not eligible: {after['reason']}")
            elif ran <= 0:
                self.fail(f"{label}: no allreduce ran on the Lamport kernel (counter +{ran})")
