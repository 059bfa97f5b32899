// Reading a small text file named by the user (a tuning file, nccl.conf) without the ways a plain
// std::ifstream read can stall or exhaust a rank: an open() of a FIFO nobody writes blocks for
// ever, and /dev/zero or a checkpoint named by mistake would be read whole into memory.
#pragma once

#include <cstddef>
#include <string>

namespace nccl_lamport {

/**
 * Reads the whole text of `path` into *text when it is a regular file of at most maxBytes bytes.
 * Never blocks on a FIFO or device: it opens with O_NONBLOCK and refuses anything but a regular
 * file. False, with *error set to one line that completes "<path> ...", otherwise:
 * "cannot be read (<errno text>)", "is not a regular file" or "is larger than <maxBytes> bytes"
 * (also when the file grows past the limit while it is read). Never throws for I/O errors.
 */
bool readSmallRegularFile(const std::string& path, size_t maxBytes, std::string* text, std::string* error);

/** True when `name` is a path (it holds a '/') to something that exists and is not a regular file
 *  (a FIFO, a device, a folder; links followed): dlopen of a FIFO waits for a writer for ever. A
 *  bare library name, searched by the loader, and a missing path are false. */
bool pathIsNotARegularFile(const std::string& name);

}  // namespace nccl_lamport
