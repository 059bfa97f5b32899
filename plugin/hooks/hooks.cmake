# plugin/hooks: the entry hooks of tuner activation (docs/tuner-activation.md). Capstone decodes
# x86-64 prologues; Debian's libcapstone-dev ships a position-independent static archive, linked
# into the shared object privately (the shared object's --exclude-libs,ALL keeps its symbols
# local, and a static archive adds no DT_NEEDED). Without capstone (or off x86-64) the hooks
# report "not capable".
add_library(lamport_hooks STATIC
  ${CMAKE_CURRENT_LIST_DIR}/prologue_relocator.cc
  ${CMAKE_CURRENT_LIST_DIR}/entry_hooks.cc
)
target_include_directories(lamport_hooks PUBLIC ${PROJECT_SOURCE_DIR})
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  find_path(CAPSTONE_INCLUDE_DIR capstone/capstone.h)
  find_library(CAPSTONE_STATIC_LIBRARY NAMES libcapstone.a)
  if(CAPSTONE_INCLUDE_DIR AND CAPSTONE_STATIC_LIBRARY)
    target_include_directories(lamport_hooks PRIVATE ${CAPSTONE_INCLUDE_DIR})
    target_compile_definitions(lamport_hooks PRIVATE NCCL_LAMPORT_HAVE_CAPSTONE=1)
    target_link_libraries(lamport_hooks PRIVATE ${CAPSTONE_STATIC_LIBRARY})
    message(STATUS "entry hooks: capstone ${CAPSTONE_STATIC_LIBRARY}")
  else()
    message(WARNING "libcapstone.a not found (Debian: libcapstone-dev): tuner activation's entry "
                    "hooks are built as 'not capable'")
  endif()
endif()
