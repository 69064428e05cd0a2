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
