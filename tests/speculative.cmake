# smol-chat with speculative decoding (included by tests/CMakeLists.txt): greedy replies
# are the same with and without drafts, /stats reports what was drafted, and bad
# combinations of the flags are refused. The library side is test_speculative.cpp.
#
# "Without drafts" is --draft-max 0: with --spec-type the model runs one token on its
# batch-invariant kernels (TransformerOptions::one_token), which give the bits of a
# multi-token pass; plain smol-chat decodes on the matvec kernels, whose sums round
# differently, so a near-tie of the random fixture could go either way there.
if(NOT EXISTS "${PROJECT_SOURCE_DIR}/examples/chat")
  return()
endif()
find_program(SMOL_SH sh REQUIRED)
set(spec_expect "${CMAKE_CURRENT_SOURCE_DIR}/chat/expect.sh")
set(spec_fixture "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf")
set(spec_chat $<TARGET_FILE:smol-chat>)
# A reply long enough for the random model to loop, so the n-gram drafter has repeats.
set(spec_run "${spec_chat} -m ${spec_fixture} -p 'one two three one two three one two' -n 48 --temp 0 -t 2 --ignore-eos --no-think")

function(smol_spec_expect name rc regex)
  add_test(NAME ${name} COMMAND ${SMOL_SH} ${spec_expect} ${rc} ${regex} 0 ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120)
endfunction()

# The same greedy text with n-gram drafts and with a draft model (the fixture itself) as
# without drafts; the stats line counts the drafts.
# The random fixture's loops seldom repeat three tokens, so these draft after a repeat of
# one (--spec-ngram-size-n 1; the default, 3, is for trained weights, ngram_drafter.hpp).
add_test(NAME chat_spec_ngram_same_reply COMMAND ${SMOL_SH} -c
  "a=$(${spec_run} --spec-type ngram-simple --draft-max 0 2>/dev/null) && b=$(${spec_run} --spec-type ngram-simple --spec-ngram-size-n 1 2>&1 >/dev/null | tee /dev/stderr | grep -E 'drafted [1-9][0-9]*, accepted [0-9]+') && c=$(${spec_run} --spec-type ngram-simple --spec-ngram-size-n 1 --draft-max 3 --draft-min 2 2>/dev/null) && d=$(${spec_run} --spec-type ngram-simple --spec-ngram-size-n 1 2>/dev/null) && [ -n \"$a\" ] && [ \"$a\" = \"$c\" ] && [ \"$a\" = \"$d\" ]")
add_test(NAME chat_spec_draft_model_same_reply COMMAND ${SMOL_SH} -c
  "a=$(${spec_run} --spec-type ngram-simple --draft-max 0 2>/dev/null) && b=$(${spec_run} -md ${spec_fixture} --draft-max 4 2>/dev/null) && [ -n \"$a\" ] && [ \"$a\" = \"$b\" ]")
set_tests_properties(chat_spec_ngram_same_reply chat_spec_draft_model_same_reply
  PROPERTIES TIMEOUT 120)

# /stats after a reply: the drafter, its limits, and the last reply's counts.
smol_spec_expect(chat_spec_stats 0
  "speculative decoding: ngram-simple, draft-max 16, draft-min 0, ngram-size-n 3.*drafted [0-9]+, accepted [0-9]+, acceptance [0-9.]+ %"
  ${SMOL_SH} -c "printf 'one two one two one two\\n/stats\\n' | ${spec_chat} -m ${spec_fixture} -n 32 --temp 0 -t 2 --ignore-eos --spec-type ngram-simple")
smol_spec_expect(chat_spec_stats_draft_model 0
  "speculative decoding: draft with [^ ]*tiny-smollm3-a.q4_k_m.gguf, draft-max 5.*drafted [1-9][0-9]*, accepted"
  ${SMOL_SH} -c "printf 'hi\\n/stats\\n' | ${spec_chat} -m ${spec_fixture} -n 16 --temp 0 -t 2 --ignore-eos -md ${spec_fixture} --draft-max 5")

# Refused: an unknown type, draft without a model, a model with another type, a draft
# model with another vocabulary (the synthetic llama file of make_model.cmake, 512 tokens).
smol_spec_expect(chat_spec_bad_type 2 "--spec-type: expected none, ngram-simple or draft"
  ${spec_chat} --spec-type ngram)
smol_spec_expect(chat_spec_draft_needs_model 2 "--spec-type draft needs a draft model \\(-md FILE\\)"
  ${spec_chat} -m ${spec_fixture} --spec-type draft)
smol_spec_expect(chat_spec_md_with_ngram 2 "-md goes with --spec-type draft, not ngram-simple"
  ${spec_chat} -m ${spec_fixture} --spec-type ngram-simple -md ${spec_fixture})
smol_spec_expect(chat_spec_bad_draft_max 2 "--draft-max"
  ${spec_chat} -m ${spec_fixture} --draft-max -3)
smol_spec_expect(chat_spec_bad_ngram_size 2 "--spec-ngram-size-n"
  ${spec_chat} -m ${spec_fixture} --spec-type ngram-simple --spec-ngram-size-n 0)

# --spec-ngram-size-n reaches the drafter and /stats.
set(spec_stats "printf 'one two three one two three one two\\n/stats\\n' | ${spec_chat} -m ${spec_fixture} -n 48 --temp 0 -t 2 --ignore-eos --no-think --spec-type ngram-simple")
add_test(NAME chat_spec_ngram_size COMMAND ${SMOL_SH} -c
  "${spec_stats} --spec-ngram-size-n 1 | grep -E 'ngram-size-n 1$' && ${spec_stats} --spec-ngram-size-n 1 | grep -E 'drafted [1-9][0-9]*, accepted' && ${spec_stats} --spec-ngram-size-n 64 | grep -E 'drafted 0, accepted 0'")
set_tests_properties(chat_spec_ngram_size PROPERTIES TIMEOUT 120)
if(EXISTS "${PROJECT_SOURCE_DIR}/examples/make-model")
  set(spec_other_vocab "${CMAKE_CURRENT_BINARY_DIR}/data/make-model/synthetic-llama.f16.gguf")
  smol_spec_expect(chat_spec_draft_other_vocabulary 1
    "^smol-chat: draft model .*synthetic-llama.f16.gguf: the draft model's vocabulary has 512 tokens, the model.s [0-9]+. speculative decoding needs the same vocabulary"
    ${spec_chat} -m ${spec_fixture} -md ${spec_other_vocab} -p hi -n 2)
  set_tests_properties(chat_spec_draft_other_vocabulary PROPERTIES FIXTURES_REQUIRED synthetic_llama)
  if(EXISTS "${PROJECT_SOURCE_DIR}/examples/server")
    # smol-server refuses it the same way, exit 1, before it serves anything.
    smol_spec_expect(server_spec_draft_other_vocabulary 1
      "smol-server: draft model .*synthetic-llama.f16.gguf: the draft model's vocabulary has 512 tokens, the model.s [0-9]+. speculative decoding needs the same vocabulary"
      $<TARGET_FILE:smol-server> -m ${spec_fixture} -md ${spec_other_vocab} --port 0 -t 1)
    set_tests_properties(server_spec_draft_other_vocabulary PROPERTIES FIXTURES_REQUIRED synthetic_llama)
  endif()
endif()
if(EXISTS "${PROJECT_SOURCE_DIR}/examples/server")
  smol_spec_expect(server_spec_help 0 "--spec-type.*ngram-simple.*draft.*--model-draft FILE.*-md"
    $<TARGET_FILE:smol-server> --help)
  smol_spec_expect(server_spec_draft_needs_model 2 "--spec-type draft needs a draft model \\(-md FILE\\)"
    $<TARGET_FILE:smol-server> --spec-type draft)
endif()
