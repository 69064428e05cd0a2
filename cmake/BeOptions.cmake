# Compiler flags shared by the library, tools and tests.

set(BE_WARNING_FLAGS -Wall -Wextra -Wshadow -Wno-unused-parameter
    -Wmissing-prototypes -Wstrict-prototypes -Wpointer-arith -Wformat=2)

function(be_target_warnings target)
  target_compile_options(${target} PRIVATE ${BE_WARNING_FLAGS})
  if(BE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(BE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(BE_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# Link-time optimisation of the library in optimised builds (not under the
# sanitizers): a round trip crosses files (worker -> engine -> transport)
# through small functions, and inlining across them takes about 7 % off
# its instructions (callgrind, be-perf cost). Only libbe.so and be-perf are
# linked with LTO (be_target_lto), from a second, LTO-only compile of the
# library's sources (be_lto_twin). libbe.a and the tests use the plain
# objects: GCC runs LTO on any LTO object it links, fat or not, unless
# -fno-lto is passed at link, so fat objects in libbe.a made every test
# link an LTO link of the whole library, which made the Release build
# several times slower; and GCC's LTO bytecode is readable only by the
# GCC release that wrote it, so an installed libbe.a carrying it would
# not link with another compiler. Compiling twice costs less than those
# links did, and a plain libbe.a needs no post-processing (stripping the
# LTO sections of fat objects would).
option(BE_LTO "Link-time optimisation of libbe.so and be-perf in Release builds" ON)
set(BE_LTO_ON OFF)
if(BE_LTO AND NOT BE_SANITIZE AND NOT BE_TSAN AND CMAKE_C_COMPILER_ID STREQUAL "GNU"
   AND CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
  set(BE_LTO_ON ON)
endif()

function(be_target_lto target)
  if(BE_LTO_ON)
    target_link_options(${target} PRIVATE -flto=auto)
  endif()
endfunction()

# be_lto_twin(FROM NEW): an object library NEW compiled from the sources of
# the object library FROM, with its include directories, definitions and
# options (read when the build is generated, so later additions count),
# into slim LTO objects. Call it after every target_sources() on FROM.
function(be_lto_twin from new)
  get_target_property(sources ${from} SOURCES)
  add_library(${new} OBJECT ${sources})
  target_include_directories(${new} PRIVATE $<TARGET_PROPERTY:${from},INCLUDE_DIRECTORIES>)
  target_compile_definitions(${new} PRIVATE $<TARGET_PROPERTY:${from},COMPILE_DEFINITIONS>)
  target_compile_options(${new} PRIVATE $<TARGET_PROPERTY:${from},COMPILE_OPTIONS>
    -flto=auto -fno-fat-lto-objects)
endfunction()
