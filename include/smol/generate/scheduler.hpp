// Scheduler: many generation requests served by one BatchTransformer, one batch per
// step (continuous batching).
//
// Each step runs one token for every request that is generating and, in the room left
// by a per-step token budget, chunks of the prompts still being read; so a long prompt
// is spread over several steps and never stalls the others' replies for seconds.
// Waiting requests are admitted while slots and KV pages allow (a request never fails
// for lack of room now; it waits); one that could never fit is refused at submit().
// When a running sequence needs a page and none is free, the newest one is preempted:
// its K/V dropped and its tokens so far queued again, to be recomputed (vLLM's
// recompute preemption), so a step always makes progress.
//
// Each request samples with its own settings and seed, stops on its own rules (end of
// generation, stop strings, max tokens, the context) and streams its own pieces. A
// finished sequence's K/V stays in the pool as a prompt cache, until its pages are
// needed: a request whose prompt starts with a cached or running sequence's tokens
// forks that prefix instead of computing it again (a shared system prompt is computed
// once, a chat's next turn reuses the previous turns); one whose prompt a running
// sequence is still reading waits for it to be read, then forks it. With a host cache
// (SchedulerOptions::host_cache_bytes), a cached sequence evicted for its pages is
// copied to host memory first, and copied back when a prompt shares more with it than
// with anything in the pool (host_prompt_cache.hpp).
//
// Speculative decoding per sequence (GenerationRequest::draft): a generating sequence's
// step may carry, after its next token, up to k tokens guessed by the scheduler's
// drafter (drafter.hpp: prompt lookup by default, ngram_drafter.hpp; or a draft model
// that advances every drafting sequence together, batch_model_drafter.hpp), with logits
// for every one, in the same forward pass as the other sequences' tokens. The rows are
// then read one by one, as plain steps would have read them (draft_verification.hpp:
// greedy keeps a guess exactly when it is the token chosen, sampling by the
// speculative-sampling rule); the first rejected guess gets the token chosen in its
// place, every guess kept is a step saved, and the K/V of the rejected positions is
// dropped from the pool. The draft length adapts per sequence (draft_length.hpp).
// Guesses only fill the room left in the step's token budget after every sequence's own
// token and the prompt chunks, and are dropped before any sequence is preempted for
// pages: drafting never slows or displaces another request. With a grammar, each row is
// masked by the grammar as it stands after the tokens kept before it, so a guess the
// grammar forbids is rejected like any wrong guess. The drafter hears when a sequence
// ends or is preempted (BatchDrafter::forget), so a draft model frees its K/V.
// Exactness needs the engine's batch invariance (BatchOptions::invariant, the default):
// a row's bits must not depend on how many tokens share its pass.
//
// Threads: one thread drives the engine (step(), run_until_idle()); any thread may call
// submit() and cancel(). The callbacks run on the engine thread, between forward
// passes: they must not block it for long (a server hands the pieces to the
// connection's thread through a queue).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/draft_length.hpp"
#include "smol/generate/draft_verification.hpp"
#include "smol/generate/drafter.hpp"
#include "smol/generate/generation_request.hpp"
#include "smol/generate/host_prompt_cache.hpp"
#include "smol/generate/ngram_drafter.hpp"
#include "smol/generate/reply_stream.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/stats.hpp"
#include "smol/generate/stop.hpp"
#include "smol/generate/token_constraints.hpp"
#include "smol/generate/token_logprobs.hpp"
#include "smol/model/batch_transformer.hpp"
#include "smol/model/session_file.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

struct SchedulerOptions {
  std::size_t max_sequences = 8;  // requests generating at once (llama-server's -np)
  std::size_t step_tokens = 512;  // tokens per forward pass, decode and prompt chunks
  std::size_t context = 0;        // the longest sequence; 0: the model's context
  // Host memory for cached prompts evicted from the pool (host_prompt_cache.hpp); 0: none.
  std::size_t host_cache_bytes = 0;
};

class Scheduler {
 public:
  // `drafter`: where the guesses of requests that draft come from; null: prompt lookup.
  Scheduler(BatchTransformer& engine, const Tokenizer& tokenizer, SchedulerOptions options = {},
            std::unique_ptr<BatchDrafter> drafter = nullptr)
      : engine_(&engine),
        tokenizer_(&tokenizer),
        options_(options),
        host_(options.host_cache_bytes),
        drafter_(drafter
                     ? std::move(drafter)
                     : std::make_unique<EachSequenceDrafter>(std::make_unique<NgramDrafter>())) {
    if (options_.context == 0 || options_.context > engine.max_sequence_length()) {
      options_.context = engine.max_sequence_length();
    }
    if (options_.max_sequences == 0) fail("scheduler: max_sequences must be at least 1");
    if (options_.step_tokens < options_.max_sequences) {
      fail("scheduler: ", options_.step_tokens, " tokens per step cannot serve ",
           options_.max_sequences, " sequences");
    }
    think_ = ThinkMarkers::of(tokenizer);
  }

  // Queues a request; thread-safe. Throws smol::Error when it can never run: an empty
  // prompt, or one that leaves no room to generate in the context or the whole pool.
  RequestId submit(GenerationRequest request) {
    if (request.prompt.empty()) fail("the prompt is empty");
    const std::size_t room = std::min(options_.context, engine_->pool().capacity());
    if (request.prompt.size() >= room) {
      fail("the prompt needs ", request.prompt.size(), " tokens but a sequence holds at most ",
           room, " (the context, or the KV pool)");
    }
    for (const TokenId token : request.prompt) {
      if (token < 0 || static_cast<std::size_t>(token) >= engine_->model().config().n_vocab) {
        fail("token id ", token, " is outside the vocabulary");
      }
    }
    std::lock_guard lock(mutex_);
    const RequestId id = next_id_++;
    incoming_.push_back(std::make_unique<Active>(id, std::move(request), think_));
    return id;
  }

  // Stops a request, waiting or running, at the next step; thread-safe. Its on_done
  // reports StopReason::cancelled with whatever it had generated.
  void cancel(RequestId id) {
    std::lock_guard lock(mutex_);
    cancelled_.insert(id);
  }

  // Ends every request, waiting or running, as cancelled; the engine thread's call (a
  // server that stops, a step that failed).
  void cancel_all() {
    take_incoming();
    {
      std::lock_guard lock(mutex_);
      cancelled_.clear();
    }
    for (auto& a : waiting_) finish(*a, StopReason::cancelled, /*keep=*/false);
    for (auto& a : running_) finish(*a, StopReason::cancelled, /*keep=*/false);
    waiting_.clear();
    running_.clear();
  }

  // Runs one step; false when there was nothing to do.
  bool step() {
    take_incoming();
    apply_cancels();
    admit();
    std::vector<BatchEntry> batch = build_batch();
    if (batch.empty()) return false;
    const auto started = Clock::now();
    const std::span<const float> logits = engine_->forward(batch);
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    after_forward(batch, logits, seconds);
    return true;
  }

  // Steps until every request submitted so far has finished.
  void run_until_idle() {
    while (step()) {
    }
  }

  // The engine thread's view (not thread-safe; EngineThread publishes them for other
  // threads): requests waiting for a slot, requests in slots, sequences cached.
  std::size_t waiting() const {
    std::lock_guard lock(mutex_);  // incoming_ is shared; waiting_ is the engine's own
    return waiting_.size() + incoming_.size();
  }
  std::size_t running() const { return running_.size(); }
  // The host cache's bytes and entries (the engine thread's view, as above).
  const HostPromptCache& host_cache() const { return host_; }

  // The cached sequences as llama-server's slots show theirs (a server's /slots; the
  // engine thread's): `index` 0 is the most recently used. Each is saved as a session
  // file's bytes (session_file.hpp, `fingerprint` the model's and the pool's), restored
  // from one as the most recently used, or erased. Out of range is a smol::Error.
  std::span<const TokenId> cached_tokens(std::size_t index) const { return cached(index).tokens; }
  std::vector<std::byte> save_cached(std::size_t index,
                                     const SessionFingerprint& fingerprint) const {
    const Cached& c = cached(index);
    return encode_pool_session(engine_->pool(), c.sequence, fingerprint, c.tokens);
  }
  // Throws KvPoolFull, changing nothing, when running sequences hold the pages it needs.
  std::size_t restore_cached(const SessionImage& image, const SessionFingerprint& fingerprint,
                             std::string_view name) {
    check_fingerprint(image.fingerprint, fingerprint, name);
    const std::size_t n = image.tokens.size();
    if (n >= std::min(options_.context, engine_->pool().capacity())) {
      fail(name, ": holds ", n, " tokens, more than a sequence here holds (",
           std::min(options_.context, engine_->pool().capacity()), ")");
    }
    make_room(KvPool::pages_for(n));
    const SequenceId sequence = restore_pool_session(image, engine_->pool(), fingerprint, name);
    cache_.push_back({sequence, image.tokens});
    return n;
  }
  std::size_t erase_cached(std::size_t index) {
    const Cached& c = cached(index);
    const std::size_t n = c.tokens.size();
    engine_->pool().remove(c.sequence);
    cache_.erase(cache_.end() - 1 - static_cast<std::ptrdiff_t>(index));
    return n;
  }
  std::size_t cached_sequences() const { return cache_.size(); }
  // Sequences preempted so far: their K/V dropped for want of pages, to be recomputed.
  std::size_t preemptions() const { return preemptions_; }

 private:
  using Clock = std::chrono::steady_clock;

  // A request and, once admitted, its sequence. `tokens` is the prompt and then every
  // generated token; the pool holds the K/V of the first `evaluated` of them.
  struct Active {
    Active(RequestId id_, GenerationRequest r, ThinkMarkers think)
        : id(id_),
          request(std::move(r)),
          tokens(request.prompt),
          sampler(request.sampling),
          constraints(request.ignore_eos, request.grammar, request.grammar_trigger, think,
                      think.open_at_end(request.prompt)) {
      if (request.draft) draft_length.emplace(*request.draft);
    }
    RequestId id;
    GenerationRequest request;
    std::vector<TokenId> tokens;
    std::size_t evaluated = 0;
    std::optional<SequenceId> sequence;
    Sampler sampler;
    TokenConstraints constraints;  // ignore_eos and the grammar: its own matcher
    std::optional<ReplyStream> stream;
    GenerationResult result;
    bool prompt_accepted = false;  // the prompt is in the sampler's penalty history
    Clock::time_point submitted = Clock::now(), first_token_at{};
    double prefill_seconds = 0;
    std::size_t prompt_evaluated = 0;
    std::optional<DraftLength> draft_length;  // with request.draft
    std::vector<TokenId> draft;               // the guesses this step verifies
  };

  // Whether the sequence is generating: its last token sampled, not yet evaluated.
  static bool decoding(const Active& a) {
    return a.evaluated + 1 == a.tokens.size() && !a.result.tokens.empty();
  }

  // A finished sequence kept for its prefix.
  struct Cached {
    SequenceId sequence;
    std::vector<TokenId> tokens;  // those whose K/V it holds
  };

  void take_incoming() {
    std::lock_guard lock(mutex_);
    for (auto& request : incoming_) waiting_.push_back(std::move(request));
    incoming_.clear();
  }

  void apply_cancels() {
    std::unordered_set<RequestId> ids;
    {
      std::lock_guard lock(mutex_);
      ids.swap(cancelled_);
    }
    if (ids.empty()) return;
    // Waiting or running alike: report the end, then drop it from its list.
    const auto drop_cancelled = [&](auto& requests) {
      std::erase_if(requests, [&](const std::unique_ptr<Active>& a) {
        if (!ids.contains(a->id)) return false;
        finish(*a, StopReason::cancelled, /*keep=*/false);
        return true;
      });
    };
    drop_cancelled(waiting_);
    drop_cancelled(running_);
  }

  // Moves waiting requests into slots while the pool can hold their prompts.
  void admit() {
    KvPool& pool = engine_->pool();
    while (!waiting_.empty() && running_.size() < options_.max_sequences) {
      Active& next = *waiting_.front();
      restore_from_host(next.tokens);
      // The longest prefix of its tokens that a live or cached sequence holds; at least
      // one token is left to evaluate (its logits pick the first reply token).
      std::size_t best = 0;
      std::optional<SequenceId> source;
      const auto consider = [&](SequenceId sequence, std::span<const TokenId> held) {
        const std::size_t n = std::min(common_prefix(held, next.tokens), next.tokens.size() - 1);
        if (n > best) {
          best = n;
          source = sequence;
        }
      };
      for (const Cached& c : cache_) consider(c.sequence, c.tokens);
      for (const auto& r : running_) {
        consider(*r->sequence, std::span(r->tokens).first(r->evaluated));
      }
      // A running sequence still reading a prompt that shares more with this one than
      // any K/V held so far: wait until it has read it, then fork it. Requests sent
      // together with one prompt (the n choices of a request, a shared system prompt)
      // compute it once rather than side by side. The reader is running, so it gets
      // there within a few steps.
      const bool prefix_coming = std::any_of(running_.begin(), running_.end(), [&](const auto& r) {
        return std::min(common_prefix(r->tokens, next.tokens), next.tokens.size() - 1) > best;
      });
      if (prefix_coming) break;
      // Pages for its whole prompt, plus one for its first reply tokens.
      const auto pages_needed = [&](std::size_t reused) {
        return KvPool::pages_for(next.tokens.size() + 1) - KvPool::pages_for(reused) +
               (reused % kKvPagePositions != 0);
      };
      // The source of the prefix is the one cached sequence that must not make room.
      if (!make_room(pages_needed(best), source)) {
        // Keeping it leaves too little room: the prefix is given up, so that the cache
        // can be emptied for this request (else, with nothing running, it would wait
        // for pages that no one will free).
        const bool source_cached =
            source && std::any_of(cache_.begin(), cache_.end(),
                                  [&](const Cached& c) { return c.sequence == *source; });
        if (!source_cached || !make_room(pages_needed(0))) break;  // wait for running ones
        best = 0;
        source.reset();
      }
      next.sequence = source ? pool.fork(*source, best) : pool.add();
      if (source) refresh(*source);
      next.evaluated = best;
      if (next.result.stats.reused_tokens == 0) next.result.stats.reused_tokens = best;
      running_.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
    }
  }

  // Frees cached sequences, least recently used first, until `pages` are free; false if
  // they can't be. `keep` (a prefix about to be forked) is never freed.
  bool make_room(std::size_t pages, std::optional<SequenceId> keep = std::nullopt) {
    KvPool& pool = engine_->pool();
    for (auto it = cache_.begin(); pool.free_pages() < pages && it != cache_.end();) {
      if (keep && it->sequence == *keep) {
        ++it;
        continue;
      }
      if (host_.enabled()) host_.keep({std::move(it->tokens), pool.copy_out(it->sequence)});
      pool.remove(it->sequence);
      it = cache_.erase(it);
    }
    return pool.free_pages() >= pages;
  }

  // Copies back from the host cache the entry that shares more of `prompt` than any
  // sequence in the pool (and a page at least: less is computed as fast as copied), as a
  // cached sequence that admit() then forks. When the pool cannot make room for it, it
  // goes back to the host cache.
  void restore_from_host(std::span<const TokenId> prompt) {
    if (!host_.enabled() || host_.size() == 0 || prompt.size() < 2) return;
    std::size_t held = kKvPagePositions - 1;
    for (const Cached& c : cache_) held = std::max(held, common_prefix(c.tokens, prompt));
    for (const auto& r : running_) {
      held = std::max(held, common_prefix(std::span(r->tokens).first(r->evaluated), prompt));
    }
    std::optional<HostPromptCache::Entry> entry = host_.take_longest(prompt, held);
    if (!entry) return;
    KvPool& pool = engine_->pool();
    if (!make_room(KvPool::pages_for(entry->tokens.size()))) {
      host_.keep(std::move(*entry));
      return;
    }
    const SequenceId sequence = pool.copy_in(entry->tokens.size(), entry->pages);
    cache_.push_back({sequence, std::move(entry->tokens)});
  }

  const Cached& cached(std::size_t index) const {
    if (index >= cache_.size()) {
      fail("no cached sequence ", index, " (", cache_.size(), " are cached)");
    }
    return cache_[cache_.size() - 1 - index];
  }

  // A cached sequence whose prefix was just used moves to the back: freed last.
  void refresh(SequenceId sequence) {
    const auto it = std::find_if(cache_.begin(), cache_.end(),
                                 [&](const Cached& c) { return c.sequence == sequence; });
    if (it == cache_.end()) return;  // a running sequence, not a cached one
    Cached used = std::move(*it);
    cache_.erase(it);
    cache_.push_back(std::move(used));
  }

  // One token per generating sequence first, then prompt chunks in the room left, then
  // drafted guesses in what is still left.
  std::vector<BatchEntry> build_batch() {
    propose_drafts();
    for (;;) {
      std::vector<BatchEntry> batch;
      std::size_t budget = options_.step_tokens;
      std::vector<std::size_t> count(running_.size(), 0);
      for (std::size_t i = 0; i < running_.size(); ++i) {
        if (running_[i]->evaluated + 1 == running_[i]->tokens.size()) count[i] = 1;
        budget -= count[i];
      }
      prompt_in_step_ = false;
      for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
        const Active& r = *running_[i];
        if (r.evaluated + 1 < r.tokens.size()) {
          count[i] = std::min(budget, r.tokens.size() - r.evaluated);
          budget -= count[i];
          prompt_in_step_ = true;
        }
      }
      bool drafts = false;
      for (std::size_t i = 0; i < running_.size(); ++i) {
        Active& r = *running_[i];
        if (r.draft.empty()) continue;
        r.draft.resize(std::min(r.draft.size(), budget));
        if (r.draft.size() < r.draft_length->settings().min) r.draft.clear();
        budget -= r.draft.size();
        drafts = drafts || !r.draft.empty();
      }
      for (std::size_t i = 0; i < running_.size(); ++i) {
        if (count[i] > 0) add(batch, *running_[i], count[i]);
      }
      if (batch.empty()) return batch;
      if (make_room(engine_->pages_needed(batch))) return batch;
      if (drafts) {
        // Guesses step aside before anyone is preempted for their pages.
        for (auto& r : running_) r->draft.clear();
        continue;
      }
      // Not even the cache's pages suffice: preempt the newest sequence and retry.
      preempt(running_.back());
      running_.pop_back();
    }
  }

  // Each drafting sequence's guesses for this step, as many as its draft length, its
  // max_tokens and the context allow, asked of the drafter together; build_batch cuts
  // them to the room left.
  void propose_drafts() {
    const auto started = Clock::now();
    const std::size_t limit = std::min(options_.context, engine_->pool().capacity());
    std::vector<BatchDrafter::Ask> asks;
    std::vector<std::size_t> wants;
    for (auto& r : running_) {
      r->draft.clear();
      if (!r->draft_length || !decoding(*r)) continue;
      // Positions up to tokens.size() - 1 + k must fit; a pass yields k + 1 tokens.
      const std::size_t room = limit > r->tokens.size() ? limit - r->tokens.size() : 0;
      const std::size_t generated = r->result.stats.generated_tokens;
      const std::size_t left = r->request.max_tokens == 0 ? std::numeric_limits<std::size_t>::max()
                               : r->request.max_tokens > generated + 1
                                   ? r->request.max_tokens - generated - 1
                                   : 0;
      const std::size_t wanted = std::min({r->draft_length->next(), room, left});
      if (wanted == 0 || wanted < r->draft_length->settings().min) continue;
      asks.push_back({r->id, r->tokens, wanted, &r->draft});
      wants.push_back(wanted);
    }
    drafting_seconds_ = 0;
    if (asks.empty()) return;
    drafter_->draft(asks);
    const std::size_t vocab = engine_->model().config().n_vocab;
    for (std::size_t i = 0; i < asks.size(); ++i) {
      std::vector<TokenId>& draft = *asks[i].draft;
      if (draft.size() > wants[i]) draft.resize(wants[i]);
      // A guess the model cannot take (a draft model's padding row) ends the draft.
      const auto outside = std::find_if(draft.begin(), draft.end(), [&](TokenId t) {
        return t < 0 || static_cast<std::size_t>(t) >= vocab;
      });
      draft.erase(outside, draft.end());
    }
    drafting_seconds_ = seconds_since(started);
  }

  // The sequence's next `n` tokens, and after its last one its guesses; every token
  // that ends the known ones asks for logits, as does every guess.
  void add(std::vector<BatchEntry>& batch, const Active& a, std::size_t n) {
    for (std::size_t i = a.evaluated; i < a.evaluated + n; ++i) {
      batch.push_back({.sequence = *a.sequence,
                       .token = a.tokens[i],
                       .position = i,
                       .logits = i + 1 == a.tokens.size()});
    }
    for (std::size_t i = 0; i < a.draft.size(); ++i) {
      batch.push_back({.sequence = *a.sequence,
                       .token = a.draft[i],
                       .position = a.tokens.size() + i,
                       .logits = true});
    }
  }

  void preempt(std::unique_ptr<Active>& victim) {
    ++preemptions_;
    drafter_->forget(victim->id);
    engine_->pool().remove(*victim->sequence);
    victim->sequence.reset();
    victim->evaluated = 0;
    victim->draft.clear();
    waiting_.push_front(std::move(victim));
  }

  void after_forward(std::span<const BatchEntry> batch, std::span<const float> logits,
                     double seconds) {
    const std::size_t vocab = engine_->model().config().n_vocab;
    // A step that read prompts is no yardstick for the draft lengths' timing rule.
    const double timed = prompt_in_step_ ? 0.0 : seconds;
    std::vector<RequestId> done;
    for (auto& r : running_) {
      // Its entries, and its first logits row: rows come in the order of the entries
      // asking.
      std::size_t n = 0, first_row = 0, rows = 0, rows_before = 0;
      for (const BatchEntry& e : batch) {
        if (e.sequence == *r->sequence) {
          ++n;
          if (e.logits && rows++ == 0) first_row = rows_before;
        }
        rows_before += e.logits ? 1 : 0;
      }
      if (n == 0) continue;
      const std::size_t drafted = r->draft.size();
      std::optional<StopReason> stop;
      if (drafted == 0) {
        const bool prompt_part = r->evaluated + 1 < r->tokens.size() || r->result.tokens.empty();
        r->evaluated += n;
        if (prompt_part) {
          r->prefill_seconds += seconds;
          r->prompt_evaluated += n;
        } else if (r->draft_length && timed > 0) {
          r->draft_length->record_step(timed);
        }
        if (r->evaluated != r->tokens.size()) continue;  // a prompt chunk without logits
        stop = next_token(*r, logits.subspan(first_row * vocab, vocab));
      } else {
        // A pass's time includes drafting it (a draft model's passes, a lookup's
        // microseconds): what the pause rule weighs is the whole cost of speculating.
        stop = verify(*r, logits.subspan(first_row * vocab, (drafted + 1) * vocab),
                      timed > 0 ? timed + drafting_seconds_ : 0.0);
      }
      if (stop) {
        finish(*r, *stop, /*keep=*/true);
        done.push_back(r->id);
      }
    }
    std::erase_if(running_, [&](const std::unique_ptr<Active>& r) {
      return std::find(done.begin(), done.end(), r->id) != done.end();
    });
  }

  // A step of a sequence's token and k guesses: `rows` holds k + 1 rows of logits, row i
  // the one after guess i (row 0 after its own token). Goes along them while the guesses
  // are kept; the positions after the last kept one are dropped.
  std::optional<StopReason> verify(Active& a, std::span<const float> rows, double seconds) {
    const std::size_t vocab = engine_->model().config().n_vocab;
    const std::size_t drafted = a.draft.size();
    a.evaluated += 1;  // its own token
    std::size_t accepted = 0;
    std::optional<StopReason> stop;
    for (std::size_t i = 0; i <= drafted; ++i) {
      bool kept = false;
      // The guess for this row; none for the row after the last guess (a bonus token).
      const TokenId* guess = i < drafted ? &a.draft[i] : nullptr;
      stop = next_token(a, rows.subspan(i * vocab, vocab), guess, &kept);
      if (kept) ++accepted;
      if (stop || !kept) break;
      ++a.evaluated;  // the kept guess's K/V was computed after the tokens kept before it
    }
    GenerationStats& stats = a.result.stats;
    stats.drafted_tokens += drafted;
    stats.accepted_draft_tokens += accepted;
    ++stats.verify_passes;
    a.draft_length->record(drafted, accepted, seconds);
    a.draft.clear();
    // The rejected guesses' positions (finish() cuts a finished sequence itself).
    if (!stop) engine_->pool().truncate(*a.sequence, a.evaluated);
    return stop;
  }

  // Samples the request's next token and streams it; the stop reason when it ends.
  // With `guess`, the token is chosen against it (draft_verification.hpp) and `kept`
  // says whether the guess was.
  std::optional<StopReason> next_token(Active& a, std::span<const float> logits,
                                       const TokenId* guess = nullptr, bool* kept = nullptr) {
    if (!a.prompt_accepted) {
      for (const TokenId t : a.request.prompt) a.sampler.accept(t);
      a.prompt_accepted = true;
      a.stream.emplace(
          *tokenizer_, think_, a.request.stop_strings, a.request.on_piece,
          think_.open_at_end(a.request.prompt) ? PieceKind::thinking : PieceKind::answer,
          a.request.spelled_tokens);
    }
    const ConstrainedRow constrained =
        a.constraints.mask(logits.first(std::min(logits.size(), tokenizer_->size())), *tokenizer_);
    // Nothing may follow: the grammar is complete (and ignore_eos forbids ending), stuck,
    // or over its budget.
    if (constrained.stop) return constrained.stop;
    const std::span<const float> row = constrained.logits;
    // After the sampler's steps: the distribution it is about to draw from (computing it
    // draws nothing, so the token is the same either way).
    std::vector<Sampler::TokenChance> chances;
    if (a.request.logprobs && a.request.post_sampling_probs) {
      const auto distribution = a.sampler.distribution(row);
      chances.assign(distribution.begin(), distribution.end());
    }
    TokenId token;
    if (guess) {
      const DraftVerdict verdict = verify_draft_token(a.sampler, row, *guess);
      token = verdict.token;
      *kept = verdict.accepted;
    } else {
      token = a.sampler.sample(row);
    }
    a.sampler.accept(token);
    if (const std::optional<StopReason> refused = a.constraints.accept(token)) return refused;
    a.result.tokens.push_back(token);
    // The raw row, before the grammar's mask and the sampler (token_logprobs.hpp).
    if (a.request.logprobs && !tokenizer_->is_end_of_generation(token)) {
      a.result.logprobs.push_back(
          a.request.post_sampling_probs
              ? post_sampling_logprobs(chances, token, *a.request.logprobs, *tokenizer_)
              : token_logprobs(logits, token, *a.request.logprobs, *tokenizer_));
      if (a.request.on_logprob) a.request.on_logprob(a.result.logprobs.back());
    }
    GenerationStats& stats = a.result.stats;
    if (++stats.generated_tokens == 1) {
      a.first_token_at = Clock::now();
      stats.time_to_first_token = seconds_since(a.submitted);
    }
    if (tokenizer_->is_end_of_generation(token)) return StopReason::end_of_generation;
    if (a.stream->take(token)) return StopReason::stop_string;
    if (a.request.max_tokens != 0 && stats.generated_tokens >= a.request.max_tokens) {
      return StopReason::max_tokens;
    }
    a.tokens.push_back(token);
    // A sequence may not outgrow the pool either: alone, it could then never run.
    if (a.tokens.size() >= std::min(options_.context, engine_->pool().capacity())) {
      return StopReason::context_full;
    }
    return std::nullopt;
  }

  // Reports the end and frees the slot; `keep`: the sequence stays as a prompt cache.
  void finish(Active& a, StopReason stop, bool keep) {
    drafter_->forget(a.id);
    GenerationResult& result = a.result;
    result.stop = stop;
    if (a.stream) {
      a.stream->finish();
      result.text = a.stream->text();
      result.thinking = a.stream->thinking();
      result.answer = a.stream->answer();
      result.stop_string = a.stream->stop_string();
    }
    result.stats.prompt_tokens = a.prompt_evaluated;
    result.stats.prefill_seconds = a.prefill_seconds;
    if (result.stats.generated_tokens > 0) {
      result.stats.decode_seconds = seconds_since(a.first_token_at);
    }
    if (a.sequence) {
      KvPool& pool = engine_->pool();
      if (keep && a.evaluated > 0) {
        pool.truncate(*a.sequence, a.evaluated);
        cache_.push_back(
            {*a.sequence,
             std::vector<TokenId>(a.tokens.begin(),
                                  a.tokens.begin() + static_cast<std::ptrdiff_t>(a.evaluated))});
      } else {
        pool.remove(*a.sequence);
      }
      a.sequence.reset();
    }
    if (a.request.on_done) a.request.on_done(result);
  }

  static std::size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
    const auto mismatch = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    return static_cast<std::size_t>(mismatch.first - a.begin());
  }

  static double seconds_since(Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  }

  BatchTransformer* engine_;
  const Tokenizer* tokenizer_;
  SchedulerOptions options_;
  HostPromptCache host_;  // the engine thread's own
  ThinkMarkers think_;
  std::unique_ptr<BatchDrafter> drafter_;
  double drafting_seconds_ = 0;  // the current step's drafting
  bool prompt_in_step_ = false;  // the current step's batch reads prompt chunks
  std::size_t preemptions_ = 0;

  mutable std::mutex mutex_;  // guards the three members below
  RequestId next_id_ = 1;
  std::vector<std::unique_ptr<Active>> incoming_;
  std::unordered_set<RequestId> cancelled_;

  // The engine thread's own.
  std::deque<std::unique_ptr<Active>> waiting_;
  std::vector<std::unique_ptr<Active>> running_;
  std::deque<Cached> cache_;
};

}  // namespace smol
