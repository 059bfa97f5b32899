// Self-registration as NCCL's tuner (README, "Clients"): when this object is LD_PRELOADed and the user set
// no NCCL_TUNER_PLUGIN, point NCCL_TUNER_PLUGIN at our own absolute path, so NCCL's tuner
// loader dlopen()s the object that is already loaded and the interposer and the tuner share
// one copy of their state.
//
// Runs as a constructor: before main() for a preloaded object, when the process has one thread
// and setenv is safe. No CUDA calls here; the decision itself is the pure
// shouldSelfRegisterAsTuner() in tuner/load_mode.cc, unit-tested there.
#include <stdlib.h>
#include <string.h>

#include <string>

#include "common/config.h"
#include "common/log.h"
#include "tuner/load_mode.h"

namespace nccl_lamport {
namespace {

void registerAsTunerIfPreloaded() {
  const char* preload = getenv("LD_PRELOAD");
  if (preload == nullptr) return;  // the common dlopen() case: nothing to do, no dladdr
  // NCCL_LAMPORT_ENABLE=0 is the A/B switch: the run must see NCCL exactly as without us, so we
  // do not make ourselves its tuner either (a user-set NCCL_TUNER_PLUGIN still applies).
  // The knob's own rule (common/config.h switchIsOn): every spelling of "off" counts, and an
  // unknown value is off too (the WARN comes when NCCL first reads the configuration).
  if (!switchIsOn(getenv("NCCL_LAMPORT_ENABLE"))) return;
  const std::string self = ownObjectPath();
  if (!shouldSelfRegisterAsTuner(preload, getenv("NCCL_TUNER_PLUGIN"), self.c_str())) return;
  // overwrite = 0: should anything have set it meanwhile, theirs wins.
  if (setenv("NCCL_TUNER_PLUGIN", self.c_str(), 0) != 0) return;
  // TRACE, not INFO: this runs in every preloaded process (shells, tools), not only NCCL users,
  // and must not add lines to their stdout under a plain NCCL_DEBUG=INFO.
  LAMPORT_TRACE(kSubsysInit | kSubsysTuning,
                "preloaded: NCCL_TUNER_PLUGIN=%s set, so NCCL loads this object as its tuner",
                self.c_str());
}

__attribute__((constructor)) void lamportSelfRegisterAsTuner() {
  try {
    registerAsTunerIfPreloaded();
  } catch (...) {
    // A constructor must never take the process down.
  }
}

}  // namespace
}  // namespace nccl_lamport
