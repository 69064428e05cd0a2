# BeImport.cmake - be_import_libs(): find prebuilt libraries by name and
# define an imported target be::<name> for each.
#
# be_import_libs(FOUND_VAR lib...) looks each library up as
# BE_<LIB>_LIBRARY (a cache variable, so -DBE_<LIB>_LIBRARY=path chooses
# one) and sets FOUND_VAR in the caller's scope to TRUE only when every one
# is found; only then are the targets defined. BeVerbs.cmake and
# BeEtcd.cmake use it, both in the build and from the installed package.

function(be_import_libs found_var)
  set(found TRUE)
  foreach(lib IN LISTS ARGN)
    string(TOUPPER ${lib} upper)
    find_library(BE_${upper}_LIBRARY ${lib})
    if(NOT BE_${upper}_LIBRARY)
      set(found FALSE)
    endif()
  endforeach()
  if(found)
    foreach(lib IN LISTS ARGN)
      string(TOUPPER ${lib} upper)
      if(NOT TARGET be::${lib})
        add_library(be::${lib} UNKNOWN IMPORTED)
        set_target_properties(be::${lib} PROPERTIES IMPORTED_LOCATION "${BE_${upper}_LIBRARY}")
      endif()
    endforeach()
  endif()
  set(${found_var} ${found} PARENT_SCOPE)
endfunction()
