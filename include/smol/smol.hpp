// The umbrella header: everything an application needs to open a GGUF model,
// tokenize, run the transformer and chat. Kernels are picked at run time when the
// target called smol_add_dispatch() in CMake (see docs/ARCHITECTURE.md).
//
// Not included: smol/net/ (the model downloader, which needs libcurl and OpenSSL)
// and smol/testing/synthetic.hpp (the test-model generator).
#pragma once

#include "smol/core/error.hpp"                     // IWYU pragma: export
#include "smol/generate/chat.hpp"                  // IWYU pragma: export
#include "smol/generate/chat_session.hpp"          // IWYU pragma: export
#include "smol/generate/sampler.hpp"               // IWYU pragma: export
#include "smol/gguf/gguf.hpp"                      // IWYU pragma: export
#include "smol/model/embedder.hpp"                 // IWYU pragma: export
#include "smol/model/model.hpp"                    // IWYU pragma: export
#include "smol/model/transformer.hpp"              // IWYU pragma: export
#include "smol/ops/context.hpp"                    // IWYU pragma: export
#include "smol/template/chat_template.hpp"         // IWYU pragma: export
#include "smol/template/known_chat_templates.hpp"  // IWYU pragma: export
#include "smol/text/gguf_vocabulary.hpp"           // IWYU pragma: export
#include "smol/text/tokenizer.hpp"                 // IWYU pragma: export
