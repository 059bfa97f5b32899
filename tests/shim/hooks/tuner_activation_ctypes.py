#!/usr/bin/env python3
"""Tuner activation reached through ctypes, as vLLM/SGLang's pynccl calls NCCL: the stand-in NCCL
(argv[1]) is opened with ctypes.CDLL (RTLD_LOCAL) and ncclAllReduce is looked up BEFORE the first
communicator's init loads libnccl-lamport.so as its tuner (NCCL_TUNER_PLUGIN). After that init,
the cached function object and a fresh lookup both reach our wrapper (the per-communicator info
counts them). Prints "PASS ctypes"."""
import ctypes
import os
import sys


class UniqueId(ctypes.Structure):  # ncclUniqueId, passed by value to ncclCommInitRank
    _fields_ = [("internal", ctypes.c_char * 128)]


class CommInfo(ctypes.Structure):
    _fields_ = [("known", ctypes.c_int), ("eligible", ctypes.c_int), ("nRanks", ctypes.c_int),
                ("rank", ctypes.c_int), ("workspaceBytes", ctypes.c_size_t),
                ("oneShotMaxBytes", ctypes.c_size_t), ("lamportCalls", ctypes.c_uint64),
                ("ncclCalls", ctypes.c_uint64), ("reason", ctypes.c_char * 128)]


def main():
    nccl = ctypes.CDLL(sys.argv[1])
    cached = nccl.ncclAllReduce  # taken before the tuner loads, as pynccl's _funcs table is
    cached.restype = ctypes.c_int
    uid = UniqueId()
    uid.internal = b"\x05"
    comm = ctypes.c_void_p()
    assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0, "ncclCommInitRank"
    x = ctypes.c_float(1.0)
    args = (ctypes.byref(x), ctypes.byref(x), ctypes.c_size_t(1), 7, 0, comm, None)
    assert cached(*args) == 0, "cached ctypes function"
    assert nccl.ncclAllReduce(*args) == 0, "fresh lookup"  # ctypes caches attributes: look up anew
    fresh = ctypes.CDLL(sys.argv[1]).ncclAllReduce
    assert fresh(*args) == 0, "new CDLL handle"
    ours = ctypes.CDLL(os.environ["NCCL_TUNER_PLUGIN"], mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    info = CommInfo()
    assert ours.ncclLamportGetCommInfo(comm, ctypes.byref(info)) == 0
    if info.known != 1 or info.ncclCalls != 3:
        print(f"FAIL: known={info.known} ncclCalls={info.ncclCalls} (want 1, 3)")
        return 1
    assert ctypes.c_long.in_dll(nccl, "standinAllReduceCalls").value == 3
    print(f"PASS ctypes ({info.reason.decode()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
