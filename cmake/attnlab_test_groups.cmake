# Writes the CTest file of one GoogleTest program's tests in groups (AttnlabTargets.cmake,
# attnlab_test_groups): run as `cmake -P` after each build of the program, with
#   program  the test program         output  the CTest file to write
#   labels   labels, comma-separated  timeout seconds a group may take
#   filter   a --gtest_filter, or empty        size  tests a group holds at most
# Each group is a run of at most `size` consecutive tests of one suite, run in one process: a test
# program loading LibTorch takes 0.3-0.4 s to start, as long as most tests take to run.
execute_process(COMMAND "${program}" --gtest_list_tests ${filter}
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE result TIMEOUT 60)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${program} --gtest_list_tests: ${result}\n${errors}")
endif()
string(REPLACE "," ";" labels "${labels}")
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")

set(text "")
set(suite "")
set(members "")
set(count 0)
set(part 0)
# closes the current group: one add_test running its tests by name, in the order listed
macro(close_group)
  if(members)
    math(EXPR part "${part} + 1")
    set(name "${suite}")
    if(part GREATER 1 OR more)
      set(name "${suite}[${part}]")
    endif()
    string(APPEND text "add_test([=[${name}]=] [==[${program}]==] [==[--gtest_filter=${members}]==])\n"
                       "set_tests_properties([=[${name}]=] PROPERTIES LABELS [==[${labels}]==] TIMEOUT ${timeout})\n")
  endif()
  set(members "")
  set(count 0)
endmacro()

# the suites' sizes first, so that a suite of one group keeps its plain name
set(suites "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ ][^ ]*)\\.")
    set(current "${CMAKE_MATCH_1}")
    list(APPEND suites "${current}")
    set(size_${current} 0)
  elseif(line MATCHES "^  ([^ ]+)")
    math(EXPR size_${current} "${size_${current}} + 1")
  endif()
endforeach()

foreach(line IN LISTS lines)
  if(line MATCHES "^([^ ][^ ]*)\\.")
    close_group()
    set(suite "${CMAKE_MATCH_1}")
    set(part 0)
    set(more FALSE)
    if(size_${suite} GREATER size)
      set(more TRUE)
    endif()
  elseif(line MATCHES "^  ([^ ]+)")
    if(count EQUAL size)
      close_group()
    endif()
    if(members)
      string(APPEND members ":")
    endif()
    string(APPEND members "${suite}.${CMAKE_MATCH_1}")
    math(EXPR count "${count} + 1")
  endif()
endforeach()
close_group()
file(WRITE "${output}" "${text}")
