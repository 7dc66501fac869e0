# smol-server from the outside, as its users meet it: the official `openai` npm client
# (tests/server/openai_client.test.mjs) and the chat page in headless Chromium through
# puppeteer-core (tests/server/browser.test.mjs). npm installs the two packages, pinned
# by tests/server/package-lock.json, into the build tree when the tests are built.
option(SMOL_SERVER_E2E_TESTS "Test smol-server with the openai npm client and headless Chromium" ON)
if(NOT SMOL_SERVER_E2E_TESTS)
  return()
endif()
find_program(SMOL_NODE node)
find_program(SMOL_NPM npm)
find_program(SMOL_CHROMIUM NAMES chromium chromium-browser)
if(NOT SMOL_NODE OR NOT SMOL_NPM OR NOT SMOL_CHROMIUM)
  message(FATAL_ERROR "smol-server's end-to-end tests need node, npm and chromium: run "
                      "./scripts/install-deps.sh --test, or configure with -DSMOL_SERVER_E2E_TESTS=OFF")
endif()

set(e2e_dir "${CMAKE_CURRENT_BINARY_DIR}/server-e2e")
foreach(file package.json package-lock.json spawn_server.mjs openai_client.test.mjs browser.test.mjs
             load.test.mjs nginx.test.mjs real_model.test.mjs structured_output.test.mjs
             tool_families.test.mjs mixture.test.mjs anthropic.test.mjs responses.test.mjs
             embeddings.test.mjs ollama.test.mjs)
  configure_file("${CMAKE_CURRENT_SOURCE_DIR}/server/${file}" "${e2e_dir}/${file}" COPYONLY)
endforeach()
add_custom_command(
  OUTPUT "${e2e_dir}/node_modules/.package-lock.json"
  COMMAND ${SMOL_NPM} ci --no-audit --no-fund --loglevel=error
  WORKING_DIRECTORY "${e2e_dir}"
  DEPENDS "${e2e_dir}/package-lock.json"
  COMMENT "Installing the openai, @anthropic-ai/sdk, ollama, puppeteer-core and ajv npm packages for the server tests")
add_custom_target(smol_server_npm ALL DEPENDS "${e2e_dir}/node_modules/.package-lock.json")

set(e2e_model "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf")
add_test(NAME server_openai_client
         COMMAND ${SMOL_NODE} "${e2e_dir}/openai_client.test.mjs" $<TARGET_FILE:smol-server> "${e2e_model}"
                 $<TARGET_FILE:smol-chat>)
# Anthropic's Messages API through Anthropic's own npm client (anthropic.test.mjs).
add_test(NAME server_anthropic_client
         COMMAND ${SMOL_NODE} "${e2e_dir}/anthropic.test.mjs" $<TARGET_FILE:smol-server> "${e2e_model}")
add_test(NAME server_browser
         COMMAND ${SMOL_NODE} "${e2e_dir}/browser.test.mjs" $<TARGET_FILE:smol-server> "${e2e_model}"
                 "${SMOL_CHROMIUM}")
# Structured output: replies to json_schema requests validated by ajv (pinned in
# package.json), over a table of schemas and seeds.
add_test(NAME server_structured_output
         COMMAND ${SMOL_NODE} "${e2e_dir}/structured_output.test.mjs" $<TARGET_FILE:smol-server>
                 "${e2e_model}")
# OpenAI's Responses API through OpenAI's own npm client (responses.test.mjs).
add_test(NAME server_responses_client
         COMMAND ${SMOL_NODE} "${e2e_dir}/responses.test.mjs" $<TARGET_FILE:smol-server> "${e2e_model}")
# Embeddings (--embeddings) through OpenAI's npm client, reranking (--reranking) through
# curl (embeddings.test.mjs).
add_test(NAME server_embeddings_client
         COMMAND ${SMOL_NODE} "${e2e_dir}/embeddings.test.mjs" $<TARGET_FILE:smol-server> "${e2e_model}"
                 $<TARGET_FILE:smol-make-model>)
# ollama's API through ollama's own npm client (ollama.test.mjs).
add_test(NAME server_ollama_client
         COMMAND ${SMOL_NODE} "${e2e_dir}/ollama.test.mjs" $<TARGET_FILE:smol-server> "${e2e_model}")
set_tests_properties(server_openai_client server_anthropic_client server_responses_client server_browser server_structured_output
                     server_embeddings_client server_ollama_client PROPERTIES LABELS "server" TIMEOUT 300)
# The browser test clicks while a reply streams: it runs alone, not beside the load test.
set_tests_properties(server_browser PROPERTIES RUN_SERIAL TRUE)
# Tool calls in each model family's own syntax (tool_call_formats.hpp): one server per
# real template of the corpus that tests/chat_template.cmake fetches, the calls forced,
# streamed, validated by ajv and sent back.
add_test(NAME server_tool_families
         COMMAND ${SMOL_NODE} "${e2e_dir}/tool_families.test.mjs" $<TARGET_FILE:smol-server> "${e2e_model}"
                 "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template_corpus")
set_tests_properties(server_tool_families PROPERTIES LABELS "server;chat_template" TIMEOUT 300
                                                     FIXTURES_REQUIRED chat_template_corpus)

# Mixture-of-experts files end to end (mixture.test.mjs): streamed, speculative and
# grammar-constrained replies on smol-make-model's Qwen3-MoE (Q4_K_M) and GPT-OSS (its
# MXFP4 mix) tiny files, two blocks each.
set(moe_dir "${CMAKE_CURRENT_BINARY_DIR}/server-moe")
file(MAKE_DIRECTORY "${moe_dir}")
add_test(NAME server_mixture_qwen3moe_file
         COMMAND $<TARGET_FILE:smol-make-model> --preset qwen3moe-tiny --layers 2
                 -o "${moe_dir}/qwen3moe.gguf")
add_test(NAME server_mixture_gpt_oss_file
         COMMAND $<TARGET_FILE:smol-make-model> --preset gpt-oss-tiny --layers 2 --type mxfp4_moe
                 -o "${moe_dir}/gpt-oss.gguf")
set_tests_properties(server_mixture_qwen3moe_file server_mixture_gpt_oss_file PROPERTIES
                     FIXTURES_SETUP server_mixture LABELS "server")
add_test(NAME server_mixture
         COMMAND ${SMOL_NODE} "${e2e_dir}/mixture.test.mjs" $<TARGET_FILE:smol-server>
                 "${moe_dir}/qwen3moe.gguf" "${moe_dir}/gpt-oss.gguf")
set_tests_properties(server_mixture PROPERTIES LABELS "server" TIMEOUT 300
                                               FIXTURES_REQUIRED server_mixture)

# Real agent CLIs (tests/agents), pinned by tests/agents/package-lock.json and installed
# into the build tree, each complete a turn: Claude Code over the Messages API, Codex CLI
# over the Responses API (their tests say how each is kept to one short turn).
# spawn_server.mjs is the server tests'.
set(agents_dir "${CMAKE_CURRENT_BINARY_DIR}/agents-e2e")
foreach(file package.json package-lock.json claude_code.test.mjs codex.test.mjs run_program.mjs)
  configure_file("${CMAKE_CURRENT_SOURCE_DIR}/agents/${file}" "${agents_dir}/${file}" COPYONLY)
endforeach()
configure_file("${CMAKE_CURRENT_SOURCE_DIR}/server/spawn_server.mjs" "${agents_dir}/spawn_server.mjs"
               COPYONLY)
add_custom_command(
  OUTPUT "${agents_dir}/node_modules/.package-lock.json"
  COMMAND ${SMOL_NPM} ci --no-audit --no-fund --loglevel=error
  WORKING_DIRECTORY "${agents_dir}"
  DEPENDS "${agents_dir}/package-lock.json"
  COMMENT "Installing Claude Code and Codex CLI (npm) for the agent tests")
add_custom_target(smol_agents_npm ALL DEPENDS "${agents_dir}/node_modules/.package-lock.json")
add_test(NAME server_agent_claude_code
         COMMAND ${SMOL_NODE} "${agents_dir}/claude_code.test.mjs" $<TARGET_FILE:smol-server>
                 "${e2e_model}" "${agents_dir}/node_modules/.bin/claude")
add_test(NAME server_agent_codex
         COMMAND ${SMOL_NODE} "${agents_dir}/codex.test.mjs" $<TARGET_FILE:smol-server>
                 "${e2e_model}" "${agents_dir}/node_modules/.bin/codex"
                 "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template_corpus/Qwen-Qwen2.5-7B-Instruct.jinja")
set_tests_properties(server_agent_claude_code server_agent_codex PROPERTIES LABELS "server" TIMEOUT 300)
set_tests_properties(server_agent_codex PROPERTIES FIXTURES_REQUIRED chat_template_corpus)

# A bounded load test (16 clients, 200 streams, a queue small enough for some 503s),
# and two replicas behind nginx (round robin, unbuffered streaming, a replica that
# goes away). nginx is Debian's package; the test runs it with its own config and
# every path in a temporary directory.
find_program(SMOL_NGINX nginx PATHS /usr/sbin)
if(NOT SMOL_NGINX)
  message(FATAL_ERROR "smol-server's end-to-end tests need nginx: run "
                      "./scripts/install-deps.sh --test, or configure with -DSMOL_SERVER_E2E_TESTS=OFF")
endif()
add_test(NAME server_load
         COMMAND ${SMOL_NODE} "${e2e_dir}/load.test.mjs" $<TARGET_FILE:smol-server> "${e2e_model}")
add_test(NAME server_nginx
         COMMAND ${SMOL_NODE} "${e2e_dir}/nginx.test.mjs" $<TARGET_FILE:smol-server> "${e2e_model}"
                 "${SMOL_NGINX}")
set_tests_properties(server_load server_nginx PROPERTIES LABELS "server" TIMEOUT 300)

# The same client and page on real weights (SmolLM2-135M-Instruct, tests/real_model.cmake
# fetches it once): the answers are checked, not only the shapes.
if(SMOL_REAL_MODEL_TESTS)
  add_test(NAME server_real_model
           COMMAND ${SMOL_NODE} "${e2e_dir}/real_model.test.mjs" $<TARGET_FILE:smol-server>
                   "${CMAKE_CURRENT_BINARY_DIR}/real-model/SmolLM2-135M-Instruct.Q4_1.gguf"
                   "${SMOL_CHROMIUM}")
  set_tests_properties(server_real_model PROPERTIES LABELS "server;real_model" TIMEOUT 300
                                                    FIXTURES_REQUIRED real_model RUN_SERIAL TRUE)
endif()
