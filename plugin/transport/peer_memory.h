// Peer-visible device memory built on CUDA VMM (docs/design.md, "Workspace"): one exportable
// allocation per rank, mapped by every peer. Same process: the peer maps the owner's allocation
// handle directly. Other processes of the host: the handle travels as a POSIX file descriptor
// (fd_exchange.h). MNNVL (a later step) will use FABRIC handles through the same two classes:
// the handle type is a parameter here, not an assumption.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

namespace nccl_lamport {

/** How an allocation is shared with peers. */
enum class PeerHandleType { kPosixFd, kFabric };

/** Whether cudaDev can back a Lamport workspace shared with `type`; *why says why not. */
bool deviceSupportsPeerMemory(int cudaDev, PeerHandleType type, std::string* why);

/** This rank's allocation: created on cudaDev, mapped read-write for cudaDev. */
class LocalAllocation {
 public:
  LocalAllocation() = default;
  ~LocalAllocation();
  LocalAllocation(const LocalAllocation&) = delete;
  LocalAllocation& operator=(const LocalAllocation&) = delete;

  /** Allocates at least `bytes` (rounded up to the granularity). False + *why on failure. */
  bool create(int cudaDev, size_t bytes, PeerHandleType type, std::string* why);
  /** A new file descriptor for the allocation (caller closes it); -1 on failure. */
  int exportFd() const;
  /** Releases the mapping and the handle (also done by the destructor). */
  void release();

  char* ptr() const { return reinterpret_cast<char*>(va_); }
  size_t size() const { return size_; }
  CUmemGenericAllocationHandle handle() const { return handle_; }

 private:
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr va_ = 0;
  size_t size_ = 0;
  bool mapped_ = false;
};

/** A peer's allocation mapped into this process for cudaDev. */
class PeerMapping {
 public:
  PeerMapping() = default;
  ~PeerMapping();
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;

  /** Maps an allocation of the same process (its handle stays owned by the owner). */
  bool mapHandle(CUmemGenericAllocationHandle handle, size_t size, int cudaDev, std::string* why);
  /** Imports and maps an allocation exported by another process as a POSIX fd (fd is not closed). */
  bool mapFd(int fd, size_t size, int cudaDev, std::string* why);
  void release();

  char* ptr() const { return reinterpret_cast<char*>(va_); }

 private:
  CUdeviceptr va_ = 0;
  size_t size_ = 0;
  bool mapped_ = false;
};

}  // namespace nccl_lamport
