# Chat templates against a real Jinja engine (included by tests/CMakeLists.txt).
# render_chat_template renders tests/chat_template/conversations.json with smol;
# compare_with_jinja.py renders it with jinja2 as Hugging Face does and compares the
# prompts byte for byte, one test per known template (and per variant of a template's
# parameters). Needs Debian's python3-jinja2 (scripts/install-deps.sh --test).

add_executable(render_chat_template ${CMAKE_CURRENT_SOURCE_DIR}/chat_template/render.cpp)
target_link_libraries(render_chat_template PRIVATE smol::smol nlohmann_json::nlohmann_json
                                                   smol_warnings smol_program_flags)
target_include_directories(render_chat_template PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})

# Debian's python3 first: a python3 earlier on PATH (pyenv, a venv) may lack jinja2.
find_program(SMOL_JINJA_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT SMOL_JINJA_PYTHON)
  find_program(SMOL_JINJA_PYTHON NAMES python3)
endif()
if(SMOL_JINJA_PYTHON)
  execute_process(COMMAND ${SMOL_JINJA_PYTHON} -c "import jinja2" RESULT_VARIABLE no_jinja
                  OUTPUT_QUIET ERROR_QUIET)
endif()
if(NOT SMOL_JINJA_PYTHON OR no_jinja)
  message(FATAL_ERROR "the chat template tests need python3 with jinja2: run "
                      "./scripts/install-deps.sh --test (Debian's python3-jinja2)")
endif()

set(template_dir "${CMAKE_CURRENT_SOURCE_DIR}/chat_template")
# smol_compare_template(NAME TEMPLATE [ARGS...]): each test writes into a folder of its own.
function(smol_compare_template name template)
  add_test(NAME chat_template_jinja_${name}
           COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/compare_with_jinja.py"
                   --driver $<TARGET_FILE:render_chat_template> --template "${template}"
                   --cases "${template_dir}/conversations.json"
                   --work "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template/${name}" ${ARGN})
  set_tests_properties(chat_template_jinja_${name} PROPERTIES TIMEOUT 120 LABELS "chat_template")
endfunction()

smol_compare_template(smollm3 "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf")
# SmolLM2-135M-Instruct's template, verbatim from its GGUF file (whose bos and eos are
# these; the template reads neither).
smol_compare_template(smollm2 "${template_dir}/smollm2-135m-instruct.jinja"
                      --bos "<|im_start|>" --eos "<|im_end|>")
# The same template with another default system prompt: smol must read it from the text.
smol_compare_template(smollm2_other_default "${template_dir}/smollm2-135m-instruct.jinja"
                      --replace "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
                                "Tu es SmolLM — réponds brièvement. 🙂"
                      --bos "<|im_start|>" --eos "<|im_end|>")
smol_compare_template(chatml "${template_dir}/chatml.jinja")
# Qwen2.5 Instruct's template (ChatML, a default system prompt, a Hermes-style tool
# section): the common table, and conversations with tools, calls and results.
smol_compare_template(qwen25 "${template_dir}/qwen2.5-instruct.jinja")
add_test(NAME chat_template_jinja_qwen25_tools
         COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/compare_with_jinja.py"
                 --driver $<TARGET_FILE:render_chat_template>
                 --template "${template_dir}/qwen2.5-instruct.jinja"
                 --cases "${template_dir}/tool_conversations.json"
                 --work "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template/qwen25_tools")
set_tests_properties(chat_template_jinja_qwen25_tools PROPERTIES TIMEOUT 120 LABELS "chat_template")
# Gemma 3's instruct template (google/gemma-3-*-it): the system prompt folded into the
# first user turn, "model" turns, alternation enforced (refusals must agree).
smol_compare_template(gemma3 "${template_dir}/gemma3.jinja" --bos "<bos>" --eos "<eos>")
