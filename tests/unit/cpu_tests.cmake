# CPU-only GoogleTest suite (label "cpu"): tuner ABI, routing policy, configuration, logging,
# reading user-named files and memory that may be unmapped.
# No GPU, no NCCL library: the tests drive the exported tuner structs through
# lamport_tuner_exports and call the policy code directly. Included from tests/CMakeLists.txt.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(lamport_cpu_tests
  ${CMAKE_CURRENT_LIST_DIR}/test_tuner.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_tuner_registration.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_routing.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_launch_policy.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_tuning_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_small_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_readable_memory.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_log.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_log_file.cc
)
target_link_libraries(lamport_cpu_tests PRIVATE
  lamport_tuner_exports
  lamport_tuner
  GTest::gtest_main
  Threads::Threads
)
gtest_discover_tests(lamport_cpu_tests
  PROPERTIES LABELS cpu
  DISCOVERY_TIMEOUT 60
)

# The shared-GPU mode's rules (tests/gpu/shared_gpu.h): no GPU, no NCCL.
add_executable(test_shared_gpu ${CMAKE_CURRENT_LIST_DIR}/test_shared_gpu.cc ${CMAKE_CURRENT_LIST_DIR}/../gpu/shared_gpu.cc)
target_include_directories(test_shared_gpu PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_shared_gpu PRIVATE GTest::gtest_main)
gtest_discover_tests(test_shared_gpu PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)

# The tuner-activation build's environment rule (tests/gpu/activation_mode.h): no GPU, no NCCL.
add_executable(test_activation_mode ${CMAKE_CURRENT_LIST_DIR}/test_activation_mode.cc
                                    ${CMAKE_CURRENT_LIST_DIR}/../gpu/activation_mode.cc)
target_include_directories(test_activation_mode PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_activation_mode PRIVATE GTest::gtest_main)
gtest_discover_tests(test_activation_mode PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)

# The communicator registry and the teardown entry points, directly (no NCCL, no GPU): linked
# against lamport_internal, the library the shared object links.
add_executable(test_comm_registry ${CMAKE_CURRENT_LIST_DIR}/test_comm_registry.cc)
target_link_libraries(test_comm_registry PRIVATE lamport_internal GTest::gtest_main Threads::Threads)
gtest_discover_tests(test_comm_registry PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)
add_executable(test_pending_children ${CMAKE_CURRENT_LIST_DIR}/test_pending_children.cc)
target_link_libraries(test_pending_children PRIVATE lamport_internal GTest::gtest_main Threads::Threads)
gtest_discover_tests(test_pending_children PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)
add_executable(test_setup_verdict ${CMAKE_CURRENT_LIST_DIR}/test_setup_verdict.cc)
target_link_libraries(test_setup_verdict PRIVATE lamport_internal GTest::gtest_main Threads::Threads)
gtest_discover_tests(test_setup_verdict PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)

# The interposer's per-call dispatch, groups and revoke (tests/unit/test_allreduce_dispatch.cc):
# the wrappers linked in directly against a stand-in NCCL, no GPU. Run twice: as NCCL runs by
# default, and with NCCL's pointer checks on.
add_library(dispatch_stand_in_nccl SHARED ${CMAKE_CURRENT_LIST_DIR}/dispatch_stand_in_nccl.c)
target_include_directories(dispatch_stand_in_nccl PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(dispatch_stand_in_nccl PRIVATE nccl_headers)
set_target_properties(dispatch_stand_in_nccl PROPERTIES C_VISIBILITY_PRESET default)
add_executable(test_allreduce_dispatch
  ${CMAKE_CURRENT_LIST_DIR}/test_allreduce_dispatch.cc
  ${PROJECT_SOURCE_DIR}/plugin/interpose/interpose_allreduce.cc
  ${PROJECT_SOURCE_DIR}/plugin/interpose/allreduce_nvtx.cc
  ${PROJECT_SOURCE_DIR}/plugin/interpose/interpose_lifecycle.cc
  ${PROJECT_SOURCE_DIR}/plugin/abi/lamport_api.cc
  ${PROJECT_SOURCE_DIR}/plugin/hooks/tuner_activation.cc)
target_include_directories(test_allreduce_dispatch PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_allreduce_dispatch PRIVATE lamport_internal dispatch_stand_in_nccl CUDA::cudart_static
                      GTest::gtest_main Threads::Threads ${CMAKE_DL_LIBS})
gtest_discover_tests(test_allreduce_dispatch PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)
add_test(NAME allreduce_dispatch.pointer_checks_on
         COMMAND test_allreduce_dispatch --gtest_filter=Dispatch.WithPointerChecksOnABufferNcclWouldRefuseGoesToNccl)
set_tests_properties(allreduce_dispatch.pointer_checks_on PROPERTIES LABELS cpu ENVIRONMENT NCCL_CHECK_POINTERS=1)
# NVTX: a stand-in tool loaded as Nsight Systems is (NVTX_INJECTION64_PATH) counts our ranges.
add_library(nvtx_counting_tool SHARED ${PROJECT_SOURCE_DIR}/tests/shim/nvtx_counting_tool.c)
target_link_libraries(nvtx_counting_tool PRIVATE CUDA::toolkit)
add_dependencies(test_allreduce_dispatch nvtx_counting_tool)
foreach(_case range disabled)
  add_test(NAME allreduce_dispatch.nvtx_${_case}
           COMMAND test_allreduce_dispatch --gtest_filter=Dispatch.ATakenCallOpensNcclsAllReduceRange)
endforeach()
set_tests_properties(allreduce_dispatch.nvtx_range PROPERTIES LABELS cpu
  ENVIRONMENT "NVTX_INJECTION64_PATH=$<TARGET_FILE:nvtx_counting_tool>")
set_tests_properties(allreduce_dispatch.nvtx_disabled PROPERTIES LABELS cpu
  ENVIRONMENT "NVTX_INJECTION64_PATH=$<TARGET_FILE:nvtx_counting_tool>;NCCL_NVTX_DISABLE=1")

# NCCL's settings that keep a communicator on NCCL, read as NCCL reads them (plugin/comm/nccl_settings.h).
add_executable(test_nccl_settings ${CMAKE_CURRENT_LIST_DIR}/test_nccl_settings.cc)
target_include_directories(test_nccl_settings PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_nccl_settings PRIVATE lamport_internal GTest::gtest_main Threads::Threads)
gtest_discover_tests(test_nccl_settings PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)

# config.maxCTAs / NCCL_MAX_CTAS from the wrappers to the set-up (plugin/comm/cta_cap.h).
add_executable(test_cta_cap ${CMAKE_CURRENT_LIST_DIR}/test_cta_cap.cc)
target_include_directories(test_cta_cap PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_cta_cap PRIVATE lamport_internal GTest::gtest_main Threads::Threads)
gtest_discover_tests(test_cta_cap PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)

# The workspace's slot size from the knobs (plugin/comm/workspace_mapping.h), same library.
add_executable(test_workspace_sizing ${CMAKE_CURRENT_LIST_DIR}/test_workspace_sizing.cc)
target_include_directories(test_workspace_sizing PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_workspace_sizing PRIVATE lamport_internal GTest::gtest_main Threads::Threads)
gtest_discover_tests(test_workspace_sizing PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)
