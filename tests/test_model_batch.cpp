// BatchTransformer and KvPool: several sequences in one pass over the weights give
// each sequence the logits it gets alone (f32 mode: within 1e-4; the int8 mode: the
// same bits, whatever shares the batch), pages are shared, copied on write, returned
// and refused when the pool is full, and a cancelled batch leaves every sequence as
// it was.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "smol/model/batch_transformer.hpp"
#include "smol/model/model.hpp"
#include "smol/model/session_file.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/testing/synthetic.hpp"
#include "test_tokens.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_model_batch {

namespace {

const std::string kQ4Model = std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf";
constexpr std::size_t kVocab = 1024;

const smol::Model& model() {
  static const smol::Model instance = smol::Model::open(kQ4Model);
  return instance;
}

std::vector<std::int32_t> some_tokens(std::size_t n, unsigned seed) {
  return smol::test::some_tokens(n, kVocab, seed);
}

// Entries for tokens[from, from + n) of one sequence, logits for the last one.
void add_run(std::vector<smol::BatchEntry>& batch, smol::SequenceId seq,
             const std::vector<std::int32_t>& tokens, std::size_t from, std::size_t n) {
  for (std::size_t i = from; i < from + n; ++i) {
    batch.push_back(
        {.sequence = seq, .token = tokens[i], .position = i, .logits = i + 1 == from + n});
  }
}

double max_delta(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  return worst;
}

std::vector<float> row(std::span<const float> logits, std::size_t r) {
  const auto s = logits.subspan(r * kVocab, kVocab);
  return {s.begin(), s.end()};
}

// The logits after each step of `steps` (prefill of the first `prompt` tokens, then one
// token at a time), run alone in a Transformer.
std::vector<std::vector<float>> alone(smol::Context& ctx, const std::vector<std::int32_t>& tokens,
                                      std::size_t prompt, smol::KvType type) {
  smol::Transformer session(model(), ctx, {.context = 1024, .kv_type = type});
  std::vector<std::vector<float>> out;
  const auto first = session.forward(std::span(tokens).first(prompt), 0);
  out.emplace_back(first.begin(), first.end());
  for (std::size_t i = prompt; i < tokens.size(); ++i) {
    const auto next = session.forward(std::span(tokens).subspan(i, 1), i);
    out.emplace_back(next.begin(), next.end());
  }
  return out;
}

}  // namespace

TEST_CASE("sequences run together give the logits each gets alone (f32 mode)") {
  smol::Context ctx(2);
  ctx.activation_precision = smol::ActivationPrecision::f32;
  // Prompts of 5, 17 and 300 tokens (the last crosses a page), then 4 decode steps each.
  const std::vector<std::size_t> prompts = {5, 17, 300};
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::vector<std::vector<float>>> expected;
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    tokens.push_back(some_tokens(prompts[s] + 4, 10 + static_cast<unsigned>(s)));
    expected.push_back(alone(ctx, tokens[s], prompts[s], smol::KvType::f32));
  }

  smol::BatchTransformer engine(model(), ctx,
                                {.total_positions = 1024, .kv_type = smol::KvType::f32});
  std::vector<smol::SequenceId> ids;
  for (std::size_t s = 0; s < prompts.size(); ++s) ids.push_back(engine.pool().add());

  // Step 0: sequence 0's whole prompt and half of sequence 2's; sequence 1 waits.
  std::vector<smol::BatchEntry> batch;
  add_run(batch, ids[0], tokens[0], 0, 5);
  add_run(batch, ids[2], tokens[2], 0, 150);
  batch.back().logits = false;
  auto logits = engine.forward(batch);
  REQUIRE(logits.size() == kVocab);
  CHECK(max_delta(row(logits, 0), expected[0][0]) <= 1e-4);

  // Step 1: sequence 0 decodes, sequence 1 joins with its whole prompt, sequence 2
  // finishes its prompt: a mixed prefill + decode batch.
  batch.clear();
  add_run(batch, ids[0], tokens[0], 5, 1);
  add_run(batch, ids[1], tokens[1], 0, 17);
  add_run(batch, ids[2], tokens[2], 150, 150);
  logits = engine.forward(batch);
  REQUIRE(logits.size() == 3 * kVocab);
  CHECK(max_delta(row(logits, 0), expected[0][1]) <= 1e-4);
  CHECK(max_delta(row(logits, 1), expected[1][0]) <= 1e-4);
  CHECK(max_delta(row(logits, 2), expected[2][0]) <= 1e-4);

  // Steps 2..: everyone decodes; sequence 0 finishes early (removed), the others go on.
  for (std::size_t step = 0; step < 3; ++step) {
    batch.clear();
    if (step == 0) add_run(batch, ids[0], tokens[0], 6, 1);
    add_run(batch, ids[1], tokens[1], 17 + step, 1);
    add_run(batch, ids[2], tokens[2], 300 + step, 1);
    logits = engine.forward(batch);
    std::size_t r = 0;
    if (step == 0) CHECK(max_delta(row(logits, r++), expected[0][2]) <= 1e-4);
    CHECK(max_delta(row(logits, r++), expected[1][1 + step]) <= 1e-4);
    CHECK(max_delta(row(logits, r++), expected[2][1 + step]) <= 1e-4);
    if (step == 0) engine.pool().remove(ids[0]);
  }
}

TEST_CASE("a sequence's logits are the same bits whatever shares its batch (int8 mode)") {
  smol::Context ctx(2);
  const auto target = some_tokens(40, 77);
  // The default f16 cache, and quantized K and V (their rows are rotated and
  // quantized per position, so the pool's pages hold the same bytes in any batch).
  for (const smol::KvTypes types :
       {smol::KvTypes(smol::KvType::f16), smol::KvTypes(smol::KvType::q8_0, smol::KvType::q4_0)}) {
    CAPTURE(smol::kv_type_name(types.key));
    // Runs `target` (prefill 32, then 8 decode steps) beside `others` other sequences,
    // placed before or after it in each batch; returns the target's logits per step.
    const auto run = [&](std::size_t others, bool target_first) {
      smol::BatchTransformer engine(model(), ctx, {.total_positions = 4096, .kv_type = types});
      const smol::SequenceId me = engine.pool().add();
      std::vector<smol::SequenceId> crowd;
      std::vector<std::vector<std::int32_t>> crowd_tokens;
      for (std::size_t o = 0; o < others; ++o) {
        crowd.push_back(engine.pool().add());
        crowd_tokens.push_back(some_tokens(60, 200 + static_cast<unsigned>(o)));
      }
      std::vector<std::vector<float>> mine;
      for (std::size_t step = 0; step < 9; ++step) {
        std::vector<smol::BatchEntry> batch;
        const auto add_me = [&] {
          if (step == 0) {
            add_run(batch, me, target, 0, 32);
          } else {
            add_run(batch, me, target, 31 + step, 1);
          }
        };
        if (target_first) add_me();
        for (std::size_t o = 0; o < others; ++o) {
          // The others are at other depths and phases: some prefill, some decode.
          const std::size_t start = step == 0 ? 0 : 19 + o + step;
          const std::size_t n = step == 0 ? 20 + o : 1;
          add_run(batch, crowd[o], crowd_tokens[o], start, n);
        }
        if (!target_first) add_me();
        const auto logits = engine.forward(batch);
        const std::size_t my_row = target_first ? 0 : others;
        mine.push_back(row(logits, my_row));
      }
      return mine;
    };
    const auto with_one = run(1, true);
    const auto with_seven_after = run(7, false);
    const auto with_seven_before = run(7, true);
    for (std::size_t step = 0; step < with_one.size(); ++step) {
      CAPTURE(step);
      CHECK(std::memcmp(with_one[step].data(), with_seven_after[step].data(),
                        kVocab * sizeof(float)) == 0);
      CHECK(std::memcmp(with_one[step].data(), with_seven_before[step].data(),
                        kVocab * sizeof(float)) == 0);
    }
    // Alone, each decode step is a batch of one token: the same bits too.
    const auto alone_steps = run(0, true);
    for (std::size_t step = 0; step < alone_steps.size(); ++step) {
      CAPTURE(step);
      CHECK(std::memcmp(alone_steps[step].data(), with_one[step].data(), kVocab * sizeof(float)) ==
            0);
    }
  }
}

// The same invariance on the newer families' mechanisms (biases, per-head Q/K norms,
// rotate-half RoPE, heads wider than n_embd / n_head, post norms, GeGLU, a sliding
// window over the pool's pages): a token's logits stay the same bits beside other
// sequences and alone; and a batch gives each sequence what a Transformer gives it
// alone (f32 mode).
TEST_CASE(
    "Qwen2, Qwen3, Gemma 3, Qwen3-MoE, GPT-OSS: batches give each sequence its own logits, the "
    "same bits") {
  // Gemma 3's and GPT-OSS's windows of 16 positions: the target's 24 tokens move past
  // them. The mixtures' experts see a different number of tokens with every crowd.
  for (const char* preset :
       {"qwen2-tiny", "qwen3-tiny", "gemma3-tiny", "qwen3moe-tiny", "gpt-oss-tiny"}) {
    CAPTURE(preset);
    smol::SyntheticSpec spec = smol::synthetic_preset(preset);
    spec.layers = 4;
    spec.vocab = kVocab;
    spec.fast = true;  // random valid blocks: batching is held to the same file either way
    auto file = smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(),
                                                 std::string(preset) + ".gguf");
    auto config = smol::ModelConfig::from_gguf(file);
    const smol::Model qwen(std::move(file), std::move(config));
    smol::Context ctx(2);
    const auto target = some_tokens(24, 31);
    // The target's logits per step (prefill 20, then 4 decode steps) beside `others`.
    const auto run = [&](std::size_t others) {
      smol::BatchTransformer engine(qwen, ctx, {.total_positions = 1024});
      const smol::SequenceId me = engine.pool().add();
      std::vector<smol::SequenceId> crowd;
      for (std::size_t o = 0; o < others; ++o) crowd.push_back(engine.pool().add());
      const auto crowd_tokens = some_tokens(40, 41);
      std::vector<std::vector<float>> mine;
      for (std::size_t step = 0; step < 5; ++step) {
        std::vector<smol::BatchEntry> batch;
        for (std::size_t o = 0; o < others; ++o) {
          add_run(batch, crowd[o], crowd_tokens, step == 0 ? 0 : 11 + o + step,
                  step == 0 ? 12 + o : 1);
        }
        add_run(batch, me, target, step == 0 ? 0 : 19 + step, step == 0 ? 20 : 1);
        mine.push_back(row(engine.forward(batch), others));
      }
      return mine;
    };
    const auto alone_steps = run(0);
    const auto crowded = run(3);
    for (std::size_t step = 0; step < alone_steps.size(); ++step) {
      CAPTURE(step);
      CHECK(std::memcmp(alone_steps[step].data(), crowded[step].data(), kVocab * sizeof(float)) ==
            0);
    }

    smol::Context exact(2);
    exact.activation_precision = smol::ActivationPrecision::f32;
    smol::Transformer session(qwen, exact, {.context = 64, .kv_type = smol::KvType::f32});
    const auto want = session.forward(target, 0, smol::LogitsFor::last);
    smol::BatchTransformer engine(qwen, exact,
                                  {.total_positions = 1024, .kv_type = smol::KvType::f32});
    const smol::SequenceId other = engine.pool().add();
    const smol::SequenceId me = engine.pool().add();
    std::vector<smol::BatchEntry> batch;
    add_run(batch, other, some_tokens(9, 5), 0, 9);
    add_run(batch, me, target, 0, target.size());
    CHECK(max_delta(row(engine.forward(batch), 1), std::vector<float>(want.begin(), want.end())) <=
          1e-4);
  }
}

// In the int8 activation mode, the engine's default: under the sanitizers the f32 mode
// made this case 71 s of the stage, the int8 one 6 s. The forks' logits stay within 3e-6
// of each sequence alone on every set (0 on the scalar one); a page written by one fork
// and read by another, or a prefix page not copied before a rewind wrote it, moves them
// by orders of magnitude more.
TEST_CASE("the KV pool shares a forked prefix, copies on write and returns its pages") {
  smol::Context ctx(2);
  smol::BatchTransformer engine(model(), ctx,
                                {.total_positions = 1280, .kv_type = smol::KvType::f32});
  smol::KvPool& pool = engine.pool();
  REQUIRE(pool.total_pages() == 5);
  const auto system = some_tokens(300, 5);
  const smol::SequenceId base = pool.add();
  std::vector<smol::BatchEntry> batch;
  add_run(batch, base, system, 0, 300);
  const std::vector<float> base_logits = row(engine.forward(batch), 0);
  CHECK(pool.free_pages() == 3);

  // Two forks of the 300-token prefix: no page copied until one of them writes.
  const smol::SequenceId a = pool.fork(base, 300);
  const smol::SequenceId b = pool.fork(base, 300);
  CHECK(pool.free_pages() == 3);
  const auto tail_a = some_tokens(10, 6), tail_b = some_tokens(10, 7);
  std::vector<std::int32_t> full_a = system, full_b = system;
  full_a.insert(full_a.end(), tail_a.begin(), tail_a.end());
  full_b.insert(full_b.end(), tail_b.begin(), tail_b.end());
  batch.clear();
  add_run(batch, a, full_a, 300, 10);
  add_run(batch, b, full_b, 300, 10);
  CHECK(engine.pages_needed(batch) == 2);  // the shared second page, once per writer
  const auto logits = engine.forward(batch);
  CHECK(pool.free_pages() == 1);
  const auto expect_a = alone(ctx, full_a, 310, smol::KvType::f32);
  const auto expect_b = alone(ctx, full_b, 310, smol::KvType::f32);
  CHECK(max_delta(row(logits, 0), expect_a[0]) <= 1e-4);
  CHECK(max_delta(row(logits, 1), expect_b[0]) <= 1e-4);

  // The base sequence still holds the unchanged prefix: rewinding it to 200 (its second
  // page is freed, its first, shared with the forks, copied) and redoing 100 tokens
  // gives the same logits as before.
  batch.clear();
  add_run(batch, base, system, 200, 100);
  const auto redone = engine.forward(batch);
  CHECK(max_delta(row(redone, 0), base_logits) <= 1e-4);
  CHECK(pool.free_pages() == 0);

  // Full: a batch that needs more pages than are free is refused and changes nothing.
  const smol::SequenceId big = pool.add();
  const auto long_prompt = some_tokens(600, 8);
  batch.clear();
  add_run(batch, big, long_prompt, 0, 600);
  CHECK(engine.pages_needed(batch) == 3);
  CHECK_THROWS_AS(engine.forward(batch), smol::KvPoolFull);
  CHECK(pool.length(big) == 0);
  CHECK(pool.free_pages() == 0);

  // Truncating and removing return the pages.
  pool.truncate(a, 100);  // keeps its first page, still shared with b
  CHECK(pool.free_pages() == 1);
  pool.remove(b);
  CHECK(pool.free_pages() == 2);
  pool.remove(a);
  CHECK(pool.free_pages() == 3);
  pool.remove(base);
  CHECK(pool.free_pages() == 5);
  CHECK_NOTHROW(engine.forward(batch));
}

TEST_CASE("a Transformer's session file restores into the pool and continues as it does") {
  // The pool keeps a page's positions tiled as KvCache does, and a session file keeps
  // rows: a slot saved from a server's pool (smol-server's /slots) and a session saved by
  // smol-chat are one format. A 300-token prompt (across a page) saved by a Transformer,
  // restored into the pool: the next token's logits are the Transformer's, and the pool's
  // sequence saves back to the same bytes.
  smol::Context ctx(2);
  ctx.activation_precision = smol::ActivationPrecision::f32;
  for (const smol::KvType type : {smol::KvType::f32, smol::KvType::f16, smol::KvType::q8_0}) {
    CAPTURE(static_cast<int>(type));
    const std::vector<std::int32_t> tokens = some_tokens(301, 77);
    const std::span<const std::int32_t> prompt = std::span(tokens).first(300);
    smol::Transformer session(model(), ctx, {.context = 1024, .kv_type = type});
    session.forward(prompt, 0);
    const std::vector<std::byte> bytes = smol::encode_session(session, prompt);
    const auto next = session.forward(std::span(tokens).subspan(300, 1), 300);
    const std::vector<float> expected(next.begin(), next.end());

    smol::BatchTransformer engine(model(), ctx, {.total_positions = 1024, .kv_type = type});
    const smol::SessionFingerprint fingerprint =
        smol::session_fingerprint(model(), engine.pool().types());
    const smol::SessionImage image = smol::decode_session(bytes, "saved", &fingerprint);
    const smol::SequenceId id =
        smol::restore_pool_session(image, engine.pool(), fingerprint, "saved");
    CHECK(engine.pool().length(id) == 300);
    CHECK(smol::encode_pool_session(engine.pool(), id, fingerprint, prompt) == bytes);
    const auto logits = engine.forward(std::vector<smol::BatchEntry>{
        {.sequence = id, .token = tokens[300], .position = 300, .logits = true}});
    CHECK(max_delta(row(logits, 0), expected) <= 1e-4);
  }
}

TEST_CASE("a cancelled batch leaves every sequence as it was") {
  smol::Context ctx(2);
  smol::BatchTransformer engine(model(), ctx, {.total_positions = 1024});
  const smol::SequenceId a = engine.pool().add(), b = engine.pool().add();
  const auto ta = some_tokens(50, 1), tb = some_tokens(50, 2);
  std::vector<smol::BatchEntry> batch;
  add_run(batch, a, ta, 0, 20);
  add_run(batch, b, tb, 0, 30);
  const auto first = engine.forward(batch);
  const std::vector<float> a_after_20 = row(first, 0);

  batch.clear();
  add_run(batch, a, ta, 20, 30);
  add_run(batch, b, tb, 30, 20);
  std::size_t polls = 0;
  const smol::CancelCheck cancel([&] { return ++polls > 5; });
  CHECK_THROWS_AS(engine.forward(batch, cancel), smol::Cancelled);
  CHECK(engine.pool().length(a) == 20);
  CHECK(engine.pool().length(b) == 30);
  // Going on from there: the same as a batch that was never cancelled.
  const auto resumed = engine.forward(batch);
  smol::BatchTransformer clean(model(), ctx, {.total_positions = 1024});
  const smol::SequenceId ca = clean.pool().add(), cb = clean.pool().add();
  std::vector<smol::BatchEntry> whole;
  add_run(whole, ca, ta, 0, 20);
  add_run(whole, cb, tb, 0, 30);
  clean.forward(whole);
  std::vector<smol::BatchEntry> rest;
  add_run(rest, ca, ta, 20, 30);
  add_run(rest, cb, tb, 30, 20);
  const auto expected = clean.forward(rest);
  CHECK(std::memcmp(resumed.data(), expected.data(), resumed.size() * sizeof(float)) == 0);
}

TEST_CASE("bad batches are refused with a clear error") {
  smol::Context ctx(1);
  smol::BatchTransformer engine(model(), ctx, {.total_positions = 512});
  const smol::SequenceId a = engine.pool().add();
  const auto t = some_tokens(8, 3);
  std::vector<smol::BatchEntry> gap = {{a, t[0], 0}, {a, t[1], 2}};
  CHECK_THROWS_WITH(engine.forward(gap), doctest::Contains("positions must be consecutive"));
  std::vector<smol::BatchEntry> ahead = {{a, t[0], 3}};
  CHECK_THROWS_WITH(engine.forward(ahead), doctest::Contains("is past its 0 positions"));
  std::vector<smol::BatchEntry> bad_token = {{a, 5000, 0}};
  CHECK_THROWS_WITH(engine.forward(bad_token), doctest::Contains("outside the vocabulary"));
  std::vector<smol::BatchEntry> unknown = {{42, t[0], 0}};
  CHECK_THROWS_WITH(engine.forward(unknown), doctest::Contains("no sequence 42"));
}

}  // namespace test_model_batch
