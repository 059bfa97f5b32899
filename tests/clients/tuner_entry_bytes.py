#!/usr/bin/env python3
"""Tuner activation on a real NCCL (one GPU, one process, no LD_PRELOAD): loads NCCL with ctypes
(as pynccl does), records the first 16 bytes of every entry point tuner activation hooks, creates
a one-rank communicator (NCCL then loads NCCL_TUNER_PLUGIN and calls its init), runs an
ncclAllReduce, destroys it, and compares the bytes.
  --expect unchanged   (NCCL_LAMPORT_ENABLE=0, or the hooks not asked for): every byte the same
  --expect hooked      (NCCL_LAMPORT_TUNER_HOOKS=1): ncclAllReduce's entry changed, and
                       ncclLamportGetCommInfo says the call reached our wrapper (known=1)
Prints "tuner-entry-bytes: PASS ..." or "...: FAIL ..." and exits 0 / 1."""
import argparse
import ctypes
import os
import sys

NAMES = ["ncclAllReduce", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitAll", "ncclCommSplit",
         "ncclCommShrink", "ncclCommFinalize", "ncclCommDestroy", "ncclCommAbort", "ncclCommRevoke",
         "ncclCommGetAsyncError", "ncclGroupStart", "ncclGroupEnd", "ncclGroupSimulateEnd"]


class UniqueId(ctypes.Structure):  # ncclUniqueId, passed by value to ncclCommInitRank
    _fields_ = [("internal", ctypes.c_char * 128)]


class CommInfo(ctypes.Structure):
    _fields_ = [("known", ctypes.c_int), ("eligible", ctypes.c_int), ("nRanks", ctypes.c_int),
                ("rank", ctypes.c_int), ("workspaceBytes", ctypes.c_size_t),
                ("oneShotMaxBytes", ctypes.c_size_t), ("lamportCalls", ctypes.c_uint64),
                ("ncclCalls", ctypes.c_uint64), ("reason", ctypes.c_char * 128)]


def entry_bytes(lib):
    out = {}
    for name in NAMES:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            continue
        addr = ctypes.cast(fn, ctypes.c_void_p).value
        out[name] = ctypes.string_at(addr, 16)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True, help="the real libnccl.so.2")
    parser.add_argument("--expect", choices=["unchanged", "hooked"], required=True)
    args = parser.parse_args()
    if not os.environ.get("NCCL_TUNER_PLUGIN"):
        print("tuner-entry-bytes: FAIL NCCL_TUNER_PLUGIN is not set")
        return 1
    cudart = None
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            cudart = ctypes.CDLL(name)
            break
        except OSError:
            pass
    nccl = ctypes.CDLL(args.lib)
    before = entry_bytes(nccl)
    uid = UniqueId()
    assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0, "ncclGetUniqueId"
    comm = ctypes.c_void_p()
    rc = nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0)
    if rc != 0:
        print(f"tuner-entry-bytes: FAIL ncclCommInitRank returned {rc}")
        return 1
    # One allreduce on device memory through the handle (as pynccl calls it).
    buf = ctypes.c_void_p()
    if cudart is None or cudart.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(4096)) != 0:
        print("tuner-entry-bytes: FAIL no libcudart to allocate a buffer")
        return 1
    rc = nccl.ncclAllReduce(buf, buf, ctypes.c_size_t(1024), 7, 0, comm, None)  # float32, sum
    cudart.cudaDeviceSynchronize()
    info = CommInfo()
    ours = ctypes.CDLL(os.environ["NCCL_TUNER_PLUGIN"], mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    ours.ncclLamportGetCommInfo(comm, ctypes.byref(info))
    after = entry_bytes(nccl)
    nccl.ncclCommDestroy(comm)
    changed = sorted(n for n in before if before[n] != after[n])
    detail = (f"allreduce rc={rc}; {len(changed)} of {len(before)} entries changed; comm known={info.known} "
              f"eligible={info.eligible} ncclCalls={info.ncclCalls} reason='{info.reason.decode()}'")
    ok = rc == 0 and (not changed and info.known == 0 if args.expect == "unchanged"
                      else "ncclAllReduce" in changed and info.known == 1 and info.ncclCalls == 1)
    print(f"tuner-entry-bytes ({args.expect}): {'PASS' if ok else 'FAIL'} {detail}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
