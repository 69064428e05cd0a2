# What `cmake --install` puts beside the library and the headers: be.pc for
# pkg-config and the CMake package (find_package(be): beConfig.cmake.in).

include(CMakePackageConfigHelpers)

# be_install_pkgconfig(): install be.pc naming the prefix it is installed
# to. `cmake --install build --prefix P` chooses that prefix only at install
# time, so the file is configured then: everything but the prefix at
# configure time into be.pc.in of the build folder, the prefix by install
# code. Paths relative to ${pcfiledir} would follow the prefix too, but
# pkg-config would no longer see that they name /usr/include or /usr/lib
# and would put those system directories on every command line.
# With DESTDIR the file names the prefix without it, as it should; a
# relative prefix is made absolute, as the install itself does.
function(be_install_pkgconfig)
  set(BE_PC_REQUIRES_PRIVATE "")
  set(BE_PC_LIBS_PRIVATE "-lpthread")
  if(BE_HAVE_VERBS)
    # Through their own .pc files, so that a static link also gets what
    # libibverbs.a needs (its providers, libnl).
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(BE_PC_VERBS QUIET libibverbs librdmacm)
    endif()
    if(BE_PC_VERBS_FOUND)
      set(BE_PC_REQUIRES_PRIVATE "libibverbs librdmacm")
    else()
      string(APPEND BE_PC_LIBS_PRIVATE " -libverbs -lrdmacm")
    endif()
  endif()
  # The libraries of other layers (BE_LINK_LIBS: imported targets, files,
  # names such as m, or -l flags). Those with pkg-config modules
  # (BE_PC_REQUIRES: src/discovery's libcurl and jansson) go to
  # Requires.private when pkg-config knows them all, so that a static
  # link gets what libcurl.a needs; the rest to Libs.private.
  get_property(layer_pcs GLOBAL PROPERTY BE_PC_REQUIRES)
  if(layer_pcs AND PKG_CONFIG_FOUND)
    pkg_check_modules(BE_PC_LAYERS QUIET ${layer_pcs})
  endif()
  if(BE_PC_LAYERS_FOUND)
    list(JOIN layer_pcs " " layer_pcs)
    string(STRIP "${BE_PC_REQUIRES_PRIVATE} ${layer_pcs}" BE_PC_REQUIRES_PRIVATE)
  endif()
  foreach(lib IN LISTS BE_LINK_LIBS)
    if(TARGET ${lib})
      if(BE_PC_LAYERS_FOUND)
        continue() # an imported target of a layer named in BE_PC_REQUIRES
      endif()
      get_target_property(lib ${lib} IMPORTED_LOCATION)
    endif()
    if(lib MATCHES "/")
      get_filename_component(lib "${lib}" NAME_WE)
      string(REGEX REPLACE "^lib" "-l" lib "${lib}")
    elseif(NOT lib MATCHES "^-")
      set(lib "-l${lib}")
    endif()
    string(APPEND BE_PC_LIBS_PRIVATE " ${lib}")
  endforeach()
  foreach(dir LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      set(BE_PC_${dir} "${CMAKE_INSTALL_${dir}}")
    else()
      set(BE_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
    endif()
  endforeach()
  set(BE_PC_PREFIX "@BE_PC_PREFIX@") # kept for the install step
  configure_file(${PROJECT_SOURCE_DIR}/cmake/be.pc.in ${PROJECT_BINARY_DIR}/be.pc.in @ONLY)
  # Staged in the build folder for install(FILES) (and so the install
  # manifest), and removed again so that an install as root leaves no
  # root-owned file there.
  set(staged ${PROJECT_BINARY_DIR}/be-install.pc)
  install(CODE "get_filename_component(BE_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\" ABSOLUTE)
    configure_file(\"${PROJECT_BINARY_DIR}/be.pc.in\" \"${staged}\" @ONLY)")
  install(FILES ${staged} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig RENAME be.pc)
  install(CODE "file(REMOVE \"${staged}\")")
endfunction()

# be_install_package_config(): the targets be::be and be::be_static
# (export set beTargets), beConfig.cmake, its version file (0.x: the same
# minor version is compatible), and BeVerbs.cmake and BeEtcd.cmake (with
# BeImport.cmake), which beConfig.cmake uses to find what libbe.a links
# against.
function(be_install_package_config)
  set(dir ${CMAKE_INSTALL_LIBDIR}/cmake/be)
  get_property(BE_HAVE_ETCD GLOBAL PROPERTY BE_HAVE_ETCD) # for beConfig.cmake.in
  install(EXPORT beTargets NAMESPACE be:: DESTINATION ${dir})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/beConfig.cmake.in
    ${PROJECT_BINARY_DIR}/beConfig.cmake INSTALL_DESTINATION ${dir})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/beConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/beConfig.cmake ${PROJECT_BINARY_DIR}/beConfigVersion.cmake
    ${PROJECT_SOURCE_DIR}/cmake/BeVerbs.cmake ${PROJECT_SOURCE_DIR}/cmake/BeEtcd.cmake
    ${PROJECT_SOURCE_DIR}/cmake/BeImport.cmake
    DESTINATION ${dir})
endfunction()
