# Install run paths relative to the installed file ($ORIGIN), so installed
# executables and modules find libjaccl in <prefix>/<libdir> wherever the
# prefix is (cmake --install --prefix, a Debian package), without
# LD_LIBRARY_PATH. The build tree keeps CMake's build run path.
#
#   jaccl_install_rpath(<target> <install-dir>)
#       <install-dir>: where <target> is installed, relative to the prefix
#   jaccl_install_rpath_dir(<source-dir> <install-dir>)
#       the same for every executable and module defined in <source-dir>

function(jaccl_install_rpath target dest)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(rpath "${CMAKE_INSTALL_LIBDIR}")
  elseif(IS_ABSOLUTE "${dest}")
    set(rpath "${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}")
  else()
    file(RELATIVE_PATH rel "/p/${dest}" "/p/${CMAKE_INSTALL_LIBDIR}")
    string(REGEX REPLACE "/+$" "" rel "${rel}")
    set(rpath "$ORIGIN")
    if(rel)
      string(APPEND rpath "/${rel}")
    endif()
  endif()
  set_property(TARGET ${target} PROPERTY INSTALL_RPATH "${rpath}")
endfunction()

function(jaccl_install_rpath_dir dir dest)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE" OR type STREQUAL "MODULE_LIBRARY")
      jaccl_install_rpath(${t} ${dest})
    endif()
  endforeach()
endfunction()
