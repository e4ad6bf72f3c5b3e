# Man pages qpool(8) and qpool.conf(5), generated from the docs at every build
# by cmake/mkman.py (python3, standard library only), so they never drift:
# qpool(8) from `qpool help` (the binary just built) and docs/operations.md,
# qpool.conf(5) from docs/configuration.md. -DQPOOL_MAN=OFF skips them.
option(QPOOL_MAN "Generate and install the man pages (needs python3)" ON)
if(QPOOL_MAN)
  # Debian's python3 first (a pyenv shim on PATH may not be usable everywhere).
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 COMPONENTS Interpreter)
  if(NOT Python3_Interpreter_FOUND)
    message(FATAL_ERROR "the man pages need python3 (apt-get install python3), or configure with -DQPOOL_MAN=OFF")
  endif()
  # The page date: SOURCE_DATE_EPOCH when set (reproducible package builds).
  string(TIMESTAMP QPOOL_MAN_DATE "%Y-%m-%d" UTC)
  set(_mkman ${CMAKE_CURRENT_SOURCE_DIR}/cmake/mkman.py)
  set(_ops ${CMAKE_CURRENT_SOURCE_DIR}/docs/operations.md)
  set(_conf ${CMAKE_CURRENT_SOURCE_DIR}/docs/configuration.md)
  add_custom_command(
    OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/man/qpool.8
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/man
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
            ${Python3_EXECUTABLE} ${_mkman} qpool8 $<TARGET_FILE:qpool> ${_ops}
            ${PROJECT_VERSION} ${QPOOL_MAN_DATE} ${CMAKE_CURRENT_BINARY_DIR}/man/qpool.8
    DEPENDS qpool ${_mkman} ${_ops}
    COMMENT "Generating man page qpool(8)"
    VERBATIM)
  add_custom_command(
    OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/man/qpool.conf.5
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/man
    COMMAND ${Python3_EXECUTABLE} ${_mkman} qpoolconf5 ${_conf}
            ${PROJECT_VERSION} ${QPOOL_MAN_DATE} ${CMAKE_CURRENT_BINARY_DIR}/man/qpool.conf.5
    DEPENDS ${_mkman} ${_conf}
    COMMENT "Generating man page qpool.conf(5)"
    VERBATIM)
  add_custom_target(man ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/man/qpool.8
                                    ${CMAKE_CURRENT_BINARY_DIR}/man/qpool.conf.5)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/man/qpool.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/man/qpool.conf.5 DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
endif()
