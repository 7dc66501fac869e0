# smol-inspect runs on the fixtures, on broken files, with bad flags.
#
# Included by tests/CMakeLists.txt. Each test runs through `sh -c` and appends the exit
# status to the output ("exit=N"), because a PASS_REGULAR_EXPRESSION alone would
# ignore it; one regex then checks the text and the status together.

set(smol_q4_fixture "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf")
set(smol_f32_fixture "${SMOL_TEST_DATA_DIR}/tiny-smollm3-a.f32.gguf")
set(smol_inspect_scratch "${CMAKE_CURRENT_BINARY_DIR}/inspect")
file(MAKE_DIRECTORY "${smol_inspect_scratch}")
file(WRITE "${smol_inspect_scratch}/garbage.gguf" "this is not a model, just some text\n")

# smol_inspect_test(<name> <regex> <shell command>): "$0" in the command is smol-inspect.
function(smol_inspect_test name regex script)
  add_test(NAME ${name} COMMAND sh -c "${script} 2>&1; echo \"exit=$?\"" $<TARGET_FILE:smol-inspect>)
  set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}")
endfunction()

smol_inspect_test(gguf_inspect_q4_k_m
  "architecture: smollm3.*smollm3\\.block_count = 8.*smollm3\\.rope\\.freq_base = 5000000.*model: gpt2.*pre: llama-bpe.*vocab size: 1024.*bos: 992 '<\\|begin_of_text\\|>'.*eos: 997 '<\\|im_end\\|>'.*padding: none.*merges: 736.*control tokens: 32.*chat template: present \\(3795 bytes\\).*tensors: 74 of 74.*token_embd\\.weight +Q6_K +\\[256, 1024\\] +215040.*Q4_K +48 tensors.*Q6_K +9 tensors.*total: 6295808 parameters, 3843584 bytes.*exit=0"
  "\"$0\" \"${smol_q4_fixture}\"")

smol_inspect_test(gguf_inspect_f32
  "general\\.file_type = 0.*F32 +74 tensors.*total: 6295808 parameters, 25183232 bytes.*exit=0"
  "\"$0\" \"${smol_f32_fixture}\"")

# The other file types of fixture A, as llama-quantize wrote them (shared/fixtures/README.md
# lists each file's tensor types): smol-inspect names every type and counts its bytes.
foreach(type_counts IN ITEMS
    "q4_1|3|Q4_1 +56 tensors +3768320 bytes.*Q6_K +1 tensors|4000768"
    "q5_0|8|Q5_0 +56 tensors +4145152 bytes.*Q6_K +1 tensors|4377600"
    "q5_1|9|Q5_1 +56 tensors +4521984 bytes.*Q6_K +1 tensors|4754432"
    "q3_k_m|12|Q3_K +32 tensors.*Q4_K +22 tensors.*Q5_K +2 tensors.*Q6_K +1 tensors|3123200"
    "q2_k|10|Q2_K +32 tensors.*Q3_K +16 tensors.*Q4_K +8 tensors.*Q6_K +1 tensors|2454528"
    "iq4_xs|30|IQ4_XS +47 tensors.*Q5_K +9 tensors.*Q6_K +1 tensors|3486720"
    "iq4_nl|25|IQ4_NL +47 tensors.*Q5_K +9 tensors.*Q6_K +1 tensors|3664896")
  string(REPLACE "|" ";" type_counts "${type_counts}")
  list(GET type_counts 0 type)
  list(GET type_counts 1 file_type)
  list(GET type_counts 2 counts)
  list(GET type_counts 3 bytes)
  smol_inspect_test(gguf_inspect_${type}
    "general\\.file_type = ${file_type}\n.*tensors: 74 of 74.*${counts}.*total: 6295808 parameters, ${bytes} bytes.*exit=0"
    "\"$0\" \"${SMOL_FIXTURES_DIR}/tiny-smollm3-a.${type}.gguf\"")
endforeach()

smol_inspect_test(gguf_inspect_glob
  "tensors: 9 of 74.*blk\\.1\\.attn_k\\.weight.*total: .*exit=0"
  "\"$0\" --tensors 'blk.1.*' \"${smol_q4_fixture}\"")

smol_inspect_test(gguf_inspect_substring
  "tensors: 8 of 74.*Q4_K +8 tensors.*exit=0"
  "\"$0\" \"${smol_q4_fixture}\" --tensors attn_q")

find_program(SMOL_PYTHON3 python3)
if(SMOL_PYTHON3)
  smol_inspect_test(gguf_inspect_json_q4_k_m
    "\"smollm3\\.block_count\": 8.*\"control_tokens\": 32.*\"bytes\": 3795.*\"Q6_K\": {[^}]*\"count\": 9.*exit=0"
    "\"$0\" --json \"${smol_q4_fixture}\" > \"${smol_inspect_scratch}/q4.json\" && \"${SMOL_PYTHON3}\" -m json.tool \"${smol_inspect_scratch}/q4.json\"")
  smol_inspect_test(gguf_inspect_json_f32
    "\"name\": \"token_embd\\.weight\".*\"total_parameters\": 6295808.*exit=0"
    "\"$0\" --json \"${smol_f32_fixture}\" > \"${smol_inspect_scratch}/f32.json\" && \"${SMOL_PYTHON3}\" -m json.tool \"${smol_inspect_scratch}/f32.json\"")
endif()

smol_inspect_test(gguf_inspect_truncated_metadata
  "truncated-metadata\\.gguf: metadata key 'tokenizer\\.ggml\\.tokens' \\(entry at offset [0-9]+\\): .*runs past the end of the file \\(5000 bytes\\)\nexit=1"
  "head -c 5000 \"${smol_q4_fixture}\" > \"${smol_inspect_scratch}/truncated-metadata.gguf\" && \"$0\" \"${smol_inspect_scratch}/truncated-metadata.gguf\"")

smol_inspect_test(gguf_inspect_truncated_data
  "tensor '[^']+' \\(tensor info at offset [0-9]+\\): data \\[[0-9]+, [0-9]+\\) runs past the end of the file \\(3000000 bytes\\)\nexit=1"
  "head -c 3000000 \"${smol_q4_fixture}\" > \"${smol_inspect_scratch}/truncated-data.gguf\" && \"$0\" \"${smol_inspect_scratch}/truncated-data.gguf\"")

smol_inspect_test(gguf_inspect_garbage
  "garbage\\.gguf: header: not a GGUF file.*exit=1"
  "\"$0\" \"${smol_inspect_scratch}/garbage.gguf\"")

smol_inspect_test(gguf_inspect_bad_flag
  "^smol-inspect: unknown option --frobnicate \\(see smol-inspect --help\\)\nexit=2"
  "\"$0\" --frobnicate \"${smol_q4_fixture}\"")
