/* The one thing libnccl-lamport.so and the LD_AUDIT module libnccl-lamport-audit.so agree on.
 * Plain C: the audit module is C and carries no C++ runtime.
 *
 * Under the audit module a program's dlopen("libnccl.so.2") gets libnccl-lamport.so. glibc then
 * records "libnccl.so.2" as a name of OUR link map, and compares a later dlopen's name with the
 * names of loaded objects before it asks any auditor (seen with glibc 2.36, see
 * tests/shim/dlopen_nccl.c). Our own dlopen("libnccl.so.2") of the real NCCL would then return
 * ourselves. So the plugin asks for the real library under a name no object carries,
 * NCCL_LAMPORT_REAL_NCCL_PREFIX "libnccl.so.2", and the audit module answers in la_objsearch
 * with the file the program's own request would have loaded without the module (the path it
 * asked for, or what its RPATH / RUNPATH / LD_LIBRARY_PATH gave: plugin/loader/ld_audit.c), else with
 * "libnccl.so.2", which the loader then searches from our object: LD_LIBRARY_PATH, our RUNPATH
 * (left out once a program's request found no NCCL on its own path, as that program's loader
 * would not have looked there), ld.so.cache, the default directories. Without the audit module
 * the prefixed name matches no file and the dlopen fails harmlessly.
 */
#ifndef NCCL_LAMPORT_AUDIT_PROTOCOL_H_
#define NCCL_LAMPORT_AUDIT_PROTOCOL_H_

/** Prefix of a library name that the audit module maps to the real NCCL, unredirected. */
#define NCCL_LAMPORT_REAL_NCCL_PREFIX "nccl-lamport-real:"

/** File name of the main object, which the audit module expects beside itself. */
#define NCCL_LAMPORT_OBJECT_NAME "libnccl-lamport.so"

#endif /* NCCL_LAMPORT_AUDIT_PROTOCOL_H_ */
