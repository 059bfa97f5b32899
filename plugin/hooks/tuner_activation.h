// Tuner activation (docs/tuner-activation.md): when NCCL 2.28+ loads this object only as its tuner, the first
// tuner init hooks the entry points of that NCCL (plugin/hooks/entry_hooks.h) so that every
// caller reaches our wrappers, whose calls to NCCL then go through the trampolines
// (plugin/loader/real_nccl.h: useHookedNccl).
//
// The hooks are installed unless NCCL_LAMPORT_TUNER_HOOKS=0 (tuner only). Each communicator's
// workspace is then set up inside the tuner's init
// (plugin/comm/tuner_setup.h) and bound to its handle at its first hooked ncclAllReduce; the
// wrappers' own set-up points (after init, at the outermost group end) are skipped in this mode,
// since they are not the same on every rank here (a rank's first communicator was created
// before its hooks).
#pragma once

#include <nccl.h>

#include <string>

namespace nccl_lamport {

struct TunerCommInfo;

/** Where the hooks stand in this process. */
enum class TunerHooksState { kNotTried, kInstalled, kNotCapable };

/**
 * Called from the tuner's v5+ init in a process that loaded us only as NCCL's tuner, with
 * NCCL_LAMPORT_ENABLE on. callerInNccl is an address inside the NCCL that called the init (its
 * return address). The first call pins this object (RTLD_NODELETE) and installs the hooks, all or
 * none; later calls return the state of the first. Never throws; thread-safe. *why says, for
 * kNotCapable, what failed.
 */
TunerHooksState activateTunerHooks(const TunerCommInfo& comm, const void* callerInNccl, std::string* why);

/** True once the entry hooks are installed in this process (they then stay). */
bool tunerHooksInstalled();

/** At a hooked call on a communicator we do not know yet: binds it to the set-up recorded in the
 *  tuner's init, or registers it as not accelerated with the reason. No-op unless the hooks are
 *  installed, and while NCCL reports the communicator's init still in progress (non-blocking). */
void bindHookedComm(ncclComm_t comm);

/** At an extension API query (ncclLamportGetCommInfo / GetAllReducePath) on a handle we do not
 *  know: binds it only if a set-up was recorded for it, so that a communicator not used yet is
 *  described as what its first call will do; never registers or reads an unknown handle. */
void bindQueriedComm(ncclComm_t comm);

}  // namespace nccl_lamport
