// The tuner-activation build of the forked GPU tests (tests/gpu/activation_mode.h, SPEC 4a).
//
// The executable is not linked against libnccl-lamport.so: NCCL alone loads it, as its tuner,
// from NCCL_TUNER_PLUGIN with RTLD_LOCAL, so its symbols are in no global scope. The extension API
// of include/nccl_lamport.h is defined here instead and forwards to the object NCCL loaded, found
// as tests/clients find it: dlopen(NCCL_TUNER_PLUGIN, RTLD_NOLOAD) once a communicator exists
// (NCCL loads its tuner during the first communicator's init). The handle is kept: the object
// pins itself in tuner activation, and the reference keeps it loaded in any case while the
// function pointers are in use.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "include/nccl_lamport.h"
#include "tests/gpu/activation_mode.h"

namespace nccl_lamport {
namespace gputest {
namespace {

struct TunerObject {
  void* handle = nullptr;
  decltype(&ncclLamportGetAllReducePath) getAllReducePath = nullptr;
  decltype(&ncclLamportGetCommInfo) getCommInfo = nullptr;
  decltype(&ncclLamportIsActive) isActive = nullptr;
};

/** The object NCCL loaded, once it is loaded; nullptr before (looked up again at the next call). */
const TunerObject* tunerObject() {
  static std::mutex mutex;
  static TunerObject object;
  std::lock_guard<std::mutex> lock(mutex);
  if (object.handle != nullptr) return &object;
  const char* path = getenv("NCCL_TUNER_PLUGIN");
  if (path == nullptr || path[0] != '/') return nullptr;
  void* handle = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
  if (handle == nullptr) return nullptr;
  TunerObject found;
  found.handle = handle;
  found.getAllReducePath = reinterpret_cast<decltype(found.getAllReducePath)>(dlsym(handle, "ncclLamportGetAllReducePath"));
  found.getCommInfo = reinterpret_cast<decltype(found.getCommInfo)>(dlsym(handle, "ncclLamportGetCommInfo"));
  found.isActive = reinterpret_cast<decltype(found.isActive)>(dlsym(handle, "ncclLamportIsActive"));
  if (found.getAllReducePath == nullptr || found.getCommInfo == nullptr || found.isActive == nullptr) {
    dlclose(handle);
    return nullptr;
  }
  object = found;
  return &object;
}

void reportMissingOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    fprintf(stderr, "nccl-lamport tests: the extension API is not available: %s\n",
            activationProblemAfterInit().c_str());
  });
}

}  // namespace

Activation activation() { return Activation::kTuner; }

std::string activationProblemAfterInit() {
  const char* path = getenv("NCCL_TUNER_PLUGIN");
  const std::string env = tunerActivationEnvProblem();
  if (!env.empty()) return env;
  if (tunerObject() != nullptr) return "";
  void* loaded = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
  if (loaded == nullptr) {
    return std::string("NCCL has not loaded NCCL_TUNER_PLUGIN=") + path +
           " although a communicator exists (wrong path, or an NCCL without tuner plugins?)";
  }
  dlclose(loaded);
  return std::string(path) + " is loaded but lacks the nccl-lamport extension API (not our object?)";
}

}  // namespace gputest
}  // namespace nccl_lamport

// The extension API for this build. Before NCCL loaded the object (no communicator yet) or when
// it never does, the calls fail loudly: ncclSystemError, IsActive 0, a message once.
extern "C" ncclResult_t ncclLamportGetAllReducePath(ncclComm_t comm, size_t count, ncclDataType_t datatype,
                                                    ncclRedOp_t op, ncclLamportPath_t* path) {
  const nccl_lamport::gputest::TunerObject* object = nccl_lamport::gputest::tunerObject();
  if (object == nullptr) {
    nccl_lamport::gputest::reportMissingOnce();
    return ncclSystemError;
  }
  return object->getAllReducePath(comm, count, datatype, op, path);
}

extern "C" ncclResult_t ncclLamportGetCommInfo(ncclComm_t comm, ncclLamportCommInfo_t* info) {
  const nccl_lamport::gputest::TunerObject* object = nccl_lamport::gputest::tunerObject();
  if (object == nullptr) {
    nccl_lamport::gputest::reportMissingOnce();
    return ncclSystemError;
  }
  return object->getCommInfo(comm, info);
}

extern "C" int ncclLamportIsActive(void) {
  const nccl_lamport::gputest::TunerObject* object = nccl_lamport::gputest::tunerObject();
  if (object == nullptr) {
    nccl_lamport::gputest::reportMissingOnce();
    return 0;
  }
  return object->isActive();
}
