"""The scenarios of clients_check.py, each a function registered by name in SCENARIOS and called
with the per-rank context (clients_context.Ctx): eager_init / lazy_init, new_group, async (with
coalesced batches), graph and ddp, as clients_check.py's docstring describes them. Each checks its
results against the float64 reference and records them for compare_runs.py.
"""
import copy
import gc

import torch
import torch.distributed as dist

from common import DTYPE_NAME, FLOAT_DTYPES, make_input, reference, within_reference

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
