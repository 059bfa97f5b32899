"""torch.distributed as real clients use it, run once on stock NCCL and once with nccl-lamport.

Launch with torchrun, one process per GPU (tests/gpu_suite.sh part `clients` runs every variant
twice and compares):
    torchrun --standalone --nproc_per_node=2 tests/clients/torch/clients_check.py --out DIR [--init eager|lazy]
        [--nonblocking] [--expect-lamport] [--scenarios a,b,...]

Scenarios (each a function below; the default list depends on --init):
  eager_init  init_process_group("nccl", device_id=...): the communicator exists before the first
              collective; sum/avg/max sweep over float32/float16/bfloat16 and sizes 1 .. 20 MiB
  lazy_init   (--init lazy) no device_id: the first collective creates the communicator; same sweep
  new_group   dist.new_group(ranks=all) (NCCL split or a new communicator) and all_reduce on it
  async       several async_op=True all_reduces in flight, then wait; then coalesced batches
              (_coalescing_manager(device=, async_ops=True): one NCCL group per batch), one batch
              per dtype (PyTorch's allreduce_coalesced takes one dtype and one op per batch)
  graph       two all_reduces captured in one torch.cuda.graph, replayed 200 times with new
              inputs copied in before each replay, each replay checked
  ddp         5 SGD steps of a 3-Linear DDP model (bucket_cap_mb=1: several buckets), losses and a
              parameter checksum per step, parameters checked against a single-process reference
--nonblocking sets TORCH_NCCL_USE_COMM_NONBLOCKING=1 (non-blocking NCCL communicators).

Scenarios are kept independent: a coalesced batch that fails is unwound (torch's pending-op list
dropped, the NCCL group it opened closed) before the error is reported, and after every scenario
the device is synchronized and one small all_reduce on the default group is checked. A scenario
that leaves the default group unusable fails, and the scenarios after it are reported as FAIL
(skipped) instead of failing with misleading errors.

Every result is checked here against a float64 CPU reference (within dtype tolerance, see
common.within_reference) and saved to DIR/rank<r>.pt; compare_runs.py then requires the sum and
max results, the graph replays and the DDP losses/checksums to be bit-identical to the stock run
(with 2 ranks each element is one fp32 addition of two values, rounded once: the same bits
whichever kernel adds them), avg within tolerance (NCCL pre-scales each input by 1/nRanks in the
dtype, nccl-lamport scales the fp32 sum: they differ near half's subnormals).
With --expect-lamport (preloaded runs) the process must have nccl-lamport active, every small
float sum/avg call must be predicted to take the Lamport path, and the communicators' counters
must show the Lamport calls. Prints "SCENARIO <name>: PASS|FAIL ..." per rank and scenario and
exits 1 on any failure.
"""
import argparse
import copy
import datetime
import gc
import inspect
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Deterministic cuBLAS for the DDP scenario; must be set before CUDA initialises.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from common import (DTYPE_NAME, FLOAT_DTYPES, LamportApi, PathTally, local_device, make_input, reference,  # noqa: E402
                    save_results, within_reference)

TORCH_OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX}
# 5 << 20 float32 elements = 20 MiB: above the 2-rank crossover (16 MiB), so NCCL runs it; the
# half types of that size (10 MiB) stay on Lamport. Sizes above 1 << 20 run for sum only, to keep
# the saved results (compared element by element) small.
SWEEP_SIZES = [1, 7, 1000, 4097, 65537, 1 << 20, 5 << 20]
SCENARIOS = {}


def scenario(*names):
    def register(fn):
        for name in names:
            SCENARIOS[name] = fn
        return fn
    return register


def nccl_version_text():
    v = torch.cuda.nccl.version()
    return ".".join(str(p) for p in v) if isinstance(v, (tuple, list)) else str(v)


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


# --- coalesced batches -----------------------------------------------------------------------
# torch.distributed's _coalescing_manager(group, device, async_ops) (torch >= 2.1) records the
# all_reduces of its body in _world.pg_coalesce_state[group] instead of issuing them, and on exit
# issues them as one group.allreduce_coalesced (which requires one dtype and one op); with device=
# it also brackets them in group._start_coalescing(device) / _end_coalescing(device), that is an
# ncclGroupStart / ncclGroupEnd. It is a generator context manager without try/finally: an
# exception in the body or in allreduce_coalesced leaves the op list behind (every later
# all_reduce on that group is then only recorded, never run) and the NCCL group open (NCCL's
# group depth is per thread: every later NCCL call of the thread, on any communicator, is then
# deferred, and a CUDA graph capture fails with "Streams given to a communicator within a NCCL
# group must either be all uncaptured or all captured by the same graph"). unwind_coalescing()
# undoes both.

def coalescing_manager():
    """torch's _coalescing_manager if it takes device= and async_ops= (torch >= 2.1), else None."""
    try:
        from torch.distributed import distributed_c10d as c10d
        params = inspect.signature(c10d._coalescing_manager).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    if "device" not in params or "async_ops" not in params:
        return None
    return c10d._coalescing_manager


def _end_coalescing_line(manager):
    """The line of manager's source that calls _end_coalescing (the last code line that does, so
    that a docstring or comment mentioning it does not count), or None."""
    try:
        fn = inspect.unwrap(manager)
        lines, first = inspect.getsourcelines(fn)
    except (TypeError, OSError, ValueError):
        return None
    found = None
    for i, line in enumerate(lines):
        if "._end_coalescing(" in line and not line.lstrip().startswith(("#", ">>>")):
            found = first + i
    return found


def _coalescing_ended(manager, exc):
    """Whether exc was raised by, or after, the manager's own _end_coalescing call (the NCCL group
    is closed then: closing it again would be an unmatched ncclGroupEnd)."""
    end_line = _end_coalescing_line(manager)
    if end_line is None:
        return False
    code = getattr(inspect.unwrap(manager), "__code__", None)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code and tb.tb_lineno >= end_line:
            return True
        tb = tb.tb_next
    return False


def unwind_coalescing(group, device, close_group=True):
    """Drops torch's pending-op list of `group` and, if close_group, ends the coalescing it started
    (ProcessGroupNCCL.endCoalescing: ncclGroupEnd, coalescing state reset). Returns notes."""
    from torch.distributed import distributed_c10d as c10d
    notes = []
    pg = group if group is not None else c10d._get_default_group()
    state = getattr(getattr(c10d, "_world", None), "pg_coalesce_state", None)
    if isinstance(state, dict) and pg in state:
        notes.append(f"dropped torch's pending-op list ({len(state.pop(pg))} ops)")
    if close_group:
        try:
            pg._end_coalescing(device)
            notes.append("closed the open coalescing group")
        except Exception as exc:  # noqa: BLE001 - nothing was open, or the backend has no coalescing
            notes.append(f"_end_coalescing: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
    else:
        notes.append("the batch's NCCL group was already closed")
    return notes


def leaked_coalescing_groups():
    """The process groups with a pending-op list (a coalescing manager that never finished)."""
    from torch.distributed import distributed_c10d as c10d
    state = getattr(getattr(c10d, "_world", None), "pg_coalesce_state", None)
    return list(state) if isinstance(state, dict) else []


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
            notes = unwind_coalescing(group, device, close_group=not _coalescing_ended(manager, exc))
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


def sweep(ctx, group=None, prefix="sweep", sizes=SWEEP_SIZES, ops=("sum", "avg"), salt0=1):
    """Eager all_reduce over dtypes x sizes x ops, each checked and recorded."""
    for di, dtype in enumerate(FLOAT_DTYPES):
        for n in sizes:
            for oi, op in enumerate(ops):
                if op != "sum" and n > (1 << 20):
                    continue
                salt = salt0 + 10 * oi + 100 * di
                x = make_input(ctx.rank, n, dtype, salt)
                key = f"{prefix}/{op}/{DTYPE_NAME[dtype]}/{n}"
                ctx.all_reduce(x, op, group=group, label=key)
                ctx.check(key, x, n, dtype, salt, op)
                # avg: NCCL pre-scales each input by 1/nRanks, nccl-lamport scales the fp32 sum.
                ctx.record(key, x, exact=(op != "avg"))
        # A non-sum op on every dtype: NCCL's path under the plugin too.
        x = make_input(ctx.rank, 1000, dtype, salt0 + 7)
        key = f"{prefix}/max/{DTYPE_NAME[dtype]}/1000"
        ctx.all_reduce(x, "max", group=group, label=key)
        ctx.check(key, x, 1000, dtype, salt0 + 7, "max")
        ctx.record(key, x)


@scenario("eager_init", "lazy_init")
def scenario_init(ctx):
    if ctx.args.init == "eager":
        # device_id makes the communicator now: it must exist before any collective.
        comm = ctx.learn_comm(None)
        if comm is None:
            ctx.info_log.append("eager_init: ProcessGroupNCCL._comm_ptr unavailable before the first collective")
        before = ctx.counters(None)
        if ctx.args.expect_lamport and before is not None and not before["known"]:
            ctx.fail("eager_init: nccl-lamport does not know the eagerly created communicator")
    else:
        before = None  # the first collective below creates the communicator
    sweep(ctx, None, prefix=f"{ctx.args.init}_init")
    ctx.expect_counters(before, None, f"{ctx.args.init}_init default group")


@scenario("new_group")
def scenario_new_group(ctx):
    group = dist.new_group(ranks=list(range(ctx.world)))
    try:
        sweep(ctx, group, prefix="new_group", sizes=[1, 4097, 65537, 1 << 20], ops=("sum",), salt0=5000)
        ctx.expect_counters(None, group, "new_group")
        torch.cuda.synchronize()
    finally:
        ctx.forget_comm(group)
        dist.destroy_process_group(group)


@scenario("async")
def scenario_async(ctx):
    specs = [(torch.bfloat16, 12345, "sum"), (torch.float32, 1, "sum"), (torch.float16, 65537, "sum"),
             (torch.float32, 4097, "avg"), (torch.bfloat16, 1 << 20, "sum"), (torch.float32, 5 << 20, "sum"),
             (torch.float16, 1000, "max"), (torch.float32, 777, "sum")]
    before = ctx.counters(None)
    tensors, works = [], []
    for i, (dtype, n, op) in enumerate(specs):
        x = make_input(ctx.rank, n, dtype, 7000 + i)
        tensors.append(x)
        works.append(ctx.all_reduce(x, op, async_op=True, label=f"async/{i}"))
    for w in works:
        w.wait()
    torch.cuda.current_stream().synchronize()
    for i, ((dtype, n, op), x) in enumerate(zip(specs, tensors)):
        key = f"async/{i}/{op}/{DTYPE_NAME[dtype]}/{n}"
        ctx.check(key, x, n, dtype, 7000 + i, op)
        ctx.record(key, x, exact=(op != "avg"))

    # Coalesced batches (one NCCL group around several allreduces), as Megatron's and FSDP's
    # fused paths issue them: one batch per dtype, since allreduce_coalesced takes one dtype and
    # one op per batch. Private API: skipped, on every rank alike, where torch lacks it.
    batches = [(torch.bfloat16, [4096, 333, 65536]), (torch.float32, [333, 4097, 65536]),
               (torch.float16, [65536, 7, 1000])]
    ctx.learn_comm(None)
    before_batches = ctx.counters(None)
    ran_batches = 0
    for b, (dtype, sizes) in enumerate(batches):
        name = DTYPE_NAME[dtype]
        xs = [make_input(ctx.rank, n, dtype, 7500 + 10 * b + i) for i, n in enumerate(sizes)]
        if not ctx.coalesced_all_reduce(xs, "sum", label=f"coalesced/{name}"):
            ctx.info_log.append("async: torch has no _coalescing_manager(device=, async_ops=); "
                                "coalesced batches skipped")
            break
        ran_batches += 1
        for i, (n, x) in enumerate(zip(sizes, xs)):
            key = f"coalesced/{name}/{i}/sum/{name}/{n}"
            ctx.check(key, x, n, dtype, 7500 + 10 * b + i, "sum")
            ctx.record(key, x)
    after_batches = ctx.counters(None)
    if ran_batches and after_batches is not None:
        ran, to_nccl = ctx.counter_delta(before_batches, after_batches)
        ctx.info_log.append(f"{ran_batches} coalesced batches: lamport+={ran} nccl+={to_nccl}")
    ctx.learn_comm(None)
    ctx.expect_counters(before, None, "async default group")


@scenario("graph")
def scenario_graph(ctx):
    replays = ctx.args.graph_replays
    specs = [(torch.bfloat16, 8192), (torch.float32, 4097)]
    statics = [make_input(ctx.rank, n, dtype, 9000 + i) for i, (dtype, n) in enumerate(specs)]
    # As torch's CUDA-graph notes ask: warm up on a side stream, outside capture (this also
    # creates a lazily initialised communicator: NCCL cannot be set up inside a capture), then
    # capture on torch.cuda.graph's own stream, with nothing of ours left in flight.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            for i, x in enumerate(statics):
                ctx.all_reduce(x, "sum", label=f"graph/warmup/{i}")
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    before = ctx.counters(None)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for i, x in enumerate(statics):
                ctx.all_reduce(x, "sum", label=f"graph/capture/{i}")
        torch.cuda.synchronize()
        outs = [[] for _ in specs]
        bad_replays = [0 for _ in specs]
        for r in range(replays):
            for i, ((dtype, n), x) in enumerate(zip(specs, statics)):
                x.copy_(make_input(ctx.rank, n, dtype, 10_000 + 1000 * i + r, device=None))
            graph.replay()
            torch.cuda.synchronize()
            for i, ((dtype, n), x) in enumerate(zip(specs, statics)):
                ref, scale = reference(ctx.world, n, dtype, 10_000 + 1000 * i + r, "sum")
                ok, nbad, err = within_reference(x, ref, scale, dtype, ctx.world)
                if not ok:
                    bad_replays[i] += 1
                    if bad_replays[i] <= 3:
                        ctx.fail(f"graph/{DTYPE_NAME[dtype]}/{n} replay {r}: {nbad} elements off the reference "
                                 f"(max error {err:.3g})")
                outs[i].append(x.detach().cpu().clone())
        for i, (dtype, n) in enumerate(specs):
            if bad_replays[i]:
                ctx.fail(f"graph/{DTYPE_NAME[dtype]}/{n}: {bad_replays[i]} of {replays} replays wrong")
            ctx.record(f"graph/{DTYPE_NAME[dtype]}/{n}/replays", torch.stack(outs[i]))
        ctx.expect_counters(before, None, "graph capture")
    finally:
        # NCCL waits in ncclCommDestroy for graphs that still hold its work: release ours now,
        # also when the capture or a replay failed.
        del graph
        gc.collect()
        torch.cuda.synchronize()


@scenario("ddp")
def scenario_ddp(ctx):
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # The same model on every rank: built on the CPU from a fixed seed (DDP also broadcasts rank
    # 0's parameters), then moved to this rank's device.
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                          nn.Linear(512, 16)).to(ctx.device)
    ref_model = copy.deepcopy(model)
    before = ctx.counters(None)
    # bucket_cap_mb=1 with 1 MiB and 2 MiB weights: several gradient buckets, each one allreduce.
    ddp = DDP(model, device_ids=[ctx.device.index], output_device=ctx.device.index, bucket_cap_mb=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.05, momentum=0.9)

    def batch(r, step):
        gen = torch.Generator().manual_seed(424_242 + 1009 * r + step)
        x = torch.randn(64, 256, generator=gen)
        y = torch.randn(64, 16, generator=gen)
        return x.to(ctx.device), y.to(ctx.device)

    for step in range(ctx.args.ddp_steps):
        batches = [batch(r, step) for r in range(ctx.world)]
        x, y = batches[ctx.rank]
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        # Reference: one process, all ranks' batches at once; mean over the concatenation equals
        # the mean of the per-rank means (equal batch sizes), which is what DDP averages.
        ref_opt.zero_grad(set_to_none=True)
        xa = torch.cat([b[0] for b in batches])
        ya = torch.cat([b[1] for b in batches])
        F.mse_loss(ref_model(xa), ya).backward()
        ref_opt.step()
        torch.cuda.synchronize()
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        ref_flat = torch.cat([p.detach().reshape(-1) for p in ref_model.parameters()])
        err = (flat - ref_flat).abs()
        tol = 1e-4 + 1e-3 * ref_flat.abs()
        if bool((err > tol).any()):
            ctx.fail(f"ddp step {step}: parameters off the single-process reference by up to {float(err.max()):.3g}")
        ctx.record(f"ddp/loss/{step}", loss.detach().reshape(1), rank_local=True)
        checksum = torch.stack([flat.double().sum(), flat.double().abs().sum(),
                                flat.view(torch.int32).to(torch.int64).sum().double()])
        ctx.record(f"ddp/param_checksum/{step}", checksum)
    ctx.record("ddp/params_final", torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    ctx.learn_comm(None)
    ctx.expect_counters(before, None, "ddp buckets")
    del ddp, opt
    gc.collect()
    torch.cuda.synchronize()


def settle(ctx, name):
    """After scenario `name`, whether it passed or not: the device idle, no coalescing batch left
    open, and the default group still reducing correctly, so that one scenario's failure does not
    turn into the next one's. What it finds counts against `name`. Returns None, or why the
    default group is unusable (the remaining scenarios are then skipped)."""
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        ctx.fail(f"{name}: synchronize after the scenario: {type(exc).__name__}: {exc}")
    for pg in leaked_coalescing_groups():
        notes = unwind_coalescing(pg, ctx.device)
        ctx.fail(f"{name}: left a coalescing batch open; unwound: {'; '.join(notes)}")
    ok, why = ctx.group_ok()
    if ok:
        return None
    # Possibly a coalescing group left open on the default group (its NCCL group defers every
    # later call): close it once and look again.
    notes = unwind_coalescing(None, ctx.device)
    ok, why_after = ctx.group_ok()
    if ok:
        ctx.fail(f"{name}: left the default process group unusable ({why}); recovered: {'; '.join(notes)}")
        return None
    ctx.fail(f"{name}: left the default process group unusable ({why}; still after {'; '.join(notes)}: "
             f"{why_after})")
    return why_after


DEFAULT_SCENARIOS = {
    "eager": "eager_init,new_group,async,graph,ddp",
    "lazy": "lazy_init,new_group,async,graph",
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--init", choices=["eager", "lazy"], default="eager")
    parser.add_argument("--nonblocking", action="store_true",
                        help="TORCH_NCCL_USE_COMM_NONBLOCKING=1: non-blocking NCCL communicators")
    parser.add_argument("--expect-lamport", action="store_true")
    parser.add_argument("--scenarios", default="")
    parser.add_argument("--graph-replays", type=int, default=200)
    parser.add_argument("--ddp-steps", type=int, default=5)
    parser.add_argument("--timeout-s", type=int, default=120, help="process-group timeout")
    args = parser.parse_args()
    names = [s for s in (args.scenarios or DEFAULT_SCENARIOS[args.init]).split(",") if s]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {sorted(SCENARIOS)}")
    if args.init == "lazy" and "eager_init" in names:
        parser.error("eager_init needs --init eager")
    if args.init == "eager" and "lazy_init" in names:
        parser.error("lazy_init needs --init lazy")
    if args.nonblocking:
        os.environ["TORCH_NCCL_USE_COMM_NONBLOCKING"] = "1"

    local_rank = local_device()
    timeout = datetime.timedelta(seconds=args.timeout_s)
    if args.init == "eager":
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank), timeout=timeout)
    else:
        dist.init_process_group("nccl", timeout=timeout)
    ctx = Ctx(args)
    variant = f"init={args.init} nonblocking={int(args.nonblocking)}"
    ctx.log(f"clients_check {variant}: torch {torch.__version__}, NCCL {nccl_version_text()}, "
            f"nccl-lamport extension API {'present' if ctx.api.present else 'absent'}"
            f"{', active' if ctx.api.active() else ''}")

    statuses = []
    unusable = None  # why the default group stopped working, and after which scenario
    for name in names:
        if unusable is not None:
            statuses.append((name, False))
            ctx.log(f"SCENARIO {name}: FAIL (0 results, 0.0 s) [skipped: the default process group is unusable "
                    f"after {unusable}]")
            continue
        fails_before = len(ctx.failures)
        infos_before = len(ctx.info_log)
        results_before = len(ctx.results)
        t0 = time.time()
        try:
            SCENARIOS[name](ctx)
        except Exception as exc:  # noqa: BLE001 - report, keep going (the other rank runs the same code)
            traceback.print_exc()
            ctx.fail(f"{name}: {type(exc).__name__}: {exc}")
        why = settle(ctx, name)
        if why is not None:
            unusable = f"{name} ({why})"
        ok = len(ctx.failures) == fails_before
        statuses.append((name, ok))
        notes = "; ".join(ctx.info_log[infos_before:])
        ctx.log(f"SCENARIO {name}: {'PASS' if ok else 'FAIL'} ({len(ctx.results) - results_before} results, "
                f"{time.time() - t0:.1f} s){' [' + notes + ']' if notes else ''}")

    # After the scenarios: under NCCL_TUNER_PLUGIN alone the object (and its API) arrives with the
    # first communicator, which lazy init creates only at the first collective.
    if args.expect_lamport and not ctx.api.active():
        ctx.fail("--expect-lamport: ncclLamportIsActive is missing or 0 in this process")

    meta = {"variant": variant, "scenarios": names, "torch": str(torch.__version__),
            "nccl": nccl_version_text()}
    save_results(args.out, ctx.rank, ctx.results, exact=ctx.exact, rank_local=ctx.rank_local, meta=meta)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    passed = sum(ok for _, ok in statuses)
    failed = len(statuses) - passed
    if len(ctx.failures) and not failed:
        failed = 1  # a failure outside any scenario (--expect-lamport without the object)
    ctx.log(f"clients_check {variant}: {ctx.tally.summary()}; {len(ctx.results)} results saved to {args.out}")
    ctx.log(f"clients_check {variant}: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
