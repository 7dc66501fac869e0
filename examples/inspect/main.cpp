// smol-inspect: what is inside a GGUF file, as text or JSON.
//
//   smol-inspect FILE [--json] [--tensors PATTERN]
//
// Architecture and hyperparameters, a tokenizer summary, the chat template's presence,
// the tensor table, a histogram of tensor types and the totals. A file the reader
// rejects prints the reader's message on one line and exits 1.
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "smol/gguf/gguf_file.hpp"

namespace smol_inspect {

using smol::gguf::ArrayView;
using smol::gguf::GgufFile;
using smol::gguf::MetadataEntry;
using smol::gguf::TensorInfo;
using smol::gguf::ValueType;
using smol::gguf::ValueView;
// Keys keep the order they are inserted in: the file's order, then the summary's.
using Json = nlohmann::ordered_json;

constexpr const char* kDescription =
    "usage: smol-inspect FILE [--json] [--tensors PATTERN]\n"
    "\n"
    "What a GGUF file holds: hyperparameters, tokenizer, chat template, tensor table.";

constexpr std::size_t kArrayShown = 16;  // longer arrays are summarised by type and length
constexpr std::size_t kTextShown = 80;   // longer strings are cut in text output

struct Options {
  std::vector<std::string> paths;  // the positional arguments: one is right
  bool json = false;
  std::optional<std::string> pattern;
};

// ---- strings ---------------------------------------------------------------------

// A one-line, shortened rendering of a string for the text output.
std::string text_string(std::string_view text) {
  std::string out = "'";
  const std::size_t shown = std::min(text.size(), kTextShown);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

// The shortest decimal that reads back as the same float (or double).
std::string number(double value, bool single_precision) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  char text[40];
  if (std::trunc(value) == value && std::fabs(value) < 1e15) {
    std::snprintf(text, sizeof text, "%.0f", value);
    return text;
  }
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    const double back = std::strtod(text, nullptr);
    if (single_precision ? static_cast<float>(back) == static_cast<float>(value) : back == value)
      break;
  }
  return text;
}

std::string mebibytes(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// ---- values ----------------------------------------------------------------------

std::string render(const ValueView& value) {
  switch (value.type()) {
    case ValueType::Bool:
      return value.as<bool>() ? "true" : "false";
    case ValueType::F32:
    case ValueType::F64:
      return number(value.as<double>(), value.type() == ValueType::F32);
    case ValueType::String:
      return text_string(value.string());
    case ValueType::Array: {
      const ArrayView array = value.array();
      if (array.size() > kArrayShown) {
        return std::string(value_type_name(array.element_type())) + "[" +
               std::to_string(array.size()) + "]";
      }
      std::string out = "[";
      for (const ValueView element : array) {
        if (out.size() > 1) out += ", ";
        out += render(element);
      }
      return out + "]";
    }
    default:
      if (is_signed_value_type(value.type())) return std::to_string(value.as<std::int64_t>());
      return std::to_string(value.as<std::uint64_t>());
  }
}

Json to_json(const ValueView& value) {
  switch (value.type()) {
    case ValueType::Bool:
      return value.as<bool>();
    case ValueType::F32:
    case ValueType::F64: {
      // JSON has no NaN or infinity. An F32 is written as its shortest decimal (1e-06,
      // not the 9.99999997e-07 its double would print), as the text output does.
      const double number_value = value.as<double>();
      if (!std::isfinite(number_value)) return nullptr;
      if (value.type() == ValueType::F64) return number_value;
      return std::strtod(number(number_value, true).c_str(), nullptr);
    }
    case ValueType::String:
      return std::string(value.string());
    case ValueType::Array: {
      const ArrayView array = value.array();
      if (array.size() > kArrayShown) {
        return Json{{"element_type", std::string(value_type_name(array.element_type()))},
                    {"length", array.size()}};
      }
      Json out = Json::array();
      for (const ValueView element : array) out.push_back(to_json(element));
      return out;
    }
    default:
      if (is_signed_value_type(value.type())) return value.as<std::int64_t>();
      return value.as<std::uint64_t>();
  }
}

// ---- summary ---------------------------------------------------------------------

struct SpecialToken {
  std::string role;
  std::optional<std::uint64_t> id;
  std::optional<std::string_view> text;
};

struct TypeTotals {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
};

struct Summary {
  std::string architecture;
  std::vector<const MetadataEntry*> general, hyper, tokenizer, other;
  std::optional<std::string_view> tokenizer_model, tokenizer_pre;
  std::optional<std::uint64_t> vocab_size, merges, control_tokens;
  std::vector<SpecialToken> special;
  std::optional<std::size_t> chat_template_bytes;
  std::vector<const TensorInfo*> tensors;
  std::map<std::string_view, TypeTotals> types;
  std::uint64_t parameters = 0;
  std::uint64_t bytes = 0;
  // A mixture of experts (<arch>.expert_count and expert_used_count): the experts per
  // block, those a token uses, and the parameters one token reads (the experts' 3-D
  // tensors, *_exps, counted at used / count).
  std::optional<std::uint64_t> experts, experts_used;
  std::uint64_t active_parameters = 0;
};

bool matches(std::string_view name, const std::string& pattern) {
  if (pattern.find_first_of("*?[") == std::string::npos) {
    return name.find(pattern) != std::string_view::npos;
  }
  return ::fnmatch(pattern.c_str(), std::string(name).c_str(), 0) == 0;
}

// Keys the tokenizer summary already shows in its own words.
bool is_summarized_tokenizer_key(std::string_view key) {
  for (const char* shown : {"model", "pre", "tokens", "token_type", "merges", "bos_token_id",
                            "eos_token_id", "padding_token_id", "unknown_token_id"}) {
    if (key == std::string("tokenizer.ggml.") + shown) return true;
  }
  return false;
}

Summary summarize(const GgufFile& file, const Options& options) {
  Summary summary;
  summary.architecture =
      std::string(file.get_optional<std::string_view>("general.architecture").value_or(""));
  const std::string arch_prefix = summary.architecture + ".";
  for (const MetadataEntry& entry : file.metadata()) {
    if (entry.key == "tokenizer.chat_template") {
      summary.chat_template_bytes = file.get<std::string_view>(entry.key).size();
    } else if (entry.key.starts_with("general.")) {
      summary.general.push_back(&entry);
    } else if (!summary.architecture.empty() && entry.key.starts_with(arch_prefix)) {
      summary.hyper.push_back(&entry);
    } else if (entry.key.starts_with("tokenizer.")) {
      if (!is_summarized_tokenizer_key(entry.key)) summary.tokenizer.push_back(&entry);
    } else {
      summary.other.push_back(&entry);
    }
  }

  summary.tokenizer_model = file.get_optional<std::string_view>("tokenizer.ggml.model");
  summary.tokenizer_pre = file.get_optional<std::string_view>("tokenizer.ggml.pre");
  const auto tokens = file.get_optional<std::vector<std::string_view>>("tokenizer.ggml.tokens");
  if (tokens) summary.vocab_size = tokens->size();
  if (const auto merges = file.get_optional<ArrayView>("tokenizer.ggml.merges"))
    summary.merges = merges->size();
  if (const auto types =
          file.get_optional<std::vector<std::int32_t>>("tokenizer.ggml.token_type")) {
    summary.control_tokens =
        static_cast<std::uint64_t>(std::count(types->begin(), types->end(), 3));
  }
  for (const char* role : {"bos", "eos", "padding", "unknown"}) {
    SpecialToken token{
        role,
        file.get_optional<std::uint64_t>(std::string("tokenizer.ggml.") + role + "_token_id"),
        {}};
    if (token.id && tokens && *token.id < tokens->size()) token.text = (*tokens)[*token.id];
    summary.special.push_back(token);
  }

  for (const TensorInfo& info : file.tensors()) {
    if (options.pattern && !matches(info.name, *options.pattern)) continue;
    summary.tensors.push_back(&info);
    TypeTotals& totals = summary.types[smol::ggml_type_name(info.type)];
    ++totals.count;
    totals.bytes += info.bytes;
    summary.parameters += info.elements();
    summary.bytes += info.bytes;
  }
  summary.experts = file.get_optional<std::uint64_t>(arch_prefix + "expert_count");
  summary.experts_used = file.get_optional<std::uint64_t>(arch_prefix + "expert_used_count");
  summary.active_parameters = summary.parameters;
  if (summary.experts && summary.experts_used && *summary.experts > 0) {
    for (const TensorInfo* info : summary.tensors) {
      if (info->name.find("_exps.") == std::string_view::npos) continue;
      summary.active_parameters -=
          info->elements() - info->elements() / *summary.experts * *summary.experts_used;
    }
  }
  return summary;
}

std::string shape_of(const TensorInfo& info) {
  std::string out = "[";
  for (const std::uint64_t dim : info.shape()) {
    if (out.size() > 1) out += ", ";
    out += std::to_string(dim);
  }
  return out + "]";
}

// ---- output ----------------------------------------------------------------------

void print_text(const GgufFile& file, const Summary& summary, std::ostream& out) {
  out << "file: " << file.name() << " (" << file.bytes().size() << " bytes, GGUF v"
      << file.version() << ", alignment " << file.alignment() << ", data at offset "
      << file.data_offset() << ")\n";
  out << "architecture: " << (summary.architecture.empty() ? "(none)" : summary.architecture)
      << "\n";
  const auto print_entries = [&](std::string_view title,
                                 const std::vector<const MetadataEntry*>& entries) {
    if (entries.empty()) return;
    out << title << ":\n";
    const std::string indent(title.find_first_not_of(' ') + 2, ' ');
    for (const MetadataEntry* entry : entries) {
      out << indent << entry->key << " = " << render(entry->value) << "\n";
    }
  };
  print_entries("general", summary.general);
  print_entries("hyperparameters", summary.hyper);

  out << "tokenizer:\n";
  out << "  model: " << summary.tokenizer_model.value_or("(none)") << "\n";
  out << "  pre: " << summary.tokenizer_pre.value_or("(none)") << "\n";
  out << "  vocab size: "
      << (summary.vocab_size ? std::to_string(*summary.vocab_size) : "(no tokens)") << "\n";
  for (const SpecialToken& token : summary.special) {
    out << "  " << token.role << ": ";
    if (!token.id) {
      out << "none\n";
      continue;
    }
    out << *token.id;
    if (token.text) out << " " << text_string(*token.text);
    out << "\n";
  }
  out << "  merges: " << summary.merges.value_or(0) << "\n";
  out << "  control tokens: " << summary.control_tokens.value_or(0) << "\n";
  print_entries("  other tokenizer keys", summary.tokenizer);
  if (summary.chat_template_bytes) {
    out << "chat template: present (" << *summary.chat_template_bytes << " bytes)\n";
  } else {
    out << "chat template: none\n";
  }
  print_entries("other metadata", summary.other);

  out << "tensors: " << summary.tensors.size() << " of " << file.tensors().size() << "\n";
  std::size_t name_width = 4;
  for (const TensorInfo* info : summary.tensors)
    name_width = std::max(name_width, info->name.size());
  char line[512];
  std::snprintf(line, sizeof line, "  %-*s  %-7s  %-22s  %12s\n", static_cast<int>(name_width),
                "name", "type", "shape", "bytes");
  out << line;
  for (const TensorInfo* info : summary.tensors) {
    std::snprintf(line, sizeof line, "  %-*.*s  %-7s  %-22s  %12llu\n",
                  static_cast<int>(name_width),
                  static_cast<int>(std::min<std::size_t>(info->name.size(), 200)),
                  info->name.data(), std::string(smol::ggml_type_name(info->type)).c_str(),
                  shape_of(*info).c_str(), static_cast<unsigned long long>(info->bytes));
    out << line;
  }
  out << "tensor types:\n";
  for (const auto& [type, totals] : summary.types) {
    std::snprintf(line, sizeof line, "  %-7s  %5llu tensors  %14llu bytes\n",
                  std::string(type).c_str(), static_cast<unsigned long long>(totals.count),
                  static_cast<unsigned long long>(totals.bytes));
    out << line;
  }
  out << "total: " << summary.parameters << " parameters, " << summary.bytes << " bytes ("
      << mebibytes(summary.bytes) << " MiB)\n";
  if (summary.experts && summary.experts_used) {
    out << "experts: " << *summary.experts << " per block, " << *summary.experts_used
        << " used per token: " << summary.active_parameters << " parameters active per token\n";
  }
}

void print_json(const GgufFile& file, const Summary& summary, std::ostream& out) {
  const auto object = [](const std::vector<const MetadataEntry*>& entries) {
    Json json = Json::object();
    for (const MetadataEntry* entry : entries)
      json[std::string(entry->key)] = to_json(entry->value);
    return json;
  };
  const auto optional_string = [](const std::optional<std::string_view>& text) -> Json {
    if (!text) return nullptr;
    return std::string(*text);
  };
  const auto optional_number = [](const std::optional<std::uint64_t>& value) -> Json {
    if (!value) return nullptr;
    return *value;
  };

  Json tokenizer = {{"model", optional_string(summary.tokenizer_model)},
                    {"pre", optional_string(summary.tokenizer_pre)},
                    {"vocab_size", optional_number(summary.vocab_size)}};
  for (const SpecialToken& token : summary.special) {
    tokenizer[token.role] =
        token.id ? Json{{"id", *token.id}, {"text", optional_string(token.text)}} : Json(nullptr);
  }
  tokenizer["merges"] = summary.merges.value_or(0);
  tokenizer["control_tokens"] = summary.control_tokens.value_or(0);
  tokenizer["metadata"] = object(summary.tokenizer);

  Json tensors = Json::array();
  for (const TensorInfo* info : summary.tensors) {
    const auto shape = info->shape();
    tensors.push_back({{"name", std::string(info->name)},
                       {"type", std::string(smol::ggml_type_name(info->type))},
                       {"shape", std::vector<std::uint64_t>(shape.begin(), shape.end())},
                       {"bytes", info->bytes},
                       {"offset", info->offset}});
  }
  Json tensor_types = Json::object();
  for (const auto& [type, totals] : summary.types) {
    tensor_types[std::string(type)] = {{"count", totals.count}, {"bytes", totals.bytes}};
  }

  Json report = {
      {"file", file.name()},
      {"file_bytes", file.bytes().size()},
      {"version", file.version()},
      {"alignment", file.alignment()},
      {"data_offset", file.data_offset()},
      {"architecture", summary.architecture.empty() ? Json(nullptr) : Json(summary.architecture)},
      {"general", object(summary.general)},
      {"hyperparameters", object(summary.hyper)},
      {"tokenizer", std::move(tokenizer)},
      {"chat_template",
       {{"present", summary.chat_template_bytes.has_value()},
        {"bytes", summary.chat_template_bytes.value_or(0)}}},
      {"other_metadata", object(summary.other)},
      {"tensors", std::move(tensors)},
      {"tensor_types", std::move(tensor_types)},
      {"total_parameters", summary.parameters},
      {"total_bytes", summary.bytes}};
  if (summary.experts && summary.experts_used) {
    report["experts"] = {{"per_block", *summary.experts},
                         {"used_per_token", *summary.experts_used},
                         {"active_parameters", summary.active_parameters}};
  }
  // Names and strings in a file need not be UTF-8: bad bytes become U+FFFD, so the
  // output stays valid JSON.
  out << report.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

// ---- command line ----------------------------------------------------------------

std::optional<int> parse_options(int argc, char** argv, Options& options) {
  smol::cli::Program program("smol-inspect", kDescription);
  CLI::App& app = program.app;
  app.add_flag("--json", options.json, "print the summary as JSON");
  app.add_option_function<std::string>(
         "--tensors", [&options](const std::string& pattern) { options.pattern = pattern; },
         "list only tensors whose name contains PATTERN, or matches it\n"
         "as a glob when it has * ? or [ (e.g. 'blk.0.*')")
      ->type_name("PATTERN");
  app.add_option("file", options.paths)->group("");  // described in the usage line
  program.check([&options] {
    if (options.paths.empty()) smol::cli::usage_error("no FILE given");
    if (options.paths.size() > 1) smol::cli::usage_error("more than one FILE given");
  });
  return program.parse(argc, argv);
}

// smol-inspect's entry: the executable's own main calls it (cmake/SmolPrograms.cmake).
int main(int argc, char** argv) {
  Options options;
  if (const std::optional<int> status = parse_options(argc, argv, options)) return *status;
  try {
    const GgufFile file = GgufFile::open(options.paths.front());
    const Summary summary = summarize(file, options);
    std::ostringstream out;  // nothing is printed for a file that fails half-way
    if (options.json) {
      print_json(file, summary, out);
    } else {
      print_text(file, summary, out);
    }
    std::cout << out.str();
  } catch (const smol::Error& e) {
    std::cerr << "smol-inspect: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace smol_inspect
