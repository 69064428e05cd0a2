# BeEtcd.cmake - find libcurl and jansson, the libraries of the etcd
# discovery client, and define the imported targets be::curl and
# be::jansson; sets BE_ETCD_LIBS_FOUND.
#
# The build includes it at the top level, where libbe links them; whether
# etcd discovery is built src/discovery decides (it finds the headers).
# beConfig.cmake includes the installed copy when be was built with etcd
# discovery: libbe.a calls into both libraries, so a program linking
# be::be_static links them too.

find_library(BE_CURL_LIBRARY curl)
find_library(BE_JANSSON_LIBRARY jansson)
set(BE_ETCD_LIBS_FOUND FALSE)
if(BE_CURL_LIBRARY AND BE_JANSSON_LIBRARY)
  set(BE_ETCD_LIBS_FOUND TRUE)
  foreach(lib IN ITEMS curl jansson)
    string(TOUPPER ${lib} upper)
    if(NOT TARGET be::${lib})
      add_library(be::${lib} UNKNOWN IMPORTED)
      set_target_properties(be::${lib} PROPERTIES IMPORTED_LOCATION "${BE_${upper}_LIBRARY}")
    endif()
  endforeach()
endif()
