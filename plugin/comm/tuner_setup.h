// Workspace set-up inside the tuner's init, and binding each communicator handle to it at its
// first hooked call (tuner activation, docs/tuner-activation.md).
//
// NCCL calls the tuner's init during every communicator's init, on every rank, with
// context == &comm->tunerContext: a pointer inside NCCL's struct ncclComm (about 1.1-1.2 MB in
// 2.28-2.30, startMagic its first field). The set-up runs there, over the host rendezvous
// (plugin/comm/host_rendezvous.h) keyed by (uid, commId, nRanks); its result (or, if the set-up
// never finished, an OFF entry recorded before it ran) waits under that address until a hooked
// call on a handle finds it. The slot is a field of the handle's struct ncclComm, at one offset
// for the whole process: the first bind takes the nearest recorded slot above the handle within
// kMaxCommBytes only if it lies inside the handle's own struct (no NCCL magic in between: NCCL's
// endMagic ends the struct, the next communicator's startMagic begins it) and learns the offset;
// every later bind takes exactly handle + offset, or nothing (the handle stays on NCCL). NCCL's
// startMagic at the handle and ncclCommCount / ncclCommCuDevice must agree too. The tuner's
// finalize forgets (and frees) what was never bound.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace nccl_lamport {

struct TunerCommInfo;

/** Largest distance from a communicator handle to its tuner context slot we accept (NCCL 2.30.7:
 *  1,191,560 bytes; room for growth). */
constexpr size_t kMaxCommBytes = size_t{4} << 20;

/** NCCL's startMagic / endMagic (comm.h, NCCL_MAGIC). */
constexpr uint64_t kNcclCommMagic = 0x0280028002800280ull;

/**
 * In the tuner's init with the hooks installed: sets up this communicator's workspace (or
 * records why not) under contextSlot. Communicators NCCL reports as spanning several nodes stay
 * on NCCL unless the NCCL_LAMPORT_TEST_SHARED_GPU knob is on (each rank has its own NCCL_HOSTID there).
 * Bounded by NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS. Never throws.
 */
void setUpAtTunerInit(const TunerCommInfo& comm, const void* contextSlot);

/** The tuner's finalize for the context at contextSlot: frees a set-up that was never bound. */
void forgetTunerSetUp(const void* contextSlot);

/** True when a set-up recorded in the tuner's init may be the handle's: at the learnt offset, or
 *  before it is learnt within kMaxCommBytes above the handle. Reads only our own records, never
 *  the handle's memory (a destroyed handle is safe to ask). */
bool tunerSetUpRecordedFor(ncclComm_t comm);

/** On a handle we do not know: registers it with the set-up recorded for it (never another
 *  communicator's: see above). Where there is none, registerIfNone (a hooked call: the handle is
 *  NCCL's to use) registers it as not accelerated with the reason and returns true, else (a
 *  query through the extension API) registers nothing and returns false. True when it is now
 *  registered. Reads the handle's struct up to its slot without faulting: a handle whose memory
 *  is unmapped (destroyed) is never registered. */
bool bindCommToTunerSetUp(ncclComm_t comm, bool registerIfNone);

}  // namespace nccl_lamport
