# BeEtcd.cmake - find libcurl and jansson, the libraries of the etcd
# discovery client, and define the imported targets be::curl and
# be::jansson; sets BE_ETCD_LIBS_FOUND.
#
# The build includes it at the top level, where libbe links them; whether
# etcd discovery is built src/discovery decides (it finds the headers).
# beConfig.cmake includes the installed copy when be was built with etcd
# discovery: libbe.a calls into both libraries, so a program linking
# be::be_static links them too.

include(${CMAKE_CURRENT_LIST_DIR}/BeImport.cmake)
be_import_libs(BE_ETCD_LIBS_FOUND curl jansson)
