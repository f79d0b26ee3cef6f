# FindJemalloc.cmake — locate jemalloc (Debian: libjemalloc-dev), the
# memory allocator wharfd is linked with (see the README's dependencies).
#
# Imported target: Jemalloc::jemalloc
# Variables: Jemalloc_FOUND, Jemalloc_INCLUDE_DIR, Jemalloc_LIBRARY, Jemalloc_VERSION

find_path(Jemalloc_INCLUDE_DIR NAMES jemalloc/jemalloc.h)
find_library(Jemalloc_LIBRARY NAMES jemalloc)

if(Jemalloc_INCLUDE_DIR AND EXISTS "${Jemalloc_INCLUDE_DIR}/jemalloc/jemalloc.h")
  file(STRINGS "${Jemalloc_INCLUDE_DIR}/jemalloc/jemalloc.h" _jv REGEX "#define JEMALLOC_VERSION \"")
  string(REGEX REPLACE ".*JEMALLOC_VERSION \"([0-9]+\\.[0-9]+\\.[0-9]+).*" "\\1" Jemalloc_VERSION "${_jv}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Jemalloc
  REQUIRED_VARS Jemalloc_INCLUDE_DIR Jemalloc_LIBRARY
  VERSION_VAR Jemalloc_VERSION)

if(Jemalloc_FOUND AND NOT TARGET Jemalloc::jemalloc)
  add_library(Jemalloc::jemalloc UNKNOWN IMPORTED)
  set_target_properties(Jemalloc::jemalloc PROPERTIES
    IMPORTED_LOCATION "${Jemalloc_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Jemalloc_INCLUDE_DIR}")
endif()
mark_as_advanced(Jemalloc_INCLUDE_DIR Jemalloc_LIBRARY)
