// The OpenAI API as plain functions: request JSON in, scheduler settings out; replies,
// stream chunks and errors back as JSON. No socket here, so every rule can be tested
// with a string (tests/test_serve_protocol.cpp) and fuzzed (tests/fuzz/).
//
// The shapes follow OpenAI's chat and completions APIs and, where OpenAI has nothing,
// llama.cpp's llama-server (which most local clients already speak): the reasoning as
// `reasoning_content` beside `content`, `timings` in the last chunk, top_k, min_p and
// repeat_penalty as extra fields, `chat_template_kwargs.enable_thinking`.
#pragma once

#include "smol/serve/api_error.hpp"
#include "smol/serve/openai_reply.hpp"
#include "smol/serve/openai_request.hpp"
