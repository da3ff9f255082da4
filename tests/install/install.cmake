# Installs the build tree BIN into a fresh scratch PREFIX (the install_prefix
# fixture).   cmake -DBIN=<build> -DPREFIX=<prefix> -P install.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BIN} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BIN} --prefix ${PREFIX} failed (${rc})")
endif()
