# GPU correctness suite of the whole plugin (SPEC 7), label `gpu`. Included from
# tests/CMakeLists.txt. Without a GPU every test reports SKIPPED (never passed).
#
#   test_gpu_multiprocess   one process per GPU (forked ranks; the gtest process never inits CUDA)
#   test_gpu_errors         bad arguments, NCCL_LAMPORT_ENABLE=0, bounded wait, abort (forked ranks)
#   test_gpu_singleprocess  one process drives every GPU (ncclCommInitAll / grouped init and calls)
#   test_gpu_threads        one thread per GPU (plain and grouped-per-thread)
#   test_gpu_lifecycle      two streams on one comm, abort/finalize/destroy, create-destroy leaks (forked ranks)
#   test_gpu_groups         allreduce in groups with allgather/send/recv, two comms, nesting, graphs (forked ranks)
#   test_gpu_comm_kinds     split/shrink/scalable/non-blocking/revoke comms, 3 comms x 2 threads (forked ranks;
#                           one test forks a single process that drives both GPUs)
#
# The fork-based and the in-process executables are separate on purpose: CUDA state does not
# survive fork, so a process that initialised CUDA must never fork ranks.
#
# Link order matters: libnccl-lamport.so comes before libnccl, so the executables' ncclAllReduce
# etc. resolve to the plugin (as under LD_PRELOAD) while pncclAllReduce reaches NCCL itself.
if(TARGET nccl-lamport AND NOT TARGET lamport_launcher)
  message(WARNING "gpu tests: the rank launcher (built with the benchmark, NCCL_LAMPORT_BUILD_BENCH) is "
                  "missing: GPU tests are not built")
endif()
if(TARGET nccl-lamport AND TARGET lamport_launcher)
  if(NOT NCCL_LIBRARY)
    message(WARNING "gpu tests: NCCL_LIBRARY (the real libnccl) not found: GPU tests are not built")
    return()
  endif()
  if(NOT TARGET GTest::gtest)
    find_package(GTest REQUIRED)
  endif()
  include(GoogleTest)

  # Shared helpers, compiled once; their main() sets the suite's NCCL_LAMPORT_* knobs.
  add_library(lamport_gpu_test_support OBJECT ${CMAKE_CURRENT_LIST_DIR}/gpu_test_support.cc
                                              ${CMAKE_CURRENT_LIST_DIR}/gpu_scenarios.cc
                                              ${CMAKE_CURRENT_LIST_DIR}/gpu_rank_runner.cc
                                              ${CMAKE_CURRENT_LIST_DIR}/gpu_comm_helpers.cc
                                              ${CMAKE_CURRENT_LIST_DIR}/shared_gpu.cc)
  target_include_directories(lamport_gpu_test_support PRIVATE
    ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include ${NCCL_INCLUDE_DIR})
  target_link_libraries(lamport_gpu_test_support PRIVATE CUDA::toolkit GTest::gtest)

  foreach(pattern multiprocess errors singleprocess threads lifecycle groups comm_kinds)
    set(target test_gpu_${pattern})
    add_executable(${target}
      ${CMAKE_CURRENT_LIST_DIR}/test_gpu_${pattern}.cc
      $<TARGET_OBJECTS:lamport_gpu_test_support>)
    target_include_directories(${target} PRIVATE
      ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include ${NCCL_INCLUDE_DIR})
    target_link_libraries(${target} PRIVATE
      nccl-lamport
      ${NCCL_LIBRARY}
      lamport_launcher
      CUDA::cudart_static
      GTest::gtest
      Threads::Threads)
    gtest_discover_tests(${target}
      PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" TIMEOUT 900
      DISCOVERY_TIMEOUT 60)
  endforeach()
endif()
