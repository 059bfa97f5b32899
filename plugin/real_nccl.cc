#include "plugin/real_nccl.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "plugin/config.h"
#include "plugin/log.h"

namespace nccl_lamport {

namespace {

// Handles of NCCL libraries found by name or path. Never closed: NCCL outlives us.
void* ncclHandleByName() {
  static void* handle = [] {
    void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) h = dlopen("libnccl.so", RTLD_NOW | RTLD_NOLOAD);
    return h;
  }();
  return handle;
}

void* ncclHandleByPath() {
  static void* handle = [] {
    const std::string& path = globalConfig().ncclPath;
    if (path.empty()) return static_cast<void*>(nullptr);
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) LAMPORT_WARN("NCCL_LAMPORT_NCCL_PATH=%s: %s", path.c_str(), dlerror());
    return h;
  }();
  return handle;
}

}  // namespace

void* resolveRealNccl(const char* name) {
  const std::string profName = std::string("p") + name;
  void* fn = dlsym(RTLD_NEXT, profName.c_str());
  if (fn == nullptr) fn = dlsym(RTLD_DEFAULT, profName.c_str());
  for (void* handle : {ncclHandleByName(), ncclHandleByPath()}) {
    if (fn != nullptr || handle == nullptr) continue;
    fn = dlsym(handle, profName.c_str());
    if (fn == nullptr) {
      // NCCL without PROFAPI (< 2.16.2): the handle's own definition comes first in its scope.
      void* plain = dlsym(handle, name);
      Dl_info info{};
      Dl_info self{};
      if (plain != nullptr && dladdr(plain, &info) != 0 &&
          dladdr(reinterpret_cast<void*>(&resolveRealNccl), &self) != 0 &&
          info.dli_fbase != self.dli_fbase) {
        fn = plain;
      }
    }
  }
  if (fn == nullptr) {
    LAMPORT_INFO(kSubsysInit, "the loaded NCCL has no %s (nor %s)", profName.c_str(), name);
  }
  return fn;
}

const char* ncclErrorText(ncclResult_t result) {
  static const auto real = reinterpret_cast<decltype(&ncclGetErrorString)>(resolveRealNccl("ncclGetErrorString"));
  return real != nullptr ? real(result) : "unknown NCCL error";
}

}  // namespace nccl_lamport
