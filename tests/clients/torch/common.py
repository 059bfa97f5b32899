"""Helpers shared by the GPU client checks (tests/clients/torch/*.py, tests/clients/*.py).

Inputs: make_input() gives every rank a deterministic tensor that any rank can rebuild, so each
check can compute a float64 reference of the whole allreduce on the CPU.

Results files: each check saves, per rank, DIR/rank<r>.pt holding
    {"format": 2, "results": {key: CPU tensor}, "exact": [keys], "rank_local": [keys], "meta": {...}}
"exact" keys must be bit-identical to the baseline run; "rank_local" keys differ between ranks
by design (a DDP rank's own loss) and are not compared across ranks. compare_dirs() (and the CLI
tests/clients/torch/compare_runs.py) compares two such directories; files of the older format (a plain
{key: tensor} dict) are read as "no key required exact".

LamportApi wraps the extension API of include/nccl_lamport.h over ctypes, from a library handle
(pynccl-style clients) or from the process's global scope (LD_PRELOAD).
"""
import ctypes
import os
import pickle

import torch

# nccl.h enums (ncclDataType_t, ncclRedOp_t): NCCL's ABI, stable across versions.
NCCL_DTYPE = {
    torch.int32: 2,
    torch.float16: 6,
    torch.float32: 7,
    torch.float64: 8,
    torch.bfloat16: 9,
}
NCCL_OP = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DTYPE_NAME = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32",
              torch.float64: "f64"}
BIT_VIEWS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
             torch.float64: torch.int64}

# Calls up to this many bytes, sum or avg of a float type, must take the Lamport path whenever a
# check runs with --expect-lamport (the built-in crossover is 16 MiB at 2 ranks; the smallest
# value the table uses for any rank count is 64 KiB).
SMALL_BYTES = 64 * 1024


def local_device():
    """This rank's CUDA device index (LOCAL_RANK), made current.

    With NCCL_LAMPORT_TEST_SHARED_GPU=1 (the shared-GPU mode of tests/gpu/shared_gpu.h, for a machine
    with one GPU) every rank runs on GPU LOCAL_RANK % device_count, and gets its own NCCL_HOSTID
    so that NCCL accepts two ranks on one GPU (it then joins them over sockets on loopback);
    nccl-lamport's own host check still sees one host. Call it before the first NCCL call."""
    local_rank = int(os.environ["LOCAL_RANK"])
    if os.environ.get("NCCL_LAMPORT_TEST_SHARED_GPU") == "1":
        os.environ["NCCL_HOSTID"] = f"nccl-lamport-shared-gpu-rank{os.environ.get('RANK', local_rank)}"
        for name, value in (("NCCL_SOCKET_IFNAME", "lo"), ("NCCL_IB_DISABLE", "1"),
                            ("NCCL_LAMPORT_REQUIRE_NVLINK", "0")):
            os.environ.setdefault(name, value)
        local_rank %= max(1, torch.cuda.device_count())
    torch.cuda.set_device(local_rank)
    return local_rank


def bits(t):
    """The raw bit pattern, so NaN == NaN and -0.0 != +0.0 in comparisons."""
    view = BIT_VIEWS.get(t.dtype)
    return t.view(view) if view is not None else t


def make_input(rank, n, dtype, salt, device="cuda"):
    """Rank `rank`'s deterministic input (N(0,1) in fp32, then cast). device=None: on the CPU."""
    gen = torch.Generator().manual_seed(1_000_003 * rank + 7919 * n + salt)
    if dtype in (torch.int32,):
        t = torch.randint(-1000, 1000, (n,), generator=gen, dtype=torch.int32)
    else:
        t = torch.randn(n, generator=gen, dtype=torch.float32).to(dtype)
    return t.to(device) if device is not None else t


def reference(world, n, dtype, salt, op):
    """(float64 reference of the allreduce of every rank's make_input, error scale) on the CPU.

    The scale is the sum of |inputs| (divided by world for avg): a rounding error bound must be
    relative to it, not to the result, because of cancellation."""
    xs = torch.stack([make_input(r, n, dtype, salt, device=None).double() for r in range(world)])
    if op == "sum":
        return xs.sum(0), xs.abs().sum(0)
    if op == "avg":
        return xs.sum(0) / world, xs.abs().sum(0) / world
    if op == "max":
        return xs.max(0).values, torch.zeros(n, dtype=torch.float64)
    if op == "min":
        return xs.min(0).values, torch.zeros(n, dtype=torch.float64)
    raise ValueError(op)


def within_reference(result, ref, scale, dtype, world):
    """(ok, number of bad elements, max |error|) of a result against a float64 reference.

    Tolerance: each run sums in fp32 (NCCL: in the dtype or fp32, or scales each input by 1/world
    first for avg) and rounds to the dtype once or twice, so the error is at most about world ulps
    of the dtype relative to sum(|inputs|), plus the smallest normal of the dtype for results
    near zero (half's subnormals lose bits when NCCL pre-scales for avg). max/min are exact."""
    r = result.detach().cpu().double()
    err = (r - ref).abs()
    if dtype.is_floating_point:
        finfo = torch.finfo(dtype)
        tol = world * finfo.eps * scale + finfo.tiny
    else:
        tol = torch.zeros_like(ref)
    bad = (err > tol) | torch.isnan(r)
    return not bool(bad.any()), int(bad.sum()), float(err.max()) if err.numel() else 0.0


def save_results(out_dir, rank, results, exact=(), rank_local=(), meta=None):
    os.makedirs(out_dir, exist_ok=True)
    meta = {str(k): (v if isinstance(v, (int, float, bool, list)) else str(v)) for k, v in (meta or {}).items()}
    payload = {
        "format": 2,
        "results": {k: v.detach().cpu() for k, v in results.items()},
        "exact": sorted(set(exact)),
        "rank_local": sorted(set(rank_local)),
        "meta": meta,
    }
    path = os.path.join(out_dir, f"rank{rank}.pt")
    torch.save(payload, path)
    return path


def load_results(path):
    """{"results", "exact" (set), "rank_local" (set), "meta"}; reads the older plain-dict files too."""
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # a torch without weights_only
        data = torch.load(path, map_location="cpu")
    except pickle.UnpicklingError:  # our own file, with a type the safe loader refuses
        data = torch.load(path, map_location="cpu", weights_only=False)
    if isinstance(data, dict) and data.get("format") == 2:
        return {"results": data["results"], "exact": set(data["exact"]), "rank_local": set(data["rank_local"]),
                "meta": data.get("meta", {})}
    return {"results": data, "exact": set(), "rank_local": set(), "meta": {}}


def compare_dirs(baseline_dir, plugin_dir, ranks, emit=print):
    """Compares a plugin run against a baseline run, rank by rank. Returns the number of failures.

    Every key must be in both runs with the same shape and dtype. Keys marked exact (in either
    run) must be bit-identical; others must agree within nRanks ulps of the dtype at the result
    magnitude (see within_reference), and a plugin run's ranks must be bit-identical to each
    other except for rank_local keys."""
    base = [load_results(os.path.join(baseline_dir, f"rank{r}.pt")) for r in range(ranks)]
    plug = [load_results(os.path.join(plugin_dir, f"rank{r}.pt")) for r in range(ranks)]
    exact_keys = base[0]["exact"] | plug[0]["exact"]
    local_keys = base[0]["rank_local"] | plug[0]["rank_local"]
    keys = sorted(set(base[0]["results"]) | set(plug[0]["results"]))
    failures = identical = 0
    for key in keys:
        problems = []
        same_all = True
        max_diff = 0.0
        for r in range(ranks):
            b = base[r]["results"].get(key)
            p = plug[r]["results"].get(key)
            if b is None or p is None:
                problems.append(f"rank {r}: missing in the {'baseline' if b is None else 'plugin'} run")
                same_all = False
                continue
            if b.dtype != p.dtype or b.shape != p.shape:
                problems.append(f"rank {r}: {b.dtype}{tuple(b.shape)} vs {p.dtype}{tuple(p.shape)}")
                same_all = False
                continue
            same = torch.equal(bits(b), bits(p))
            same_all &= same
            bd, pd = b.double(), p.double()
            diff = (bd - pd).abs()
            both_nan = torch.isnan(bd) & torch.isnan(pd)
            diff = torch.where(both_nan, torch.zeros_like(diff), diff)
            if diff.numel():
                max_diff = max(max_diff, float(torch.nan_to_num(diff, nan=float("inf")).max()))
            if key in exact_keys:
                if not same:
                    n_diff = int((bits(b) != bits(p)).sum())
                    problems.append(f"rank {r}: {n_diff} of {b.numel()} elements not bit-identical (required)")
            elif b.dtype.is_floating_point:
                finfo = torch.finfo(b.dtype)
                tol = ranks * finfo.eps * torch.maximum(bd.abs(), pd.abs()) + finfo.tiny
                bad = ((diff > tol) | (torch.isnan(bd) != torch.isnan(pd))) & ~both_nan
                if bad.any():
                    problems.append(f"rank {r}: {int(bad.sum())} of {b.numel()} elements beyond tolerance")
            elif not same:
                problems.append(f"rank {r}: integer results differ")
            if r > 0 and key not in local_keys:
                p0 = plug[0]["results"].get(key)
                if p0 is not None and (p0.shape != p.shape or not torch.equal(bits(p0), bits(p))):
                    problems.append(f"plugin ranks 0 and {r} are not bit-identical")
        identical += int(same_all)
        if problems:
            failures += 1
            emit(f"FAIL {key}: " + "; ".join(problems) + f" (max diff {max_diff:.3g})")
        else:
            kind = "bit-identical" if same_all else "within tolerance"
            req = ", exact required" if key in exact_keys else ""
            emit(f"ok   {key}: max |plugin - baseline| = {max_diff:.3g} ({kind}{req})")
    total = len(keys)
    emit(f"{total - failures} passed, {failures} failed ({identical} of {total} bit-identical to the "
         f"baseline; {len(exact_keys & set(keys))} required bit-identical)")
    return failures


class LamportCommInfo(ctypes.Structure):
    """ncclLamportCommInfo_t of include/nccl_lamport.h."""
    _fields_ = [
        ("known", ctypes.c_int),
        ("eligible", ctypes.c_int),
        ("nRanks", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("workspaceBytes", ctypes.c_size_t),
        ("oneShotMaxBytes", ctypes.c_size_t),
        ("lamportCalls", ctypes.c_uint64),
        ("ncclCalls", ctypes.c_uint64),
        ("reason", ctypes.c_char * 128),
    ]


def tuner_object():
    """The object NCCL loaded as its tuner (NCCL_TUNER_PLUGIN, an absolute path), if it is loaded.

    In the tuner-activation mode (SPEC 4a) our extension API lives there: NCCL dlopens it
    RTLD_LOCAL, so its symbols are in neither the global scope nor the NCCL library. RTLD_NOLOAD
    never loads it ourselves (that would be a second, uninitialised copy of nothing: the same
    object, but the test would no longer show what NCCL did)."""
    path = os.environ.get("NCCL_TUNER_PLUGIN", "")
    if not path.startswith("/"):
        return None
    try:
        return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
    except OSError:
        return None


class LamportApi:
    """ncclLamportIsActive / ncclLamportGetAllReducePath / ncclLamportGetCommInfo, where present.

    lib: a ctypes.CDLL (a client that dlopened the library), or None for the process's global
    scope (where an LD_PRELOADed object's symbols are). Where neither has the API, the tuner
    object (tuner_object()) is searched too. Binding is retried until it succeeds: under
    NCCL_TUNER_PLUGIN alone the tuner is loaded only by the first communicator's init."""

    def __init__(self, lib=None):
        self._lib = ctypes.CDLL(None) if lib is None else lib
        self._is_active = self._path = self._info = None
        self._bind()

    def _bind(self):
        if self._is_active is not None and self._path is not None and self._info is not None:
            return
        for lib in (self._lib, tuner_object()):
            if lib is not None and self._bind_from(lib):
                return

    def _bind_from(self, lib):
        try:
            is_active, path, info = lib.ncclLamportIsActive, lib.ncclLamportGetAllReducePath, lib.ncclLamportGetCommInfo
        except AttributeError:
            return False
        is_active.restype = ctypes.c_int
        is_active.argtypes = []
        path.restype = ctypes.c_int
        path.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        info.restype = ctypes.c_int
        info.argtypes = [ctypes.c_void_p, ctypes.POINTER(LamportCommInfo)]
        self._is_active, self._path, self._info = is_active, path, info
        return True

    @property
    def present(self):
        self._bind()
        return self._is_active is not None and self._path is not None and self._info is not None

    def active(self):
        self._bind()
        return None if self._is_active is None else bool(self._is_active())

    def path(self, comm, count, dtype, op):
        """"lamport" or "nccl" for ncclAllReduce(comm, count, dtype, op) now; None if unknown."""
        self._bind()
        if self._path is None or not comm:
            return None
        out = ctypes.c_int(-1)
        rc = self._path(ctypes.c_void_p(comm), count, NCCL_DTYPE[dtype], NCCL_OP[op], ctypes.byref(out))
        if rc != 0:
            return None
        return "lamport" if out.value == 1 else "nccl"

    def comm_info(self, comm):
        self._bind()
        if self._info is None or not comm:
            return None
        info = LamportCommInfo()
        if self._info(ctypes.c_void_p(comm), ctypes.byref(info)) != 0:
            return None
        return {
            "known": info.known,
            "eligible": info.eligible,
            "nRanks": info.nRanks,
            "rank": info.rank,
            "workspaceBytes": int(info.workspaceBytes),
            "oneShotMaxBytes": int(info.oneShotMaxBytes),
            "lamportCalls": int(info.lamportCalls),
            "ncclCalls": int(info.ncclCalls),
            "reason": info.reason.decode(errors="replace"),
        }


def dtype_bytes(dtype):
    return torch.empty(0, dtype=dtype).element_size()


def is_small_lamport_candidate(numel, dtype, op):
    """A call that --expect-lamport requires on the Lamport path (see SMALL_BYTES)."""
    return dtype in FLOAT_DTYPES and op in ("sum", "avg") and 0 < numel * dtype_bytes(dtype) <= SMALL_BYTES


class PathTally:
    """Counts the paths a run's calls were predicted to take, per communicator, and checks them
    against the communicator's counters at the end."""

    def __init__(self, api, expect_lamport, fail):
        self.api = api
        self.expect_lamport = expect_lamport
        self.fail = fail
        self.per_comm = {}  # comm -> {"lamport": n, "nccl": n, "unknown": n}

    def before_call(self, comm, numel, dtype, op, label):
        """Queries and records the path of a call about to be made; returns it (or None)."""
        path = self.api.path(comm, numel, dtype, op) if (self.api is not None and comm) else None
        counts = self.per_comm.setdefault(comm or 0, {"lamport": 0, "nccl": 0, "unknown": 0})
        counts[path or "unknown"] += 1
        if self.expect_lamport and path is not None and path != "lamport" \
                and is_small_lamport_candidate(numel, dtype, op):
            self.fail(f"{label}: {numel * dtype_bytes(dtype)} bytes {DTYPE_NAME[dtype]} {op} went to {path}, "
                      f"expected Lamport")
        return path

    def summary(self):
        total = {"lamport": 0, "nccl": 0, "unknown": 0}
        for counts in self.per_comm.values():
            for k, v in counts.items():
                total[k] += v
        return f"paths lamport={total['lamport']} nccl={total['nccl']} unknown={total['unknown']}"
