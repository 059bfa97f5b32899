# Self-registration as NCCL's tuner (plugin/loader/self_register.cc), seen from a preloaded process's own
# environment (label cpu): `env` runs with the object preloaded and prints what the constructor
# left. Every spelling of NCCL_LAMPORT_ENABLE=off must leave NCCL_TUNER_PLUGIN unset (the A/B run
# sees stock NCCL); on by default, it must be set. Included from tests/CMakeLists.txt.
find_program(NCCL_LAMPORT_ENV_PROGRAM env REQUIRED)
set(_preload_so ${PROJECT_BINARY_DIR}/lib/libnccl-lamport.so)

add_test(NAME self_register.on_by_default COMMAND ${NCCL_LAMPORT_ENV_PROGRAM})
set_tests_properties(self_register.on_by_default PROPERTIES LABELS cpu
  ENVIRONMENT "LD_PRELOAD=${_preload_so}" PASS_REGULAR_EXPRESSION "NCCL_TUNER_PLUGIN=/")
foreach(_off 0 false NO)
  add_test(NAME self_register.enable_${_off} COMMAND ${NCCL_LAMPORT_ENV_PROGRAM})
  set_tests_properties(self_register.enable_${_off} PROPERTIES LABELS cpu
    ENVIRONMENT "LD_PRELOAD=${_preload_so};NCCL_LAMPORT_ENABLE=${_off}" FAIL_REGULAR_EXPRESSION "NCCL_TUNER_PLUGIN="
    PASS_REGULAR_EXPRESSION "NCCL_LAMPORT_ENABLE=${_off}")
endforeach()
