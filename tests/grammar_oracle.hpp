// The yardstick of the fast token masks (TokenMaskTable): the brute-force mask, each
// token's bytes run through a GrammarRecognizer of its own, one token at a time, with no
// trie, no memoized transitions and no cache. Shared by test_grammar and
// test_grammar_schema.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/grammar/grammar_matcher.hpp"
#include "smol/grammar/recognizer.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol::test {

inline std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& path) {
  return std::make_shared<const Tokenizer>(load_vocabulary(gguf::GgufFile::open(path)));
}

inline std::shared_ptr<const Tokenizer> fixture_tokenizer() {
  static const auto tokenizer = load_tokenizer(SMOL_FIXTURES_DIR "/tiny-smollm3-a.q4_k_m.gguf");
  return tokenizer;
}

// SmolLM2-135M-Instruct's vocabulary (49,152 tokens): the file the real_model CTest
// fixture extracts into the build tree, or $SMOL_REAL_MODEL. Null when absent, unless
// $SMOL_REQUIRE_REAL_MODEL is set (the CTest entry that depends on the fixture sets it).
inline std::shared_ptr<const Tokenizer> smollm2_tokenizer() {
  const char* env = std::getenv("SMOL_REAL_MODEL");
  const std::string path =
      env ? env : SMOL_BINARY_DIR "/tests/real-model/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) {
    if (std::getenv("SMOL_REQUIRE_REAL_MODEL")) FAIL("the real model is missing: " << path);
    MESSAGE("skipped: no SmolLM2 file at " << path << " (set SMOL_REAL_MODEL)");
    return nullptr;
  }
  static std::shared_ptr<const Tokenizer> tokenizer;
  if (!tokenizer) tokenizer = load_tokenizer(path);
  return tokenizer;
}

// The bytes a token writes as grammar text, or nullopt for a token that never matches
// text: this restates the policy of TokenTrie from the Tokenizer directly.
inline std::optional<std::string> text_piece(const Tokenizer& tokenizer, TokenId id) {
  const TokenType type = tokenizer.vocabulary().type_of(id);
  if (tokenizer.is_end_of_generation(id)) return std::nullopt;
  if (type != TokenType::normal && type != TokenType::byte && type != TokenType::user_defined) {
    return std::nullopt;
  }
  std::string piece = tokenizer.token_to_piece(id);
  if (piece.empty()) return std::nullopt;
  return piece;
}

// Token by token: allowed iff its bytes all advance the recognizer, or it ends
// generation and the text so far is a whole sentence of the grammar.
inline std::vector<bool> brute_force_mask(GrammarRecognizer& recognizer, const GrammarState& state,
                                          const Tokenizer& tokenizer) {
  std::vector<bool> allowed(tokenizer.size(), false);
  for (std::size_t i = 0; i < tokenizer.size(); ++i) {
    const auto id = static_cast<TokenId>(i);
    if (tokenizer.is_end_of_generation(id)) {
      allowed[i] = GrammarRecognizer::can_end(state);
      continue;
    }
    const std::optional<std::string> piece = text_piece(tokenizer, id);
    if (!piece) continue;
    GrammarState copy = state;
    allowed[i] = recognizer.advance(copy, *piece);
  }
  return allowed;
}

inline std::vector<bool> as_flags(const TokenSet& set, std::size_t n) {
  std::vector<bool> flags(n, false);
  set.for_each([&](TokenId id) { flags[static_cast<std::size_t>(id)] = true; });
  return flags;
}

// Compares the fast mask with the brute force at a state reached by `text`; reports the
// first few tokens where they differ.
inline void check_mask_at(TokenMaskTable& table, GrammarStateId state, GrammarRecognizer& oracle,
                          const GrammarState& oracle_state, const Tokenizer& tokenizer,
                          std::string_view text) {
  const std::vector<bool> fast = as_flags(*table.allowed(state), tokenizer.size());
  const std::vector<bool> slow = brute_force_mask(oracle, oracle_state, tokenizer);
  int reported = 0;
  std::size_t allowed = 0;
  for (std::size_t i = 0; i < fast.size(); ++i) {
    allowed += slow[i] ? 1 : 0;
    if (fast[i] != slow[i] && reported++ < 5) {
      FAIL_CHECK(
          "after \"" << text << "\": token " << i << " \""
                     << tokenizer.token_to_piece(static_cast<TokenId>(i), {.render_special = true})
                     << "\" fast=" << fast[i] << " brute force=" << slow[i]);
    }
  }
  // A state the grammar reached always allows something: more text, or the end.
  CHECK_MESSAGE(allowed > 0, "empty mask after \"" << text << "\"");
}

// Walks a grammar by tokens and checks the fast mask against the brute force at every
// step: first along `document` (the longest allowed token that is a prefix of what is
// left, so the walk reaches deep states of a real output), branching off at each step
// with one random allowed token, then `random_steps` random allowed tokens from the
// start. Returns how many states were checked.
inline int oracle_walk(const std::shared_ptr<const Grammar>& grammar,
                       const std::shared_ptr<const Tokenizer>& tokenizer, std::string_view document,
                       int random_steps, unsigned seed, int branch_every = 1) {
  auto trie = std::make_shared<const TokenTrie>(*tokenizer);
  auto table = std::make_shared<TokenMaskTable>(grammar, trie);
  GrammarRecognizer oracle(grammar);
  std::mt19937 random(seed);
  int checked = 0;

  const auto random_allowed = [&](const TokenSet& set, bool text_only) -> std::optional<TokenId> {
    std::vector<TokenId> ids = set.ids();
    if (text_only) std::erase_if(ids, [&](TokenId id) { return trie->is_end_of_generation(id); });
    if (ids.empty()) return std::nullopt;
    return ids[std::uniform_int_distribution<std::size_t>(0, ids.size() - 1)(random)];
  };

  // Along the document.
  GrammarMatcher matcher(table);
  GrammarState state = oracle.initial();
  std::string text;
  for (int step = 0; text.size() < document.size(); ++step) {
    check_mask_at(*table, matcher.state(), oracle, state, *tokenizer, text);
    ++checked;
    const std::shared_ptr<const TokenSet> allowed = matcher.allowed_tokens();
    if (step % branch_every == 0) {
      if (const auto t = random_allowed(*allowed, true)) {
        GrammarMatcher branch = matcher;
        GrammarState branch_state = state;
        const std::string piece(trie->piece(*t));
        REQUIRE(branch.accept(*t));
        REQUIRE(oracle.advance(branch_state, piece));
        check_mask_at(*table, branch.state(), oracle, branch_state, *tokenizer, text + piece);
        ++checked;
      }
    }
    std::optional<TokenId> best;
    std::size_t best_length = 0;
    allowed->for_each([&](TokenId id) {
      const std::string_view piece = trie->piece(id);
      if (piece.size() > best_length && document.substr(text.size()).starts_with(piece)) {
        best = id;
        best_length = piece.size();
      }
    });
    REQUIRE_MESSAGE(best, "the document is refused after \"" << text << "\"");
    REQUIRE(matcher.accept(*best));
    const std::string piece(trie->piece(*best));
    REQUIRE(oracle.advance(state, piece));
    text += piece;
  }
  CHECK_MESSAGE(matcher.can_end(), "the whole document is not a sentence of the grammar");
  check_mask_at(*table, matcher.state(), oracle, state, *tokenizer, text);
  ++checked;

  // Random tokens from the start.
  matcher.reset();
  state = oracle.initial();
  text.clear();
  for (int step = 0; step < random_steps; ++step) {
    const auto t = random_allowed(*matcher.allowed_tokens(), true);
    if (!t) break;
    const std::string piece(trie->piece(*t));
    REQUIRE(matcher.accept(*t));
    REQUIRE(oracle.advance(state, piece));
    text += piece;
    check_mask_at(*table, matcher.state(), oracle, state, *tokenizer, text);
    ++checked;
  }
  return checked;
}

}  // namespace smol::test
