# Support code of the plugin: descriptor passing between processes (fd_exchange.cc) and the
# NVLink/P2P topology queries (topology.cc). include()d from plugin/CMakeLists.txt.
# NVML is dlopen()ed at run time (no link dependency); the CUDA runtime is the static one.
add_library(lamport_support STATIC
  ${PROJECT_SOURCE_DIR}/plugin/fd_exchange.cc
  ${PROJECT_SOURCE_DIR}/plugin/topology.cc
)
target_include_directories(lamport_support PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(lamport_support
  PUBLIC lamport_common CUDA::cudart_static ${CMAKE_DL_LIBS} Threads::Threads)
set_target_properties(lamport_support PROPERTIES POSITION_INDEPENDENT_CODE ON)
