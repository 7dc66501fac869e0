// The engine thread and reply channels, as the server uses them: connection threads
// submit, read their pieces and cancel while one thread runs the scheduler. Run under
// ThreadSanitizer too (scripts/test.sh's tsan stage).
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "smol/model/batch_transformer.hpp"
#include "smol/model/model.hpp"
#include "smol/serve/engine_thread.hpp"
#include "smol/serve/reply_channel.hpp"
#include "smol/serve/token_mask_cache.hpp"
#include "smol/text/gguf_vocabulary.hpp"

namespace {

const std::string kFixture = std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf";

struct Fixture {
  smol::Model model = smol::Model::open(kFixture);
  smol::Tokenizer tokenizer{smol::load_vocabulary(model.file())};
  smol::Context context{1};
};

Fixture& fixture() {
  static Fixture instance;
  return instance;
}

smol::GenerationRequest request_for(int i, std::size_t max_tokens) {
  const std::vector<std::string> prompts = {"Once upon a time", "The quick brown fox",
                                            "Why is the sky blue?", "Numbers: 1, 2, 3"};
  smol::GenerationRequest request;
  request.prompt = fixture().tokenizer.encode(prompts[static_cast<std::size_t>(i) % prompts.size()],
                                              {.add_bos = false});
  request.sampling = smol::SamplerSettings::greedy();
  request.max_tokens = max_tokens;
  request.ignore_eos = true;
  return request;
}

struct Reply {
  std::string text;
  smol::GenerationResult result;
};

// Reads a channel to its end, as a connection thread does.
Reply read_all(smol::serve::ReplyChannel& channel) {
  Reply reply;
  for (;;) {
    auto event = channel.next(std::chrono::milliseconds(50));
    if (!event) continue;
    if (event->done) {
      reply.result = *event->done;
      return reply;
    }
    reply.text += event->text;
  }
}

// The reply of request i alone, on an engine of its own.
Reply alone(int i, std::size_t max_tokens) {
  Fixture& f = fixture();
  smol::BatchTransformer engine(f.model, f.context, {.total_positions = 1024});
  smol::Scheduler scheduler(engine, f.tokenizer, {.max_sequences = 1});
  smol::serve::EngineThread thread(scheduler);
  auto channel = std::make_shared<smol::serve::ReplyChannel>();
  smol::GenerationRequest request = request_for(i, max_tokens);
  smol::serve::ReplyChannel::connect(channel, request);
  thread.submit(std::move(request));
  return read_all(*channel);
}

}  // namespace

TEST_CASE("connection threads get the same replies as requests run alone") {
  constexpr int kRequests = 6;
  std::vector<Reply> expected;
  for (int i = 0; i < kRequests; ++i) expected.push_back(alone(i, 8 + static_cast<std::size_t>(i)));

  Fixture& f = fixture();
  smol::BatchTransformer engine(f.model, f.context, {.total_positions = 2048});
  smol::Scheduler scheduler(engine, f.tokenizer, {.max_sequences = 3, .step_tokens = 64});
  smol::serve::EngineThread thread(scheduler);
  std::vector<Reply> got(kRequests);
  std::vector<std::thread> connections;
  for (int i = 0; i < kRequests; ++i) {
    connections.emplace_back([&, i] {
      auto channel = std::make_shared<smol::serve::ReplyChannel>();
      smol::GenerationRequest request = request_for(i, 8 + static_cast<std::size_t>(i));
      smol::serve::ReplyChannel::connect(channel, request);
      thread.submit(std::move(request));
      got[static_cast<std::size_t>(i)] = read_all(*channel);
    });
  }
  for (auto& connection : connections) connection.join();
  for (int i = 0; i < kRequests; ++i) {
    CAPTURE(i);
    const auto& g = got[static_cast<std::size_t>(i)];
    CHECK(g.result.tokens == expected[static_cast<std::size_t>(i)].result.tokens);
    CHECK(g.text == expected[static_cast<std::size_t>(i)].text);
    CHECK(g.result.stop == smol::StopReason::max_tokens);
  }
  CHECK(thread.failures() == 0);
}

TEST_CASE("a connection cancels its request mid-reply; stop() ends the rest") {
  Fixture& f = fixture();
  smol::BatchTransformer engine(f.model, f.context, {.total_positions = 2048});
  smol::Scheduler scheduler(engine, f.tokenizer, {.max_sequences = 1, .step_tokens = 64});
  auto thread = std::make_unique<smol::serve::EngineThread>(scheduler);

  // One long request, cancelled from its reader after its first piece.
  auto channel = std::make_shared<smol::serve::ReplyChannel>();
  smol::GenerationRequest request = request_for(0, 100000);
  smol::serve::ReplyChannel::connect(channel, request);
  const smol::RequestId id = *thread->submit(std::move(request));
  std::optional<smol::serve::ReplyEvent> first;
  while (!(first = channel->next(std::chrono::milliseconds(50)))) {
  }
  REQUIRE_FALSE(first->done);
  thread->cancel(id);
  const Reply cancelled = read_all(*channel);
  CHECK(cancelled.result.stop == smol::StopReason::cancelled);
  CHECK(cancelled.result.tokens.size() < 100000);

  // Two more, one running and one waiting for the single slot: stopping the engine
  // ends both, so no reader waits forever.
  std::vector<std::shared_ptr<smol::serve::ReplyChannel>> channels;
  for (int i = 1; i <= 2; ++i) {
    channels.push_back(std::make_shared<smol::serve::ReplyChannel>());
    smol::GenerationRequest r = request_for(i, 100000);
    smol::serve::ReplyChannel::connect(channels.back(), r);
    thread->submit(std::move(r));
  }
  while (!channels[0]->next(std::chrono::milliseconds(50))) {
  }
  thread->stop();
  for (auto& c : channels) CHECK(read_all(*c).result.stop == smol::StopReason::cancelled);
  // A request that comes after stop() is refused, not queued where nothing runs it.
  CHECK_FALSE(thread->submit(request_for(3, 4)).has_value());
  CHECK(thread->slots_busy() == 0);
  thread.reset();
  CHECK(engine.pool().free_pages() == engine.pool().total_pages());
}

TEST_CASE("call(): connection threads read and erase cached sequences between the engine's steps") {
  // Two connections generate while two others list, save and erase the cached sequences
  // (what /slots does), each call run on the engine thread; a call that throws gives the
  // caller its exception; after stop() a call is refused.
  Fixture& f = fixture();
  smol::BatchTransformer engine(f.model, f.context, {.total_positions = 2048});
  smol::Scheduler scheduler(engine, f.tokenizer, {.max_sequences = 2, .step_tokens = 64});
  smol::serve::EngineThread thread(scheduler);
  const smol::SessionFingerprint fingerprint =
      smol::session_fingerprint(f.model, engine.pool().types());
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      auto channel = std::make_shared<smol::serve::ReplyChannel>();
      smol::GenerationRequest request = request_for(i, 6);
      smol::serve::ReplyChannel::connect(channel, request);
      thread.submit(std::move(request));
      CHECK(read_all(*channel).result.stop == smol::StopReason::max_tokens);
    });
  }
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        const std::size_t bytes = thread.call([&](smol::Scheduler& s) -> std::size_t {
          return s.cached_sequences() > 0 ? s.save_cached(0, fingerprint).size() : 0;
        });
        CHECK((bytes == 0 || bytes > 64));  // none cached yet, or a whole session file
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(thread.call([](smol::Scheduler& s) { return s.cached_sequences(); }) == 2);
  CHECK_THROWS_AS(thread.call([](smol::Scheduler& s) { return s.erase_cached(5); }), smol::Error);
  CHECK(thread.call([](smol::Scheduler& s) { return s.erase_cached(0); }) > 0);
  CHECK(thread.call([](smol::Scheduler& s) { return s.cached_sequences(); }) == 1);
  thread.stop();
  CHECK_THROWS_AS(thread.call([](smol::Scheduler& s) { return s.cached_sequences(); }),
                  smol::Error);
}

namespace {

smol::serve::OutputGrammar output(const std::string& gbnf) {
  return {gbnf, smol::parse_gbnf(gbnf), "grammar"};
}

}  // namespace

// The server's cache of compiled grammars (serve/token_mask_cache.hpp), from connection
// threads as the server calls it.
TEST_CASE("mask cache: one compilation per grammar; failures are not kept") {
  smol::serve::TokenMaskCache cache(fixture().tokenizer);
  const auto list = output(R"(root ::= "[" [0-9]+ ("," [0-9]+)* "]")");
  const auto first = cache.table(list);
  CHECK(cache.table(list) == first);
  CHECK(cache.compilations() == 1);
  // No token can begin this one: refused each time it comes, never cached.
  const auto nothing = output(R"(root ::= [\uD800-\uDFFF]+)");
  CHECK_THROWS_AS(cache.table(nothing), smol::Error);
  CHECK_THROWS_AS(cache.table(nothing), smol::Error);
  CHECK(cache.compilations() == 3);
  CHECK(cache.size() == 1);
}

TEST_CASE("mask cache: bounded in bytes; a filling table is compiled afresh for new requests") {
  // A byte bound below one table: each new grammar pushes the older one out.
  smol::serve::TokenMaskCache small(fixture().tokenizer, {.bytes = 1});
  const auto a = small.table(output(R"(root ::= "a"+)"));
  small.table(output(R"(root ::= "b"+)"));
  CHECK(small.size() == 1);
  CHECK(small.table(output(R"(root ::= "a"+)")) != a);  // compiled again
  CHECK(small.compilations() == 3);
  // A table past half its memory budget is handed to no new request.
  smol::serve::TokenMaskCache tight(fixture().tokenizer,
                                    {.limits = {.max_table_bytes = std::size_t{24} << 10}});
  const auto json = output(R"(root ::= [a-z]{0,200})");  // 13 states, about 17 KiB
  const auto old = tight.table(json);
  REQUIRE(old->filling());
  CHECK(tight.table(json) != old);
  CHECK(tight.compilations() == 2);
}

TEST_CASE("mask cache: a waiting request compiles the grammar itself when the compiler's leaves") {
  // Budgets lifted: the nested repetition compiles until cancelled.
  smol::serve::TokenMaskCache cache(
      fixture().tokenizer,
      {.limits = {.max_step_work = std::size_t{1} << 40, .compile_seconds = 3600}});
  const auto heavy = output(R"(root ::= (("a"{0,2000}){0,2000}){0,2000})");
  std::atomic<bool> first_gone{false}, second_gone{false};
  std::atomic<int> cancelled{0};
  const auto ask = [&](std::atomic<bool>& gone) {
    try {
      cache.table(heavy, smol::CancelCheck(&gone));
    } catch (const smol::Cancelled&) {
      ++cancelled;
    }
  };
  std::thread first([&] { ask(first_gone); });
  while (cache.compilations() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread second([&] { ask(second_gone); });  // finds the compilation and waits
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  first_gone = true;
  // The first request's client left: the second compiles the grammar itself.
  for (int i = 0; i < 6000 && cache.compilations() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(cache.compilations() == 2);
  second_gone = true;
  first.join();
  second.join();
  CHECK(cancelled == 2);
  CHECK(cache.size() == 0);
}
