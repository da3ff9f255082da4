# The side channels with large libraries (mpi://, pmix://, redis://) as
# plugins of a shared libjaccl: libjaccl-<name>.so beside it, opened with
# dlopen on first use (src/bootstrap/channel_plugin.h says why). A static
# libjaccl links them in, as before.
#
#   -DJACCL_CHANNEL_PLUGINS=OFF   link them into a shared libjaccl too
#
#   jaccl_add_channel(<name> [INCLUDES dir...] [LIBS lib...])
#       src/bootstrap/<name>_channel.cpp with its library: a plugin, or
#       part of libjaccl; either way JACCL_HAVE_<NAME>=1 for libjaccl.

option(JACCL_CHANNEL_PLUGINS
  "mpi://, pmix:// and redis:// as plugins of the shared libjaccl" ${JACCL_BUILD_SHARED})
if(JACCL_CHANNEL_PLUGINS AND NOT JACCL_BUILD_SHARED)
  set(JACCL_CHANNEL_PLUGINS OFF)
endif()

get_target_property(_jaccl_srcs jaccl SOURCES)
list(FILTER _jaccl_srcs EXCLUDE REGEX "/src/bootstrap/plugins/")
if(JACCL_CHANNEL_PLUGINS)
  list(FILTER _jaccl_srcs EXCLUDE REGEX "/src/bootstrap/(mpi|pmix|redis)_channel\\.cpp$")
  target_compile_definitions(jaccl PRIVATE JACCL_CHANNEL_PLUGINS=1)
  target_link_libraries(jaccl PRIVATE ${CMAKE_DL_LIBS})
endif()
set_property(TARGET jaccl PROPERTY SOURCES ${_jaccl_srcs})
unset(_jaccl_srcs)

function(jaccl_add_channel name)
  cmake_parse_arguments(A "" "" "INCLUDES;LIBS" ${ARGN})
  string(TOUPPER ${name} upper)
  target_compile_definitions(jaccl PRIVATE JACCL_HAVE_${upper}=1)
  if(NOT JACCL_CHANNEL_PLUGINS)
    target_include_directories(jaccl PRIVATE ${A_INCLUDES})
    target_link_libraries(jaccl PRIVATE ${A_LIBS})
    return()
  endif()
  set(t jaccl-${name})
  add_library(${t} MODULE
    ${PROJECT_SOURCE_DIR}/src/bootstrap/${name}_channel.cpp
    ${PROJECT_SOURCE_DIR}/src/bootstrap/plugins/${name}_plugin.cpp)
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/src ${A_INCLUDES})
  target_link_libraries(${t} PRIVATE jaccl ${A_LIBS})
  target_compile_definitions(${t} PRIVATE JACCL_HAVE_${upper}=1)
  target_compile_options(${t} PRIVATE -Wall -Wextra -Wpedantic)
  # Only the entry is exported: the channel's code binds to itself, never
  # to libjaccl's forwarding functions of the same names.
  set_target_properties(${t} PROPERTIES PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS ${t} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set_property(GLOBAL APPEND PROPERTY JACCL_CHANNEL_PLUGIN_TARGETS ${t})
endfunction()
