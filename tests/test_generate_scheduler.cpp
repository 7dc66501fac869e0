// Scheduler: requests served together give each the reply it gets alone (the same
// tokens, greedy or seeded), join and leave mid-way, are cancelled, stop on their own
// rules, reuse cached prefixes, wait when the KV pool is full, and may be submitted
// from other threads while the engine runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "fewer_repeats.hpp"
#include "smol/generate/batch_model_drafter.hpp"
#include "smol/generate/drafter.hpp"
#include "smol/generate/ngram_drafter.hpp"
#include "smol/generate/scheduler.hpp"
#include "smol/model/batch_transformer.hpp"
#include "smol/model/model.hpp"
#include "smol/text/gguf_vocabulary.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_generate_scheduler {

namespace {

const std::string kFixture = std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf";

struct Fixture {
  smol::Model model = smol::Model::open(kFixture);
  smol::Tokenizer tokenizer{smol::load_vocabulary(model.file())};
};

Fixture& fixture() {
  static Fixture instance;
  return instance;
}

std::vector<smol::TokenId> prompt_of(const std::string& text) {
  return fixture().tokenizer.encode(text, {.parse_special = false, .add_bos = false});
}

const std::vector<std::string> kPrompts = {
    "Once upon a time",
    "The quick brown fox jumps over the lazy dog, and then the dog",
    "A",
    "In a village by the sea there lived an old fisherman who every morning took his boat "
    "out past the rocks, and every evening came back with stories about what he had seen",
    "Numbers: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20",
    "Why is the sky blue?",
};

smol::GenerationRequest request_for(std::size_t i, bool sampled) {
  smol::GenerationRequest request;
  request.prompt = prompt_of(kPrompts[i % kPrompts.size()]);
  request.sampling = sampled ? smol::SamplerSettings{} : smol::SamplerSettings::greedy();
  if (sampled) {
    request.sampling.temperature = 0.9f;
    request.sampling.seed = 1000 + i;
  }
  request.max_tokens = 10 + i % 4;
  request.ignore_eos = true;
  return request;
}

// Runs the requests through one scheduler; results by submission index.
std::vector<smol::GenerationResult> serve(std::vector<smol::GenerationRequest> requests,
                                          smol::SchedulerOptions options,
                                          std::size_t total_positions = 4096) {
  smol::Context ctx(2);
  smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = total_positions});
  // Requests that draft guess after a repeat of one token: the random fixture's loops
  // seldom repeat three (the default, for trained weights), and the cases need guesses.
  smol::Scheduler scheduler(
      engine, fixture().tokenizer, options,
      std::make_unique<smol::EachSequenceDrafter>(
          std::make_unique<smol::NgramDrafter>(smol::NgramSettings{.min_ngram = 1})));
  std::vector<smol::GenerationResult> results(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].on_done = [&results, i](const smol::GenerationResult& r) { results[i] = r; };
    scheduler.submit(std::move(requests[i]));
  }
  scheduler.run_until_idle();
  return results;
}

smol::GenerationResult alone(const smol::GenerationRequest& request) {
  return serve({request}, {.max_sequences = 1})[0];
}

}  // namespace

TEST_CASE("requests served together get the tokens they get alone, greedy and seeded") {
  for (const bool sampled : {false, true}) {
    CAPTURE(sampled);
    std::vector<smol::GenerationRequest> requests;
    for (std::size_t i = 0; i < 8; ++i) requests.push_back(request_for(i, sampled));
    // Four slots, so half the requests wait and join as others finish; 24 tokens a
    // step, so the long prompts are read in chunks beside the others' decoding.
    const auto together = serve(requests, {.max_sequences = 4, .step_tokens = 24});
    for (std::size_t i = 0; i < requests.size(); ++i) {
      CAPTURE(i);
      const auto single = alone(requests[i]);
      CHECK(together[i].stop == smol::StopReason::max_tokens);
      CHECK(together[i].tokens.size() == requests[i].max_tokens);
      CHECK(together[i].tokens == single.tokens);
      CHECK(together[i].text == single.text);
    }
  }
}

TEST_CASE("streamed pieces, stop strings and cancelled requests") {
  smol::Context ctx(2);
  smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = 4096});
  smol::Scheduler scheduler(engine, fixture().tokenizer, {.max_sequences = 2, .step_tokens = 64});

  // A reference reply, to pick a stop string from its middle.
  const auto reference = alone(request_for(0, false));
  REQUIRE(reference.answer.size() > 4);
  const std::string stop = reference.answer.substr(reference.answer.size() / 2, 3);

  std::map<std::string, smol::GenerationResult> done;
  std::map<std::string, std::string> streamed;
  const auto watch = [&](smol::GenerationRequest request, const std::string& name) {
    request.on_piece = [&streamed, name](const smol::TextPiece& p) { streamed[name] += p.text; };
    request.on_done = [&done, name](const smol::GenerationResult& r) { done[name] = r; };
    return request;
  };
  auto stopped = request_for(0, false);
  stopped.stop_strings = {stop};
  const auto stop_id = scheduler.submit(watch(stopped, "stop"));
  auto endless = request_for(1, false);
  endless.max_tokens = 0;
  const auto endless_id = scheduler.submit(watch(endless, "endless"));
  const auto queued_id = scheduler.submit(watch(request_for(2, false), "queued"));
  (void)stop_id;
  for (int i = 0; i < 2; ++i) scheduler.step();
  scheduler.cancel(endless_id);  // running
  scheduler.cancel(queued_id);   // still waiting: two slots, both taken
  scheduler.run_until_idle();

  CHECK(done["stop"].stop == smol::StopReason::stop_string);
  CHECK(done["stop"].answer == reference.answer.substr(0, reference.answer.find(stop)));
  CHECK(streamed["stop"] == done["stop"].answer);
  CHECK(done["endless"].stop == smol::StopReason::cancelled);
  CHECK(done["endless"].stats.generated_tokens >= 1);
  CHECK(streamed["endless"] == done["endless"].answer);
  CHECK(done["queued"].stop == smol::StopReason::cancelled);
  CHECK(done["queued"].stats.generated_tokens == 0);
  CHECK(scheduler.running() == 0);
  CHECK(scheduler.waiting() == 0);
}

TEST_CASE("a follow-up request reuses the cached prefix and replies as a fresh run") {
  const auto first = request_for(3, false);
  smol::Context ctx(2);
  smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = 4096});
  smol::Scheduler scheduler(engine, fixture().tokenizer, {.max_sequences = 2});
  smol::GenerationResult one, two;
  auto a = first;
  a.on_done = [&](const smol::GenerationResult& r) { one = r; };
  scheduler.submit(a);
  scheduler.run_until_idle();
  CHECK(one.stats.reused_tokens == 0);
  CHECK(scheduler.cached_sequences() == 1);

  // The next turn: the first prompt, the reply, then more text.
  auto follow = first;
  follow.prompt.insert(follow.prompt.end(), one.tokens.begin(), one.tokens.end());
  const auto more = prompt_of(" And then?");
  follow.prompt.insert(follow.prompt.end(), more.begin(), more.end());
  auto b = follow;
  b.on_done = [&](const smol::GenerationResult& r) { two = r; };
  scheduler.submit(b);
  scheduler.run_until_idle();
  // Everything evaluated before is reused: the prompt and all but the last reply token.
  CHECK(two.stats.reused_tokens == first.prompt.size() + one.tokens.size() - 1);
  CHECK(two.stats.prompt_tokens == follow.prompt.size() - two.stats.reused_tokens);
  CHECK(two.tokens == alone(follow).tokens);
}

TEST_CASE("requests sent together with one prompt read it once: the others wait, then fork it") {
  // Three choices of one prompt, as a server's n: 3 submits them, with their own seeds.
  // 24 tokens a step: the prompt takes several steps, during which the others must wait
  // for it rather than read it side by side.
  std::vector<smol::GenerationRequest> requests;
  for (std::size_t i = 0; i < 3; ++i) {
    auto request = request_for(3, true);
    request.sampling.seed = 7 + i;
    requests.push_back(request);
  }
  const std::size_t prompt = requests[0].prompt.size();
  REQUIRE(prompt > 24);
  const auto results = serve(requests, {.max_sequences = 4, .step_tokens = 24});
  CHECK(results[0].stats.prompt_tokens == prompt);
  CHECK(results[0].stats.reused_tokens == 0);
  for (std::size_t i = 1; i < results.size(); ++i) {
    CAPTURE(i);
    // All but the last prompt token forked (its logits pick the first reply token).
    CHECK(results[i].stats.reused_tokens == prompt - 1);
    CHECK(results[i].stats.prompt_tokens == 1);
    // Forked or not, each samples what it samples alone.
    CHECK(results[i].tokens == alone(requests[i]).tokens);
  }
  CHECK(results[1].tokens != results[2].tokens);  // their own seeds
}

TEST_CASE("a full pool of cached prefixes: the prefix about to be forked is never the one freed") {
  // Every request shares a 300-token prefix (a chat template's system block) and the
  // pool holds few pages: admitting each one must free cached sequences, and the oldest
  // cached one is also the prefix it forks. Freeing it first once ended every request
  // of the batch with "KV pool: no sequence".
  std::string shared;
  while (prompt_of(shared).size() < 300) shared += "You are a helpful assistant. ";
  smol::Context ctx(1);
  smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = 5 * 256});
  smol::Scheduler scheduler(engine, fixture().tokenizer, {.max_sequences = 2, .step_tokens = 128});
  // Freeing the forked prefix first (the old bug, planted) fails at the fifth request:
  // the sanitize stage runs six (twelve took 28 s there on a 2-core AMD Zen 1).
  const std::size_t requests = smol::test::fewer_repeats() ? 6 : 12;
  for (std::size_t i = 0; i < requests; ++i) {
    CAPTURE(i);
    auto request = request_for(i, false);
    request.prompt = prompt_of(shared + kPrompts[i % kPrompts.size()] + " #" + std::to_string(i));
    smol::GenerationResult result;
    auto submitted = request;
    submitted.on_done = [&](const smol::GenerationResult& r) { result = r; };
    scheduler.submit(submitted);
    scheduler.run_until_idle();
    CHECK(result.stop == smol::StopReason::max_tokens);
    if (i > 0) CHECK(result.stats.reused_tokens >= 290);
    CHECK(result.tokens == alone(request).tokens);
  }
}

TEST_CASE("a cached prefix that leaves too little room is given up, not waited for") {
  // One context's worth of pool: the first chat stays cached and fills most of it. The
  // next shares its prefix but is long enough that keeping the cached chat leaves too
  // few pages. With nothing running, nothing would ever free them: the request must
  // drop the prefix and take the whole pool, not wait forever.
  std::string shared, first_tail, second_tail;
  while (prompt_of(shared).size() < 300) shared += "You are a helpful assistant. ";
  while (prompt_of(first_tail).size() < 400) first_tail += "The first chat goes on. ";
  while (prompt_of(second_tail).size() < 500) second_tail += "A second, longer question. ";
  smol::Context ctx(1);
  smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = 4 * 256});
  smol::Scheduler scheduler(engine, fixture().tokenizer, {.max_sequences = 1});
  for (const std::string& tail : {first_tail, second_tail}) {
    auto request = request_for(0, false);
    request.prompt = prompt_of(shared + tail);
    request.max_tokens = 4;
    smol::GenerationResult result;
    result.stop = smol::StopReason::cancelled;
    request.on_done = [&](const smol::GenerationResult& r) { result = r; };
    scheduler.submit(request);
    scheduler.run_until_idle();
    CHECK(scheduler.waiting() == 0);
    CHECK(result.stop == smol::StopReason::max_tokens);
  }
}

TEST_CASE(
    "a host cache: a conversation evicted from the pool comes back copied, as if never gone") {
  // A pool of three pages (768 positions) and conversations of about 300 tokens (two
  // pages): each one evicts the one before. With a host cache the first comes back from
  // host memory (two pages, and a third for its last page copied on write), its whole
  // prompt reused, its reply what it is alone; without, it is read again.
  std::vector<std::string> conversations;
  for (int c = 0; c < 4; ++c) {
    std::string text = "Conversation " + std::to_string(c) + ".";
    while (prompt_of(text).size() < 300) text += " Talk number " + std::to_string(c) + " goes on.";
    conversations.push_back(text);
  }
  for (const std::size_t host_bytes : {std::size_t{0}, std::size_t{64} << 20}) {
    CAPTURE(host_bytes);
    smol::Context ctx(1);
    smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = 3 * 256});
    smol::Scheduler scheduler(
        engine, fixture().tokenizer,
        {.max_sequences = 1, .step_tokens = 256, .host_cache_bytes = host_bytes});
    const auto run = [&](const std::vector<smol::TokenId>& prompt) {
      auto request = request_for(0, false);
      request.prompt = prompt;
      request.max_tokens = 4;
      smol::GenerationResult result;
      request.on_done = [&](const smol::GenerationResult& r) { result = r; };
      scheduler.submit(request);
      scheduler.run_until_idle();
      return result;
    };
    std::vector<smol::GenerationResult> first;
    for (const std::string& text : conversations) first.push_back(run(prompt_of(text)));
    // Three others came after: at most one fits the pool beside nothing else.
    CHECK(scheduler.host_cache().size() == (host_bytes > 0 ? 3u : 0u));
    // The first conversation's next turn.
    std::vector<smol::TokenId> next = prompt_of(conversations[0]);
    next.insert(next.end(), first[0].tokens.begin(), first[0].tokens.end());
    const auto more = prompt_of(" And then?");
    next.insert(next.end(), more.begin(), more.end());
    const smol::GenerationResult back = run(next);
    if (host_bytes > 0) {
      CHECK(back.stats.reused_tokens ==
            prompt_of(conversations[0]).size() + first[0].tokens.size() - 1);
    } else {
      CHECK(back.stats.reused_tokens == 0);
    }
    auto fresh = request_for(0, false);
    fresh.prompt = next;
    fresh.max_tokens = 4;
    CHECK(back.tokens == alone(fresh).tokens);
  }
}

TEST_CASE("a full KV pool makes requests wait; one that can never fit is refused") {
  // 3 pages of 256 positions; each request needs 2 (a 300-token prompt and its reply).
  std::vector<smol::GenerationRequest> requests;
  std::string long_text;
  while (prompt_of(long_text).size() < 300)
    long_text += "The sea was calm and the ships sailed on. ";
  for (std::size_t i = 0; i < 3; ++i) {
    auto r = request_for(i, false);
    r.prompt = prompt_of(long_text + kPrompts[i]);
    requests.push_back(r);
  }
  const auto results = serve(requests, {.max_sequences = 3, .step_tokens = 128}, 768);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    CHECK(results[i].stop == smol::StopReason::max_tokens);
    CHECK(results[i].tokens == alone(requests[i]).tokens);
  }

  smol::Context ctx(1);
  smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = 512});
  smol::Scheduler scheduler(engine, fixture().tokenizer);
  auto huge = request_for(0, false);
  huge.prompt = prompt_of(long_text + long_text);
  REQUIRE(huge.prompt.size() >= 512);
  CHECK_THROWS_WITH(scheduler.submit(huge), doctest::Contains("a sequence holds at most 512"));
  auto empty = request_for(0, false);
  empty.prompt.clear();
  CHECK_THROWS_WITH(scheduler.submit(empty), doctest::Contains("empty"));
}

TEST_CASE("requests submitted and cancelled from other threads while the engine runs") {
  smol::Context ctx(2);
  smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = 4096});
  smol::Scheduler scheduler(engine, fixture().tokenizer, {.max_sequences = 4, .step_tokens = 48});
  std::mutex results_mutex;
  std::map<std::size_t, smol::GenerationResult> results;
  std::atomic<std::size_t> finished{0};
  constexpr std::size_t kThreads = 4, kEach = 3;
  std::vector<std::thread> clients;
  for (std::size_t t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      for (std::size_t k = 0; k < kEach; ++k) {
        const std::size_t index = t * kEach + k;
        auto request = request_for(index, true);
        request.on_done = [&, index](const smol::GenerationResult& r) {
          std::lock_guard lock(results_mutex);
          results[index] = r;
          finished.fetch_add(1);
        };
        const smol::RequestId id = scheduler.submit(std::move(request));
        if (index % 5 == 4) scheduler.cancel(id);
      }
    });
  }
  while (finished.load() < kThreads * kEach) {
    if (!scheduler.step()) std::this_thread::yield();
  }
  for (auto& client : clients) client.join();
  for (std::size_t index = 0; index < kThreads * kEach; ++index) {
    CAPTURE(index);
    const auto& r = results.at(index);
    // A cancel lands at the engine's next step; a request cancelled that way ends
    // cancelled (unless the engine finished it first); the others are untouched.
    if (index % 5 != 4 || r.stop != smol::StopReason::cancelled) {
      CHECK(r.tokens == alone(request_for(index, true)).tokens);
    }
  }
}

namespace {

// The log-softmax of a row, computed here apart from token_logprobs.hpp.
std::vector<double> log_softmax(std::span<const float> row) {
  double max = row[0];
  for (const float x : row) max = std::max<double>(max, x);
  double sum = 0.0;
  for (const float x : row) sum += std::exp(static_cast<double>(x) - max);
  std::vector<double> out(row.size());
  for (std::size_t i = 0; i < row.size(); ++i) out[i] = row[i] - max - std::log(sum);
  return out;
}

// The logits rows of a reply, from a BatchTransformer of its own: the prompt in one
// pass (its last row picks the first token), then each reply token alone.
std::vector<std::vector<float>> reply_rows(const std::vector<smol::TokenId>& prompt,
                                           const std::vector<smol::TokenId>& reply) {
  smol::Context ctx(2);
  smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = 1024});
  const smol::SequenceId sequence = engine.pool().add();
  const std::size_t vocab = fixture().tokenizer.size();
  std::vector<smol::BatchEntry> batch;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    batch.push_back({sequence, prompt[i], i, i + 1 == prompt.size()});
  }
  std::vector<std::vector<float>> rows;
  std::span<const float> logits = engine.forward(batch);
  rows.emplace_back(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(vocab));
  for (std::size_t i = 0; i + 1 < reply.size(); ++i) {
    const smol::BatchEntry entry{sequence, reply[i], prompt.size() + i, true};
    logits = engine.forward(std::span(&entry, 1));
    rows.emplace_back(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(vocab));
  }
  return rows;
}

}  // namespace

TEST_CASE("logprobs: the raw distribution's, equal to an independent log-softmax of the logits") {
  const smol::Tokenizer& tokenizer = fixture().tokenizer;
  for (const bool sampled : {false, true}) {
    CAPTURE(sampled);
    smol::GenerationRequest request = request_for(1, sampled);
    request.ignore_eos = false;  // the chosen token is the raw row's best under greedy
    request.logprobs = 5;
    // Sampling transforms do not change what is reported (OpenAI's meaning).
    if (sampled) request.sampling.top_k = 3;
    const smol::GenerationResult result = alone(request);
    REQUIRE(!result.tokens.empty());
    const bool ended = tokenizer.is_end_of_generation(result.tokens.back());
    REQUIRE(result.logprobs.size() == result.tokens.size() - (ended ? 1 : 0));
    REQUIRE(!result.logprobs.empty());
    const auto rows = reply_rows(request.prompt, result.tokens);
    for (std::size_t i = 0; i < result.logprobs.size(); ++i) {
      CAPTURE(i);
      const smol::TokenLogprob& t = result.logprobs[i];
      const std::vector<double> expected = log_softmax(rows[i]);
      CHECK(t.chosen.token == result.tokens[i]);
      CHECK(t.chosen.bytes == tokenizer.token_to_piece(result.tokens[i], {.render_special = true}));
      CHECK(t.chosen.logprob ==
            doctest::Approx(expected[static_cast<std::size_t>(t.chosen.token)]).epsilon(1e-4));
      REQUIRE(t.top.size() == 5);
      double mass = 0.0;
      for (std::size_t k = 0; k < t.top.size(); ++k) {
        const auto id = static_cast<std::size_t>(t.top[k].token);
        CHECK(t.top[k].logprob == doctest::Approx(expected[id]).epsilon(1e-4));
        if (k > 0) CHECK(t.top[k].logprob <= t.top[k - 1].logprob);
        mass += std::exp(static_cast<double>(t.top[k].logprob));
      }
      CHECK(mass <= 1.0 + 1e-5);
      // The top one is the row's best, and nothing outside the list beats its last.
      const auto best = static_cast<smol::TokenId>(
          std::max_element(expected.begin(), expected.end()) - expected.begin());
      CHECK(t.top[0].token == best);
      std::size_t above = 0;
      for (const double lp : expected) above += lp > t.top.back().logprob + 1e-5;
      CHECK(above < 5);
      if (!sampled) {
        CHECK(t.chosen.token == t.top[0].token);
        CHECK(t.chosen.logprob == t.top[0].logprob);
      }
    }
  }
}

TEST_CASE("post-sampling logprobs: the distribution drawn from, the same tokens drawn") {
  smol::GenerationRequest request = request_for(1, true);
  request.sampling.top_k = 3;
  request.sampling.top_p = 1.0f;
  request.sampling.min_p = 0.0f;
  request.sampling.temperature = 0.8f;
  request.ignore_eos = false;  // the sampler sees the raw row, as the oracle below does
  request.logprobs = 5;
  const smol::GenerationResult raw = alone(request);
  request.post_sampling_probs = true;
  const smol::GenerationResult result = alone(request);
  CHECK(result.tokens == raw.tokens);  // computing the distribution draws nothing
  REQUIRE(!result.logprobs.empty());
  const auto rows = reply_rows(request.prompt, result.tokens);
  for (std::size_t i = 0; i < result.logprobs.size(); ++i) {
    CAPTURE(i);
    const smol::TokenLogprob& t = result.logprobs[i];
    CHECK(t.post_sampling);
    // The oracle: softmax of the three best logits over the temperature.
    std::vector<std::size_t> ids(rows[i].size());
    for (std::size_t k = 0; k < ids.size(); ++k) ids[k] = k;
    std::partial_sort(ids.begin(), ids.begin() + 3, ids.end(), [&](std::size_t a, std::size_t b) {
      return rows[i][a] != rows[i][b] ? rows[i][a] > rows[i][b] : a < b;
    });
    double total = 0.0;
    for (std::size_t k = 0; k < 3; ++k)
      total += std::exp((rows[i][ids[k]] - rows[i][ids[0]]) / 0.8);
    REQUIRE(t.top.size() == 3);  // five asked, three kept
    double mass = 0.0;
    for (std::size_t k = 0; k < 3; ++k) {
      CHECK(t.top[k].token == static_cast<smol::TokenId>(ids[k]));
      const double expected = std::exp((rows[i][ids[k]] - rows[i][ids[0]]) / 0.8) / total;
      CHECK(std::exp(t.top[k].logprob) == doctest::Approx(expected).epsilon(1e-3));
      mass += std::exp(static_cast<double>(t.top[k].logprob));
    }
    CHECK(mass == doctest::Approx(1.0).epsilon(1e-4));
    bool listed = false;
    for (const auto& top : t.top)
      listed |= top.token == t.chosen.token && top.logprob == t.chosen.logprob;
    CHECK(listed);  // the chosen token is one the sampler kept, with its chance
  }
  // Greedy: the one token, certain.
  smol::GenerationRequest greedy = request_for(1, false);
  greedy.logprobs = 3;
  greedy.post_sampling_probs = true;
  for (const smol::TokenLogprob& t : alone(greedy).logprobs) {
    CHECK(t.chosen.logprob == 0.0f);
    REQUIRE(t.top.size() == 1);
    CHECK(t.top[0].token == t.chosen.token);
  }
}

TEST_CASE("logprobs of requests served together equal those served alone; none unasked") {
  std::vector<smol::GenerationRequest> requests;
  for (std::size_t i = 0; i < 6; ++i) {
    requests.push_back(request_for(i, i % 2 == 1));
    if (i != 4) requests.back().logprobs = i % 3;  // request 4 asks for none
  }
  std::vector<std::vector<smol::TokenLogprob>> streamed(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].on_logprob = [&streamed, i](const smol::TokenLogprob& t) {
      streamed[i].push_back(t);
    };
  }
  const auto together = serve(requests, {.max_sequences = 3, .step_tokens = 24});
  for (std::size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    if (i == 4) {
      CHECK(together[i].logprobs.empty());
      CHECK(streamed[i].empty());
      continue;
    }
    smol::GenerationRequest by_itself = requests[i];
    by_itself.on_logprob = nullptr;
    const auto single = alone(by_itself);
    REQUIRE(together[i].logprobs.size() == together[i].tokens.size());
    REQUIRE(single.logprobs.size() == together[i].logprobs.size());
    REQUIRE(streamed[i].size() == together[i].logprobs.size());
    for (std::size_t k = 0; k < single.logprobs.size(); ++k) {
      // Chunked beside others or read whole, a prompt's last row may round apart a hair.
      CHECK(together[i].logprobs[k].chosen.logprob ==
            doctest::Approx(single.logprobs[k].chosen.logprob).epsilon(1e-4));
      CHECK(streamed[i][k].chosen.token == together[i].logprobs[k].chosen.token);
      REQUIRE(together[i].logprobs[k].top.size() == i % 3);
      for (std::size_t j = 0; j < i % 3; ++j) {
        CHECK(together[i].logprobs[k].top[j].logprob ==
              doctest::Approx(single.logprobs[k].top[j].logprob).epsilon(1e-4));
      }
    }
  }
}

namespace {

// Prompts that repeat themselves, so that prompt lookup has something to guess from and
// the random fixture, greedy, falls into loops its guesses then match.
const std::vector<std::string> kRepetitive = {
    "one two three one two three one two three one two",
    "Numbers: 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2",
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the",
    "Once upon a time",
};

std::vector<smol::GenerationRequest> drafting_requests(bool drafting, bool sampled,
                                                       std::size_t max_tokens = 40) {
  std::vector<smol::GenerationRequest> requests;
  for (std::size_t i = 0; i < kRepetitive.size(); ++i) {
    smol::GenerationRequest request;
    request.prompt = prompt_of(kRepetitive[i]);
    request.sampling = smol::SamplerSettings::greedy();
    if (sampled) {
      request.sampling = smol::SamplerSettings{};
      request.sampling.temperature = 0.8f;
      request.sampling.seed = 50 + i;
    }
    request.max_tokens = max_tokens;
    request.ignore_eos = true;
    // Never paused: whether guesses are kept must not hang on the passes' times.
    if (drafting) request.draft = smol::DraftLengthSettings{.pause = 0};
    requests.push_back(std::move(request));
  }
  return requests;
}

}  // namespace

TEST_CASE("n-gram drafting in the batch: greedy replies are plain decoding's, guesses counted") {
  // Four sequences share every step; with drafting, each step carries their guesses too.
  const smol::SchedulerOptions options{.max_sequences = 4, .step_tokens = 64};
  const auto plain = serve(drafting_requests(false, false), options);
  const auto drafted = serve(drafting_requests(true, false), options);
  std::size_t total_drafted = 0, total_accepted = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    CHECK(plain[i].stats.drafted_tokens == 0);
    CHECK(drafted[i].stop == smol::StopReason::max_tokens);
    CHECK(drafted[i].tokens == plain[i].tokens);
    CHECK(drafted[i].text == plain[i].text);
    const smol::GenerationStats& s = drafted[i].stats;
    CHECK(s.accepted_draft_tokens <= s.drafted_tokens);
    CHECK(s.verify_passes <= s.drafted_tokens);
    // Each kept guess is a token without a step of its own.
    CHECK(s.accepted_draft_tokens < s.generated_tokens);
    total_drafted += s.drafted_tokens;
    total_accepted += s.accepted_draft_tokens;
  }
  CHECK(total_drafted > 0);
  CHECK(total_accepted > 0);  // the repeats are guessed right
  // A follow-up that forks a drafted sequence's cached prefix: the rolled-back guesses
  // left nothing behind in its K/V.
  auto first = drafting_requests(true, false)[0];
  auto again = first;
  const auto once = serve({first}, options)[0];
  again.prompt.insert(again.prompt.end(), once.tokens.begin(), once.tokens.end());
  again.max_tokens = 8;
  auto fresh = again;
  fresh.draft.reset();
  const auto both = serve({first, again}, {.max_sequences = 1, .step_tokens = 64});
  CHECK(both[1].stats.reused_tokens > first.prompt.size());
  CHECK(both[1].tokens == alone(fresh).tokens);
}

TEST_CASE("n-gram drafting with sampling: replies run their course, guesses counted") {
  const auto drafted =
      serve(drafting_requests(true, true), {.max_sequences = 4, .step_tokens = 64});
  for (const auto& r : drafted) {
    CHECK(r.stop == smol::StopReason::max_tokens);
    CHECK(r.tokens.size() == 40);
    CHECK(r.stats.accepted_draft_tokens <= r.stats.drafted_tokens);
  }
}

TEST_CASE("drafting steps aside when the step's token budget is full") {
  // One-token prompts and the same max_tokens: the four sequences are read in the first
  // step and then generate, each step holding one token of every sequence still running.
  // Without guesses they end together; a sequence whose guesses are kept ends sooner and
  // leaves the others more room.
  const auto requests = [](bool drafting) {
    std::vector<smol::GenerationRequest> out;
    for (const char* word : {"A", "one", "The", "Numbers"}) {
      smol::GenerationRequest request;
      request.prompt = {prompt_of(word).front()};
      request.sampling = smol::SamplerSettings::greedy();
      request.max_tokens = 48;
      request.ignore_eos = true;
      if (drafting) request.draft = smol::DraftLengthSettings{};
      out.push_back(std::move(request));
    }
    return out;
  };
  const auto plain = serve(requests(false), {.max_sequences = 4, .step_tokens = 4});
  // Four tokens a step: no room is ever left, and no guess is added.
  const auto full = serve(requests(true), {.max_sequences = 4, .step_tokens = 4});
  // Six tokens a step: two guesses at most beside the four tokens.
  const auto room = serve(requests(true), {.max_sequences = 4, .step_tokens = 6});
  std::size_t room_drafted = 0;
  // The guesses of all four fit the room of the steps: sum over steps s of 6 minus the
  // sequences running at s, i.e. 6 S - sum of each sequence's steps. A step gives a
  // sequence one token and its kept guesses (one fewer where max_tokens ends it on a kept
  // guess), so sequence i ran 48 - accepted_i steps, or one more.
  std::size_t most_steps = 0, sure_steps = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    CHECK(full[i].tokens == plain[i].tokens);
    CHECK(room[i].tokens == plain[i].tokens);
    CHECK(full[i].stats.drafted_tokens == 0);
    room_drafted += room[i].stats.drafted_tokens;
    const std::size_t steps = 48 - room[i].stats.accepted_draft_tokens;
    most_steps = std::max(most_steps, steps + 1);
    sure_steps += steps;
  }
  CHECK(room_drafted <= 6 * most_steps - sure_steps);
  CHECK(room_drafted > 0);  // the random model's loops are guessed at, where there is room
}

TEST_CASE("guesses take only the room prompts leave: a prompt is read as fast beside drafting") {
  // A generates (drafting or not) when B's long prompt arrives; eight tokens a step leave
  // B seven a step, guesses or not, so B's first token comes after as many steps.
  struct Run {
    std::size_t b_steps = 0;
    smol::GenerationResult a;
  };
  const auto run = [](bool drafting) {
    smol::Context ctx(2);
    smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = 4096});
    smol::Scheduler scheduler(engine, fixture().tokenizer, {.max_sequences = 2, .step_tokens = 8});
    Run out;
    smol::GenerationRequest a;
    a.prompt = prompt_of(kRepetitive[0]);
    a.sampling = smol::SamplerSettings::greedy();
    a.max_tokens = 200;
    a.ignore_eos = true;
    // Pauses of no tokens: drafting never pauses, whatever the steps' times.
    if (drafting) a.draft = smol::DraftLengthSettings{.pause = 0};
    a.on_done = [&out](const smol::GenerationResult& r) { out.a = r; };
    scheduler.submit(std::move(a));
    for (int i = 0; i < 12; ++i) scheduler.step();
    smol::GenerationRequest b;
    std::string text;
    while (prompt_of(text).size() < 100) text += "The sea was calm and the ships sailed on. ";
    b.prompt = prompt_of(text);
    b.sampling = smol::SamplerSettings::greedy();
    b.max_tokens = 1;
    bool b_done = false;
    b.on_done = [&b_done](const smol::GenerationResult&) { b_done = true; };
    scheduler.submit(std::move(b));
    while (!b_done && scheduler.step()) ++out.b_steps;
    scheduler.run_until_idle();
    return out;
  };
  const Run plain = run(false);
  const Run drafted = run(true);
  CHECK(plain.b_steps >= 100 / 7);
  CHECK(drafted.b_steps == plain.b_steps);
  CHECK(drafted.a.tokens == plain.a.tokens);
  CHECK(drafted.a.stats.drafted_tokens > 0);
}

namespace {

// Guesses whenever asked, whatever the history: the last token again, as many as asked
// for; counts the asks it answered.
class EagerDrafter final : public smol::BatchDrafter {
 public:
  explicit EagerDrafter(std::size_t& answered) : answered_(&answered) {}
  void draft(std::span<const Ask> asks) override {
    for (const Ask& ask : asks) {
      ask.draft->insert(ask.draft->end(), ask.max_tokens, ask.history.back());
      ++*answered_;
    }
  }
  void forget(std::uint64_t) override {}

 private:
  std::size_t* answered_;
};

}  // namespace

TEST_CASE("guesses that need KV pages no one has free step aside before anyone is preempted") {
  // Two pages of 256 positions. A reads a 252-token prompt, B a short one: a page each.
  // B ends after 4 tokens, before A's own tokens reach position 256, and its cached
  // sequence then gives its page up. A's first guesses (step 4, after two timed plain
  // steps: its token at 254, four guesses at 255..258) need that page while B still runs:
  // they must be dropped, and B (the newest, the one preemption would take) must not be
  // preempted.
  std::string text;
  while (prompt_of(text).size() < 252) text += "The sea was calm and the ships sailed on. ";
  std::vector<smol::TokenId> long_prompt = prompt_of(text);
  long_prompt.resize(252);
  struct Run {
    smol::GenerationResult a, b;
    std::size_t answered = 0, preemptions = 0;
  };
  const auto run = [&](bool drafting, std::size_t total_positions) {
    smol::Context ctx(2);
    smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = total_positions});
    Run out;
    smol::Scheduler scheduler(engine, fixture().tokenizer, {.max_sequences = 2, .step_tokens = 512},
                              std::make_unique<EagerDrafter>(out.answered));
    smol::GenerationRequest a;
    a.prompt = long_prompt;
    a.sampling = smol::SamplerSettings::greedy();
    a.max_tokens = 8;
    a.ignore_eos = true;
    // Pauses of no tokens: drafting never pauses, whatever the steps' times.
    if (drafting) a.draft = smol::DraftLengthSettings{.pause = 0};
    a.on_done = [&out](const smol::GenerationResult& r) { out.a = r; };
    smol::GenerationRequest b;
    b.prompt = prompt_of(kPrompts[5]);
    REQUIRE(b.prompt.front() != a.prompt.front());  // no shared prefix to wait for
    b.sampling = smol::SamplerSettings::greedy();
    b.max_tokens = 4;
    b.ignore_eos = true;
    b.on_done = [&out](const smol::GenerationResult& r) { out.b = r; };
    scheduler.submit(std::move(a));
    scheduler.submit(std::move(b));
    scheduler.run_until_idle();
    out.preemptions = scheduler.preemptions();
    return out;
  };
  const Run plain = run(false, 512);
  const Run tight = run(true, 512);
  const Run roomy = run(true, 4096);
  // The sequences' own tokens fit without preemption; with room, every answered ask is a
  // verified pass (the step's 512 tokens never cut a draft).
  CHECK(plain.preemptions == 0);
  CHECK(roomy.preemptions == 0);
  CHECK(roomy.answered > 0);
  CHECK(roomy.answered == roomy.a.stats.verify_passes);
  // Tight: no one preempted, some answered guesses dropped, drafting again once B's page
  // was free, and the replies are plain decoding's.
  CHECK(tight.preemptions == 0);
  CHECK(tight.a.stats.verify_passes > 0);
  CHECK(tight.answered > tight.a.stats.verify_passes);
  for (const Run* r : {&tight, &roomy}) {
    CHECK(r->a.stop == smol::StopReason::max_tokens);
    CHECK(r->b.stop == smol::StopReason::max_tokens);
    CHECK(r->a.tokens == plain.a.tokens);
    CHECK(r->b.tokens == plain.b.tokens);
  }
}

namespace {

struct DraftModelRun {
  std::vector<smol::GenerationResult> results;
  std::size_t draft_sequences_left = 0;  // the draft model's sequences after the last reply
  std::size_t preemptions = 0;
};

// The requests through a scheduler whose drafter is a draft model: the fixture itself,
// on its own engine with a pool of `draft_positions`.
DraftModelRun serve_with_draft_model(std::vector<smol::GenerationRequest> requests,
                                     smol::SchedulerOptions options, std::size_t draft_positions,
                                     std::size_t total_positions = 4096) {
  smol::Context ctx(2);
  smol::BatchTransformer engine(fixture().model, ctx, {.total_positions = total_positions});
  smol::BatchTransformer draft_engine(fixture().model, ctx, {.total_positions = draft_positions});
  auto owned = std::make_unique<smol::BatchModelDrafter>(draft_engine, fixture().tokenizer.size());
  const smol::BatchModelDrafter& drafter = *owned;
  smol::Scheduler scheduler(engine, fixture().tokenizer, options, std::move(owned));
  DraftModelRun out;
  out.results.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].on_done = [&out, i](const smol::GenerationResult& r) { out.results[i] = r; };
    scheduler.submit(std::move(requests[i]));
  }
  scheduler.run_until_idle();
  out.draft_sequences_left = drafter.sequences();
  out.preemptions = scheduler.preemptions();
  return out;
}

}  // namespace

TEST_CASE(
    "a draft model in the batch: greedy replies are plain decoding's; itself as draft "
    "is right nearly always") {
  // Two slots for four requests: sequences join and leave while the draft model follows
  // them, its K/V rolled back after each rejection and freed when a reply ends.
  const smol::SchedulerOptions options{.max_sequences = 2, .step_tokens = 64};
  const auto plain = serve(drafting_requests(false, false), options);
  const auto self = serve_with_draft_model(drafting_requests(true, false), options, 4096);
  // One page for the draft model: two sequences cannot both keep theirs, so guesses are
  // sometimes not made at all; the replies are the same.
  const auto cramped = serve_with_draft_model(drafting_requests(true, false), options, 256);
  std::size_t drafted = 0, accepted = 0, cramped_drafted = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    CHECK(self.results[i].stop == smol::StopReason::max_tokens);
    CHECK(self.results[i].tokens == plain[i].tokens);
    CHECK(self.results[i].text == plain[i].text);
    CHECK(cramped.results[i].tokens == plain[i].tokens);
    const smol::GenerationStats& s = self.results[i].stats;
    CHECK(s.accepted_draft_tokens <= s.drafted_tokens);
    CHECK(s.accepted_draft_tokens < s.generated_tokens);
    drafted += s.drafted_tokens;
    accepted += s.accepted_draft_tokens;
    cramped_drafted += cramped.results[i].stats.drafted_tokens;
  }
  CHECK(drafted > 0);
  // The same model, batch-invariant on both sides, guesses the very tokens chosen; only
  // a guess of an end-of-generation token (refused by ignore_eos) could miss.
  CHECK(accepted * 10 >= drafted * 9);
  CHECK(cramped_drafted > 0);
  CHECK(self.draft_sequences_left == 0);
  CHECK(cramped.draft_sequences_left == 0);
  CHECK(self.preemptions == 0);

  // Sampling: replies run their course, guesses counted.
  const auto sampled = serve_with_draft_model(drafting_requests(true, true), options, 4096);
  std::size_t sampled_drafted = 0;
  for (const auto& r : sampled.results) {
    CHECK(r.stop == smol::StopReason::max_tokens);
    CHECK(r.tokens.size() == 40);
    CHECK(r.stats.accepted_draft_tokens <= r.stats.drafted_tokens);
    sampled_drafted += r.stats.drafted_tokens;
  }
  CHECK(sampled_drafted > 0);
}

TEST_CASE("a draft model follows a preempted sequence: forgotten, then caught up again") {
  // Two pages: A and B each read a 230-token prompt into a page of their own, then both
  // need a second page; B, the newer, is preempted (its guesses went first), waits for
  // A to end, and is recomputed.
  std::vector<smol::GenerationRequest> requests;
  for (const char* text : {"The sea was calm and the ships sailed on. ",
                           "Numbers: 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, "}) {
    std::string long_text;
    while (prompt_of(long_text).size() < 230) long_text += text;
    smol::GenerationRequest request;
    request.prompt = prompt_of(long_text);
    request.prompt.resize(230);
    request.sampling = smol::SamplerSettings::greedy();
    request.max_tokens = 40;
    request.ignore_eos = true;
    requests.push_back(std::move(request));
  }
  const smol::SchedulerOptions options{.max_sequences = 2, .step_tokens = 512};
  const auto plain = serve_with_draft_model(requests, options, 4096, 512);
  for (auto& r : requests) r.draft = smol::DraftLengthSettings{.pause = 0};  // never pauses
  const auto drafted = serve_with_draft_model(requests, options, 4096, 512);
  CHECK(plain.preemptions > 0);
  CHECK(drafted.preemptions > 0);
  std::size_t guesses = 0, kept = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    CHECK(drafted.results[i].stop == smol::StopReason::max_tokens);
    CHECK(drafted.results[i].tokens == plain.results[i].tokens);
    guesses += drafted.results[i].stats.drafted_tokens;
    kept += drafted.results[i].stats.accepted_draft_tokens;
  }
  CHECK(guesses > 0);
  CHECK(kept * 10 >= guesses * 9);  // the draft model's K/V followed each sequence
  CHECK(drafted.draft_sequences_left == 0);
}

}  // namespace test_generate_scheduler
