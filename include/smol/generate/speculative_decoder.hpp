// SpeculativeDecoder: decoding several tokens per forward pass when a drafter's guesses
// are right, with exactly the output of plain decoding.
//
// Plain decoding evaluates each sampled token alone to get the logits of the next. Here,
// after a token t is sampled, the drafter guesses d1..dk and the model evaluates
// [t, d1, ..., dk] at positions n..n+k in one pass, with the logits of every one: row i
// is what one-token steps would have given after d_i, had d1..d_i been sampled. The reply
// then goes on row by row: d_{i+1} is checked against row i (draft_verification.hpp);
// while guesses are accepted they cost no further pass, and the first rejected position
// gets its own token, which starts the next pass. When all k are accepted, row k gives a
// further token for free. A pass thus yields between one and k + 1 tokens.
//
// Rolling back a rejection costs nothing: the KV of the rejected guesses stays in the
// source at positions the cache does not count (PromptCache::extend_ahead), and the next
// pass starts at the first of them, which makes the source forget them (LogitsSource's
// contract).
//
// Exactness needs the pass's rows to be the bits one-token steps give. smol's decode
// kernels (matvec) sum in another order than its multi-token tiles, which can flip a Q8_K
// rounding step, so the target must run one token on the tiles too
// (TransformerOptions::one_token = OneToken::tiles, batch-invariant: a token's bits do not
// depend on how many share its pass); then greedy output equals plain decoding token for
// token, and sampling keeps plain decoding's distribution. (Where a matrix's matvec
// rounds like its tiles, AMX on the sixteen-row copies (32-value types, IQ4_XS), one token
// takes matvec anyway, and a pass of up to 16 tokens the same kernel over its tokens:
// ops/matmul.hpp's matvec_rounds_like_tiles and kRows16FewTokens.)
//
// ReplyGenerator drives it: choose() in place of Sampler::sample, advance() in place of
// PromptCache::extend.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/draft_length.hpp"
#include "smol/generate/draft_verification.hpp"
#include "smol/generate/drafter.hpp"
#include "smol/generate/logits_source.hpp"
#include "smol/generate/prompt_cache.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/stats.hpp"

namespace smol {

class SpeculativeDecoder {
 public:
  explicit SpeculativeDecoder(std::unique_ptr<Drafter> drafter, DraftLengthSettings settings = {})
      : drafter_(std::move(drafter)), length_(settings) {
    if (!drafter_) fail("speculative decoding needs a drafter");
  }

  const DraftLength& draft_length() const noexcept { return length_; }

  // A reply starts: its first token comes from the prompt's logits, no guess pending.
  void begin_reply() {
    draft_.clear();
    row_ = 0;
    in_pass_ = accepted_ = false;
  }

  // Chooses the token for the current row of logits, as Sampler::sample would: against
  // the guess made for this position, if there is one. Call sampler.accept() after it.
  TokenId choose(Sampler& sampler, std::span<const float> logits) {
    accepted_ = false;
    if (in_pass_ && row_ < draft_.size()) {
      const DraftVerdict verdict = verify_draft_token(sampler, logits, draft_[row_]);
      accepted_ = verdict.accepted;
      if (!accepted_) end_pass(row_);
      return verdict.token;
    }
    if (in_pass_) end_pass(draft_.size());  // every guess accepted: this row is a bonus
    return sampler.sample(logits);
  }

  // `token`, just chosen, continues the reply: returns the logits that choose the next
  // one, from the current pass when `token` was an accepted guess, else from a new pass
  // of `token` and the drafter's guesses after it (or `token` alone when there are
  // none). `budget`: tokens the reply may still generate after `token` (its
  // max_tokens), so that no guess is drafted past it. Counts drafts in `stats`.
  std::span<const float> advance(LogitsSource& source, PromptCache& cache, TokenId token,
                                 std::size_t budget, GenerationStats& stats) {
    if (accepted_) {
      cache.confirm(token);
      ++stats.accepted_draft_tokens;
      return row(++row_);
    }
    // A step's time includes the drafting (a draft model's steps, an n-gram lookup's
    // microseconds): what the pause rule weighs is the whole cost of speculating.
    const auto started = Clock::now();
    draft_.clear();
    row_ = 0;
    in_pass_ = false;
    // Positions n..n+k must fit the context, and k + 1 tokens at most are wanted.
    const std::size_t room =
        source.context_length() - std::min(source.context_length(), cache.size() + 1);
    const std::size_t wanted = std::min({length_.next(), budget > 0 ? budget - 1 : 0, room});
    if (wanted > 0 && wanted >= length_.settings().min) {
      history_.assign(cache.tokens().begin(), cache.tokens().end());
      history_.push_back(token);
      drafter_->draft(history_, wanted, draft_);
      if (draft_.size() > wanted) draft_.resize(wanted);
      if (draft_.size() < length_.settings().min) draft_.clear();
    }
    if (draft_.empty()) {
      const std::span<const float> logits = cache.extend(source, token);
      length_.record_step(seconds_since(started));
      return logits;
    }

    pass_.assign(1, token);
    pass_.insert(pass_.end(), draft_.begin(), draft_.end());
    rows_ = cache.extend_ahead(source, pass_);
    pass_seconds_ = seconds_since(started);
    row_width_ = rows_.size() / pass_.size();
    in_pass_ = true;
    stats.drafted_tokens += draft_.size();
    ++stats.verify_passes;
    return row(0);
  }

 private:
  std::span<const float> row(std::size_t i) const {
    return rows_.subspan(i * row_width_, row_width_);
  }

  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  }

  // The pass is judged: `accepted` of its guesses kept.
  void end_pass(std::size_t accepted) {
    length_.record(draft_.size(), accepted, pass_seconds_);
    in_pass_ = false;
  }

  std::unique_ptr<Drafter> drafter_;
  DraftLength length_;
  std::vector<TokenId> draft_;    // the current pass's guesses d1..dk
  std::vector<TokenId> pass_;     // [t, d1, ..., dk]
  std::vector<TokenId> history_;  // the drafter's view: the cache's tokens and t
  std::span<const float> rows_;   // the pass's logits, k + 1 rows; valid until the next pass
  std::size_t row_width_ = 0;
  double pass_seconds_ = 0;  // the current pass's forward time
  std::size_t row_ = 0;      // the row that chooses the next token
  bool in_pass_ = false;     // a pass's guesses are being judged
  bool accepted_ = false;    // choose() kept the guess for its row
};

}  // namespace smol
