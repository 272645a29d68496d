# Sanitizer builds, selected with -DVSL_SANITIZE=address (ASan + UBSan) or =thread (TSan).
# Applied globally so that every library, tool and test is instrumented alike.
if(VSL_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(VSL_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT VSL_SANITIZE STREQUAL "")
  message(FATAL_ERROR "VSL_SANITIZE must be '', 'address' or 'thread', not '${VSL_SANITIZE}'")
endif()
