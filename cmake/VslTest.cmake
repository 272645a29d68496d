# vsl_add_test(<name> SOURCES <files...> LABELS <area> [slow] [LIBS <libs...>] [TIMEOUT <s>])
#
# One line per test binary. The binary links GoogleTest's main and the given libraries;
# each TEST() becomes its own ctest case (discovered when ctest runs) carrying the labels,
# so `ctest -L ftl` or `ctest -LE slow` select by area. Areas: foundation ftl flashback
# card block sdk power hls rtl alveo bench backend monitor ha kernel (VM tests) formal; add
# `slow` for long campaigns.
include(GoogleTest)
set(VSL_TEST_AREAS foundation ftl flashback card block sdk power hls rtl alveo bench backend monitor ha kernel formal)

function(vsl_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_LABELS)
    message(FATAL_ERROR "vsl_add_test(${name}): give LABELS with the test's area")
  endif()
  set(area_found OFF)
  foreach(l IN LISTS T_LABELS)
    if(l IN_LIST VSL_TEST_AREAS)
      set(area_found ON)
    elseif(NOT l STREQUAL "slow")
      message(FATAL_ERROR "vsl_add_test(${name}): unknown label '${l}'")
    endif()
  endforeach()
  if(NOT area_found)
    message(FATAL_ERROR "vsl_add_test(${name}): no area label among ${T_LABELS}")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${name} ${T_SOURCES})
  vsl_warnings(${name})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest_main GTest::gmock)
  # Labels are applied by a second include file that runs after discovery, because
  # gtest_discover_tests cannot pass a list-valued property through its script.
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    TEST_LIST ${name}_TESTS
    PROPERTIES TIMEOUT ${T_TIMEOUT}
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set(label_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
  file(WRITE "${label_file}"
    "if(${name}_TESTS)\n"
    "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${T_LABELS}\")\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${label_file}")
endfunction()

# vsl_add_command_test(<name> LABELS <area>... COMMAND <cmd...>) for tests that run a tool
# or script rather than a GoogleTest binary. Exit code 77 marks the test skipped (the
# script prints why: a kernel feature or device this machine lacks).
function(vsl_add_command_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "LABELS;COMMAND" ${ARGN})
  add_test(NAME ${name} COMMAND ${T_COMMAND})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77)
endfunction()
