# cmake -DPYTHON=... -DTARGET=... -DREQUIREMENT="name==version --hash=sha256:..." -P pip_install.cmake
# Installs one pinned PyPI package (its hashes required, no dependencies) into TARGET, a
# folder of the build tree that a test puts on its import path, unless a previous run
# installed the same requirement there.
set(stamp "${TARGET}/installed.txt")
if(EXISTS "${stamp}")
  file(READ "${stamp}" installed)
  if(installed STREQUAL "${REQUIREMENT}")
    message(STATUS "${REQUIREMENT} is already installed in ${TARGET}")
    return()
  endif()
endif()
file(REMOVE_RECURSE "${TARGET}")
file(MAKE_DIRECTORY "${TARGET}")
file(WRITE "${TARGET}.requirements.txt" "${REQUIREMENT}\n")
execute_process(COMMAND "${PYTHON}" -m pip install --no-deps --require-hashes --only-binary :all:
                        --disable-pip-version-check --progress-bar off --target "${TARGET}"
                        -r "${TARGET}.requirements.txt"
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "pip install ${REQUIREMENT} failed (${result}); is PyPI reachable, "
                      "and does ${PYTHON} have pip (Debian: python3-pip)?")
endif()
file(WRITE "${stamp}" "${REQUIREMENT}")
