/* Host-memory failures on demand for the fault scenarios (tests/shim/lifecycle_fault_scenarios.c):
 * the program's own operator new (tests/shim/alloc_faults.cc) takes the place of libstdc++'s for
 * every library of the process, libnccl-lamport.so included, and can be told to throw
 * std::bad_alloc once, at a chosen allocation of the calling thread or of the next thread that
 * starts allocating (a set-up thread of ours). */
#ifndef NCCL_LAMPORT_ALLOC_FAULTS_H_
#define NCCL_LAMPORT_ALLOC_FAULTS_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The n-th C++ allocation (operator new, any form) the calling thread makes from now on throws
 * std::bad_alloc; the others succeed. n <= 0: none. Clears allocFaultFired. */
void allocFaultArm(int n);

/* The n-th C++ allocation of the next thread to make its first one from now on throws
 * std::bad_alloc (counted from that first one); the others succeed. Threads that allocated before
 * this call are never armed: with the stand-in NCCL, whose own threads make no C++ allocation,
 * the next such thread is the deferred set-up thread the scenario's next non-blocking init,
 * collected split child or group end starts (allocFaultThreadsStarted tells whether it was the
 * only one). n <= 0: none, and an arm no thread took yet is taken back. Clears allocFaultFired
 * and allocFaultThreadsStarted. */
void allocFaultArmNextThread(int n);

/* How many threads made their first C++ allocation since the last allocFaultArmNextThread. */
int allocFaultThreadsStarted(void);

/* 1 if the armed allocation was reached (and threw) since the last allocFaultArm or
 * allocFaultArmNextThread, else 0. */
int allocFaultFired(void);

/* 1 if this program's operator new is the one in use (a sanitizer's runtime replaces it with its
 * own, and then no failure can be injected), else 0. */
int allocFaultsAvailable(void);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_LAMPORT_ALLOC_FAULTS_H_ */
