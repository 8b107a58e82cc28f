# Helpers shared by every target that compiles against LibTorch.
#
# attnlab_torch_target(T): warnings, the shared precompiled header (LibTorch's headers cost ~10 s
# per translation unit on 2 cores; with the PCH they are parsed once per build).
function(attnlab_torch_target target)
  set_target_properties(${target} PROPERTIES DEFINE_SYMBOL "")  # keep flags identical for PCH reuse
  target_compile_options(${target} PRIVATE -Wall -Wextra -Winvalid-pch)
  if(NOT target STREQUAL attnlab_pch)
    target_precompile_headers(${target} REUSE_FROM attnlab_pch)
  endif()
endfunction()

# attnlab_plugin(T KIND SOURCES...): an attention (KIND=attention, file plugins/attn_<name>.so)
# or dataset (KIND=dataset, file datasets/data_<name>.so) plugin.
function(attnlab_plugin target kind)
  add_library(${target} MODULE ${ARGN})
  target_link_libraries(${target} PRIVATE attnlab_core)
  attnlab_torch_target(${target})
  if(kind STREQUAL "attention")
    set(dir ${ATTNLAB_PLUGIN_DIR})
    set(install_dir ${ATTNLAB_INSTALL_PLUGIN_DIR})
    add_dependencies(attn_plugins ${target})
  else()
    set(dir ${ATTNLAB_DATASET_DIR})
    set(install_dir ${ATTNLAB_INSTALL_DATASET_DIR})
    add_dependencies(data_plugins ${target})
  endif()
  # installed in <prefix>/lib/attnlab/<kind>s/: libattnlab_core.so is two folders up (and a
  # LibTorch inside the checkout where CMAKE_INSTALL_RPATH names one)
  set(rpath "$ORIGIN/../.." ${CMAKE_INSTALL_RPATH})
  set_target_properties(${target} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${dir} INSTALL_RPATH "${rpath}")
  install(TARGETS ${target} LIBRARY DESTINATION ${install_dir} COMPONENT runtime)
endfunction()

# attnlab_dataset_format(T SOURCES... [PUBLIC lib...] [PRIVATE lib...]): a dataset's LibTorch-free
# static library (parsing, generating), which tests/ unit-tests without loading the plugin. It
# links attnlab_core for attnlab::DataError and data_util.hpp.
function(attnlab_dataset_format target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;PUBLIC;PRIVATE")
  add_library(${target} STATIC ${arg_SOURCES})
  target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${target} PUBLIC attnlab_core ${arg_PUBLIC} PRIVATE ${arg_PRIVATE})
  target_compile_options(${target} PRIVATE -Wall -Wextra)
endfunction()

# attnlab_torch_test(T SOURCES...): a GoogleTest executable whose sources use LibTorch. They are
# compiled as a PIC object library so they can reuse the shared PCH (built -fPIC; executables
# would be compiled -fPIE and could not use it). Their main is tests/torch_test_main.cpp.
function(attnlab_torch_test target)
  add_library(${target}_objects OBJECT ${ARGN} ${PROJECT_SOURCE_DIR}/tests/torch_test_main.cpp)
  target_link_libraries(${target}_objects PRIVATE attnlab_runner_lib GTest::gtest)
  attnlab_torch_target(${target}_objects)
  add_executable(${target} $<TARGET_OBJECTS:${target}_objects>)
  target_link_libraries(${target} PRIVATE attnlab_runner_lib GTest::gtest)
endfunction()

# attnlab_test_groups(T [LABELS l...] [TIMEOUT s] [FILTER f] [SIZE n]): T's GoogleTest tests as CTest
# tests in groups: each run of at most n (default 10) consecutive tests of one suite is one CTest
# test, named after the suite (`Suite[2]` for its second run where it has several), its tests run in
# one process. A LibTorch program takes 0.3-0.4 s to start, as long as most of its tests take to
# run: one process a test was a third of the suite's time. Listed after each build of T, as
# gtest_discover_tests lists them (cmake/attnlab_test_groups.cmake); FILTER keeps only the tests
# its --gtest_filter names. One failing test fails its group; GoogleTest's output names the test.
set(ATTNLAB_TEST_GROUPS_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/attnlab_test_groups.cmake)
function(attnlab_test_groups target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TIMEOUT;FILTER;SIZE" "LABELS")
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 1500)
  endif()
  if(NOT arg_SIZE)
    set(arg_SIZE 10)
  endif()
  set(filter "")
  if(arg_FILTER)
    set(filter "--gtest_filter=${arg_FILTER}")
  endif()
  string(REPLACE ";" "," labels "${arg_LABELS}")  # passed as one word; the script splits them again
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_groups.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D "program=$<TARGET_FILE:${target}>" -D "output=${tests_file}" -D "labels=${labels}"
            -D "timeout=${arg_TIMEOUT}" -D "filter=${filter}" -D "size=${arg_SIZE}" -P ${ATTNLAB_TEST_GROUPS_SCRIPT}
    BYPRODUCTS ${tests_file} VERBATIM)
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_groups_include.cmake")
  file(WRITE ${include_file}
       "if(EXISTS \"${tests_file}\")\n  include(\"${tests_file}\")\nelse()\n  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
