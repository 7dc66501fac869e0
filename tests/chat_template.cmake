# Chat templates against a real Jinja engine (included by tests/CMakeLists.txt).
# render_chat_template renders tests/chat_template/conversations.json with smol;
# compare_with_jinja.py renders it with jinja2 as Hugging Face does and compares the
# prompts byte for byte, one test per known template (and per variant of a template's
# parameters). Needs Debian's python3-jinja2 (scripts/install-deps.sh --test).

add_executable(render_chat_template ${CMAKE_CURRENT_SOURCE_DIR}/chat_template/render.cpp)
target_link_libraries(render_chat_template PRIVATE smol::smol nlohmann_json::nlohmann_json
                                                   smol_warnings smol_program_flags)
target_include_directories(render_chat_template PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
# render_jinja_template renders a conversation table with smol's Jinja engine
# (template/jinja.hpp), for compare_corpus.py.
add_executable(render_jinja_template ${CMAKE_CURRENT_SOURCE_DIR}/chat_template/render_jinja.cpp)
target_link_libraries(render_jinja_template PRIVATE smol::smol nlohmann_json::nlohmann_json
                                                    smol_warnings smol_program_flags)

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
# The corpus of real templates (see the corpus tests below), fetched once per build tree.
set(corpus_dir "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template_corpus")
add_test(NAME chat_template_corpus_fetch
         COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/fetch_template_corpus.py" --out "${corpus_dir}")
set_tests_properties(chat_template_corpus_fetch PROPERTIES FIXTURES_SETUP chat_template_corpus
                                                           TIMEOUT 600 LABELS "chat_template")
# smol_compare_template(NAME TEMPLATE [ARGS...]): each test writes into a folder of its own.
function(smol_compare_template name template)
  add_test(NAME chat_template_jinja_${name}
           COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/compare_with_jinja.py"
                   --driver $<TARGET_FILE:render_chat_template> --template "${template}"
                   --cases "${template_dir}/conversations.json"
                   --work "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template/${name}" ${ARGN})
  set_tests_properties(chat_template_jinja_${name} PROPERTIES TIMEOUT 120 LABELS "chat_template"
                       FIXTURES_REQUIRED chat_template_corpus)
  # The same table through smol's Jinja engine, as programs render a file's template now
  # (ChatTemplate::jinja: the messages, calls and tools converted into its context).
  add_test(NAME chat_template_engine_${name}
           COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/compare_with_jinja.py"
                   --driver $<TARGET_FILE:render_chat_template> --template "${template}"
                   --cases "${template_dir}/conversations.json" --engine
                   --work "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template_engine/${name}" ${ARGN})
  set_tests_properties(chat_template_engine_${name} PROPERTIES TIMEOUT 120 LABELS "chat_template"
                       FIXTURES_REQUIRED chat_template_corpus)
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
# section), the corpus' copy: the common table, and conversations with tools, calls and
# results.
set(qwen25_template "${corpus_dir}/Qwen-Qwen2.5-7B-Instruct.jinja")
smol_compare_template(qwen25 "${qwen25_template}")
add_test(NAME chat_template_jinja_qwen25_tools
         COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/compare_with_jinja.py"
                 --driver $<TARGET_FILE:render_chat_template>
                 --template "${qwen25_template}"
                 --cases "${template_dir}/tool_conversations.json"
                 --work "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template/qwen25_tools")
set_tests_properties(chat_template_jinja_qwen25_tools PROPERTIES TIMEOUT 120 LABELS "chat_template"
                     FIXTURES_REQUIRED chat_template_corpus)
add_test(NAME chat_template_engine_qwen25_tools
         COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/compare_with_jinja.py"
                 --driver $<TARGET_FILE:render_chat_template> --engine
                 --template "${qwen25_template}"
                 --cases "${template_dir}/tool_conversations.json"
                 --work "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template_engine/qwen25_tools")
set_tests_properties(chat_template_engine_qwen25_tools PROPERTIES TIMEOUT 120 LABELS "chat_template"
                     FIXTURES_REQUIRED chat_template_corpus)
# Gemma 3's instruct template (google/gemma-3-*-it): the system prompt folded into the
# first user turn, "model" turns, alternation enforced (refusals must agree).
smol_compare_template(gemma3 "${template_dir}/gemma3.jinja" --bos "<bos>" --eos "<eos>")

# The Jinja language itself, a snippet per behaviour (whitespace control, literals,
# operators, tests, filters, str/dict/list methods, loops, scopes, macros, undefined and
# None): language_snippets.json rendered by jinja2 and by smol's engine, byte for byte;
# where jinja2 fails, smol must fail too.
add_test(NAME chat_template_language
         COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/compare_snippets.py" --quiet
                 --driver $<TARGET_FILE:render_jinja_template>
                 --snippets "${template_dir}/language_snippets.json"
                 --work "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template_language")
set_tests_properties(chat_template_language PROPERTIES TIMEOUT 120 LABELS "chat_template")

# The chat template corpus: every template in llama.cpp's models/templates (70 files, as
# vendored by PyPI's llama-cpp-python 0.3.36 source package), rendered on
# corpus_conversations.json by jinja2 (as transformers' apply_chat_template does) and by
# smol's Jinja engine (render_jinja_template), byte for byte; where jinja2 refuses a
# conversation, smol must refuse it too. fetch_template_corpus.py downloads the sdist once
# per build tree through pip, SHA-256 pinned (network, 77 MB), and copies the templates out;
# they never enter git. Their names are listed here, as the tests are made at configure time.
set(corpus_templates
    Apertus-8B-Instruct.jinja
    Apriel-1.6-15b-Thinker-fixed.jinja
    Bielik-11B-v3.0-Instruct.jinja
    ByteDance-Seed-OSS.jinja
    Cohere2MoE.jinja
    CohereForAI-c4ai-command-r-plus-tool_use.jinja
    CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja
    GLM-4.6.jinja
    GLM-4.7-Flash.jinja
    GigaChat3-10B-A1.8B.jinja
    GigaChat3.1-10B-A1.8B.jinja
    HuggingFaceTB-SmolLM3-3B.jinja
    Kimi-K2-Instruct.jinja
    Kimi-K2-Thinking.jinja
    Kimi-K3.jinja
    LFM2-8B-A1B.jinja
    LFM2.5-8B-A1B.jinja
    LFM2.5-Instruct.jinja
    MiMo-VL.jinja
    MiniMax-M1.jinja
    MiniMax-M2.jinja
    MiniMax-M3.jinja
    Mistral-Small-3.2-24B-Instruct-2506.jinja
    NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja
    NVIDIA-Nemotron-Nano-v2.jinja
    NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja
    NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja
    Qwen-QwQ-32B.jinja
    Qwen-Qwen2.5-7B-Instruct.jinja
    Qwen-Qwen3-0.6B.jinja
    Qwen3-Coder.jinja
    Qwen3.5-4B.jinja
    Reka-Edge.jinja
    Spark2.5.jinja
    StepFun3.5-Flash.jinja
    deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja
    deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja
    deepseek-ai-DeepSeek-V3.1.jinja
    deepseek-ai-DeepSeek-V3.2.jinja
    deepseek-ai-DeepSeek-V4-Flash-0731.jinja
    deepseek-ai-DeepSeek-V4.jinja
    fireworks-ai-llama-3-firefunction-v2.jinja
    google-gemma-2-2b-it.jinja
    google-gemma-4-31B-it-interleaved.jinja
    google-gemma-4-31B-it.jinja
    ibm-granite-granite-3.3-2B-Instruct.jinja
    ibm-granite-granite-4.0.jinja
    ibm-granite-granite-4.1.jinja
    inclusionai-ling-3.0-flash.jinja
    llama-cpp-deepseek-r1.jinja
    llama-cpp-rwkv-world.jinja
    meetkai-functionary-medium-v3.1.jinja
    meetkai-functionary-medium-v3.2.jinja
    meta-llama-Llama-3.1-8B-Instruct.jinja
    meta-llama-Llama-3.2-3B-Instruct.jinja
    meta-llama-Llama-3.3-70B-Instruct.jinja
    microsoft-Phi-3.5-mini-instruct.jinja
    mistralai-Ministral-3-14B-Reasoning-2512.jinja
    mistralai-Mistral-Nemo-Instruct-2407.jinja
    moonshotai-Kimi-K2.jinja
    muse-glimmer.jinja
    openai-gpt-oss-120b.jinja
    openbmb-MiniCPM5-1B.jinja
    poolside-Laguna-S-2.1.jinja
    poolside-Laguna-XS-2.1.jinja
    poolside-Laguna-XS.2.jinja
    tencent-Hy3.jinja
    unsloth-Apriel-1.5.jinja
    unsloth-mistral-Devstral-Small-2507.jinja
    upstage-Solar-Open-100B.jinja
)
foreach(file IN LISTS corpus_templates)
  string(REGEX REPLACE "\\.jinja$" "" stem "${file}")
  string(REGEX REPLACE "[^A-Za-z0-9_]" "_" stem "${stem}")
  add_test(NAME chat_template_corpus_${stem}
           COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/compare_corpus.py"
                   --driver $<TARGET_FILE:render_jinja_template> --template "${corpus_dir}/${file}"
                   --cases "${template_dir}/corpus_conversations.json"
                   --work "${CMAKE_CURRENT_BINARY_DIR}/data/chat_template_corpus_work/${stem}")
  set_tests_properties(chat_template_corpus_${stem} PROPERTIES FIXTURES_REQUIRED chat_template_corpus
                                                              TIMEOUT 120 LABELS "chat_template")
endforeach()

# smol-server with another model's template (--chat-template-file, three of the corpus),
# --chat-template-kwargs and a request's chat_template_kwargs: POST /apply-template's
# prompts against jinja2's, and the refusals of a template the engine cannot parse.
add_test(NAME chat_template_server_apply
         COMMAND ${SMOL_JINJA_PYTHON} "${template_dir}/server_apply_template.py"
                 --server $<TARGET_FILE:smol-server>
                 --model "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf"
                 --corpus "${corpus_dir}" --cases "${template_dir}/corpus_conversations.json")
set_tests_properties(chat_template_server_apply PROPERTIES FIXTURES_REQUIRED chat_template_corpus
                                                           TIMEOUT 300 LABELS "chat_template;server")
