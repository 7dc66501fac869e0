// Constrained decoding through generation: the Scheduler's requests (each with its own
// grammar state over a shared table) and a chat reply (ReplyGenerator through
// ChatSession) write only what their grammar allows and end only where it may end.
#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smol/generate/chat_session.hpp"
#include "smol/generate/scheduler.hpp"
#include "smol/generate/token_constraints.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/recognizer.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"
#include "smol/model/batch_transformer.hpp"
#include "smol/model/model.hpp"
#include "smol/text/gguf_vocabulary.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_generate_grammar {

namespace {

const std::string kFixture = std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf";

struct Fixture {
  smol::Model model = smol::Model::open(kFixture);
  smol::Tokenizer tokenizer{smol::load_vocabulary(model.file())};
  std::shared_ptr<const smol::TokenTrie> trie = std::make_shared<smol::TokenTrie>(tokenizer);
};

Fixture& fixture() {
  static Fixture instance;
  return instance;
}

std::shared_ptr<smol::TokenMaskTable> table_for(std::string_view gbnf) {
  return std::make_shared<smol::TokenMaskTable>(smol::parse_gbnf(gbnf), fixture().trie);
}

// Whether `text` is a sentence of the grammar (`whole`) or the start of one.
bool grammar_takes(const smol::TokenMaskTable& table, const std::string& text, bool whole) {
  smol::GrammarRecognizer recognizer(table.grammar());
  smol::GrammarState state = recognizer.initial();
  if (!recognizer.advance(state, text)) return false;
  return !whole || smol::GrammarRecognizer::can_end(state);
}

constexpr std::string_view kAnswer = R"(root ::= ("yes" | "no" | "maybe") "." )";
constexpr std::string_view kList = R"(root ::= "[" [0-9]{1,3} ("," " "? [0-9]{1,3}){0,4} "]")";

// Answers with a one-hot row on the end-of-generation token: a model that wants to stop
// at once.
class EagerToStop final : public smol::LogitsSource {
 public:
  explicit EagerToStop(smol::TokenId eos) : eos_(eos), logits_(fixture().tokenizer.size()) {}
  std::span<const float> evaluate(std::span<const smol::TokenId>, std::size_t,
                                  const smol::CancelCheck& = {}) override {
    std::fill(logits_.begin(), logits_.end(), 0.0f);
    logits_[static_cast<std::size_t>(eos_)] = 10.0f;
    return logits_;
  }
  std::size_t context_length() const override { return 4096; }

 private:
  smol::TokenId eos_;
  std::vector<float> logits_;
};

}  // namespace

TEST_CASE("scheduler: every request writes only what its grammar allows") {
  Fixture& f = fixture();
  smol::Context ctx(2);
  smol::BatchTransformer engine(f.model, ctx, {.total_positions = 4096});
  smol::Scheduler scheduler(engine, f.tokenizer, {.max_sequences = 4, .step_tokens = 64});
  const auto answer = table_for(kAnswer);
  const auto list = table_for(kList);
  struct Case {
    std::shared_ptr<smol::TokenMaskTable> table;
    bool ignore_eos;
    smol::GenerationResult result;
  };
  // Two requests per table (a shared table, separate states), sampled, with and without
  // ignore_eos, plus one unconstrained request beside them.
  std::vector<Case> cases = {{answer, false, {}},
                             {answer, true, {}},
                             {list, false, {}},
                             {list, true, {}},
                             {nullptr, false, {}}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    smol::GenerationRequest request;
    request.prompt = f.tokenizer.encode("Answer:", {.add_bos = false});
    request.sampling.temperature = 1.0f;
    request.sampling.seed = 7 + i;
    request.max_tokens = 40;
    request.ignore_eos = cases[i].ignore_eos;
    request.grammar = cases[i].table;
    request.on_done = [&cases, i](const smol::GenerationResult& r) { cases[i].result = r; };
    scheduler.submit(std::move(request));
  }
  scheduler.run_until_idle();
  for (const Case& c : cases) {
    if (!c.table) continue;
    CAPTURE(c.result.text);
    CAPTURE(c.ignore_eos);
    // These grammars always finish within 40 tokens; with ignore_eos the reply ends
    // when the grammar is complete and nothing may follow.
    CHECK(c.result.stop == smol::StopReason::end_of_generation);
    CHECK(grammar_takes(*c.table, c.result.text, true));
  }
}

TEST_CASE("chat reply: a model that wants to stop at once must first complete the grammar") {
  Fixture& f = fixture();
  REQUIRE(f.tokenizer.vocabulary().eos_id);
  EagerToStop source(*f.tokenizer.vocabulary().eos_id);
  smol::ChatSettings settings;
  settings.sampling = smol::SamplerSettings::greedy();
  settings.raw = true;
  smol::ChatSession session(source, f.tokenizer, smol::ChatTemplate{}, settings);
  // Unconstrained, it ends at once.
  const smol::Reply free = session.ask("Question?");
  CHECK(free.stats.generated_tokens == 1);
  CHECK(free.text.empty());
  // Constrained: it writes a sentence of the grammar, then ends as soon as it may.
  smol::ReplyOptions options;
  options.grammar = table_for(kList);
  const smol::Reply constrained = session.ask("Question?", options);
  CAPTURE(constrained.text);
  CHECK(constrained.stop == smol::StopReason::end_of_generation);
  CHECK(grammar_takes(*options.grammar, constrained.text, true));
  CHECK(constrained.text.front() == '[');
  CHECK(constrained.text.back() == ']');
}

TEST_CASE("scheduler: drafted guesses pass the grammar, the reply is the plain one") {
  Fixture& f = fixture();
  // A long list, after a prompt full of the list's own tokens: prompt lookup guesses
  // from it, and the grammar rejects what it does not allow.
  const auto table = table_for(R"(root ::= "[" [0-9]{1,3} ("," " " [0-9]{1,3}){0,40} "]")");
  const auto run = [&](bool drafting) {
    smol::Context ctx(2);
    smol::BatchTransformer engine(f.model, ctx, {.total_positions = 4096});
    smol::Scheduler scheduler(engine, f.tokenizer, {.max_sequences = 2, .step_tokens = 64});
    std::vector<smol::GenerationResult> results(2);
    for (std::size_t i = 0; i < results.size(); ++i) {
      smol::GenerationRequest request;
      request.prompt = f.tokenizer.encode("[1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]\n[1, 2, 3, 1",
                                          {.add_bos = false});
      request.sampling = smol::SamplerSettings::greedy();
      request.max_tokens = 60;
      request.ignore_eos = i == 1;
      request.grammar = table;
      if (drafting) request.draft = smol::DraftLengthSettings{};
      request.on_done = [&results, i](const smol::GenerationResult& r) { results[i] = r; };
      scheduler.submit(std::move(request));
    }
    scheduler.run_until_idle();
    return results;
  };
  const auto plain = run(false);
  const auto drafted = run(true);
  std::size_t guesses = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(drafted[i].text);
    CHECK(drafted[i].tokens == plain[i].tokens);
    CHECK(grammar_takes(*table, drafted[i].text, drafted[i].stop != smol::StopReason::max_tokens));
    CHECK(drafted[i].stats.accepted_draft_tokens <= drafted[i].stats.drafted_tokens);
    guesses += drafted[i].stats.drafted_tokens;
  }
  CHECK(guesses > 0);
}

// A grammar that leaves nothing to write ends the reply with a reason of its own, never
// as if the model had finished: after "a" it wants a surrogate, which no text holds
// (grammar_dead_end); after forty x's it becomes too ambiguous for its step budget
// (grammar_budget). Both in the scheduler (the server) and in a chat reply (smol-chat).
TEST_CASE("a grammar that leaves nothing to write ends the reply with its own reason") {
  Fixture& f = fixture();
  const auto dead_end = table_for(R"(root ::= "a" [\uD800-\uDFFF])");
  const auto ambiguous = std::make_shared<smol::TokenMaskTable>(
      smol::parse_gbnf("root ::= \"" + std::string(40, 'x') + "\" ((\"a\"{0,200}){0,200}){0,200}"),
      f.trie, smol::TokenMaskTable::kDefaultMaskMemoryLimit,
      smol::GrammarLimits{.max_step_work = 100'000});
  // The reply ends where the next mask would need the ambiguous part: a token that could
  // reach the fortieth x (the fixture's vocabulary may hold "xx").
  struct Case {
    std::shared_ptr<smol::TokenMaskTable> table;
    smol::StopReason stop;
    std::string text;
  };
  const auto x_run = [](const std::string& text) {
    return text.size() >= 30 && text.size() < 40 &&
           text.find_first_not_of('x') == std::string::npos;
  };
  const std::vector<Case> cases = {{dead_end, smol::StopReason::grammar_dead_end, "a"},
                                   {ambiguous, smol::StopReason::grammar_budget, "x..."}};
  smol::Context ctx(2);
  smol::BatchTransformer engine(f.model, ctx, {.total_positions = 4096});
  smol::Scheduler scheduler(engine, f.tokenizer, {.max_sequences = 4, .step_tokens = 64});
  std::vector<smol::GenerationResult> results(cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    smol::GenerationRequest request;
    request.prompt = f.tokenizer.encode("Answer:", {.add_bos = false});
    request.sampling = smol::SamplerSettings::greedy();
    request.max_tokens = 100;
    request.grammar = cases[i].table;
    request.on_done = [&results, i](const smol::GenerationResult& r) { results[i] = r; };
    scheduler.submit(std::move(request));
  }
  // An unconstrained request beside them is not disturbed.
  smol::GenerationResult free;
  smol::GenerationRequest plain;
  plain.prompt = f.tokenizer.encode("Answer:", {.add_bos = false});
  plain.max_tokens = 8;
  plain.ignore_eos = true;
  plain.on_done = [&free](const smol::GenerationResult& r) { free = r; };
  scheduler.submit(std::move(plain));
  scheduler.run_until_idle();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(results[i].text);
    CHECK(results[i].stop == cases[i].stop);
    CHECK((cases[i].text == "x..." ? x_run(results[i].text) : results[i].text == cases[i].text));
  }
  CHECK(free.stop == smol::StopReason::max_tokens);
  CHECK(free.stats.generated_tokens == 8);

  // The chat reply's path (ReplyGenerator).
  EagerToStop source(*f.tokenizer.vocabulary().eos_id);
  smol::ChatSettings settings;
  settings.sampling = smol::SamplerSettings::greedy();
  settings.raw = true;
  smol::ChatSession session(source, f.tokenizer, smol::ChatTemplate{}, settings);
  for (const Case& c : cases) {
    smol::ReplyOptions options;
    options.grammar = c.table;
    const smol::Reply reply = session.ask("Question?", options);
    CAPTURE(reply.text);
    CHECK(reply.stop == c.stop);
    CHECK((c.text == "x..." ? x_run(reply.text) : reply.text == c.text));
  }
}

}  // namespace test_generate_grammar

namespace test_generate_grammar {

namespace {

// Feeds `text`'s tokens through `constraints`; the stop reason of the first token
// refused, and in `free_tokens` how many were sampled from an unconstrained row.
std::optional<smol::StopReason> feed(smol::TokenConstraints& constraints, const std::string& text,
                                     std::size_t& free_tokens) {
  Fixture& f = fixture();
  const std::vector<float> logits(f.tokenizer.size(), 0.0f);
  for (const smol::TokenId token : f.tokenizer.encode(text, {.add_bos = false})) {
    const smol::ConstrainedRow row = constraints.mask(logits, f.tokenizer);
    if (row.stop) return row.stop;
    free_tokens += row.logits.data() == logits.data();
    if (auto stop = constraints.accept(token)) return stop;
  }
  return std::nullopt;
}

// Whether the row after `constraints`' tokens lets `piece` (one token) be written.
bool allows(smol::TokenConstraints& constraints, const std::string& piece) {
  Fixture& f = fixture();
  const std::vector<smol::TokenId> ids = f.tokenizer.encode(piece, {.add_bos = false});
  REQUIRE(ids.size() == 1);
  const std::vector<float> logits(f.tokenizer.size(), 0.0f);
  const smol::ConstrainedRow row = constraints.mask(logits, f.tokenizer);
  REQUIRE_FALSE(row.stop);
  return row.logits[static_cast<std::size_t>(ids[0])] > -1.0f;
}

}  // namespace

TEST_CASE(
    "a lazy grammar: free text until its trigger, the grammar from the trigger's first byte") {
  Fixture& f = fixture();
  const auto table = table_for(R"(root ::= "<call>" [a-z]+ "</call>")");
  const std::string prose = "Hello there, some free text: 123 <ca ll> ";
  const std::size_t prose_tokens = f.tokenizer.encode(prose, {.add_bos = false}).size();
  {
    smol::TokenConstraints lazy(false, table, smol::GrammarTrigger{"<call>"});
    std::size_t free_tokens = 0;
    CHECK_FALSE(feed(lazy, prose + "<call>abc", free_tokens).has_value());
    CHECK(free_tokens >= prose_tokens);  // the prose and the trigger's first token: free
    CHECK(allows(lazy, "d"));            // now the grammar's: letters or the close
    CHECK_FALSE(allows(lazy, "9"));
  }
  {
    // The grammar refuses the trigger's token itself (bytes after the trigger it cannot
    // take): the reply ends with its own reason.
    const std::vector<smol::TokenId> the = f.tokenizer.encode("the", {.add_bos = false});
    REQUIRE(the.size() == 1);
    smol::TokenConstraints lazy(false, table_for(R"(root ::= "t" [0-9]+)"),
                                smol::GrammarTrigger{"t"});
    CHECK(lazy.accept(the[0]) == smol::StopReason::grammar_dead_end);
  }
  {
    // at_start: only a reply that begins with the trigger; otherwise it stays free.
    smol::TokenConstraints at_start(false, table, smol::GrammarTrigger{"<call>", true});
    std::size_t free_tokens = 0;
    CHECK_FALSE(feed(at_start, "Sure <call>12 and more", free_tokens).has_value());
    CHECK(allows(at_start, "9"));
    smol::TokenConstraints first(false, table, smol::GrammarTrigger{"<call>", true});
    CHECK_FALSE(feed(first, "  <call>", free_tokens).has_value());
    CHECK_FALSE(allows(first, "9"));
  }
  const smol::ThinkMarkers think = smol::ThinkMarkers::of(f.tokenizer);
  if (think.open && think.close) {
    // A trigger inside the reasoning is no call.
    smol::TokenConstraints lazy(false, table, smol::GrammarTrigger{"<call>"}, think, true);
    std::size_t free_tokens = 0;
    CHECK_FALSE(feed(lazy, "I could write <call>12 here", free_tokens).has_value());
    CHECK_FALSE(lazy.accept(*think.close).has_value());
    CHECK_FALSE(feed(lazy, "Then <call>ab", free_tokens).has_value());
    CHECK_FALSE(allows(lazy, "9"));
  }
}

}  // namespace test_generate_grammar

namespace test_generate_grammar {

TEST_CASE("spelled control tokens: a tool syntax's markers are text to grammars and replies") {
  Fixture& f = fixture();
  const std::optional<smol::TokenId> marker = f.tokenizer.find_token("<|im_start|>");
  REQUIRE(marker.has_value());
  REQUIRE(f.tokenizer.is_control(*marker));
  const std::vector<smol::TokenId> spelled = {*marker};

  // The trie: a control token matches nothing, unless spelled.
  CHECK(f.trie->piece(*marker).empty());
  const auto trie = std::make_shared<smol::TokenTrie>(f.tokenizer, spelled);
  CHECK(trie->piece(*marker) == "<|im_start|>");
  smol::GrammarMatcher matcher(std::make_shared<smol::TokenMaskTable>(
      smol::parse_gbnf(R"(root ::= "<|im_start|>" [a-z]+)"), trie));
  CHECK(matcher.allowed_tokens()->contains(*marker));
  CHECK(matcher.accept(*marker));
  smol::GrammarMatcher plain(table_for(R"(root ::= "<|im_start|>" [a-z]+)"));
  CHECK_FALSE(plain.allowed_tokens()->contains(*marker));

  // The reply: shown as text when spelled, kept out of sight otherwise.
  const std::vector<smol::TokenId> ab = f.tokenizer.encode("ab", {.add_bos = false});
  for (const bool shown : {false, true}) {
    CAPTURE(shown);
    smol::ReplyStream stream(f.tokenizer, {}, {}, nullptr, smol::PieceKind::answer,
                             shown ? spelled : std::vector<smol::TokenId>{});
    stream.take(*marker);
    for (const smol::TokenId t : ab) stream.take(t);
    stream.finish();
    CHECK(stream.answer() == (shown ? "<|im_start|>ab" : "ab"));
    CHECK(stream.text() == "<|im_start|>ab");
  }
}

}  // namespace test_generate_grammar
