/* The version tests/shim/runpath_fake_nccl.c reports, 2.99.99: no real NCCL has it, so
 * tests/shim/runpath_check.c can tell which libnccl.so.2 answered. */
#ifndef NCCL_LAMPORT_RUNPATH_FAKE_NCCL_H_
#define NCCL_LAMPORT_RUNPATH_FAKE_NCCL_H_

#define RUNPATH_FAKE_NCCL_VERSION 29999

#endif /* NCCL_LAMPORT_RUNPATH_FAKE_NCCL_H_ */
