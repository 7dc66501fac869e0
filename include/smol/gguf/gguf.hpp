// Everything for GGUF files: the validating reader and the writer.
#pragma once

#include "smol/gguf/gguf_file.hpp"  // IWYU pragma: export
#include "smol/gguf/writer.hpp"     // IWYU pragma: export
