// Visibility of the entry points the loader and NCCL see; everything else is hidden, and
// plugin/abi/exports.map lists the exported names once more for the linker.
#pragma once

#define NCCL_LAMPORT_EXPORT extern "C" __attribute__((visibility("default")))
