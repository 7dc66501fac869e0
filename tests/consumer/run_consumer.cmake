# cmake -DSRC=... -DWORK=... -DMODEL=... -DARGS=... [-DINSTALL_FROM=build dir] -P run_consumer.cmake
file(REMOVE_RECURSE "${WORK}")
if(INSTALL_FROM)
  execute_process(COMMAND ${CMAKE_COMMAND} --install "${INSTALL_FROM}" --prefix "${WORK}/prefix"
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc)
    message(FATAL_ERROR "install into ${WORK}/prefix failed")
  endif()
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SRC}" -B "${WORK}/build" ${ARGS} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK}/build" -j 2 RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed")
endif()
foreach(program IN ITEMS consumer consumer_testing)
  execute_process(COMMAND "${WORK}/build/${program}" "${MODEL}" RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${program} failed")
  endif()
endforeach()

# README.md's program, where this consumer built it: it must open the file, reply and exit
# 0. The fixture's random weights sample any words, possibly none before the turn ends, so
# the words are shown, not checked (test_chat_session holds smol::Chat's replies to a
# session wired by hand); the timeout bounds a reply that runs to the end of the context.
if(EXISTS "${WORK}/build/hello_chat/hello_chat")
  execute_process(COMMAND "${WORK}/build/hello_chat/hello_chat" "${MODEL}" "Hi!"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE reply TIMEOUT 300)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "hello_chat failed: ${rc}")
  endif()
  string(STRIP "${reply}" reply)
  message("hello_chat answered: ${reply}")
endif()
