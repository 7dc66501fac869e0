// DraftLength: how many tokens to draft next, learned from how many were accepted and
// what the passes cost.
//
// A verification pass of 1 + k tokens costs more than a one-token step (on a CPU much
// less than k + 1 steps, since the weights are read once, yet more: each token still does
// its own arithmetic and attention). Accepted guesses save whole steps; rejected ones only
// cost their share of the pass. So the length is the one that yields the most tokens per
// second, by what the recent passes showed:
//   - what a pass yields: its own token, plus each guess kept with all before it. The
//     chance that guess j is kept once guesses 1..j-1 were is counted per position over
//     the window's passes (a pass that kept j-1 of j or more guesses was a rejection at
//     j; one that kept fewer never tested j), drawn towards the window's overall keep
//     rate where a position has few passes (so lengths not tried yet are judged by it);
//   - what a pass costs, in one-token steps: a + b k, fitted to the timed passes and to
//     the one-token step itself (a pass of no guesses). A long pass costs several times
//     the steps of a short one (bench/HISTORY.md, "The draft length from a cost model"):
//     doubling up to --draft-max after every draft kept whole, the rule before this one,
//     drafted at the dear end.
// The lengths weighed are those whose passes fill whole tiles: k + 1 tokens a power of
// two (1, 3, 7, 15 guesses), or --draft-max itself. The prefill kernels take a pass's
// tokens in tiles of 16, 8, 4, 2 and 1 (simd/tile_loop.hpp), so a pass of 3 tokens costs
// a 2-token pass and a step (as much as 4 tokens), and the straight cost line, blind to
// that, chose 5 or 6 guesses where 7 cost less, and the grounded task of smol-bench
// --spec-type gained less from drafting for it (bench/HISTORY.md, "AVX2: IQ4_XS tiles of
// four tokens, and drafts that fill whole tiles"). The length grows at most to 2 f + 1, f
// the farthest position the window has tested, so a probe into the untested costs little.
// Until passes have been timed, the length starts at 3, grows to 2 k + 1 after a draft of
// k kept whole, and is one more than the kept guesses after a rejection.
// When the caller times its work (record's seconds), the timed passes say whether
// drafting pays: once kMinTimedPasses of them (or the passes of the last `window` drafted
// tokens) are in, does any length yield more tokens per step than a plain step's one?
// (Not "were the last passes slower than plain steps": that judges their length, which
// the model shortens instead.) From kMinEarlyPasses on, a no is a verdict already if even
// one more kept guess at every position would not make it a yes. What a guess costs
// differs tenfold between machines, models and kernels, so a fixed acceptance threshold
// cannot say it; untimed, the rule is the acceptance rate over the passes of the last
// `window` drafted tokens, against `min_acceptance`.
// Drafting that does not pay stops for `pause` generated tokens, then tries one pass, a
// probe, so open-ended text that never repeats runs as plain decoding. The window that
// called the pause is kept: a probe that does not pay on its own (by its time; untimed,
// keeping none or fewer than min_acceptance of its guesses) pauses again, for twice as
// long, up to `max_pause`; one that pays says the text has changed, and the window starts
// afresh. (Starting afresh after every pause cost the eight passes a verdict needs, each
// time, and kept open text well below plain decoding's speed: bench/HISTORY.md, "AVX2:
// two- and four-token tiles, and a pause that ends in one probe".)
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <vector>

namespace smol {

struct DraftLengthSettings {
  std::size_t max = 16;  // --draft-max (llama.cpp's default)
  // --draft-min: a shorter draft is not worth its pass and is dropped (llama.cpp's
  // meaning; its default 0 verifies any draft).
  std::size_t min = 0;
  std::size_t window = 48;      // drafted tokens the passes are judged over
  double min_acceptance = 0.2;  // below it, drafting pauses
  std::size_t pause = 16;       // generated tokens without drafting, at first (0: never pauses)
  std::size_t max_pause = 256;
};

class DraftLength {
 public:
  explicit DraftLength(DraftLengthSettings settings = {})
      : settings_(settings),
        length_(std::min(settings.max, kFirstLength)),
        pause_(settings.pause) {}

  const DraftLengthSettings& settings() const noexcept { return settings_; }

  // Tokens to ask the drafter for at this step; 0 while drafting is paused, and before
  // two one-token steps have been timed (record_step). Each call is one generated
  // token's step, which is what a pause counts.
  std::size_t next() {
    // The first steps run plain, so that passes have a step's time to be held to.
    if (step_seconds_ <= 0) return 0;
    if (paused_for_ > 0) {
      probing_ = --paused_for_ == 0;
      return 0;
    }
    return length_;
  }

  // A one-token step (no draft) took `seconds`: the yardstick a pass is held to. The
  // first is not: right after the prompt it runs cold, markedly slower than the next ones
  // (bench/HISTORY.md, "Figures moved from code comments"), and a yardstick too long makes
  // every pass look cheap.
  void record_step(double seconds) {
    if (!first_step_timed_) {
      first_step_timed_ = true;
      return;
    }
    step_seconds_ = step_seconds_ > 0 ? 0.75 * step_seconds_ + 0.25 * seconds : seconds;
  }

  // A verification ended: `accepted` of the `drafted` guesses were kept, and the pass took
  // `seconds` (0: not timed).
  void record(std::size_t drafted, std::size_t accepted, double seconds = 0) {
    if (drafted == 0) return;
    // What plain steps would have taken for the pass's tokens: the kept guesses and the
    // token of its own.
    const bool timed = seconds > 0 && step_seconds_ > 0;
    const double steps = timed ? seconds / step_seconds_ : 0;
    if (probing_) {
      probing_ = false;
      const bool paid =
          timed ? static_cast<double>(accepted + 1) >= kStopBelow * steps
                : accepted > 0 && static_cast<double>(accepted) >=
                                      settings_.min_acceptance * static_cast<double>(drafted);
      if (paid) {
        forget_window();
      } else {
        push({drafted, accepted, steps});
        pause();
        return;
      }
    }
    push({drafted, accepted, steps});
    bool pays = true;
    if (timed) {
      // By the passes' times: the best length, and whether even it yields more than the
      // one token a plain step does (a few unlucky guesses are no verdict).
      count_window();
      double tokens_per_step = 0;
      length_ = most_tokens_per_step(tokens_per_step);
      if (timed_in_window_ < kMinTimedPasses && in_window_ < settings_.window) {
        // Too few passes for a verdict, unless even a hopeful reading of them (one more
        // guess kept at every position) says no length pays.
        if (timed_in_window_ < kMinEarlyPasses) return;
        double hopeful = 0;
        most_tokens_per_step(hopeful, /*hope=*/1.0);
        if (hopeful >= kStopBelow) return;
      }
      pays = tokens_per_step >= kStopBelow;
    } else {
      // A draft shorter than asked for (the drafter had no more) says nothing against
      // the length asked for.
      length_ = accepted == drafted ? std::min(settings_.max, std::max(length_, 2 * drafted + 1))
                                    : std::min(settings_.max, accepted + 1);
      if (in_window_ < settings_.window) return;  // not enough evidence yet
      pays = static_cast<double>(accepted_in_window_) >=
             settings_.min_acceptance * static_cast<double>(in_window_);
    }
    if (!pays) {
      pause();
    } else {
      pause_ = settings_.pause;  // it pays again: a later failure starts from the short pause
    }
  }

  bool paused() const noexcept { return paused_for_ > 0; }

 private:
  struct Outcome {
    std::size_t drafted, accepted;
    double steps;  // the pass's time in one-token steps (0: not timed)
  };

  // The window's passes as most_tokens_per_step reads them: per guess position j
  // (1-based), how many passes tested it and kept it; the farthest position tested; and
  // the cost line, guesses x against steps y, fitted to the one-token step (a pass of no
  // guesses and 1 step, kStepWeight passes' worth) and the timed passes.
  void count_window() {
    const std::size_t longest = std::max<std::size_t>(settings_.max, 1);
    tested_.assign(longest + 1, 0.0);  // no allocation after the first pass
    kept_.assign(longest + 1, 0.0);
    all_tested_ = all_kept_ = 0;
    farthest_ = 0;
    double n = kStepWeight, sx = 0, sy = kStepWeight, sxx = 0, sxy = 0;
    for (const Outcome& o : outcomes_) {
      const std::size_t reached = std::min({o.drafted, o.accepted + 1, longest});
      for (std::size_t j = 1; j <= reached; ++j) {
        tested_[j] += 1;
        if (j <= o.accepted) kept_[j] += 1;
      }
      farthest_ = std::max(farthest_, reached);
      all_tested_ += static_cast<double>(reached);
      all_kept_ += static_cast<double>(std::min(o.accepted, reached));
      if (o.steps > 0) {
        const double x = static_cast<double>(o.drafted);
        n += 1, sx += x, sy += o.steps, sxx += x * x, sxy += x * o.steps;
      }
    }
    const double mean_x = sx / n, mean_y = sy / n;
    slope_ = std::max(kSlopeFloor,
                      (sxy - n * mean_x * mean_y) / std::max(1e-9, sxx - n * mean_x * mean_x));
    base_ = std::max(kBaseFloor, mean_y - slope_ * mean_x);
  }

  // The length (settings' min, at least 1, to max) whose passes yield the most tokens per
  // step, by count_window's reading of the window (the header says how); `hope` counts
  // that many more kept guesses at every position, and overall.
  std::size_t most_tokens_per_step(double& tokens_per_step, double hope = 0) const {
    const std::size_t longest = std::max<std::size_t>(settings_.max, 1);
    const double keep_rate =
        all_tested_ + hope > 0 ? (all_kept_ + hope) / (all_tested_ + hope) : 0.5;
    // Positions past 2 f + 1 (f the farthest tested) are not tried yet: a draft grows at
    // most so far a pass, as the untimed rule does, so a probe of the untested costs little.
    const std::size_t reachable = std::min(longest, 2 * farthest_ + 1);
    std::size_t best = std::clamp<std::size_t>(settings_.min, 1, longest);
    double best_rate = 0, yield = 1, reach = 1;  // tokens a pass yields; P(all so far kept)
    for (std::size_t k = 1; k <= reachable; ++k) {
      const double p =
          (kept_[k] + hope + kKeepRateWeight * keep_rate) / (tested_[k] + hope + kKeepRateWeight);
      reach *= p;
      yield += reach;
      const double rate = yield / (base_ + slope_ * static_cast<double>(k));
      const bool whole_tiles = ((k + 1) & k) == 0 || k == longest;  // k + 1 a power of two
      if (k >= settings_.min && whole_tiles && rate > best_rate) best = k, best_rate = rate;
    }
    tokens_per_step = best_rate;
    return best;
  }

  // The one-token step counts as kStepWeight passes on the cost line; a guess never costs
  // less than kSlopeFloor steps, a pass never less than kBaseFloor plus its guesses. A
  // position's keep rate counts the window's overall rate as kKeepRateWeight passes.
  static constexpr double kStepWeight = 2.0, kSlopeFloor = 0.01, kBaseFloor = 0.1;
  static constexpr double kKeepRateWeight = 2.0;
  // The passes' verdict needs kMinTimedPasses timed passes (or a full window), and says
  // stop below kStopBelow tokens a step (a plain step yields 1): at half the guesses
  // kept, where one guess pays, eight passes show that few kept (one or none) 4 times
  // in 100. From kMinEarlyPasses on, passes that keep so little that even one more kept
  // guess a position would not pay are a verdict too: where a pass of one guess costs
  // nearly two steps (a decode bound by its multiplies, as on AMD Zen 1: bench/HISTORY.md,
  // "Figures moved from code comments"), three passes that keep nothing.
  static constexpr std::size_t kMinTimedPasses = 8, kMinEarlyPasses = 3;
  static constexpr double kStopBelow = 0.95;
  // The length before any pass is weighed, and after a paying probe: a pass of 4 tokens,
  // one whole tile.
  static constexpr std::size_t kFirstLength = 3;

  // An outcome into the window, which keeps the passes of the last `window` drafted tokens.
  void push(const Outcome& o) {
    outcomes_.push_back(o);
    in_window_ += o.drafted;
    accepted_in_window_ += o.accepted;
    timed_in_window_ += o.steps > 0 ? 1 : 0;
    while (!outcomes_.empty() && in_window_ - outcomes_.front().drafted >= settings_.window) {
      in_window_ -= outcomes_.front().drafted;
      accepted_in_window_ -= outcomes_.front().accepted;
      timed_in_window_ -= outcomes_.front().steps > 0 ? 1 : 0;
      outcomes_.pop_front();
    }
  }

  void pause() {
    paused_for_ = pause_;
    pause_ = std::min(settings_.max_pause, 2 * pause_);
  }

  void forget_window() {
    outcomes_.clear();
    in_window_ = accepted_in_window_ = timed_in_window_ = 0;
    length_ = std::min(settings_.max, kFirstLength);
  }

  DraftLengthSettings settings_;
  std::size_t length_;
  std::size_t pause_;
  std::size_t paused_for_ = 0;
  bool probing_ = false;  // the next pass is the probe after a pause
  std::deque<Outcome> outcomes_;
  std::size_t in_window_ = 0, accepted_in_window_ = 0, timed_in_window_ = 0;
  // count_window's reading of the window, which most_tokens_per_step weighs.
  std::vector<double> tested_, kept_;  // per guess position; kept for reuse
  double all_tested_ = 0, all_kept_ = 0;
  std::size_t farthest_ = 0;
  double slope_ = 0, base_ = 0;  // a pass of k guesses costs base_ + slope_ k steps
  double step_seconds_ = 0;      // a one-token step, smoothed; 0 until one is timed
  bool first_step_timed_ = false;
};

}  // namespace smol
