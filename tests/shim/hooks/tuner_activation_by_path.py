#!/usr/bin/env python3
"""NCCL_TUNER_PLUGIN together with libnccl-lamport.so opened by path as "the NCCL library" (pynccl
with VLLM_NCCL_SO_PATH, kept from the recipe for older NCCLs). The process holds one NCCL, the
stand-in (argv[1], opened with ctypes.CDLL as a framework's own NCCL; NCCL_LAMPORT_NCCL_PATH names
it, so our object uses the same library). Through our object the program calls ncclGroupStart and
ncclGroupEnd before it creates any communicator; then the framework creates one on the stand-in
directly, whose init loads the tuner. Our group wrappers already hold the stand-in's entries: if
the tuner's init now hooked those entries, the framework's next ncclGroupStart would enter our
wrapper, whose saved "real" function is the hooked entry itself, and recurse until the stack
overflows. Every call must reach the stand-in once and return. Prints "PASS by-path"."""
import ctypes
import sys


class UniqueId(ctypes.Structure):  # ncclUniqueId, passed by value to ncclCommInitRank
    _fields_ = [("internal", ctypes.c_char * 128)]


def main():
    nccl = ctypes.CDLL(sys.argv[1])
    ours = ctypes.CDLL(sys.argv[2])
    groups = ctypes.c_long.in_dll(nccl, "standinGroupCalls")
    assert ours.ncclGroupStart() == 0 and ours.ncclGroupEnd() == 0, "group calls through our object"
    assert groups.value == 2, f"stand-in group calls: {groups.value} (want 2)"
    uid = UniqueId()
    uid.internal = b"\x09"
    comm = ctypes.c_void_p()
    assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0, "framework's ncclCommInitRank"
    sys.stdout.flush()
    assert nccl.ncclGroupStart() == 0 and nccl.ncclGroupEnd() == 0, "framework's group calls"
    assert ours.ncclGroupStart() == 0 and ours.ncclGroupEnd() == 0, "group calls through our object again"
    assert groups.value == 6, f"stand-in group calls: {groups.value} (want 6)"
    assert nccl.ncclCommDestroy(comm) == 0, "ncclCommDestroy"
    print("PASS by-path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
