# GPU correctness suite of the whole plugin (SPEC 7), label `gpu`. Included from
# tests/CMakeLists.txt. Without a GPU every test reports SKIPPED (never passed).
#
#   test_gpu_multiprocess   one process per GPU (forked ranks; the gtest process never inits CUDA)
#   test_gpu_errors         bad arguments, NCCL_LAMPORT_ENABLE=0, bounded wait, abort (forked ranks)
#   test_gpu_singleprocess  one process drives every GPU (ncclCommInitAll / grouped init and calls)
#   test_gpu_threads        one thread per GPU (plain and grouped-per-thread)
#   test_gpu_lifecycle      two streams on one comm, abort/finalize/destroy, create-destroy leaks (forked ranks)
#   test_gpu_groups         allreduce in groups with allgather/send/recv, two comms, nesting, graphs, simulated
#                           groups, work queued before ncclGroupEnd (forked ranks)
#   test_gpu_comm_kinds     split/shrink/scalable/non-blocking/revoke comms, 3 comms x 2 threads (forked ranks;
#                           one test forks a single process that drives both GPUs)
#
# The fork-based and the in-process executables are separate on purpose: CUDA state does not
# survive fork, so a process that initialised CUDA must never fork ranks.
#
# Link order matters: libnccl-lamport.so comes before libnccl, so the executables' ncclAllReduce
# etc. resolve to the plugin (as under LD_PRELOAD) while pncclAllReduce reaches NCCL itself.
#
# Tuner activation (SPEC 4a, tests/gpu/activation_mode.h): the forked executables are built a
# second time, from the same objects, into tests/tuner/ under the same names, WITHOUT
# libnccl-lamport.so (a linked interposer would run before the tuner's init and make it the other
# mode). They find the extension API in the object NCCL loads from NCCL_TUNER_PLUGIN and take
# NCCL's own result through collectives the plugin never takes; run them with only
# NCCL_TUNER_PLUGIN=/abs/path/libnccl-tuner-lamport.so set (tests/gpu_suite.sh part tuner; in
# ctest as tuner.<Suite>.<Test>). Without it they fail, never pass.
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

  # Objects compiled once and linked into both builds.
  function(lamport_gpu_objects name)
    add_library(${name} OBJECT ${ARGN})
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include ${NCCL_INCLUDE_DIR})
    target_link_libraries(${name} PRIVATE CUDA::toolkit GTest::gtest)
  endfunction()
  # Shared helpers; their main() sets the suite's NCCL_LAMPORT_* knobs.
  lamport_gpu_objects(lamport_gpu_test_support ${CMAKE_CURRENT_LIST_DIR}/gpu_test_support.cc
                                               ${CMAKE_CURRENT_LIST_DIR}/gpu_scenarios.cc
                                               ${CMAKE_CURRENT_LIST_DIR}/gpu_rank_runner.cc
                                               ${CMAKE_CURRENT_LIST_DIR}/gpu_comm_helpers.cc
                                               ${CMAKE_CURRENT_LIST_DIR}/nccl_reference.cc)
  lamport_gpu_objects(lamport_gpu_shared_gpu ${CMAKE_CURRENT_LIST_DIR}/shared_gpu.cc
                                             ${CMAKE_CURRENT_LIST_DIR}/activation_mode.cc)
  lamport_gpu_objects(lamport_gpu_activation_linked ${CMAKE_CURRENT_LIST_DIR}/activation_linked.cc)
  lamport_gpu_objects(lamport_gpu_activation_tuner ${CMAKE_CURRENT_LIST_DIR}/activation_tuner.cc)

  # lamport_gpu_executable(TARGET BUILD MAIN OBJECTS...): BUILD linked (libnccl-lamport.so ahead of
  # libnccl) or tuner (libnccl only, into tests/tuner/ under the name without "_tuner"); MAIN
  # gtest (the support's main) or gtest_main.
  function(lamport_gpu_executable target build main)
    add_executable(${target} ${ARGN} $<TARGET_OBJECTS:lamport_gpu_shared_gpu>
                   $<TARGET_OBJECTS:lamport_gpu_activation_${build}>)
    set(plugin nccl-lamport)
    set(timeout 900)
    if(target STREQUAL "test_gpu_faults" OR target STREQUAL "test_gpu_faults_tuner")
      set(timeout 300)
    endif()
    set(discover PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" TIMEOUT ${timeout})
    if(build STREQUAL "tuner")
      set(plugin)
      string(REGEX REPLACE "_tuner$" "" name ${target})
      set_target_properties(${target} PROPERTIES OUTPUT_NAME ${name}
                            RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/tuner)
      add_dependencies(${target} nccl-lamport)  # the object NCCL_TUNER_PLUGIN names
      list(APPEND discover ENVIRONMENT "NCCL_TUNER_PLUGIN=${PROJECT_BINARY_DIR}/lib/libnccl-tuner-lamport.so")
      set(discover TEST_PREFIX "tuner." ${discover})
    endif()
    target_link_libraries(${target} PRIVATE ${plugin} ${NCCL_LIBRARY} lamport_launcher CUDA::cudart_static
                          GTest::${main} Threads::Threads ${CMAKE_DL_LIBS})
    gtest_discover_tests(${target} ${discover} DISCOVERY_TIMEOUT 60)
  endfunction()

  foreach(pattern multiprocess errors singleprocess threads lifecycle groups comm_kinds)
    set(sources ${CMAKE_CURRENT_LIST_DIR}/test_gpu_${pattern}.cc)
    if(pattern STREQUAL "comm_kinds")  # one executable, two files (non-blocking comms apart)
      list(APPEND sources ${CMAKE_CURRENT_LIST_DIR}/test_gpu_comm_kinds_nonblocking.cc)
    endif()
    if(pattern STREQUAL "groups")  # and when a grouped call launches (simulated groups, queued work)
      list(APPEND sources ${CMAKE_CURRENT_LIST_DIR}/test_gpu_group_launch.cc)
    endif()
    lamport_gpu_objects(test_gpu_${pattern}_objects ${sources})
    set(objects $<TARGET_OBJECTS:test_gpu_${pattern}_objects> $<TARGET_OBJECTS:lamport_gpu_test_support>)
    lamport_gpu_executable(test_gpu_${pattern} linked gtest ${objects})
    # The in-process patterns stay linked-only: tuner activation is process-wide either way, and
    # they need one GPU per rank (shared-GPU mode skips them).
    if(NOT pattern MATCHES "^(singleprocess|threads)$")
      lamport_gpu_executable(test_gpu_${pattern}_tuner tuner gtest ${objects})
    endif()
  endforeach()

  # A rank killed or stopped during Lamport calls (issue 10, evidence); its own fork logic.
  lamport_gpu_objects(test_gpu_faults_objects ${CMAKE_CURRENT_LIST_DIR}/test_gpu_faults.cc)
  lamport_gpu_executable(test_gpu_faults linked gtest_main $<TARGET_OBJECTS:test_gpu_faults_objects>)
  lamport_gpu_executable(test_gpu_faults_tuner tuner gtest_main $<TARGET_OBJECTS:test_gpu_faults_objects>)
endif()
