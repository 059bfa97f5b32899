#!/usr/bin/env bash
# Copies what the GPU machine needs from a build folder into a small staging folder (the device
# tool carries at most 64 MiB), keeping the bin/../lib layout the relative RPATHs expect.
#   bash tests/stage_for_device.sh BUILD_DIR [STAGE_DIR] [ARCHIVE.tar.xz]
# With ARCHIVE, the stage is also packed into one xz tarball (all tests fit: about 14 MB for 113 MB
# of binaries); carry that instead of the folder and unpack it there with
#   mkdir -p STAGE_DIR && tar xJf ARCHIVE -C STAGE_DIR
set -euo pipefail
build=$1
stage=${2:-.device/stage}
rm -rf "$stage"
mkdir -p "$stage/lib" "$stage/bench" "$stage/tests"
cp -a "$build"/lib/libnccl-lamport.so "$build"/lib/libnccl-tuner-lamport.so "$build"/lib/libnccl-lamport-audit.so "$stage/lib/"
cp "$build/bench/nccl-lamport-bench" "$stage/bench/" 2>/dev/null || echo "no bench binary"
for t in "$build"/tests/test_*; do
  [ -f "$t" ] && [ -x "$t" ] && cp "$t" "$stage/tests/"
done
# The tuner-activation build of the forked GPU tests (tests/gpu/activation_mode.h): same names.
mkdir -p "$stage/tests/tuner"
for t in "$build"/tests/tuner/test_*; do
  [ -f "$t" ] && [ -x "$t" ] && cp "$t" "$stage/tests/tuner/"
done
strip --strip-debug "$stage"/tests/* "$stage"/tests/tuner/* "$stage"/bench/* 2>/dev/null || true
du -sh "$stage"
if [ -n "${3:-}" ]; then
  tar cf - -C "$stage" . | xz -6 -T0 > "$3"
  du -h "$3"
fi
