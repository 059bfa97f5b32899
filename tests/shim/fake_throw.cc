// A C++ exception raised from inside the stand-in NCCL (tests/shim/lifecycle_fake_nccl.c, built
// with -fexceptions so it unwinds through the C frames): the injection point for "a throw inside
// our set-up", which must never cross a C entry point of libnccl-lamport.so (issue 10, point 7).
#include <stdexcept>
#include <string>

extern "C" void fakeThrow(const char* where) { throw std::runtime_error(std::string("injected in ") + where); }
