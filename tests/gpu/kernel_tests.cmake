# Kernel tests, included from tests/CMakeLists.txt:
#   test_lamport_primitives  CPU: sentinel, sanitize, conversions, layout, rotation model
#   test_gpu_kernel          GPU: the one-shot kernels on simulated ranks, no NCCL (skipped, not
#                            passed, on a machine without a GPU)
#   test_gpu_twoshot         GPU: the two-shot kernel, the same way
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(test_lamport_primitives ${CMAKE_CURRENT_LIST_DIR}/../unit/test_lamport_primitives.cc)
target_include_directories(test_lamport_primitives PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_lamport_primitives PRIVATE GTest::gtest_main)
gtest_discover_tests(test_lamport_primitives
  PROPERTIES LABELS cpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
  DISCOVERY_TIMEOUT 60)

add_executable(test_gpu_kernel ${CMAKE_CURRENT_LIST_DIR}/test_gpu_kernel.cu ${CMAKE_CURRENT_LIST_DIR}/test_gpu_kernel_residency.cu
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_kernel_validation.cu)
target_link_libraries(test_gpu_kernel PRIVATE lamport_kernels CUDA::cudart_static GTest::gtest_main)
gtest_discover_tests(test_gpu_kernel
  PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
  DISCOVERY_TIMEOUT 60)
add_executable(test_gpu_twoshot ${CMAKE_CURRENT_LIST_DIR}/test_gpu_twoshot.cu)
target_link_libraries(test_gpu_twoshot PRIVATE lamport_kernels CUDA::cudart_static GTest::gtest_main)
gtest_discover_tests(test_gpu_twoshot
  PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
  DISCOVERY_TIMEOUT 60)
# Its argument checks need no GPU (they come before any CUDA call): also run them under `cpu`.
add_test(NAME kernel_cpu.LamportLaunchValidation COMMAND test_gpu_kernel --gtest_filter=LamportLaunchValidation.*)
set_tests_properties(kernel_cpu.LamportLaunchValidation PROPERTIES LABELS cpu FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
# nccl-lamport-bench --loopback run as a program (GPU; skipped without one).
if(TARGET nccl-lamport-bench)
  add_executable(test_gpu_loopback_bench ${CMAKE_CURRENT_LIST_DIR}/test_gpu_loopback_bench.cc)
  target_link_libraries(test_gpu_loopback_bench PRIVATE CUDA::cudart_static GTest::gtest_main)
  target_compile_definitions(test_gpu_loopback_bench PRIVATE
    NCCL_LAMPORT_BENCH_BINARY="$<TARGET_FILE:nccl-lamport-bench>")
  add_dependencies(test_gpu_loopback_bench nccl-lamport-bench)
  gtest_discover_tests(test_gpu_loopback_bench
    PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" TIMEOUT 600
    DISCOVERY_TIMEOUT 60)
endif()
