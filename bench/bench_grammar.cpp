// Grammar token masks along a real JSON document: the time to build the allowed-token
// mask at each step of generating the document, token by token (the document tokenized
// by the vocabulary's own tokenizer, as a model would write it), under a nested JSON
// schema (objects, arrays of objects, $ref, enum, formats, a pattern).
//
//   mask_warm/<vocab>   the table already saw this schema (a server's steady state: the
//                       second and later requests with the same schema)
//   mask_cold/<vocab>   a fresh table each pass (the first request with a schema: states
//                       and masks computed as the document reaches them)
//   apply/<vocab>       setting the refused logits to -inf with the mask
//   refuse_ambiguous/<vocab>     compiling nested counted repetition until its step budget
//                                refuses it (what a hostile request costs)
//   compile_wide_object/<vocab>  a 5,000-property schema from its text to its first mask
// Counters: median_us / p90_us / max_us per token, tokens per document. The manual time
// is the sum of the measured steps.
//
// $SMOL_GRAMMAR_SCHEMA and $SMOL_GRAMMAR_DOCUMENT, when set, name files holding another
// schema and a document valid under it in place of the built-in pair.
//
// Vocabularies: the fixture's (1,024 tokens), SmolLM2-135M's (49,152; $SMOL_REAL_MODEL or
// the real_model test fixture's copy in the build tree) and a 128,256-token vocabulary
// (the size of Llama 3's) made from SmolLM2's by adding concatenations of two of its
// tokens: no real Llama-3 vocabulary file is at hand here, and byte-level BPE tokens are
// such concatenations, so the trie has a realistic shape; a real file's numbers may
// differ somewhat.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/grammar_limits.hpp"
#include "smol/grammar/grammar_matcher.hpp"
#include "smol/grammar/json_schema.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"

namespace bench_grammar {

constexpr std::string_view kSchema = R"({
  "$defs": {
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "country": {"enum": ["UK", "FR", "US", "DE"]}
      },
      "required": ["street", "city", "country"],
      "additionalProperties": false
    }
  },
  "type": "object",
  "properties": {
    "id": {"type": "string", "format": "uuid"},
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "email": {"type": "string", "format": "email"},
    "active": {"type": "boolean"},
    "balance": {"type": ["number", "null"]},
    "home": {"$ref": "#/$defs/address"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "orders": {"type": "array", "items": {
      "type": "object",
      "properties": {
        "sku": {"type": "string"},
        "quantity": {"type": "integer"},
        "price": {"type": "number"},
        "placed": {"type": "string", "format": "date-time"},
        "ship_to": {"$ref": "#/$defs/address"}
      },
      "required": ["sku", "quantity", "price"],
      "additionalProperties": false}}
  },
  "required": ["id", "name", "age", "active", "home", "tags", "orders"],
  "additionalProperties": false
})";

constexpr std::string_view kDocument = R"({
  "id": "3f2b8c1e-9a4d-4e6f-8b7a-1c2d3e4f5a6b",
  "name": "Ada Lovelace",
  "age": 36,
  "email": "ada.lovelace@example.org",
  "active": true,
  "balance": 1234.56,
  "home": {"street": "12 St James's Square", "city": "London", "zip": "10001", "country": "UK"},
  "tags": ["mathematics", "poetry", "analytical engine", "notes"],
  "orders": [
    {"sku": "BRASS-GEAR-42", "quantity": 12, "price": 3.75, "placed": "1843-07-10T09:30:00Z",
     "ship_to": {"street": "Ockham Park", "city": "Surrey", "country": "UK"}},
    {"sku": "PUNCH-CARD-100", "quantity": 500, "price": 0.02},
    {"sku": "NOTEBOOK", "quantity": 3, "price": 1.5, "placed": "1843-08-01T14:00:00+01:00"}
  ]
})";

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

// The text of the file named by $`name` (another schema or document than the built-in
// pair, e.g. bench/schemas/order.json and a document valid under it), else `fallback`.
std::string file_or(const char* name, std::string_view fallback) {
  const char* path = std::getenv(name);
  if (!path) return std::string(fallback);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw smol::Error(std::string("cannot read $") + name + " = " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::shared_ptr<const smol::Tokenizer> load(const std::string& path) {
  if (!std::filesystem::exists(path)) return nullptr;
  return std::make_shared<const smol::Tokenizer>(
      smol::load_vocabulary(smol::gguf::GgufFile::open(path)));
}

std::shared_ptr<const smol::Tokenizer> fixture() {
  static auto t =
      load(env_or("SMOL_FIXTURES_DIR", SMOL_BENCH_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf");
  return t;
}

std::shared_ptr<const smol::Tokenizer> smollm2() {
  static auto t = load(env_or("SMOL_REAL_MODEL", SMOL_BENCH_REAL_MODEL));
  return t;
}

// SmolLM2's vocabulary grown to Llama 3's 128,256 tokens with pairs of its own tokens.
std::shared_ptr<const smol::Tokenizer> large() {
  static std::shared_ptr<const smol::Tokenizer> t = [] {
    const auto base = smollm2();
    if (!base) return std::shared_ptr<const smol::Tokenizer>();
    smol::Vocabulary vocab = base->vocabulary();
    std::unordered_set<std::string> seen(vocab.tokens.begin(), vocab.tokens.end());
    std::vector<std::size_t> words;
    for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
      if (vocab.type_of(static_cast<smol::TokenId>(i)) == smol::TokenType::normal)
        words.push_back(i);
    }
    std::uint32_t state = 12345;
    const auto next = [&] {
      state = state * 1664525u + 1013904223u;
      return words[(state >> 8) % words.size()];
    };
    while (vocab.tokens.size() < 128256) {
      std::string token = vocab.tokens[next()] + vocab.tokens[next()];
      if (seen.insert(token).second) {
        vocab.tokens.push_back(std::move(token));
        vocab.token_types.push_back(smol::TokenType::normal);
      }
    }
    return std::make_shared<const smol::Tokenizer>(std::move(vocab));
  }();
  return t;
}

struct Setup {
  std::shared_ptr<const smol::Tokenizer> tokenizer;
  std::shared_ptr<const smol::TokenTrie> trie;
  std::shared_ptr<const smol::Grammar> grammar;
  std::vector<smol::TokenId> tokens;
};

const Setup* setup(int which) {
  static std::unique_ptr<Setup> setups[3];
  if (!setups[which]) {
    auto tokenizer = which == 0 ? fixture() : which == 1 ? smollm2() : large();
    if (!tokenizer) return nullptr;
    auto s = std::make_unique<Setup>();
    s->tokenizer = tokenizer;
    s->trie = std::make_shared<const smol::TokenTrie>(*tokenizer);
    s->grammar = smol::json_schema_grammar(file_or("SMOL_GRAMMAR_SCHEMA", kSchema));
    s->tokens = tokenizer->encode(file_or("SMOL_GRAMMAR_DOCUMENT", kDocument));
    setups[which] = std::move(s);
  }
  return setups[which].get();
}

const char* kNames[] = {"fixture_1024", "smollm2_49152", "synthetic_128256"};

void report(benchmark::State& state, std::vector<double>& step_us, std::size_t tokens) {
  std::sort(step_us.begin(), step_us.end());
  const auto at = [&](double q) {
    return step_us[std::min(step_us.size() - 1, static_cast<std::size_t>(q * step_us.size()))];
  };
  state.counters["median_us"] = at(0.5);
  state.counters["p90_us"] = at(0.9);
  state.counters["max_us"] = step_us.back();
  state.counters["tokens"] = static_cast<double>(tokens);
}

// One pass of the document: the mask at every step, then the document's token.
void walk(smol::GrammarMatcher& matcher, const Setup& s, std::vector<double>& step_us,
          double& total_seconds) {
  using Clock = std::chrono::steady_clock;
  for (const smol::TokenId token : s.tokens) {
    const auto start = Clock::now();
    const auto mask = matcher.allowed_tokens();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    benchmark::DoNotOptimize(mask.get());
    step_us.push_back(seconds * 1e6);
    total_seconds += seconds;
    if (!matcher.accept(token)) throw smol::Error("the document's token is refused");
  }
}

void mask_warm(benchmark::State& state) {
  const Setup* s = setup(static_cast<int>(state.range(0)));
  if (!s) return state.SkipWithError("vocabulary file not found");
  state.SetLabel(kNames[state.range(0)]);
  auto table = std::make_shared<smol::TokenMaskTable>(s->grammar, s->trie);
  std::vector<double> step_us;
  double ignored = 0;
  smol::GrammarMatcher warmup(table);
  walk(warmup, *s, step_us, ignored);
  step_us.clear();
  for (auto _ : state) {
    smol::GrammarMatcher matcher(table);
    double seconds = 0;
    walk(matcher, *s, step_us, seconds);
    state.SetIterationTime(seconds);
  }
  report(state, step_us, s->tokens.size());
  state.counters["states"] = static_cast<double>(table->stats().states);
}

void mask_cold(benchmark::State& state) {
  const Setup* s = setup(static_cast<int>(state.range(0)));
  if (!s) return state.SkipWithError("vocabulary file not found");
  state.SetLabel(kNames[state.range(0)]);
  std::vector<double> step_us;
  for (auto _ : state) {
    auto table = std::make_shared<smol::TokenMaskTable>(s->grammar, s->trie);
    smol::GrammarMatcher matcher(table);
    double seconds = 0;
    walk(matcher, *s, step_us, seconds);
    state.SetIterationTime(seconds);
  }
  report(state, step_us, s->tokens.size());
}

void apply(benchmark::State& state) {
  const Setup* s = setup(static_cast<int>(state.range(0)));
  if (!s) return state.SkipWithError("vocabulary file not found");
  state.SetLabel(kNames[state.range(0)]);
  auto table = std::make_shared<smol::TokenMaskTable>(s->grammar, s->trie);
  std::vector<std::shared_ptr<const smol::TokenSet>> masks;
  smol::GrammarMatcher matcher(table);
  for (const smol::TokenId token : s->tokens) {
    masks.push_back(matcher.allowed_tokens());
    matcher.accept(token);
  }
  std::vector<float> logits(s->tokenizer->size(), 1.0f);
  std::vector<double> step_us;
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    double total = 0;
    for (const auto& mask : masks) {
      const auto start = Clock::now();
      mask->apply(logits);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      benchmark::DoNotOptimize(logits.data());
      step_us.push_back(seconds * 1e6);
      total += seconds;
    }
    state.SetIterationTime(total);
  }
  report(state, step_us, s->tokens.size());
}

// Compiling what a hostile client sends: nested counted repetition, which reads a text in
// a number of ways that multiplies with each level, refused when a step passes its budget
// (grammar_limits.hpp, GrammarLimits::max_step_work). The time is the refusal's.
void refuse_ambiguous(benchmark::State& state) {
  const Setup* s = setup(static_cast<int>(state.range(0)));
  if (!s) return state.SkipWithError("vocabulary file not found");
  state.SetLabel(kNames[state.range(0)]);
  const auto grammar = smol::parse_gbnf(R"(root ::= (("a"{0,2000}){0,2000}){0,2000})");
  for (auto _ : state) {
    try {
      smol::TokenMaskTable::compile(grammar, s->trie);
      return state.SkipWithError("the grammar compiled");
    } catch (const smol::GrammarLimitError&) {
    }
  }
}

// Compiling a wide object: 5,000 optional properties beside additionalProperties (two
// rules per property), from the schema's text to the first mask.
void compile_wide_object(benchmark::State& state) {
  const Setup* s = setup(static_cast<int>(state.range(0)));
  if (!s) return state.SkipWithError("vocabulary file not found");
  state.SetLabel(kNames[state.range(0)]);
  std::string schema = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 5000; ++i) {
    schema +=
        (i ? ", " : "") + std::string("\"p") + std::to_string(i) + R"(": {"type": "integer"})";
  }
  schema += R"(}, "additionalProperties": true})";
  std::size_t work = 0;
  for (auto _ : state) {
    const auto table = smol::TokenMaskTable::compile(smol::json_schema_grammar(schema), s->trie);
    work = table->stats().peak_step_work;
  }
  state.counters["peak_step_work"] = static_cast<double>(work);
}

BENCHMARK(refuse_ambiguous)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(compile_wide_object)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(mask_warm)->DenseRange(0, 2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(mask_cold)
    ->DenseRange(0, 2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(apply)->DenseRange(0, 2)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace bench_grammar
