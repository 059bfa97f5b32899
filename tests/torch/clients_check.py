"""torch.distributed as real clients use it, run once on stock NCCL and once with nccl-lamport.

Launch with torchrun, one process per GPU (tests/gpu_suite.sh part `clients` runs every variant
twice and compares):
    torchrun --standalone --nproc_per_node=2 tests/torch/clients_check.py --out DIR [--init eager|lazy]
        [--nonblocking] [--expect-lamport] [--scenarios a,b,...]

Scenarios (each a function below; the default list depends on --init):
  eager_init  init_process_group("nccl", device_id=...): the communicator exists before the first
              collective; sum/avg/max sweep over float32/float16/bfloat16 and sizes 1 .. 20 MiB
  lazy_init   (--init lazy) no device_id: the first collective creates the communicator; same sweep
  new_group   dist.new_group(ranks=all) (NCCL split or a new communicator) and all_reduce on it
  async       several async_op=True all_reduces in flight, then wait; a coalesced batch too
  graph       two all_reduces captured in one torch.cuda.graph, replayed 200 times with new
              inputs copied in before each replay, each replay checked
  ddp         5 SGD steps of a 3-Linear DDP model (bucket_cap_mb=1: several buckets), losses and a
              parameter checksum per step, parameters checked against a single-process reference
--nonblocking sets TORCH_NCCL_USE_COMM_NONBLOCKING=1 (non-blocking NCCL communicators).

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
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Deterministic cuBLAS for the DDP scenario; must be set before CUDA initialises.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from common import (DTYPE_NAME, FLOAT_DTYPES, LamportApi, PathTally, make_input, reference,  # noqa: E402
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
    """The ncclComm_t behind a process group (ProcessGroupNCCL._comm_ptr), or None."""
    try:
        pg = group if group is not None else dist.group.WORLD
        backend = pg._get_backend(torch.device("cuda", torch.cuda.current_device()))
        fn = getattr(backend, "_comm_ptr", None)
        return int(fn()) if callable(fn) else None
    except Exception:  # noqa: BLE001 - an older or newer torch: no introspection, not a failure
        return None


class Ctx:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.results = {}
        self.exact = []
        self.rank_local = []
        self.failures = []
        self.api = LamportApi(None)
        self.tally = PathTally(self.api if self.api.present else None, args.expect_lamport, self.fail)
        self.comms = {}  # id(group) or 0 -> comm pointer, once a collective has run on it
        self.info_log = []

    def log(self, text):
        print(f"rank {self.rank}: {text}", flush=True)

    def fail(self, text):
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
            ptr = torch_comm_ptr(group)
            if ptr:
                self.comms[key] = ptr
        return self.comms.get(key)

    def all_reduce(self, t, op="sum", group=None, async_op=False, label=""):
        self.tally.before_call(self.comm(group), t.numel(), t.dtype, op, label or f"{op}/{DTYPE_NAME[t.dtype]}")
        work = dist.all_reduce(t, op=TORCH_OPS[op], group=group, async_op=async_op)
        if not async_op:
            self.learn_comm(group)
        return work

    def check(self, key, result, n, dtype, salt, op):
        ref, scale = reference(self.world, n, dtype, salt, op)
        ok, nbad, err = within_reference(result, ref, scale, dtype, self.world)
        if not ok:
            self.fail(f"{key}: {nbad} of {n} elements off the float64 reference (max error {err:.3g})")
        return ok

    def counters(self, group=None):
        comm = self.comm(group)
        return self.api.comm_info(comm) if (comm and self.api.present) else None

    def expect_counters(self, before, group, label):
        """With --expect-lamport: the group's communicator is eligible and ran Lamport calls."""
        after = self.counters(group)
        if after is None:
            self.info_log.append(f"{label}: no communicator counters (torch has no _comm_ptr, or no extension API)")
            return
        ran = after["lamportCalls"] - (before["lamportCalls"] if before else 0)
        to_nccl = after["ncclCalls"] - (before["ncclCalls"] if before else 0)
        self.info_log.append(f"{label}: eligible={after['eligible']} lamport+={ran} nccl+={to_nccl} "
                             f"({after['reason']})")
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
    sweep(ctx, group, prefix="new_group", sizes=[1, 4097, 65537, 1 << 20], ops=("sum",), salt0=5000)
    ctx.expect_counters(None, group, "new_group")
    torch.cuda.synchronize()
    ctx.comms.pop(id(group), None)
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

    # A coalesced batch (ncclGroupStart/End around several allreduces), as FSDP and DDP's
    # fused paths issue them. Private API: skipped, on every rank alike, where torch lacks it.
    try:
        from torch.distributed.distributed_c10d import _coalescing_manager
    except ImportError:
        ctx.info_log.append("async: torch has no _coalescing_manager; coalesced batch skipped")
        _coalescing_manager = None
    if _coalescing_manager is not None:
        cspecs = [(torch.bfloat16, 4096), (torch.float32, 333), (torch.float16, 65536)]
        xs = [make_input(ctx.rank, n, dtype, 7500 + i) for i, (dtype, n) in enumerate(cspecs)]
        with _coalescing_manager(device=torch.device("cuda", torch.cuda.current_device()), async_ops=True) as cm:
            for i, x in enumerate(xs):
                ctx.all_reduce(x, "sum", label=f"coalesced/{i}")
        cm.wait()
        torch.cuda.current_stream().synchronize()
        for i, ((dtype, n), x) in enumerate(zip(cspecs, xs)):
            key = f"coalesced/{i}/sum/{DTYPE_NAME[dtype]}/{n}"
            ctx.check(key, x, n, dtype, 7500 + i, "sum")
            ctx.record(key, x)
    ctx.learn_comm(None)
    ctx.expect_counters(before, None, "async default group")


@scenario("graph")
def scenario_graph(ctx):
    replays = ctx.args.graph_replays
    specs = [(torch.bfloat16, 8192), (torch.float32, 4097)]
    statics = [make_input(ctx.rank, n, dtype, 9000 + i) for i, (dtype, n) in enumerate(specs)]
    # Warm up on a side stream, outside capture (the communicator may be lazily created here).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i, x in enumerate(statics):
            ctx.all_reduce(x, "sum", label=f"graph/warmup/{i}")
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    before = ctx.counters(None)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i, x in enumerate(statics):
            ctx.all_reduce(x, "sum", label=f"graph/capture/{i}")
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
    # NCCL waits in ncclCommDestroy for graphs that still hold its work: release ours now.
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
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                          nn.Linear(512, 16)).cuda()
    ref_model = copy.deepcopy(model)
    before = ctx.counters(None)
    # bucket_cap_mb=1 with 1 MiB and 2 MiB weights: several gradient buckets, each one allreduce.
    ddp = DDP(model, device_ids=[ctx.local_rank], bucket_cap_mb=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.05, momentum=0.9)

    def batch(r, step):
        gen = torch.Generator().manual_seed(424_242 + 1009 * r + step)
        x = torch.randn(64, 256, generator=gen)
        y = torch.randn(64, 16, generator=gen)
        return x.cuda(), y.cuda()

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

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
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
    if args.expect_lamport and not ctx.api.active():
        ctx.fail("--expect-lamport: ncclLamportIsActive is missing or 0 in this process")

    statuses = []
    for name in names:
        fails_before = len(ctx.failures)
        infos_before = len(ctx.info_log)
        results_before = len(ctx.results)
        t0 = time.time()
        try:
            SCENARIOS[name](ctx)
        except Exception as exc:  # noqa: BLE001 - report, keep going (the other rank runs the same code)
            traceback.print_exc()
            ctx.fail(f"{name}: {type(exc).__name__}: {exc}")
        ok = len(ctx.failures) == fails_before
        statuses.append((name, ok))
        notes = "; ".join(ctx.info_log[infos_before:])
        ctx.log(f"SCENARIO {name}: {'PASS' if ok else 'FAIL'} ({len(ctx.results) - results_before} results, "
                f"{time.time() - t0:.1f} s){' [' + notes + ']' if notes else ''}")

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
