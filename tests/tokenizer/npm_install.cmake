# cmake -DNPM=... -DPREFIX=... -DPACKAGES="a@1;b@2" [-DFLAGS="--ignore-scripts"] -P npm_install.cmake
# Installs PACKAGES under PREFIX unless a previous run already did (the stamp file
# records which package list it installed).
set(stamp "${PREFIX}/installed.txt")
if(EXISTS "${stamp}")
  file(READ "${stamp}" installed)
  if(installed STREQUAL "${PACKAGES}")
    message(STATUS "npm packages already installed in ${PREFIX}")
    return()
  endif()
endif()

file(MAKE_DIRECTORY "${PREFIX}")
execute_process(COMMAND "${NPM}" install --prefix "${PREFIX}" --no-audit --no-fund
                        --no-package-lock --loglevel=error ${FLAGS} ${PACKAGES}
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "npm install ${PACKAGES} failed (${result}); is the npm registry reachable?")
endif()
file(WRITE "${stamp}" "${PACKAGES}")
