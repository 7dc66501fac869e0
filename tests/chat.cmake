# Chat, tokenize and download tests (included by tests/CMakeLists.txt).
#
# test_download links libcurl and OpenSSL when both are found; the programs are run
# as a user would: smol-chat through a pipe and through a pseudo-terminal (script
# from util-linux), smol-tokenize against the fixture's llama-tokenize ids.
find_package(CURL QUIET)
find_package(OpenSSL QUIET COMPONENTS Crypto)
if(TARGET test_download)
  if(CURL_FOUND AND OpenSSL_FOUND)
    target_link_libraries(test_download PRIVATE CURL::libcurl OpenSSL::Crypto)
    target_compile_definitions(test_download PRIVATE SMOL_HAVE_DOWNLOAD=1)
  else()
    message(STATUS "smol: libcurl or OpenSSL not found; the downloader tests are skipped")
  endif()
endif()

if(NOT EXISTS "${PROJECT_SOURCE_DIR}/examples/chat" OR NOT EXISTS "${PROJECT_SOURCE_DIR}/examples/tokenize")
  return()
endif()

find_program(SMOL_SH sh REQUIRED)
find_program(SMOL_PYTHON3 python3)
find_program(SMOL_SCRIPT script)  # util-linux: runs a command on a pseudo-terminal
set(chat_dir "${CMAKE_CURRENT_BINARY_DIR}/data/chat")
file(MAKE_DIRECTORY "${chat_dir}")
set(expect "${CMAKE_CURRENT_SOURCE_DIR}/chat/expect.sh")
set(gguf_tool "${CMAKE_CURRENT_SOURCE_DIR}/chat/gguf_tool.py")
set(fixture "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf")
set(chat $<TARGET_FILE:smol-chat>)
set(tokenize $<TARGET_FILE:smol-tokenize>)

# smol_expect(NAME RC REGEX MAX_LINES COMMAND...): see tests/chat/expect.sh. Shell
# snippets chain with && since a ; would split the CMake argument.
function(smol_expect name rc regex max_lines)
  add_test(NAME ${name} COMMAND ${SMOL_SH} ${expect} ${rc} ${regex} ${max_lines} ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120)
endfunction()

# ---- smol-chat through a pipe and one-shot -------------------------------------
# --ignore-eos: the fixture's weights are random, so whether a greedy reply meets the
# end token within 8 tokens turns on near-ties that any change of rounding can flip.
smol_expect(chat_pipe 0 "prompt [0-9]+ tokens \\(0 reused\\).*reply 8 tokens.*max tokens" 0
  ${SMOL_SH} -c "echo hi | ${chat} -m ${fixture} -n 8 --temp 0 -t 2 --ignore-eos")
smol_expect(chat_pipe_two_turns 0 "\\([1-9][0-9]* reused\\)" 0
  ${SMOL_SH} -c "printf 'hi\\nhow are you\\n' | ${chat} -m ${fixture} -n 4 --temp 0 -t 2")
smol_expect(chat_one_shot 0 "reply [0-9]+ token" 0
  ${chat} -m ${fixture} -p "Hello" -n 6 --temp 0 --no-think -t 2)
smol_expect(chat_raw 0 "prompt [0-9]+ tokens \\(0 reused\\)" 0
  ${chat} -m ${fixture} --raw -p "Once upon" -n 6 --temp 0 -t 2)
# The mmap path and the interleaved copies both answer, whatever the CPU prefers.
smol_expect(chat_repack_off 0 "reply 6 tokens" 0
  ${chat} -m ${fixture} -p "Hello" -n 6 --temp 0 --no-think --ignore-eos -t 2 --repack off)
smol_expect(chat_repack_on 0 "reply 6 tokens" 0
  ${chat} -m ${fixture} -p "Hello" -n 6 --temp 0 --no-think --ignore-eos -t 2 --repack on)
smol_expect(chat_bad_repack 2 "--repack: expected auto, on or off" 1 ${chat} --repack yes)
# Greedy output is the same through a pipe and with -p.
add_test(NAME chat_pipe_matches_prompt COMMAND ${SMOL_SH} -c
  "a=$(echo hi | ${chat} -m ${fixture} -n 8 --temp 0 2>/dev/null) && b=$(${chat} -m ${fixture} -p hi -n 8 --temp 0 2>/dev/null) && [ -n \"$a\" ] && [ \"$a\" = \"$b\" ]")

# --prompt-cache: the first run saves the prompt's session, the second restores it,
# evaluates only the last prompt token and gives the same greedy reply; a truncated
# file and one saved with another KV type are refused with exit 1.
set(session "${chat_dir}/prompt-cache.session")
set(session_err "${chat_dir}/prompt-cache.err")
set(cached_chat "${chat} -m ${fixture} -p hi -n 8 --temp 0 -t 2 --ignore-eos --prompt-cache ${session}")
add_test(NAME chat_prompt_cache COMMAND ${SMOL_SH} -c
  "rm -f ${session} && a=$(${cached_chat} 2>/dev/null) && [ -s ${session} ] && b=$(${cached_chat} 2>${session_err}) && cat ${session_err} && grep -Eq 'restored [1-9][0-9]* tokens' ${session_err} && grep -Eq 'prompt 1 tokens \\([1-9][0-9]* reused\\)' ${session_err} && [ -n \"$a\" ] && [ \"$a\" = \"$b\" ] && ! ${cached_chat} --kv-type f32 2>${session_err} && grep -q 'the KV cache type (-ctk/-ctv) is K f16, V f16 in the file, K f32, V f32 here' ${session_err} && head -c 100 ${session} > ${session}.cut && ! ${chat} -m ${fixture} -p hi -n 2 --prompt-cache ${session}.cut 2>${session_err} && grep -q 'prompt-cache.session.cut: truncated' ${session_err}")
# The replies are compared bit for bit, so both runs must round alike: the first
# evaluates the prompt in one prefill (AMX's or the tiles' kernels), the second restores
# all but the last token and evaluates that one with the one-token kernels, which round
# their float sums differently on every SIMD set (on AMX enough to flip a near-tie of
# this random model). The scalar set computes both the same way, so the test pins it:
# what it checks is the prompt cache, not the kernels.
set_tests_properties(chat_prompt_cache PROPERTIES TIMEOUT 120 ENVIRONMENT "SMOL_ISA=scalar")

# ---- bad input: one line, exit 1; bad flags: exit 2 -----------------------------
smol_expect(chat_missing_file 1 "^smol-chat: .*no such file$" 1 ${chat} -m "${chat_dir}/nope.gguf")
smol_expect(chat_directory 1 "^smol-chat: .* is a directory" 1 ${chat} -m "${chat_dir}")
smol_expect(chat_not_gguf 1 "^smol-chat: .*not a GGUF file" 1
  ${chat} -m "${PROJECT_SOURCE_DIR}/CMakeLists.txt")
smol_expect(chat_bad_flag 2 "unknown option --bogus" 1 ${chat} --bogus)
smol_expect(chat_bad_kv_type 2 "--kv-type: expected f32, f16, bf16, q8_0 or q4_0" 1 ${chat} --kv-type q8)
smol_expect(chat_bad_cache_type 2 "--cache-type-k: expected f32, f16, bf16, q8_0 or q4_0" 1
  ${chat} -ctk q5_1)
smol_expect(chat_bad_number 2 "--temp: expected a number" 1 ${chat} --temp warm)
smol_expect(chat_help 0 "--repeat-penalty.*--hide-thinking.*--kv-type.*--cache-type-k.*--cache-type-v.*--repack" 0 ${chat} --help)
# A quantized cache end to end: -ctk/-ctv reach the engine and the greedy reply is text.
add_test(NAME chat_q8_0_cache COMMAND ${SMOL_SH} -c
  "out=$(${chat} -m ${fixture} -p hi -n 8 --temp 0 -t 2 --ignore-eos -ctk q8_0 -ctv q4_0) && [ -n \"$out\" ]")
if(SMOL_PYTHON3)
  set(unsupported "${chat_dir}/unsupported-arch.gguf")
  set(truncated "${chat_dir}/truncated.gguf")
  set(vocab_only "${chat_dir}/vocab-only.gguf")
  add_test(NAME chat_make_bad_files COMMAND ${SMOL_SH} -c
    "${SMOL_PYTHON3} ${gguf_tool} unsupported ${unsupported} && ${SMOL_PYTHON3} ${gguf_tool} truncate ${fixture} ${truncated} 100000 && ${SMOL_PYTHON3} ${gguf_tool} vocab-only ${fixture} ${vocab_only}")
  set_tests_properties(chat_make_bad_files PROPERTIES FIXTURES_SETUP chat_bad_files)
  smol_expect(chat_unsupported_arch 1 "architecture \"mamba\" is not supported" 1 ${chat} -m ${unsupported})
  smol_expect(chat_truncated 1 "runs past the end of the file" 1 ${chat} -m ${truncated})
  smol_expect(tokenize_vocab_only 0 "^\\[39, 68, 357, 78, 277, 262, 587\\]$" 1
    ${tokenize} -m ${vocab_only} --ids "Hello world")
  set_tests_properties(chat_unsupported_arch chat_truncated tokenize_vocab_only PROPERTIES
    FIXTURES_REQUIRED chat_bad_files)
endif()

# ---- the default model: no file, no download -> the random demo model ----------
smol_expect(chat_demo_model 0 "weights are RANDOM.*reply [0-9]+ token" 0
  ${CMAKE_COMMAND} -E env SMOL_MODELS=${chat_dir}/models SMOL_DOWNLOAD=0
  ${chat} -p "Hello" -n 4 --temp 0 -t 2)

# ---- smol-chat on a pseudo-terminal ----------------------------------------------
if(SMOL_SCRIPT)
  set(repl "${chat} -m ${fixture} -n 8 --temp 0 -t 2")
  smol_expect(chat_pty_commands 0 "> .*\\[prompt [0-9]+ tokens.*reasoning off.*context: [0-9]+ of 4096 positions used.*conversation cleared" 0
    ${SMOL_SH} -c "printf 'hi\\n/no_think\\n/stats\\n/reset\\n/help\\n/quit\\n' | ${SMOL_SCRIPT} -qec '${repl}' /dev/null")
endif()
# Ctrl-C is typed only once the program shows it is in the state under test (a
# reply streaming, the prompt waiting), so these do not depend on the machine's speed.
if(SMOL_PYTHON3)
  set(pty_session ${SMOL_PYTHON3} "${CMAKE_CURRENT_SOURCE_DIR}/chat/pty_session.py")
  # Ctrl-C during a reply stops the reply; the program goes on, a Ctrl-C at the prompt
  # (now with the oneTBB workers running) only warns, and /quit exits 0.
  add_test(NAME chat_pty_ctrl_c_stops_reply COMMAND ${pty_session} 0
    "expect:Type a message" "send:hi\\n" "expect:hi\r?\n.{40}" "send:\\x03"
    "expect:cancelled\\]" "expect:> " "send:\\x03" "expect:Ctrl-C again" "send:/quit\\n"
    -- ${chat} -m ${fixture} -t 1 --temp 0 --ignore-eos)
  # Ctrl-C twice at the prompt quits with 130.
  add_test(NAME chat_pty_ctrl_c_twice COMMAND ${pty_session} 130
    "expect:> " "send:\\x03" "expect:Ctrl-C again" "send:\\x03"
    -- ${chat} -m ${fixture} -n 8 --temp 0 -t 2)
  # Ctrl-C while the model loads is not forgotten by the reply that would follow: the
  # program exits 130 (a forgotten keypress lets it go on into the reply, to the context's
  # end, and exit 0).
  # Typed when it says it is loading; wherever the keypress lands (the copies, the
  # engine's start, the reply), the exit is the same.
  add_test(NAME chat_pty_ctrl_c_while_loading COMMAND ${pty_session} 130
    "expect:loading" "send:\\x03"
    -- ${chat} -m ${fixture} -p "Tell me a long story" -t 1 --temp 0 --ignore-eos -n 100000)
  set_tests_properties(chat_pty_ctrl_c_stops_reply chat_pty_ctrl_c_twice
                       chat_pty_ctrl_c_while_loading PROPERTIES TIMEOUT 200)
endif()

# Line editing and history at the prompt (libedit): "/stas", Left, "t" is "/stats";
# Up recalls "/help". A prompt line that reached the model unedited would show
# "unknown command /stas" or a second reply instead.
if(SMOL_PYTHON3)
  add_test(NAME chat_pty_line_editing COMMAND ${pty_session} 0
    "expect:Type a message" "send:/stas\\x1b[Dt\\n" "expect:context: [0-9]+ of"
    "send:/help\\n" "expect:/reset +forget" "send:\\x1b[A\\n" "expect:/reset +forget"
    "send:/quit\\n" -- ${chat} -m ${fixture} -t 1)
  set_tests_properties(chat_pty_line_editing PROPERTIES TIMEOUT 200 FAIL_REGULAR_EXPRESSION "unknown command")
endif()

# ---- failures exit non-zero ------------------------------------------------------
# A prompt longer than the context: one line, exit 1 (one-shot and through a pipe).
set(long_prompt "Tell me everything about the long history of the sea and the ships and the ports")
smol_expect(chat_prompt_too_long 1 "smol-chat: .*needs [0-9]+ tokens but the context holds 16" 0
  ${chat} -m ${fixture} -c 16 -p "${long_prompt}" -t 1)
smol_expect(chat_pipe_prompt_too_long 1 "smol-chat: .*context holds 16" 0
  ${SMOL_SH} -c "echo '${long_prompt}' | ${chat} -m ${fixture} -c 16 -t 1")
# A FIFO (or any non-regular file) is refused at once, never waited on.
smol_expect(chat_fifo_model 1 "not a regular file \\(it is a FIFO\\)" 1
  ${SMOL_SH} -c "rm -f '${chat_dir}/model.fifo' && mkfifo '${chat_dir}/model.fifo' && exec ${chat} -m '${chat_dir}/model.fifo'")
set_tests_properties(chat_fifo_model PROPERTIES TIMEOUT 20)
# --verbose shows the prompt as tokens: the template's markers are control tokens, the
# same spelling typed by the user is not.
smol_expect(chat_verbose_prompt 0 "\\[prompt: [0-9]+ tokens\\].*'<\\|im_start\\|>' \\(control\\).*'<' *\n.*'\\|'" 0
  ${chat} -m ${fixture} -p "<|im_end|>" -n 1 --temp 0 --verbose -t 1)

# ---- smol-tokenize against llama-tokenize's ids (tiny-smollm3-a.tokenizer.json) --
smol_expect(tokenize_ids 0 "^\\[39, 68, 357, 78, 11, 277, 262, 587, 0\\]$" 1
  ${tokenize} -m ${fixture} --ids "Hello, world!")
smol_expect(tokenize_pieces 0 "   357 -> 'll'.*   277 -> ' w'" 0 ${tokenize} -m ${fixture} "Hello, world!")
smol_expect(tokenize_numbers 0 "^\\[18, 13, 16, 19, 16, 20, 24, 306, 220, 17, 10, 17, 28, 19, 11, 220, 16, 11, 15, 15, 15, 11, 15, 15, 15, 297, 220, 15, 13, 15, 15, 16\\]$" 1
  ${tokenize} -m ${fixture} --ids "3.14159 and 2+2=4, 1,000,000 or 0.001")
file(WRITE "${chat_dir}/newlines.txt" "\n\n\n")
smol_expect(tokenize_file_bytes 0 "^\\[299, 198\\]$" 1 ${tokenize} -m ${fixture} --ids -f "${chat_dir}/newlines.txt")
smol_expect(tokenize_special 0 "^\\[996, 71, 72\\]$" 1 ${tokenize} -m ${fixture} --ids "<|im_start|>hi")
smol_expect(tokenize_no_special 0 "^\\[27, 91, 380" 1 ${tokenize} -m ${fixture} --ids --no-special "<|im_start|>hi")
smol_expect(tokenize_bos 0 "^\\[992, 39," 1 ${tokenize} -m ${fixture} --ids --bos "Hello")
smol_expect(tokenize_bad_file 1 "^smol-tokenize: .*not a GGUF file" 1
  ${tokenize} -m "${PROJECT_SOURCE_DIR}/CMakeLists.txt" "x")
smol_expect(tokenize_bad_flag 2 "unknown option --bogus" 0 ${tokenize} --bogus)

# ---- smol-chat's download of the default model, against a loopback server --------
if(SMOL_PYTHON3 AND CURL_FOUND AND OpenSSL_FOUND)
  add_test(NAME chat_download_default_model
    COMMAND ${SMOL_SH} ${CMAKE_CURRENT_SOURCE_DIR}/chat/download_e2e.sh ${chat} ${fixture}
            ${chat_dir}/download-e2e)
  set_tests_properties(chat_download_default_model PROPERTIES TIMEOUT 120 LABELS network)
endif()

# ---- structured output: -j / --json-schema and --grammar --------------------------
# The reply to a schema is JSON that the schema accepts (checked by Python's json, as a
# client would read it); a grammar with a mistake exits 1 naming its line and column,
# before the model loads; two constraints at once are a bad command line (2).
if(SMOL_PYTHON3)
  set(check_json_reply "import json, subprocess, sys\nout = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True).stdout\nvalue = json.loads(out)\nassert isinstance(value, dict) and set(value) == {'a'}, out\nassert isinstance(value['a'], int) and not isinstance(value['a'], bool), out\nprint(out)")
  add_test(NAME chat_json_schema
           COMMAND ${SMOL_PYTHON3} -c "${check_json_reply}" ${chat} -m ${fixture} -p Hello -n 200
                   --temp 0 -t 2 -j "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}")
  set_tests_properties(chat_json_schema PROPERTIES TIMEOUT 120)
endif()
smol_expect(chat_bad_grammar 1 "--grammar: grammar: line 2, column [0-9]+: " 1
  ${chat} -m ${fixture} -p Hello --grammar "root ::= \"a\"\nb ::= [")
smol_expect(chat_bad_json_schema 1 "--json-schema: JSON schema: .*unevaluatedProperties" 1
  ${chat} -m ${fixture} -p Hello -j "{\"type\":\"object\",\"unevaluatedProperties\":false}")
smol_expect(chat_two_constraints 2 "excludes" 0
  ${chat} -m ${fixture} -p Hello -j "{}" --grammar "root ::= \"a\"")
