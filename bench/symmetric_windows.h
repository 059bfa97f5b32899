// NCCL's symmetric kernels for nccl-lamport-bench's third column: a send and a receive buffer
// from ncclMemAlloc, each registered as a symmetric window (ncclCommWindowRegister with
// NCCL_WIN_COLL_SYMMETRIC, NCCL >= 2.27), on which stock NCCL's allreduce can take its symmetric
// kernels. The entry points are looked up at run time (dlsym), so the bench still runs on an NCCL
// without them and says "n/a".
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>

namespace nccl_lamport::bench {

class SymmetricWindows {
 public:
  SymmetricWindows() = default;
  SymmetricWindows(const SymmetricWindows&) = delete;
  SymmetricWindows& operator=(const SymmetricWindows&) = delete;
  ~SymmetricWindows();

  /**
   * Allocates and registers both buffers of `bytes` bytes on comm (collective: every rank calls
   * it, in the same order as its other collectives). False with *why when the NCCL has no
   * symmetric windows or a step fails; then nothing stays allocated.
   */
  bool open(ncclComm_t comm, size_t bytes, std::string* why);

  /** Deregisters and frees (collective too); called by the destructor if needed. */
  void close();

  [[nodiscard]] void* send() const { return send_; }
  [[nodiscard]] void* recv() const { return recv_; }

 private:
  ncclComm_t comm_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  void* sendWin_ = nullptr;  // ncclWindow_t (an opaque pointer in every NCCL that has it)
  void* recvWin_ = nullptr;
};

}  // namespace nccl_lamport::bench
