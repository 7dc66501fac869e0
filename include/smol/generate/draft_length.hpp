// DraftLength: how many tokens to draft next, learned from how many were accepted.
//
// A verification pass of 1 + k tokens costs more than a one-token step (on a CPU much
// less than k + 1 steps, since the weights are read once, yet more: each token still does
// its own arithmetic and attention). Accepted guesses save whole steps; rejected ones only
// cost their share of the pass. So drafting pays while enough guesses are accepted, and
// the length follows the evidence:
//   - every guess accepted: the next draft may be twice as long (up to `max`);
//   - a guess rejected: the next one is one longer than what was accepted, the length
//     the model has just shown it follows;
//   - over the passes of the last `window` drafted tokens, drafting did not pay:
//     drafting stops for `pause` generated tokens, then tries again (a pause that is
//     followed by another failure doubles, up to `max_pause`), so open-ended text that
//     never repeats runs as plain decoding.
// Whether it paid is measured when the caller times its work (record's seconds): the
// passes took longer than one-token steps would have for the tokens they yielded. What a
// guess costs differs tenfold between machines, models and kernels, so a fixed acceptance
// threshold cannot say it; `min_acceptance` is the rule only until a step is timed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>

namespace smol {

struct DraftLengthSettings {
  std::size_t max = 16;  // --draft-max (llama.cpp's default)
  // --draft-min: a shorter draft is not worth its pass and is dropped (llama.cpp's
  // meaning; its default 0 verifies any draft).
  std::size_t min = 0;
  std::size_t window = 48;      // drafted tokens the acceptance rate is measured over
  double min_acceptance = 0.2;  // below it, drafting pauses
  std::size_t pause = 16;       // generated tokens without drafting, at first
  std::size_t max_pause = 256;
};

class DraftLength {
 public:
  explicit DraftLength(DraftLengthSettings settings = {})
      : settings_(settings),
        length_(std::min<std::size_t>(settings.max, 4)),
        pause_(settings.pause) {}

  const DraftLengthSettings& settings() const noexcept { return settings_; }

  // Tokens to ask the drafter for at this step; 0 while drafting is paused, and before a
  // one-token step has been timed (record_step). Each call is one generated token's
  // step, which is what a pause counts.
  std::size_t next() {
    // The first step runs plain, so that passes have a step's time to be held to.
    if (step_seconds_ <= 0) return 0;
    if (paused_for_ > 0) {
      --paused_for_;
      return 0;
    }
    return length_;
  }

  // A one-token step (no draft) took `seconds`: the yardstick a pass is held to.
  void record_step(double seconds) {
    step_seconds_ = step_seconds_ > 0 ? 0.75 * step_seconds_ + 0.25 * seconds : seconds;
  }

  // A verification ended: `accepted` of the `drafted` guesses were kept, and the pass took
  // `seconds` (0: not timed).
  void record(std::size_t drafted, std::size_t accepted, double seconds = 0) {
    if (drafted == 0) return;
    // A draft shorter than asked for (the drafter had no more) says nothing against the
    // length asked for.
    length_ = accepted == drafted ? std::min(settings_.max, std::max(length_, 2 * drafted))
                                  : std::min(settings_.max, accepted + 1);
    // What plain steps would have taken for the pass's tokens: the kept guesses and the
    // token of its own.
    const double plain_seconds =
        seconds > 0 && step_seconds_ > 0 ? static_cast<double>(accepted + 1) * step_seconds_ : 0;
    outcomes_.push_back({drafted, accepted, seconds, plain_seconds});
    in_window_ += drafted;
    accepted_in_window_ += accepted;
    while (!outcomes_.empty() && in_window_ - outcomes_.front().drafted >= settings_.window) {
      in_window_ -= outcomes_.front().drafted;
      accepted_in_window_ -= outcomes_.front().accepted;
      outcomes_.pop_front();
    }
    if (in_window_ < settings_.window) return;  // not enough evidence yet
    if (!pays()) {
      paused_for_ = pause_;
      pause_ = std::min(settings_.max_pause, 2 * pause_);
      forget_window();
    } else {
      pause_ = settings_.pause;  // it pays again: a later failure starts from the short pause
    }
  }

  bool paused() const noexcept { return paused_for_ > 0; }

 private:
  struct Outcome {
    std::size_t drafted, accepted;
    double seconds, plain_seconds;  // the pass's time, and plain steps' for its tokens
  };

  // Whether the window's passes beat plain steps: by their times when every pass in it
  // was timed against a known step, else by the acceptance rate.
  bool pays() const {
    double pass = 0, plain = 0;
    for (const Outcome& o : outcomes_) {
      if (o.seconds <= 0 || o.plain_seconds <= 0) {
        return static_cast<double>(accepted_in_window_) >=
               settings_.min_acceptance * static_cast<double>(in_window_);
      }
      pass += o.seconds;
      plain += o.plain_seconds;
    }
    return pass <= plain;
  }

  void forget_window() {
    outcomes_.clear();
    in_window_ = accepted_in_window_ = 0;
    length_ = std::min<std::size_t>(settings_.max, 4);
  }

  DraftLengthSettings settings_;
  std::size_t length_;
  std::size_t pause_;
  std::size_t paused_for_ = 0;
  std::deque<Outcome> outcomes_;
  std::size_t in_window_ = 0, accepted_in_window_ = 0;
  double step_seconds_ = 0;  // a one-token step, smoothed; 0 until one is timed
};

}  // namespace smol
