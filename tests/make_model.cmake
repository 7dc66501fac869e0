# CTest entries for smol-make-model (included by tests/CMakeLists.txt): the tool
# writes small synthetic models, and smol-inspect (when it is part of the build)
# reads them back. The in-process checks of the generator live in
# test_quant_synthetic.cpp; these run the program as a user would.
set(make_model_dir "${CMAKE_CURRENT_BINARY_DIR}/data/make-model")
set(make_model_tiny "${make_model_dir}/synthetic-tiny.q4_k_m.gguf")
set(make_model_llama "${make_model_dir}/synthetic-llama.f16.gguf")
file(MAKE_DIRECTORY "${make_model_dir}")

add_test(NAME make_model_tiny
  COMMAND $<TARGET_FILE:smol-make-model> --preset tiny --seed 3 -o "${make_model_tiny}")
set_tests_properties(make_model_tiny PROPERTIES
  FIXTURES_SETUP synthetic_tiny
  PASS_REGULAR_EXPRESSION "74 tensors \\(17 F32, 48 Q4_K, 9 Q6_K\\)")

# llama-quantize's IQ4_XS mix: attn_v Q5_K (four query heads a KV head), ffn_down Q5_K in
# the first eighth of the layers (no importance matrix), the tied LM head Q6_K, the rest
# IQ4_XS. The tiny preset is fixture A's shape, and these counts are those of llama-quantize's
# own file of it (shared/fixtures/README.md), as are the three mixes below.
add_test(NAME make_model_tiny_iq4_xs
  COMMAND $<TARGET_FILE:smol-make-model> --preset tiny --type iq4_xs
          -o "${make_model_dir}/synthetic-tiny.iq4_xs.gguf")
set_tests_properties(make_model_tiny_iq4_xs PROPERTIES
  FIXTURES_SETUP synthetic_tiny_iq4_xs
  PASS_REGULAR_EXPRESSION "74 tensors \\(17 F32, 47 IQ4_XS, 9 Q5_K, 1 Q6_K\\)")

# llama-quantize's IQ4_NL (IQ4_XS's mix), Q3_K_M and Q2_K.
function(make_model_mix type counts)
  add_test(NAME make_model_tiny_${type}
    COMMAND $<TARGET_FILE:smol-make-model> --preset tiny --type ${type} --fast
            -o "${make_model_dir}/synthetic-tiny.${type}.gguf")
  set_tests_properties(make_model_tiny_${type} PROPERTIES
    PASS_REGULAR_EXPRESSION "74 tensors \\(17 F32, ${counts}\\)")
endfunction()
make_model_mix(iq4_nl "47 IQ4_NL, 9 Q5_K, 1 Q6_K")
make_model_mix(q3_k_m "32 Q3_K, 22 Q4_K, 2 Q5_K, 1 Q6_K")
make_model_mix(q2_k "32 Q2_K, 16 Q3_K, 8 Q4_K, 1 Q6_K")

# llama-quantize's Q4_0, Q4_1, Q5_0 and Q5_1: every matrix of the type but the tied LM
# head, Q6_K (the fixtures' q4_1, q5_0 and q5_1 files hold these counts). Read back by
# smol-inspect, each file loads and names its type.
foreach(type IN ITEMS q4_0 q4_1 q5_0 q5_1)
  string(TOUPPER "${type}" type_name)
  add_test(NAME make_model_tiny_${type}
    COMMAND $<TARGET_FILE:smol-make-model> --preset tiny --type ${type} --fast
            -o "${make_model_dir}/synthetic-tiny.${type}.gguf")
  set_tests_properties(make_model_tiny_${type} PROPERTIES
    FIXTURES_SETUP synthetic_tiny_${type}
    PASS_REGULAR_EXPRESSION "74 tensors \\(17 F32, 56 ${type_name}, 1 Q6_K\\)")
endforeach()

# llama-quantize's Q5_K_M: Q4_K_M's mix with Q5_K in Q4_K's place.
add_test(NAME make_model_tiny_q5_k_m
  COMMAND $<TARGET_FILE:smol-make-model> --preset tiny --type q5_k_m --fast
          -o "${make_model_dir}/synthetic-tiny.q5_k_m.gguf")
set_tests_properties(make_model_tiny_q5_k_m PROPERTIES
  PASS_REGULAR_EXPRESSION "74 tensors \\(17 F32, 48 Q5_K, 9 Q6_K\\)")

# smol-bench's model column names the file type as llama-bench does (general.file_type 30;
# tests/bench.cmake checks 25 on the IQ4_NL fixture); an unnamed one would read "file type
# 30". RUN_SERIAL: smol-bench reads a 1 GiB buffer for its roofline.
if(SMOL_BUILD_BENCH)
  add_test(NAME make_model_bench_names_iq4_xs
    COMMAND $<TARGET_FILE:smol-bench> -m "${make_model_dir}/synthetic-tiny.iq4_xs.gguf"
            -p 4 -n 0 -r 1)
  set_tests_properties(make_model_bench_names_iq4_xs PROPERTIES
    FIXTURES_REQUIRED synthetic_tiny_iq4_xs RUN_SERIAL TRUE
    PASS_REGULAR_EXPRESSION "\\| smollm3 6M IQ4_XS - 4\\.25 bpw \\|")
endif()

add_test(NAME make_model_llama_f16
  COMMAND $<TARGET_FILE:smol-make-model> --arch llama --layers 2 --hidden 128 --ffn 384
          --heads 4 --kv-heads 2 --vocab 512 --type f16 -o "${make_model_llama}")
set_tests_properties(make_model_llama_f16 PROPERTIES
  FIXTURES_SETUP synthetic_llama
  PASS_REGULAR_EXPRESSION "21 tensors \\(16 F16, 5 F32\\)")

# A mixture of experts (qwen3moe), two blocks: the norms and the routers F32; the
# experts' 3-D tensors Q4_K but ffn_down_exps in the last block (of two), Q6_K as
# ffn_down's extra bits; attn_v likewise; token_embd Q4_K and the LM head its own Q6_K
# matrix (Qwen3-MoE does not tie it).
set(make_model_moe "${make_model_dir}/synthetic-qwen3moe.q4_k_m.gguf")
add_test(NAME make_model_qwen3moe
  COMMAND $<TARGET_FILE:smol-make-model> --preset qwen3-moe-tiny --layers 2 --vocab 1024
          -o "${make_model_moe}")
set_tests_properties(make_model_qwen3moe PROPERTIES
  FIXTURES_SETUP synthetic_qwen3moe
  PASS_REGULAR_EXPRESSION "qwen3moe 2 layers.*27 tensors \\(11 F32, 13 Q4_K, 3 Q6_K\\)")

# The same with its experts MXFP4 and every other matrix Q8_0 (gpt-oss's files' mix):
# per block the three expert tensors MXFP4 and q, k, v, o Q8_0, plus token_embd and the
# LM head Q8_0.
add_test(NAME make_model_qwen3moe_mxfp4_moe
  COMMAND $<TARGET_FILE:smol-make-model> --preset qwen3-moe-tiny --layers 2 --type mxfp4_moe
          -o "${make_model_dir}/synthetic-qwen3moe.mxfp4_moe.gguf")
set_tests_properties(make_model_qwen3moe_mxfp4_moe PROPERTIES
  PASS_REGULAR_EXPRESSION "27 tensors \\(11 F32, 6 MXFP4, 10 Q8_0\\)")

# GPT-OSS, two blocks, in its files' mix: per block 12 F32 tensors (attn_norm, the Q, K,
# V and output biases, the sinks, post_attention_norm, the router and its bias, the
# experts' three biases), q, k, v, o Q8_0 and the experts MXFP4; plus output_norm F32,
# token_embd and the untied LM head Q8_0.
set(make_model_gpt_oss "${make_model_dir}/synthetic-gpt-oss.mxfp4_moe.gguf")
add_test(NAME make_model_gpt_oss
  COMMAND $<TARGET_FILE:smol-make-model> --preset gpt-oss-tiny --layers 2 --type mxfp4_moe
          -o "${make_model_gpt_oss}")
set_tests_properties(make_model_gpt_oss PROPERTIES
  FIXTURES_SETUP synthetic_gpt_oss
  PASS_REGULAR_EXPRESSION "gpt-oss 2 layers.*41 tensors \\(25 F32, 6 MXFP4, 10 Q8_0\\)")

add_test(NAME make_model_rejects_bad_options
  COMMAND $<TARGET_FILE:smol-make-model> --vocab 100 -o "${make_model_dir}/never.gguf")
set_tests_properties(make_model_rejects_bad_options PROPERTIES
  PASS_REGULAR_EXPRESSION "vocab must be at least 262")

if(EXISTS "${PROJECT_SOURCE_DIR}/examples/inspect")
  add_test(NAME make_model_inspect_tiny COMMAND $<TARGET_FILE:smol-inspect> "${make_model_tiny}")
  set_tests_properties(make_model_inspect_tiny PROPERTIES
    FIXTURES_REQUIRED synthetic_tiny
    PASS_REGULAR_EXPRESSION "architecture: smollm3.*merges: 736.*chat template: present \\(3795 bytes\\).*tensors: 74 of 74")
  foreach(type IN ITEMS q5_0 q5_1)
    string(TOUPPER "${type}" type_name)
    add_test(NAME make_model_inspect_tiny_${type}
             COMMAND $<TARGET_FILE:smol-inspect> "${make_model_dir}/synthetic-tiny.${type}.gguf")
    set_tests_properties(make_model_inspect_tiny_${type} PROPERTIES
      FIXTURES_REQUIRED synthetic_tiny_${type}
      PASS_REGULAR_EXPRESSION "${type_name} +56 tensors")
  endforeach()
  # Parameters, worked out: embeddings and the LM head 2 x 256 x 1024, output_norm 256;
  # per block the attention 3 x 131072 + 2 x 65536 + norms 256 + 256 + 2 x 128, the router
  # 256 x 16, the experts 3 x 256 x 256 x 16 (3145728, of which a token reads 4/16):
  # total 524544 + 2 x 3543808 = 7612160, active 524544 + 2 x (398080 + 786432) = 2893568.
  add_test(NAME make_model_inspect_qwen3moe
           COMMAND $<TARGET_FILE:smol-inspect> "${make_model_moe}")
  set_tests_properties(make_model_inspect_qwen3moe PROPERTIES
    FIXTURES_REQUIRED synthetic_qwen3moe
    PASS_REGULAR_EXPRESSION "blk\\.1\\.ffn_down_exps\\.weight +Q[46]_K +\\[256, 256, 16\\].*total: 7612160 parameters.*experts: 16 per block, 4 used per token: 2893568 parameters active per token")
  # gpt-oss-tiny, two blocks: token_embd and output 1024 x 256 each, output_norm 256;
  # per block the attention 131072 (q) + 2 x 32768 (k, v) + 131072 (o), its biases 512 +
  # 128 + 128 + 256, the sinks 8, two norms 2 x 256, the router 4096 and its bias 16, the
  # experts 3 x 256 x 256 x 16 = 3145728 and their biases 3 x 256 x 16 = 12288 (a token
  # reads 4/16 of both): total 524544 + 2 x 3491352 = 7507248, active 524544 + 2 x
  # (333336 + 786432 + 3072) = 2770224.
  add_test(NAME make_model_inspect_gpt_oss
           COMMAND $<TARGET_FILE:smol-inspect> "${make_model_gpt_oss}")
  set_tests_properties(make_model_inspect_gpt_oss PROPERTIES
    FIXTURES_REQUIRED synthetic_gpt_oss
    PASS_REGULAR_EXPRESSION "architecture: gpt-oss.*blk\\.1\\.attn_sinks\\.weight +F32 +\\[8\\].*total: 7507248 parameters.*experts: 16 per block, 4 used per token: 2770224 parameters active per token")
  add_test(NAME make_model_inspect_llama COMMAND $<TARGET_FILE:smol-inspect> "${make_model_llama}")
  set_tests_properties(make_model_inspect_llama PROPERTIES
    FIXTURES_REQUIRED synthetic_llama
    PASS_REGULAR_EXPRESSION "architecture: llama.*output.weight +F16")
endif()

# smol-chat on the mixtures, end to end (the server's side: server_mixture): a greedy
# reply is the same with ngram-simple speculation as without, and its drafts were made
# (/stats: "drafted N", N > 0; verified by the batch engine, which groups a pass's tokens
# by expert); a GBNF grammar holds every reply token (lower-case words only; raw prompts,
# as these files carry synthetic vocabularies).
if(EXISTS "${PROJECT_SOURCE_DIR}/examples/chat")
  find_program(SMOL_MOE_SH sh REQUIRED)
  foreach(moe IN ITEMS qwen3moe gpt_oss)
    if(moe STREQUAL "qwen3moe")
      set(moe_file "${make_model_moe}")
    else()
      set(moe_file "${make_model_gpt_oss}")
    endif()
    set(moe_chat "$<TARGET_FILE:smol-chat> -m ${moe_file} --raw --temp 0 --ignore-eos -t 2")
    set(moe_prompt "the cat sat on the mat and the cat sat on the")
    add_test(NAME chat_mixture_${moe}_speculation COMMAND ${SMOL_MOE_SH} -c
      "a=$(printf '${moe_prompt}\\n' | ${moe_chat} -n 64 2>/dev/null) && b=$(printf '${moe_prompt}\\n/stats\\n' | ${moe_chat} -n 64 --spec-type ngram-simple --spec-ngram-size-n 1 2>/dev/null) && [ -n \"$a\" ] && printf '%s' \"$b\" | grep -Eq 'drafted [1-9]' && case \"$b\" in \"$a\"*) ;; *) exit 1 ;; esac")
    add_test(NAME chat_mixture_${moe}_grammar COMMAND ${SMOL_MOE_SH} -c
      "out=$(${moe_chat} -n 24 -p 'Once upon a time' --grammar 'root ::= [a-z ]+' 2>/dev/null) && [ -n \"$out\" ] && printf '%s' \"$out\" | grep -Eqx '[a-z ]+'")
    set_tests_properties(chat_mixture_${moe}_speculation chat_mixture_${moe}_grammar PROPERTIES
      FIXTURES_REQUIRED synthetic_${moe} TIMEOUT 120)
  endforeach()
endif()
