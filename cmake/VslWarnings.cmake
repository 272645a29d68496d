# Warning policy: zero warnings. Every project target calls vsl_warnings(<target>).
function(vsl_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual
    -Wimplicit-fallthrough -Wformat=2)
  if(VSL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
