// Copying from an address of this process that may no longer be mapped (a communicator handle
// the program already destroyed), without a fault: the kernel does the reading.
#pragma once

#include <cstddef>

namespace nccl_lamport {

/**
 * Copies `bytes` bytes from `from` (this process) to `to` when every byte of the source is mapped
 * and readable; false otherwise (then `to` holds an unspecified prefix). Never faults: the copy
 * goes through process_vm_readv, or, where a seccomp profile refuses that call, through a pipe
 * (whose write returns EFAULT for an unreadable source). Costs a system call per 64 KiB at most.
 */
bool copyIfReadable(const void* from, void* to, size_t bytes);

/** copyIfReadable's fallback alone, through a pipe (for tests: process_vm_readv is used where
 *  allowed). */
bool copyIfReadableThroughPipe(const void* from, void* to, size_t bytes);

}  // namespace nccl_lamport
