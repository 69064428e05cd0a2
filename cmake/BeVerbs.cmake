# BeVerbs.cmake - find libibverbs and librdmacm (rdma-core) and define the
# imported targets be::ibverbs and be::rdmacm; sets BE_VERBS_FOUND.
#
# The build includes it to decide whether the verbs transport is built.
# beConfig.cmake includes the installed copy: libbe.a calls into both
# libraries, so a program linking be::be_static links them too.
# Only the library files are looked for here; the build also needs the
# headers and looks for them itself.

include(${CMAKE_CURRENT_LIST_DIR}/BeImport.cmake)
be_import_libs(BE_VERBS_FOUND ibverbs rdmacm)
