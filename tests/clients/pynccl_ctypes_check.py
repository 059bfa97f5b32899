"""Raw NCCL over ctypes, the way vLLM's and SGLang's pynccl use it (VLLM_NCCL_SO_PATH,
SGLANG_NCCL_SO_PATH): ctypes.CDLL(path), every entry point looked up by name on that handle.

    torchrun --standalone --nproc_per_node=2 tests/clients/pynccl_ctypes_check.py --lib LIB --out DIR
        [--expect-lamport | --expect-stock] [--exports-file FILE]

LIB is what the client would be given: the real libnccl.so.2 (stock), the absolute path of
libnccl-lamport.so, or a bare name such as libnccl.so.2 (resolved by the loader; under
LD_AUDIT=libnccl-lamport-audit.so that name is redirected to libnccl-lamport.so).

Per rank: ncclGetVersion; ncclGetUniqueId on rank 0, shared over a gloo process group;
ncclCommInitRank; a warm-up allreduce as vLLM does; ncclAllReduce on torch CUDA tensors
(float32/float16/bfloat16 x 1, 1000, 65537, 1<<20 elements, out-of-place and in-place, sum; plus
avg, max and a 32 MiB call that is above the Lamport crossover) on
torch.cuda.current_stream().cuda_stream; a grouped pair of allreduces (ncclGroupStart/End); an
allreduce captured in a CUDA graph and replayed; ncclAllGather, ncclBroadcast and a grouped
ncclSend/ncclRecv exchange (what pynccl also calls); ncclCommDestroy. Every result is checked
against a float64 reference and saved to DIR/rank<r>.pt for tests/clients/torch/compare_runs.py (sum,
max, gather, broadcast and send/recv results must be bit-identical between runs; avg within
tolerance, see tests/clients/torch/common.py).

If the library exports ncclLamportGetAllReducePath, each call's path is queried and printed.
--expect-lamport: the library must be nccl-lamport (the extension API is found through the
handle, or in the tuner object NCCL_TUNER_PLUGIN names once NCCL has loaded it) and active, the communicator eligible, every small float sum/avg call routed to the
Lamport kernel, and the communicator's counters must equal the number of calls predicted on
each path. --expect-stock: the library must not be nccl-lamport.
--exports-file: with --expect-stock, rank 0 writes the NCCL API names the library exports; in
other runs, every name listed there must be exported too (a pynccl binds its whole list at load).
Exits 1 on any failure; prints "pynccl <label>: N passed, M failed".
"""
import argparse
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from common import (DTYPE_NAME, NCCL_DTYPE, NCCL_OP, LamportApi, PathTally, local_device, make_input,  # noqa: E402
                    reference, save_results, within_reference)

# What vLLM's and SGLang's pynccl bind at load time (a missing one is an AttributeError there).
PYNCCL_REQUIRED = [
    "ncclGetErrorString", "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclAllReduce",
    "ncclReduce", "ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv", "ncclBroadcast",
    "ncclCommDestroy", "ncclGroupStart", "ncclGroupEnd",
]
# The rest of NCCL's public API (2.19 .. 2.28); whatever the stock library has, the object must too.
NCCL_API_OTHER = [
    "ncclGetLastError", "ncclCommInitRankConfig", "ncclCommInitRankScalable", "ncclCommInitAll",
    "ncclCommSplit", "ncclCommShrink", "ncclCommFinalize", "ncclCommAbort", "ncclCommGetAsyncError",
    "ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank", "ncclCommRegister", "ncclCommDeregister",
    "ncclCommWindowRegister", "ncclCommWindowDeregister", "ncclMemAlloc", "ncclMemFree",
    "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy", "ncclGroupSimulateEnd", "ncclBcast",
    "ncclAlltoAll", "ncclGather", "ncclScatter", "ncclCommQueryProperties", "ncclDevCommCreate",
    "ncclDevCommDestroy",
]


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def object_of(fn):
    """The file that defines a ctypes function (dladdr), or '?'."""
    try:
        libc = ctypes.CDLL(None)
        dladdr = libc.dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        dladdr.restype = ctypes.c_int
        info = DlInfo()
        if dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    except (AttributeError, OSError):
        pass
    return "?"


class Nccl:
    """The ctypes binding a pynccl makes: one handle, functions looked up on it by name."""

    def __init__(self, so):
        self.lib = ctypes.CDLL(so)  # ctypes' default mode, as vLLM and SGLang load it
        c_int, c_void_p, c_size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
        self.exports = [name for name in PYNCCL_REQUIRED + NCCL_API_OTHER if hasattr(self.lib, name)]
        missing = [name for name in PYNCCL_REQUIRED if name not in self.exports]
        if missing:
            raise RuntimeError(f"{so} lacks {missing}: a pynccl binding fails to load it")

        def fn(name, restype, argtypes):
            f = getattr(self.lib, name)
            f.restype = restype
            f.argtypes = argtypes
            return f

        self.getErrorString = fn("ncclGetErrorString", ctypes.c_char_p, [c_int])
        self.getVersion = fn("ncclGetVersion", c_int, [ctypes.POINTER(c_int)])
        self.getUniqueId = fn("ncclGetUniqueId", c_int, [ctypes.POINTER(NcclUniqueId)])
        self.commInitRank = fn("ncclCommInitRank", c_int, [ctypes.POINTER(c_void_p), c_int, NcclUniqueId, c_int])
        self.allReduce = fn("ncclAllReduce", c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p])
        self.allGather = fn("ncclAllGather", c_int, [c_void_p, c_void_p, c_size_t, c_int, c_void_p, c_void_p])
        self.broadcast = fn("ncclBroadcast", c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p])
        self.send = fn("ncclSend", c_int, [c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p])
        self.recv = fn("ncclRecv", c_int, [c_void_p, c_size_t, c_int, c_int, c_void_p, c_void_p])
        self.groupStart = fn("ncclGroupStart", c_int, [])
        self.groupEnd = fn("ncclGroupEnd", c_int, [])
        self.commDestroy = fn("ncclCommDestroy", c_int, [c_void_p])

    def check(self, rc, what):
        if rc != 0:
            msg = self.getErrorString(rc)
            raise RuntimeError(f"{what} returned {rc} ({msg.decode() if msg else '?'})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True, help="library path or name, as given to ctypes.CDLL")
    parser.add_argument("--out", required=True)
    parser.add_argument("--label", default="")
    parser.add_argument("--graph-replays", type=int, default=20)
    parser.add_argument("--exports-file", default="")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--expect-lamport", action="store_true")
    mode.add_argument("--expect-stock", action="store_true")
    args = parser.parse_args()
    label = args.label or os.path.basename(args.lib)

    local_rank = local_device()
    dist.init_process_group("gloo")  # only to share the unique id, as vLLM's CPU group does
    rank, world = dist.get_rank(), dist.get_world_size()
    failures = []
    checks = 0

    def log(text):
        print(f"rank {rank}: {text}", flush=True)

    def fail(text):
        failures.append(text)
        log(f"FAIL {text}")

    nccl = Nccl(args.lib)
    version = ctypes.c_int()
    nccl.check(nccl.getVersion(ctypes.byref(version)), "ncclGetVersion")
    api = LamportApi(nccl.lib)
    log(f"pynccl {label}: --lib {args.lib} -> ncclAllReduce from {object_of(nccl.allReduce)}, "
        f"NCCL version code {version.value}, nccl-lamport extension API "
        f"{'present, active=' + str(api.active()) if api.present else 'absent'}")
    if args.expect_stock:
        checks += 1
        if api.present:
            fail("--expect-stock: the library is nccl-lamport")
    if args.exports_file:
        checks += 1
        if args.expect_stock:
            if rank == 0:
                with open(args.exports_file, "w") as f:
                    f.write("\n".join(nccl.exports) + "\n")
        elif os.path.exists(args.exports_file):
            with open(args.exports_file) as f:
                wanted = [line.strip() for line in f if line.strip()]
            missing = [name for name in wanted if name not in nccl.exports]
            if missing:
                fail(f"exports: the stock library has {missing}, {args.lib} does not")
            else:
                log(f"exports: all {len(wanted)} NCCL API names of the stock library are present")
        else:
            log(f"exports: no {args.exports_file} (run the stock variant first); not checked")

    # Unique id: made by rank 0, shared over gloo, rebuilt from bytes on every rank.
    uid = NcclUniqueId()
    if rank == 0:
        nccl.check(nccl.getUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    box = [ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid))]
    dist.broadcast_object_list(box, src=0)
    ctypes.memmove(ctypes.addressof(uid), box[0], ctypes.sizeof(uid))

    comm = ctypes.c_void_p()
    with torch.cuda.device(local_rank):
        t0 = time.time()
        nccl.check(nccl.commInitRank(ctypes.byref(comm), world, uid, rank), "ncclCommInitRank")
        log(f"ncclCommInitRank: {time.time() - t0:.2f} s")
    comm_ptr = comm.value
    # Checked once a communicator exists: under NCCL_TUNER_PLUGIN alone the object (and its API)
    # is loaded by NCCL during the first ncclCommInitRank, not by the client.
    if args.expect_lamport:
        checks += 1
        if not api.present:
            fail("--expect-lamport: neither the library nor the tuner object has the nccl-lamport API")
        elif not api.active():
            fail("--expect-lamport: ncclLamportIsActive() is 0")
    info = api.comm_info(comm_ptr) if api.present else None
    if info is not None:
        log(f"comm info: eligible={info['eligible']} oneShotMaxBytes={info['oneShotMaxBytes']} "
            f"workspace={info['workspaceBytes']} ({info['reason']})")
        if args.expect_lamport:
            checks += 1
            if not info["eligible"]:
                fail(f"--expect-lamport: communicator not eligible: {info['reason']}")

    tally = PathTally(api, args.expect_lamport, fail)
    stream = torch.cuda.current_stream()
    results, exact = {}, []

    def allreduce(send, recv, op, label_):
        path = tally.before_call(comm_ptr, send.numel(), send.dtype, op, label_)
        nccl.check(nccl.allReduce(ctypes.c_void_p(send.data_ptr()), ctypes.c_void_p(recv.data_ptr()),
                                  send.numel(), NCCL_DTYPE[send.dtype], NCCL_OP[op], comm_ptr,
                                  ctypes.c_void_p(stream.cuda_stream)), f"ncclAllReduce {label_}")
        return path

    def check_result(key, out, n, dtype, salt, op, path):
        nonlocal checks
        checks += 1
        ref, scale = reference(world, n, dtype, salt, op)
        ok, nbad, err = within_reference(out, ref, scale, dtype, world)
        if not ok:
            fail(f"{key}: {nbad} of {n} elements off the float64 reference (max error {err:.3g})")
        results[key] = out.detach().cpu().clone()
        if op != "avg":  # avg: NCCL pre-scales each input, nccl-lamport scales the fp32 sum
            exact.append(key)
        log(f"{key}: {'ok' if ok else 'WRONG'} path={path or 'n/a'}")

    # vLLM's warm-up: one element, then wait for the stream.
    warm = torch.zeros(1, device="cuda")
    allreduce(warm, warm, "sum", "warmup")
    stream.synchronize()

    dtypes = [torch.float32, torch.float16, torch.bfloat16]
    for di, dtype in enumerate(dtypes):
        for n in [1, 1000, 65537, 1 << 20]:
            salt = 100 + di
            send = make_input(rank, n, dtype, salt)
            recv = torch.empty_like(send)
            path = allreduce(send, recv, "sum", f"oop/{DTYPE_NAME[dtype]}/{n}")
            stream.synchronize()
            check_result(f"sum/oop/{DTYPE_NAME[dtype]}/{n}", recv, n, dtype, salt, "sum", path)
            buf = make_input(rank, n, dtype, salt + 50)
            path = allreduce(buf, buf, "sum", f"inplace/{DTYPE_NAME[dtype]}/{n}")
            stream.synchronize()
            check_result(f"sum/inplace/{DTYPE_NAME[dtype]}/{n}", buf, n, dtype, salt + 50, "sum", path)
    for dtype, n, op, salt in [(torch.bfloat16, 65537, "avg", 300), (torch.float32, 1000, "avg", 301),
                               (torch.float16, 4097, "max", 302), (torch.float32, 8 << 20, "sum", 303)]:
        send = make_input(rank, n, dtype, salt)
        recv = torch.empty_like(send)
        path = allreduce(send, recv, op, f"{op}/{DTYPE_NAME[dtype]}/{n}")
        stream.synchronize()
        check_result(f"{op}/oop/{DTYPE_NAME[dtype]}/{n}", recv, n, dtype, salt, op, path)

    # Two allreduces in one NCCL group, as a pynccl user may batch them.
    a = make_input(rank, 4096, torch.bfloat16, 400)
    b = make_input(rank, 1001, torch.float32, 401)
    nccl.check(nccl.groupStart(), "ncclGroupStart")
    pa = allreduce(a, a, "sum", "group/bf16/4096")
    pb = allreduce(b, b, "sum", "group/f32/1001")
    nccl.check(nccl.groupEnd(), "ncclGroupEnd")
    stream.synchronize()
    check_result("group/sum/bf16/4096", a, 4096, torch.bfloat16, 400, "sum", pa)
    check_result("group/sum/f32/1001", b, 1001, torch.float32, 401, "sum", pb)

    # CUDA graph: vLLM captures pynccl's allreduce on the capture stream and replays it.
    static = make_input(rank, 8192, torch.bfloat16, 500)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        stream = torch.cuda.current_stream()  # the capture stream
        gpath = allreduce(static, static, "sum", "graph/bf16/8192")
    stream = torch.cuda.current_stream()
    replays = []
    bad = 0
    for r in range(args.graph_replays):
        static.copy_(make_input(rank, 8192, torch.bfloat16, 600 + r, device=None))
        graph.replay()
        torch.cuda.synchronize()
        ref, scale = reference(world, 8192, torch.bfloat16, 600 + r, "sum")
        ok, nbad, err = within_reference(static, ref, scale, torch.bfloat16, world)
        bad += int(not ok)
        replays.append(static.detach().cpu().clone())
    checks += 1
    if bad:
        fail(f"graph/bf16/8192: {bad} of {args.graph_replays} replays off the reference")
    results["graph/sum/bf16/8192/replays"] = torch.stack(replays)
    exact.append("graph/sum/bf16/8192/replays")
    log(f"graph/bf16/8192: {args.graph_replays - bad} of {args.graph_replays} replays ok path={gpath or 'n/a'}")
    del graph
    torch.cuda.synchronize()

    # The other collectives a pynccl calls: they must reach NCCL through the same handle.
    n = 1000
    mine = make_input(rank, n, torch.float32, 700)
    gathered = torch.empty(world * n, device="cuda", dtype=torch.float32)
    nccl.check(nccl.allGather(ctypes.c_void_p(mine.data_ptr()), ctypes.c_void_p(gathered.data_ptr()), n,
                              NCCL_DTYPE[torch.float32], comm_ptr, ctypes.c_void_p(stream.cuda_stream)),
               "ncclAllGather")
    bc = make_input(rank, n, torch.float16, 701)
    nccl.check(nccl.broadcast(ctypes.c_void_p(bc.data_ptr()), ctypes.c_void_p(bc.data_ptr()), n,
                              NCCL_DTYPE[torch.float16], 0, comm_ptr, ctypes.c_void_p(stream.cuda_stream)),
               "ncclBroadcast")
    peer_next, peer_prev = (rank + 1) % world, (rank - 1) % world
    sendbuf = make_input(rank, n, torch.bfloat16, 702)
    recvbuf = torch.empty_like(sendbuf)
    nccl.check(nccl.groupStart(), "ncclGroupStart")
    nccl.check(nccl.send(ctypes.c_void_p(sendbuf.data_ptr()), n, NCCL_DTYPE[torch.bfloat16], peer_next, comm_ptr,
                         ctypes.c_void_p(stream.cuda_stream)), "ncclSend")
    nccl.check(nccl.recv(ctypes.c_void_p(recvbuf.data_ptr()), n, NCCL_DTYPE[torch.bfloat16], peer_prev, comm_ptr,
                         ctypes.c_void_p(stream.cuda_stream)), "ncclRecv")
    nccl.check(nccl.groupEnd(), "ncclGroupEnd")
    stream.synchronize()
    for key, got, want in [
        ("allgather/f32/1000", gathered,
         torch.cat([make_input(r, n, torch.float32, 700, device=None) for r in range(world)])),
        ("broadcast/f16/1000", bc, make_input(0, n, torch.float16, 701, device=None)),
        ("sendrecv/bf16/1000", recvbuf, make_input(peer_prev, n, torch.bfloat16, 702, device=None)),
    ]:
        checks += 1
        same = torch.equal(got.cpu(), want)
        if not same:
            fail(f"{key}: not what the peers sent")
        results[key] = got.detach().cpu().clone()
        exact.append(key)
        log(f"{key}: {'ok' if same else 'WRONG'}")

    # Counters: every allreduce on this communicator went through us, so they must match exactly.
    info = api.comm_info(comm_ptr) if api.present else None
    if info is not None:
        predicted = tally.per_comm.get(comm_ptr, {"lamport": 0, "nccl": 0, "unknown": 0})
        log(f"counters: lamportCalls={info['lamportCalls']} ncclCalls={info['ncclCalls']}; predicted "
            f"lamport={predicted['lamport']} nccl={predicted['nccl']}")
        if args.expect_lamport:
            checks += 1
            if (info["lamportCalls"], info["ncclCalls"]) != (predicted["lamport"], predicted["nccl"]):
                fail("counters differ from the predicted paths")
            if predicted["lamport"] == 0:
                fail("--expect-lamport: no call was routed to the Lamport kernel")

    nccl.check(nccl.commDestroy(comm_ptr), "ncclCommDestroy")
    # Each rank receives its peer's data from send/recv: those results differ between ranks.
    save_results(args.out, rank, results, exact=exact,
                 rank_local=[k for k in results if k.startswith("sendrecv/")],
                 meta={"lib": args.lib, "version": version.value, "label": label})
    dist.destroy_process_group()
    log(f"pynccl {label}: {tally.summary()}; {len(results)} results saved to {args.out}")
    log(f"pynccl {label}: {max(checks - len(failures), 0)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
