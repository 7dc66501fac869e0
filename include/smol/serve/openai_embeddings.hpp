// OpenAI's embeddings request and reply (POST /v1/embeddings), and llama-server's own
// /embedding beside it: inputs in, token lists out, then vectors back as JSON.
//
// `input` is a string, a list of strings, a list of token ids (one input) or a list of
// such lists, as OpenAI's API takes it. Text is tokenized as llama-server tokenizes an
// embedding input: control tokens written in it are parsed, and bos and eos are added
// where the vocabulary says so (Qwen3-Embedding pools the eos it appends); token lists
// are used as they are. `encoding_format` "base64" sends each vector as the base64 of
// its little-endian float32 bytes (OpenAI's SDKs ask for it by default), `dimensions`
// keeps the first N values of each (a Matryoshka model's shorter embedding), and
// llama-server's `embd_normalize` says how the vector is scaled (2: unit length).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smol/ops/pooling.hpp"
#include "smol/serve/api_error.hpp"
#include "smol/serve/openai_request.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol::serve {

// Most inputs per request (OpenAI's limit) and tokens over all of them.
inline constexpr std::size_t kMaxEmbeddingInputs = 2048;
inline constexpr std::size_t kMaxEmbeddingTokens = std::size_t{1} << 20;

struct EmbeddingRequest {
  std::vector<std::vector<TokenId>> inputs;  // one token list per input, in order
  bool base64 = false;                       // encoding_format "base64"
  std::optional<std::size_t> dimensions;     // keep the first N values
  int normalize = 2;                         // embd_normalize (normalize_embedding)
  std::size_t tokens() const {
    std::size_t total = 0;
    for (const auto& input : inputs) total += input.size();
    return total;
  }
};

namespace detail {

// The tokens of one text input, as llama-server tokenizes embedding inputs.
inline std::vector<TokenId> embedding_tokens(const Tokenizer& tokenizer, const std::string& text) {
  return tokenizer.encode(text, {.parse_special = true, .add_eos = tokenizer.vocabulary().add_eos});
}

// A list of token ids as one input, each checked against the vocabulary.
inline std::vector<TokenId> token_list(const Json& list, std::size_t vocabulary,
                                       const std::string& at) {
  std::vector<TokenId> ids;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Json& id = list[i];
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
        id.get<std::int64_t>() >= static_cast<std::int64_t>(vocabulary)) {
      throw invalid_request(at + "[" + std::to_string(i) +
                                "] is not a token id of this model (0 to " +
                                std::to_string(vocabulary - 1) + ")",
                            "input");
    }
    ids.push_back(static_cast<TokenId>(id.get<std::int64_t>()));
  }
  return ids;
}

inline void add_input(EmbeddingRequest& request, const Json& input, const Tokenizer& tokenizer,
                      const std::string& at) {
  if (input.is_string()) {
    if (input.get_ref<const std::string&>().empty()) {
      throw invalid_request(at + " is an empty string", "input");
    }
    request.inputs.push_back(embedding_tokens(tokenizer, input.get<std::string>()));
  } else if (input.is_array() && !input.empty()) {
    request.inputs.push_back(token_list(input, tokenizer.size(), at));
  } else {
    throw invalid_request(at + " must be a non-empty string or list of token ids", "input");
  }
  if (request.inputs.back().empty()) throw invalid_request(at + " has no tokens", "input");
}

inline EmbeddingRequest parse_embedding(const Json& body, const Tokenizer& tokenizer,
                                        const char* input_field) {
  EmbeddingRequest request;
  const Json* input = field(body, input_field);
  if (input == nullptr) {
    throw invalid_request(std::string(input_field) + " is required", input_field);
  }
  // A list of strings or of lists is many inputs; a string or a list of ids is one.
  const bool many =
      input->is_array() && !input->empty() && ((*input)[0].is_string() || (*input)[0].is_array());
  if (input->is_array() && input->empty()) {
    throw invalid_request(std::string(input_field) + " is an empty list", input_field);
  }
  if (many) {
    if (input->size() > kMaxEmbeddingInputs) {
      throw invalid_request(std::string(input_field) + " holds " + std::to_string(input->size()) +
                                " inputs, over the " + std::to_string(kMaxEmbeddingInputs) +
                                " one request may have",
                            input_field);
    }
    for (std::size_t i = 0; i < input->size(); ++i) {
      add_input(request, (*input)[i], tokenizer,
                std::string(input_field) + "[" + std::to_string(i) + "]");
      if (request.tokens() > kMaxEmbeddingTokens) {
        throw invalid_request(
            "the inputs hold over " + std::to_string(kMaxEmbeddingTokens) + " tokens", input_field);
      }
    }
  } else {
    add_input(request, *input, tokenizer, input_field);
  }
  if (const Json* format = field(body, "encoding_format")) {
    if (!format->is_string() || (*format != "float" && *format != "base64")) {
      throw invalid_request("encoding_format must be \"float\" or \"base64\"", "encoding_format");
    }
    request.base64 = *format == "base64";
  }
  if (field(body, "dimensions") != nullptr) {
    request.dimensions = static_cast<std::size_t>(integer_in(body, "dimensions", 1, 1 << 20, 1));
  }
  request.normalize = static_cast<int>(integer_in(body, "embd_normalize", -1, 64, 2));
  return request;
}

inline constexpr std::string_view kBase64Alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace detail

// POST /v1/embeddings (`input`) or llama-server's /embedding (`content`, or `input`).
// Throws ApiError (400) naming the field at fault.
inline EmbeddingRequest parse_embedding_request(std::string_view body, const Tokenizer& tokenizer,
                                                const char* input_field = "input") {
  return detail::reading_json(
      [&] { return detail::parse_embedding(detail::parse_body(body), tokenizer, input_field); });
}

// The vector's float32 bytes (little-endian, as every machine smol runs on stores them)
// in base64, as OpenAI's encoding_format "base64" sends them. A few lines of our own:
// neither nlohmann-json nor the standard library encodes base64.
inline std::string base64_floats(std::span<const float> values) {
  std::vector<unsigned char> bytes(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    const std::uint32_t chunk = (std::uint32_t{bytes[i]} << 16) |
                                (n > 1 ? std::uint32_t{bytes[i + 1]} << 8 : 0) |
                                (n > 2 ? std::uint32_t{bytes[i + 2]} : 0);
    for (std::size_t k = 0; k < 4; ++k) {
      out += k <= n ? detail::kBase64Alphabet[(chunk >> (18 - 6 * k)) & 63] : '=';
    }
  }
  return out;
}

// One pooled vector made what the request asks: its first `dimensions` values (refused
// past the model's width), scaled by its normalization.
inline std::vector<float> finish_embedding(std::vector<float> vector,
                                           const EmbeddingRequest& request) {
  if (request.dimensions) {
    if (*request.dimensions > vector.size()) {
      throw invalid_request("dimensions " + std::to_string(*request.dimensions) +
                                " is more than the model's " + std::to_string(vector.size()),
                            "dimensions");
    }
    vector.resize(*request.dimensions);
  }
  normalize_embedding(vector, request.normalize);
  return vector;
}

// OpenAI's reply: a list of {object: "embedding", index, embedding} and the usage.
inline Json embeddings_reply(const std::string& model, std::span<const std::vector<float>> vectors,
                             const EmbeddingRequest& request) {
  Json data = Json::array();
  for (std::size_t i = 0; i < vectors.size(); ++i) {
    data.push_back(
        {{"object", "embedding"},
         {"index", i},
         {"embedding", request.base64 ? Json(base64_floats(vectors[i])) : Json(vectors[i])}});
  }
  const std::size_t tokens = request.tokens();
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

}  // namespace smol::serve
