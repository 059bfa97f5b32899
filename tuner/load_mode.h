// How this process loaded us, and what follows from it: preloaded (the interposer's wrappers run),
// NCCL's tuner alone (NCCL_TUNER_PLUGIN: tuner activation installs entry hooks in NCCL 2.28+, or
// the path is off with a notice saying how to turn it on), or another copy of nccl-lamport
// already wraps NCCL. docs/tuner-activation.md.
#pragma once

#include <atomic>
#include <string>

namespace nccl_lamport {

struct TunerCommInfo;

/** Called by every interposer wrapper: this process runs the Lamport path (LD_PRELOAD). */
inline void markInterposerActive();
/** True once any interposer wrapper ran in this process. */
inline bool interposerActive();

/** The absolute path of the object that holds this code (dladdr), or "" if unknown. */
std::string ownObjectPath();

/** The INFO line a tuner-only process gets, naming the object to preload. */
std::string tunerOnlyNotice(const std::string& objectPath);

/** Why a tuner-only process on this tuner ABI version has no Lamport path, for the notice:
 *  activation by NCCL_TUNER_PLUGIN alone needs NCCL 2.28+ (tuner ABI v5). hooksWhy: why the
 *  hooks were not installed, where that was the reason ("" otherwise). */
std::string tunerOnlyReason(int abiVersion, bool enabled, bool hooksWanted, const std::string& hooksWhy);

/**
 * True when ldPreload (an LD_PRELOAD value: entries separated by spaces or colons) names the
 * object at ourPath (absolute), by full path or by file name. False for null or empty inputs
 * and for a relative ourPath.
 */
bool preloadListNames(const char* ldPreload, const char* ourPath);

/**
 * Self-registration as NCCL's tuner (README, "Clients"), as a pure decision: true when ldPreload names
 * our object (preloadListNames) and tunerPluginEnv (NCCL_TUNER_PLUGIN) is unset or empty.
 * The caller then sets NCCL_TUNER_PLUGIN=ourPath.
 */
bool shouldSelfRegisterAsTuner(const char* ldPreload, const char* tunerPluginEnv,
                               const char* ourPath);

/** Forgets that the interposer ran and that the tuner-only notice was shown (tests only). */
void resetTunerProcessStateForTest();

namespace detail {
extern std::atomic<bool> gInterposerActive;
}  // namespace detail

inline void markInterposerActive() {
  // Load first: wrappers call this on every call, and a store would bounce the cache line.
  if (!detail::gInterposerActive.load(std::memory_order_relaxed)) {
    detail::gInterposerActive.store(true, std::memory_order_release);
  }
}

inline bool interposerActive() { return detail::gInterposerActive.load(std::memory_order_acquire); }

/** At the first tuner init of a process that no interposer wrapper reached and whose LD_PRELOAD
 *  does not name us: installs tuner activation's entry hooks (activateFromTuner), or turns the
 *  path off and tells the user once how to turn it on (INFO), or stands aside for another copy
 *  that wraps NCCL. Other inits wait until the first has decided. callerInNccl: an address inside
 *  the NCCL whose tuner init this is (null: not called by NCCL, no hooks). */
void decideLoadModeOnce(const TunerCommInfo& comm, const void* callerInNccl);

/** True when this process loaded us only as NCCL's tuner and no wrapper of ours is reachable
 *  (no LD_PRELOAD, no entry hooks): ncclLamportIsActive() is then 0. */
bool tunerOnlyPathOff();

/** Defined only in the shared object (plugin/hooks/tuner_activation.cc), hence weak: installs
 *  the entry hooks once per process; true when they are in place, else *why says why not. */
__attribute__((weak)) bool activateFromTuner(const TunerCommInfo& comm, const void* callerInNccl,
                                             std::string* why);

}  // namespace nccl_lamport
