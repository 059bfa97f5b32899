// nccl-lamport-bench's progress line on stderr (rank 0 writes it): where a long sweep is, without
// touching stdout, whose table stays clean for pipes and files. Shown only when stderr is a
// terminal and --quiet is not given: a log file would fill with carriage-return rewrites.
#pragma once

#include <cstddef>
#include <string>

namespace nccl_lamport::bench {

/** "size 5/22: 4K bytes, graph" (index counts from 0; phase: "check", "eager", "graph", ...). */
[[nodiscard]] std::string formatProgress(int index, int total, size_t bytes, const std::string& phase);

/** Whether to draw the progress line: not quiet and the descriptor is a terminal. */
[[nodiscard]] bool progressWanted(bool quiet, int fd);

/** Rewrites the terminal's current line with text (carriage return, text, erase to end). */
void showProgress(const std::string& text);

/** Erases the progress line, so what follows starts on a clean line. */
void clearProgress();

}  // namespace nccl_lamport::bench
