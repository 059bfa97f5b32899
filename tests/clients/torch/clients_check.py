"""torch.distributed as real clients use it, run once on stock NCCL and once with nccl-lamport.

Launch with torchrun, one process per GPU (tests/gpu_suite.sh part `clients` runs every variant
twice and compares):
    torchrun --standalone --nproc_per_node=2 tests/clients/torch/clients_check.py --out DIR [--init eager|lazy]
        [--nonblocking] [--expect-lamport] [--scenarios a,b,...]

Scenarios (each a function in clients_scenarios.py; the default list depends on --init):
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

This file is the command line and the runner (scenario loop, settling after each, report);
the scenarios are in clients_scenarios.py, the per-rank call/check/record/counter context in
clients_context.py, the coalesced-batch helpers in coalescing.py.
"""
import argparse
import datetime
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Deterministic cuBLAS for the DDP scenario; must be set before CUDA initialises.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from clients_context import Ctx  # noqa: E402
from clients_scenarios import SCENARIOS  # noqa: E402
from coalescing import leaked_coalescing_groups, unwind_coalescing  # noqa: E402
from common import local_device, save_results  # noqa: E402


def nccl_version_text():
    v = torch.cuda.nccl.version()
    return ".".join(str(p) for p in v) if isinstance(v, (tuple, list)) else str(v)


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
