# Building an attnlab plugin outside attnlab's tree (shipped in the CMake package):
#
#   cmake_minimum_required(VERSION 3.18)
#   project(my_method LANGUAGES CXX)
#   find_package(attnlab 0.2 REQUIRED)
#   attnlab_add_attention_plugin(my_method SOURCES my_method.cpp)
#
# builds attn_my_method.so (a dataset: data_NAME.so) in the build folder, C++17, linked with
# attnlab::core and LibTorch, position independent; load it with `attnlab ... --plugins build`.
# Extra LINK_LIBRARIES are linked privately (e.g. attnlab::random_features).

function(_attnlab_add_plugin prefix name)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "SOURCES;LINK_LIBRARIES")
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "attnlab: plugin ${name}: no SOURCES given")
  endif()
  set(target ${prefix}${name})
  add_library(${target} MODULE ${arg_SOURCES})
  target_link_libraries(${target} PRIVATE attnlab::core ${arg_LINK_LIBRARIES})
  target_compile_features(${target} PRIVATE cxx_std_17)
  set_target_properties(${target} PROPERTIES PREFIX "" CXX_EXTENSIONS OFF)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra)
  endif()
endfunction()

# attnlab_add_attention_plugin(NAME SOURCES a.cpp... [LINK_LIBRARIES lib...]): attn_NAME.so
function(attnlab_add_attention_plugin name)
  _attnlab_add_plugin(attn_ ${name} ${ARGN})
endfunction()

# attnlab_add_dataset_plugin(NAME SOURCES a.cpp... [LINK_LIBRARIES lib...]): data_NAME.so
function(attnlab_add_dataset_plugin name)
  _attnlab_add_plugin(data_ ${name} ${ARGN})
endfunction()
