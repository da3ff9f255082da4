# The Debian package (CPack DEB): library, headers, CMake package, tools and
# the Python module, with its dependencies declared.
#
#   cmake --build build && (cd build && cpack -G DEB)   # -> build/jaccl_<v>_<arch>.deb
#   dpkg -i build/jaccl_*.deb                           # or apt-get install ./build/jaccl_*.deb
#
# cpack installs the configured build under /usr (CPACK_PACKAGING_INSTALL_PREFIX),
# stripped; the install run paths ($ORIGIN, cmake/install_rpath.cmake) make the
# tools and the module find /usr/<libdir>/libjaccl.so.0. Shared-library
# dependencies come from dpkg-shlibdeps (libhiredis, libopenmpi, libpmix, ...);
# libnettle, opened with dlopen, is added by name below;
# the Python module adds python3 of the version it was built for and numpy.

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME jaccl)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "jaccl authors")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "collective communication for distributed ML over TCP and shared memory")
set(CPACK_PACKAGE_DESCRIPTION
  "jaccl is a C++20 collective-communication library, source-compatible with\n the standalone JACCL library of MLX. This package holds the library, its\n headers and CMake package, jaccl-run, jaccl-bench and the Python module.")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# dpkg-shlibdeps finds libjaccl.so.0 inside the package through the tools'
# $ORIGIN run paths; GENERATE_SHLIBS also registers it for ldconfig.
# Dependencies dpkg-shlibdeps cannot see: the Python module's interpreter,
# libfabric, which the ofi transport opens with dlopen, and the package
# holding the libnettle that the job token's HMAC opens (libnettle8 on
# Debian 12).
set(_jaccl_crypto_pkg libnettle8)
execute_process(COMMAND dpkg-query -S "${_jaccl_crypto_lib_file}"
  OUTPUT_VARIABLE _jaccl_owner RESULT_VARIABLE _jaccl_rc ERROR_QUIET)
if(_jaccl_rc EQUAL 0 AND _jaccl_owner MATCHES "^([^:,]+)")
  set(_jaccl_crypto_pkg "${CMAKE_MATCH_1}")
endif()
set(_jaccl_deb_depends "${_jaccl_crypto_pkg}")
if(JACCL_PYTHON_MODULE_VERSION)
  string(REPLACE "." ";" _jaccl_py_v "${JACCL_PYTHON_MODULE_VERSION}")
  list(GET _jaccl_py_v 0 _jaccl_py_major)
  list(GET _jaccl_py_v 1 _jaccl_py_minor)
  math(EXPR _jaccl_py_next "${_jaccl_py_minor} + 1")
  list(APPEND _jaccl_deb_depends
    "python3 (>= ${JACCL_PYTHON_MODULE_VERSION})"
    "python3 (<< ${_jaccl_py_major}.${_jaccl_py_next})" "python3-numpy")
endif()
if(JACCL_HAVE_OFI)
  list(APPEND _jaccl_deb_depends "libfabric1")
endif()
list(JOIN _jaccl_deb_depends ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
include(CPack)
