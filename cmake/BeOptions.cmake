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
# its instructions (callgrind, be-perf cost). Fat objects keep the plain
# code too, so the tests link without LTO and build as fast as before;
# libbe.so and be-perf link with it (be_target_lto).
option(BE_LTO "Link-time optimisation of libbe and be-perf in Release builds" ON)
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
