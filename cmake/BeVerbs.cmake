# BeVerbs.cmake - find libibverbs and librdmacm (rdma-core) and define the
# imported targets be::ibverbs and be::rdmacm; sets BE_VERBS_FOUND.
#
# The build includes it to decide whether the verbs transport is built.
# beConfig.cmake includes the installed copy: libbe.a calls into both
# libraries, so a program linking be::be_static links them too.
# Only the library files are looked for here; the build also needs the
# headers and looks for them itself.

find_library(BE_IBVERBS_LIBRARY ibverbs)
find_library(BE_RDMACM_LIBRARY rdmacm)
set(BE_VERBS_FOUND FALSE)
if(BE_IBVERBS_LIBRARY AND BE_RDMACM_LIBRARY)
  set(BE_VERBS_FOUND TRUE)
  foreach(lib IN ITEMS ibverbs rdmacm)
    string(TOUPPER ${lib} upper)
    if(NOT TARGET be::${lib})
      add_library(be::${lib} UNKNOWN IMPORTED)
      set_target_properties(be::${lib} PROPERTIES IMPORTED_LOCATION "${BE_${upper}_LIBRARY}")
    endif()
  endforeach()
endif()
