# Command lines of every program (examples/common/cli.hpp; included by
# tests/CMakeLists.txt): numbers out of range or too large for their type are usage
# errors (exit 2, one line), thread counts above the CPUs are capped with a note, a
# missing -m is exit 2, unusable files named by flags fail at once with one line
# naming them, and --help exits 0.
#
# A flag that must be refused is given with a model file that does not exist: a
# parser that wrongly accepts the flag then exits 1 at once ("no such file") instead
# of running the model with a wrapped-around value.
if(NOT EXISTS "${PROJECT_SOURCE_DIR}/examples/chat")
  return()
endif()

find_program(SMOL_SH sh REQUIRED)
set(cli_dir "${CMAKE_CURRENT_BINARY_DIR}/data/cli")
file(MAKE_DIRECTORY "${cli_dir}")
file(MAKE_DIRECTORY "${cli_dir}/a-directory")
file(WRITE "${cli_dir}/text.txt" "Hello, world!\n")
set(cli_expect "${CMAKE_CURRENT_SOURCE_DIR}/chat/expect.sh")
set(cli_fixture "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf")
set(cli_no_model "${cli_dir}/no-such-model.gguf")
set(cli_chat $<TARGET_FILE:smol-chat>)
set(cli_logits $<TARGET_FILE:smol-logits>)
set(cli_perplexity $<TARGET_FILE:smol-perplexity>)
set(cli_tokenize $<TARGET_FILE:smol-tokenize>)
set(cli_inspect $<TARGET_FILE:smol-inspect>)
set(cli_make_model $<TARGET_FILE:smol-make-model>)

# smol_cli_expect(NAME RC REGEX MAX_LINES COMMAND...): see tests/chat/expect.sh. (chat.cmake's
# smol_expect is defined after this file is included.)
function(smol_cli_expect name rc regex max_lines)
  add_test(NAME ${name} COMMAND ${SMOL_SH} ${cli_expect} ${rc} ${regex} ${max_lines} ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 LABELS cli)
endfunction()

# ---- smol-chat: no wrap-around, no narrowing --------------------------------------
foreach(threads IN ITEMS 4294967297 99999999999 3000000000)
  smol_cli_expect(cli_chat_threads_${threads} 2
    "^smol-chat: --threads: expected an integer from 0 to 4096, got \"${threads}\" \\(see smol-chat --help\\)$" 1
    ${cli_chat} -m ${cli_no_model} -p hi -t ${threads})
endforeach()
smol_cli_expect(cli_chat_top_k_overflow 2
  "^smol-chat: --top-k: expected an integer from 0 to 2147483647, got \"4294967296\"" 1
  ${cli_chat} -m ${cli_no_model} -p hi --top-k 4294967296)
smol_cli_expect(cli_chat_repeat_last_n_overflow 2
  "^smol-chat: --repeat-last-n: expected an integer from -1 to 2147483647, got \"4294967296\"" 1
  ${cli_chat} -m ${cli_no_model} -p hi --repeat-last-n 4294967296)

# ---- smol-chat: sampling values outside their meaning -----------------------------
smol_cli_expect(cli_chat_top_p_above_one 2 "^smol-chat: --top-p: expected a number from 0 to 1, got \"2\"" 1
  ${cli_chat} -m ${cli_no_model} -p hi --top-p 2)
smol_cli_expect(cli_chat_min_p_above_one 2 "^smol-chat: --min-p: expected a number from 0 to 1, got \"5\"" 1
  ${cli_chat} -m ${cli_no_model} -p hi --min-p 5)
smol_cli_expect(cli_chat_repeat_penalty_zero 2 "^smol-chat: --repeat-penalty: expected a number > 0, got \"0\"" 1
  ${cli_chat} -m ${cli_no_model} -p hi --repeat-penalty 0)
smol_cli_expect(cli_chat_temp_not_finite 2 "^smol-chat: --temp: expected a number, got \"inf\"" 1
  ${cli_chat} -m ${cli_no_model} -p hi --temp inf)
# llama.cpp's -1: the penalty sees the whole context.
smol_cli_expect(cli_chat_repeat_last_n_context 0 "reply 2 tokens" 0
  ${cli_chat} -m ${cli_fixture} -p hi -n 2 --temp 0 -t 2 --repeat-last-n -1 --ignore-eos)

# ---- smol-chat: threads -----------------------------------------------------------
# More threads than CPUs: a note, and the run goes on with the CPUs there are.
smol_cli_expect(cli_chat_threads_capped 0
  "^smol-chat: -t 1000: this machine has [0-9]+ CPUs?. using [0-9]+.*reply 2 tokens" 0
  ${cli_chat} -m ${cli_fixture} -p hi -n 2 --temp 0 -t 1000 --ignore-eos)
smol_cli_expect(cli_chat_threads_zero_is_all 0 "reply 2 tokens" 0
  ${cli_chat} -m ${cli_fixture} -p hi -n 2 --temp 0 -t 0 --ignore-eos)

# ---- smol-chat: new and kept spellings --------------------------------------------
smol_cli_expect(cli_chat_verbose 0 "reply 2 tokens" 0
  ${cli_chat} -m ${cli_fixture} -p hi -n 2 --temp 0 -t 2 --ignore-eos --verbose -v)
smol_cli_expect(cli_chat_help 0
  "^usage: smol-chat.*-m, --model FILE.*--system, --system-prompt TEXT.*-sys.*-r, --stop, --reverse-prompt TEXT.*--think, --no-think.*-v, --verbose.*-h, --help +show this text.*/think" 0
  ${cli_chat} --help)
# One value per flag: --stop a b is a stop string and a stray argument.
smol_cli_expect(cli_chat_stop_takes_one_value 2 "^smol-chat: unexpected argument \"b\" \\(see smol-chat --help\\)$" 1
  ${cli_chat} -m ${cli_no_model} --stop a b)

# ---- smol-bench --------------------------------------------------------------------
if(SMOL_BUILD_BENCH)
  set(cli_bench $<TARGET_FILE:smol-bench>)
  foreach(threads IN ITEMS 4294967297 3000000000)
    smol_cli_expect(cli_bench_threads_${threads} 2
      "^smol-bench: --threads: expected an integer from 1 to 4096, got \"${threads}\" \\(see smol-bench --help\\)$" 1
      ${cli_bench} -m ${cli_fixture} -t 2,${threads})
  endforeach()
  smol_cli_expect(cli_bench_missing_model 2 "^smol-bench: no model given: use -m FILE \\(see smol-bench --help\\)$" 1
    ${cli_bench} -p 8)
  # The table shows the thread count that ran (the one in the note), not the one asked for.
  smol_cli_expect(cli_bench_threads_capped 0
    "^smol-bench: -t 1000: this machine has [0-9]+ CPUs?. using ([0-9]+).*\\| +\\1 \\| [a-z0-9+]+ +\\| pp8 .*\\| +\\1 \\| [a-z0-9+]+ +\\| tg2 " 0
    ${cli_bench} -m ${cli_fixture} -t 1000 -p 8 -n 2 -r 1)
  # It reads a 1 GiB buffer for the roofline, like bench_smol_bench_json.
  set_tests_properties(cli_bench_threads_capped PROPERTIES RUN_SERIAL TRUE)
  smol_cli_expect(cli_bench_help 0 "^usage: smol-bench.*options:.*-t, --threads N,\\.\\.\\..*-h, --help +show this text" 0
    ${cli_bench} --help)
endif()

# ---- a missing -m (or -o, or FILE) is a usage error -------------------------------
smol_cli_expect(cli_logits_missing_model 2 "^smol-logits: no model given: use -m FILE \\(see smol-logits --help\\)$" 1
  ${cli_logits} --tokens 1,2 -o "${cli_dir}/logits-missing-model.bin")
smol_cli_expect(cli_perplexity_missing_model 2 "^smol-perplexity: no model given: use -m FILE \\(see smol-perplexity --help\\)$" 1
  ${cli_perplexity} -f "${cli_dir}/text.txt")
smol_cli_expect(cli_tokenize_missing_model 2 "^smol-tokenize: no model given: use -m FILE \\(see smol-tokenize --help\\)$" 1
  ${cli_tokenize} hello)
smol_cli_expect(cli_inspect_missing_file 2 "^smol-inspect: no FILE given \\(see smol-inspect --help\\)$" 1
  ${cli_inspect} --json)
smol_cli_expect(cli_make_model_missing_output 2 "^smol-make-model: no output file given: use -o FILE \\(see smol-make-model --help\\)$" 1
  ${cli_make_model} --preset tiny)

# ---- files named by flags: fail at once, one line naming the path -----------------
# The output is opened before the model runs: no top-5 lines come before the error.
smol_cli_expect(cli_logits_unwritable_output 1
  "^smol-logits: error: [^ ]*/no-such-dir/logits\\.bin: cannot open for writing \\([^)]*\\)$" 1
  ${cli_logits} -m ${cli_fixture} --tokens 1,2 -o "${cli_dir}/no-such-dir/logits.bin")
smol_cli_expect(cli_perplexity_text_is_directory 1
  "^smol-perplexity: error: [^ ]*/a-directory: is a directory, not a text file$" 1
  ${cli_perplexity} -m ${cli_fixture} -f "${cli_dir}/a-directory")
smol_cli_expect(cli_tokenize_text_is_directory 1
  "^smol-tokenize: [^ ]*/a-directory: is a directory, not a text file$" 1
  ${cli_tokenize} -m ${cli_fixture} -f "${cli_dir}/a-directory")

# ---- the other programs' numbers ---------------------------------------------------
smol_cli_expect(cli_logits_threads_overflow 2 "^smol-logits: --threads: expected an integer from 0 to 4096" 1
  ${cli_logits} -m ${cli_no_model} --tokens 1,2 -t 4294967297 -o "${cli_dir}/logits-threads.bin")
smol_cli_expect(cli_logits_decode_from_past_the_end 2 "^smol-logits: --decode-from 3: there are only 2 tokens$" 1
  ${cli_logits} -m ${cli_fixture} --tokens 1,2 --decode-from 3 -o "${cli_dir}/logits-decode-from.bin")
smol_cli_expect(cli_logits_decode_from_zero 2 "^smol-logits: --decode-from: expected an integer from 1 to 2147483647, got \"0\"" 1
  ${cli_logits} -m ${cli_fixture} --tokens 1,2 --decode-from 0 -o "${cli_dir}/logits-decode-zero.bin")
smol_cli_expect(cli_logits_bad_token 2 "^smol-logits: --tokens: expected an integer from 0 to 2147483647, got \"-2\"" 1
  ${cli_logits} -m ${cli_no_model} --tokens 1,-2 -o "${cli_dir}/logits-bad-token.bin")
smol_cli_expect(cli_perplexity_threads_overflow 2 "^smol-perplexity: --threads: expected an integer from 0 to 4096" 1
  ${cli_perplexity} -m ${cli_no_model} -f "${cli_dir}/text.txt" -t 4294967297)
smol_cli_expect(cli_perplexity_small_context 2 "^smol-perplexity: --ctx-size: expected an integer from 4 to 16777216, got \"2\"" 1
  ${cli_perplexity} -m ${cli_no_model} -f "${cli_dir}/text.txt" -c 2)
smol_cli_expect(cli_make_model_bad_heads 2 "^smol-make-model: --heads: expected an integer from 1 to 1024, got \"0\"" 1
  ${cli_make_model} --heads 0 -o "${cli_dir}/never-heads.gguf")
smol_cli_expect(cli_make_model_layers_overflow 2 "^smol-make-model: --layers: expected an integer from 1 to 1024, got \"18446744073709551617\"" 1
  ${cli_make_model} --layers 18446744073709551617 -o "${cli_dir}/never-layers.gguf")

# ---- --help: exit 0, every flag listed ---------------------------------------------
smol_cli_expect(cli_logits_help 0 "^usage: smol-logits.*-t, --threads N.*-h, --help +show this text" 0 ${cli_logits} --help)
smol_cli_expect(cli_perplexity_help 0 "^usage: smol-perplexity.*-b, --batch-size N.*-h, --help +show this text" 0
  ${cli_perplexity} --help)
smol_cli_expect(cli_tokenize_help 0 "^usage: smol-tokenize.*--no-special, --no-parse-special.*-h, --help +show this text" 0
  ${cli_tokenize} -h)
smol_cli_expect(cli_inspect_help 0 "^usage: smol-inspect.*--tensors PATTERN.*-h, --help +show this text" 0 ${cli_inspect} -h)
smol_cli_expect(cli_make_model_help 0 "^usage: smol-make-model.*options:.*--kv-heads N.*-h, --help +show this text" 0
  ${cli_make_model} --help)

# ---- smol-server: its own flags --------------------------------------------------------
set(cli_server $<TARGET_FILE:smol-server>)
smol_cli_expect(cli_server_store_responses_range 2
  "^smol-server: --store-responses: expected an integer from 0 to 100000, got \"100001\"" 1
  ${cli_server} -m ${cli_no_model} --store-responses 100001)
smol_cli_expect(cli_server_logit_bias_syntax 2
  "^smol-server: --logit-bias: expected TOKEN_ID\\+BIAS or TOKEN_ID-BIAS, got \"5x\"" 1
  ${cli_server} -m ${cli_no_model} --logit-bias 5x)
# A token the model lacks is known only once its vocabulary is read: exit 1, named.
smol_cli_expect(cli_server_logit_bias_token 1
  "smol-server: logit_bias: token 5000 is not in this model's vocabulary \\(0 to 1023\\)" 0
  ${cli_server} -m ${cli_fixture} --port 0 --logit-bias 5000+1)
