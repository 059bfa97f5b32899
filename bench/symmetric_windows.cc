#include "bench/symmetric_windows.h"

#include <dlfcn.h>

namespace nccl_lamport::bench {

namespace {

// NCCL's nccl.h (2.27+): #define NCCL_WIN_COLL_SYMMETRIC 0x01. Repeated so this builds against
// older headers.
constexpr int kWinCollSymmetric = 0x01;

using MemAllocFn = ncclResult_t (*)(void**, size_t);
using MemFreeFn = ncclResult_t (*)(void*);
using WindowRegisterFn = ncclResult_t (*)(ncclComm_t, void*, size_t, void**, int);
using WindowDeregisterFn = ncclResult_t (*)(ncclComm_t, void*);

struct SymmetricApi {
  MemAllocFn memAlloc = nullptr;
  MemFreeFn memFree = nullptr;
  WindowRegisterFn windowRegister = nullptr;
  WindowDeregisterFn windowDeregister = nullptr;
  [[nodiscard]] bool complete() const {
    return memAlloc != nullptr && memFree != nullptr && windowRegister != nullptr && windowDeregister != nullptr;
  }
};

// The p* names: stock NCCL's own, never an interposer's wrapper.
const SymmetricApi& api() {
  static const SymmetricApi a = [] {
    SymmetricApi s;
    s.memAlloc = reinterpret_cast<MemAllocFn>(dlsym(RTLD_DEFAULT, "pncclMemAlloc"));
    s.memFree = reinterpret_cast<MemFreeFn>(dlsym(RTLD_DEFAULT, "pncclMemFree"));
    s.windowRegister = reinterpret_cast<WindowRegisterFn>(dlsym(RTLD_DEFAULT, "pncclCommWindowRegister"));
    s.windowDeregister = reinterpret_cast<WindowDeregisterFn>(dlsym(RTLD_DEFAULT, "pncclCommWindowDeregister"));
    return s;
  }();
  return a;
}

}  // namespace

bool SymmetricWindows::open(ncclComm_t comm, size_t bytes, std::string* why) {
  const SymmetricApi& a = api();
  if (!a.complete()) {
    *why = "this NCCL has no symmetric windows (ncclCommWindowRegister: NCCL >= 2.27)";
    return false;
  }
  comm_ = comm;
  ncclResult_t res = a.memAlloc(&send_, bytes);
  if (res == ncclSuccess) res = a.memAlloc(&recv_, bytes);
  if (res == ncclSuccess) res = a.windowRegister(comm, send_, bytes, &sendWin_, kWinCollSymmetric);
  if (res == ncclSuccess) res = a.windowRegister(comm, recv_, bytes, &recvWin_, kWinCollSymmetric);
  if (res != ncclSuccess) {
    *why = std::string("symmetric window set-up failed: ") + ncclGetErrorString(res);
    close();
    return false;
  }
  return true;
}

void SymmetricWindows::close() {
  const SymmetricApi& a = api();
  if (!a.complete()) return;
  if (recvWin_ != nullptr) (void)a.windowDeregister(comm_, recvWin_);
  if (sendWin_ != nullptr) (void)a.windowDeregister(comm_, sendWin_);
  if (recv_ != nullptr) (void)a.memFree(recv_);
  if (send_ != nullptr) (void)a.memFree(send_);
  recvWin_ = sendWin_ = recv_ = send_ = nullptr;
}

SymmetricWindows::~SymmetricWindows() { close(); }

}  // namespace nccl_lamport::bench
