// For compare_with_jsonschema.py: converts JSON schemas to grammars and answers, per
// schema, random texts of its grammar and whether it accepts given texts.
//   sample_grammar REQUEST.json RESPONSE.json
// REQUEST: [{"schema": {...}, "walks": N, "seed": S, "probes": ["text", ...]}, ...]
// RESPONSE: [{"error": null or "the conversion's refusal", "samples": ["text", ...],
//             "accepted": [true, ...]}, ...]  (one per request, in order)
// A sample is a finished random walk through the grammar's bytes (closing characters
// favoured so that most walks finish). Schemas are read as ordered_json: property order
// is the schema's, as the server reads it.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/json_schema.hpp"
#include "smol/grammar/recognizer.hpp"

namespace {

using smol::GrammarRecognizer;
using smol::GrammarState;

bool accepts(const std::shared_ptr<const smol::Grammar>& grammar, const std::string& text) {
  GrammarRecognizer recognizer(grammar);
  GrammarState state = recognizer.initial();
  return recognizer.advance(state, text) && GrammarRecognizer::can_end(state);
}

std::vector<std::string> samples(const std::shared_ptr<const smol::Grammar>& grammar, int walks,
                                 unsigned seed) {
  GrammarRecognizer recognizer(grammar);
  std::mt19937 random(seed);
  std::vector<std::string> done;
  for (int w = 0; w < walks; ++w) {
    GrammarState state = recognizer.initial();
    std::string text;
    while (text.size() < 2000) {
      if (GrammarRecognizer::can_end(state) &&
          (GrammarRecognizer::exhausted(state) || random() % 3 == 0)) {
        done.push_back(text);
        break;
      }
      std::vector<std::pair<std::uint8_t, double>> options;
      double total = 0;
      for (int b = 0; b < 256; ++b) {
        GrammarState next;
        if (!recognizer.advance(state, static_cast<std::uint8_t>(b), next)) continue;
        double weight = b >= 0x20 && b < 0x7F ? 1.0 : 0.05;
        if (b == '"' || b == '}' || b == ']' || b == ',') weight = 12.0;
        if (b == ' ' || b == '\n' || b == '\t') weight = 0.3;
        options.push_back({static_cast<std::uint8_t>(b), weight});
        total += weight;
      }
      if (options.empty()) break;  // cannot happen in a grammar the parser took; skipped
      double pick = std::uniform_real_distribution<double>(0, total)(random);
      std::uint8_t chosen = options.back().first;
      for (const auto& [b, weight] : options) {
        if ((pick -= weight) <= 0) {
          chosen = b;
          break;
        }
      }
      GrammarState next;
      recognizer.advance(state, chosen, next);
      state = next;
      text += static_cast<char>(chosen);
    }
  }
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: sample_grammar REQUEST.json RESPONSE.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  const nlohmann::ordered_json request = nlohmann::ordered_json::parse(in);
  nlohmann::json response = nlohmann::json::array();
  for (const nlohmann::ordered_json& item : request) {
    nlohmann::json answer = {{"error", nullptr},
                             {"samples", nlohmann::json::array()},
                             {"accepted", nlohmann::json::array()}};
    std::shared_ptr<const smol::Grammar> grammar;
    try {
      grammar = smol::json_schema_grammar(item.at("schema").dump());
    } catch (const smol::Error& e) {
      answer["error"] = e.what();
      response.push_back(answer);
      continue;
    }
    for (const std::string& text :
         samples(grammar, item.value("walks", 0), item.value("seed", 1U))) {
      answer["samples"].push_back(text);
    }
    for (const auto& probe : item.value("probes", nlohmann::ordered_json::array())) {
      answer["accepted"].push_back(accepts(grammar, probe.get<std::string>()));
    }
    response.push_back(answer);
  }
  std::ofstream(argv[2]) << response.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                         << "\n";
  return 0;
}
