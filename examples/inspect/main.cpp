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

#include "cli.hpp"
#include "smol/gguf/gguf_file.hpp"

namespace {

using smol::gguf::ArrayView;
using smol::gguf::GgufFile;
using smol::gguf::MetadataEntry;
using smol::gguf::TensorInfo;
using smol::gguf::ValueType;
using smol::gguf::ValueView;

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

// Length of the valid UTF-8 sequence at text[i], or 0 when the byte there starts none.
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  std::uint32_t code = 0;
  if ((lead & 0xe0) == 0xc0) {
    length = 2, code = lead & 0x1fu;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3, code = lead & 0x0fu;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4, code = lead & 0x07u;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    code = code << 6 | (byte(i + k) & 0x3fu);
  }
  constexpr std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return length;
}

// A JSON string literal; bytes that are not UTF-8 become U+FFFD so the output stays valid.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else if (const std::size_t length = utf8_sequence(text, i); length > 0) {
      out.append(text.substr(i, length));
      i += length;
      continue;
    } else {
      out += "\\ufffd";
    }
    ++i;
  }
  return out + "\"";
}

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

std::string render(const ValueView& value, bool json) {
  switch (value.type()) {
    case ValueType::Bool:
      return value.as<bool>() ? "true" : "false";
    case ValueType::F32:
    case ValueType::F64: {
      const double number_value = value.as<double>();
      if (json && !std::isfinite(number_value)) return "null";
      return number(number_value, value.type() == ValueType::F32);
    }
    case ValueType::String:
      return json ? json_string(value.string()) : text_string(value.string());
    case ValueType::Array: {
      const ArrayView array = value.array();
      const std::string element_type(value_type_name(array.element_type()));
      if (array.size() > kArrayShown) {
        if (json) {
          return "{\"element_type\": \"" + element_type +
                 "\", \"length\": " + std::to_string(array.size()) + "}";
        }
        return element_type + "[" + std::to_string(array.size()) + "]";
      }
      std::string out = "[";
      for (const ValueView element : array) {
        if (out.size() > 1) out += ", ";
        out += render(element, json);
      }
      return out + "]";
    }
    default:
      if (is_signed_value_type(value.type())) return std::to_string(value.as<std::int64_t>());
      return std::to_string(value.as<std::uint64_t>());
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
      out << indent << entry->key << " = " << render(entry->value, false) << "\n";
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
}

void print_json(const GgufFile& file, const Summary& summary, std::ostream& out) {
  const auto object = [&](const std::vector<const MetadataEntry*>& entries) {
    std::string text = "{";
    for (const MetadataEntry* entry : entries) {
      if (text.size() > 1) text += ", ";
      text += json_string(entry->key) + ": " + render(entry->value, true);
    }
    return text + "}";
  };
  const auto optional_string = [](const std::optional<std::string_view>& text) {
    return text ? json_string(*text) : std::string("null");
  };
  const auto optional_number = [](const std::optional<std::uint64_t>& value) {
    return value ? std::to_string(*value) : std::string("null");
  };
  out << "{\n";
  out << "  \"file\": " << json_string(file.name()) << ",\n";
  out << "  \"file_bytes\": " << file.bytes().size() << ",\n";
  out << "  \"version\": " << file.version() << ",\n";
  out << "  \"alignment\": " << file.alignment() << ",\n";
  out << "  \"data_offset\": " << file.data_offset() << ",\n";
  out << "  \"architecture\": "
      << (summary.architecture.empty() ? "null" : json_string(summary.architecture)) << ",\n";
  out << "  \"general\": " << object(summary.general) << ",\n";
  out << "  \"hyperparameters\": " << object(summary.hyper) << ",\n";
  out << "  \"tokenizer\": {\"model\": " << optional_string(summary.tokenizer_model)
      << ", \"pre\": " << optional_string(summary.tokenizer_pre)
      << ", \"vocab_size\": " << optional_number(summary.vocab_size);
  for (const SpecialToken& token : summary.special) {
    out << ", " << json_string(token.role) << ": ";
    if (!token.id) {
      out << "null";
    } else {
      out << "{\"id\": " << *token.id << ", \"text\": " << optional_string(token.text) << "}";
    }
  }
  out << ", \"merges\": " << summary.merges.value_or(0)
      << ", \"control_tokens\": " << summary.control_tokens.value_or(0)
      << ", \"metadata\": " << object(summary.tokenizer) << "},\n";
  out << "  \"chat_template\": {\"present\": " << (summary.chat_template_bytes ? "true" : "false")
      << ", \"bytes\": " << summary.chat_template_bytes.value_or(0) << "},\n";
  out << "  \"other_metadata\": " << object(summary.other) << ",\n";
  out << "  \"tensors\": [";
  for (std::size_t i = 0; i < summary.tensors.size(); ++i) {
    const TensorInfo& info = *summary.tensors[i];
    out << (i == 0 ? "\n" : ",\n") << "    {\"name\": " << json_string(info.name)
        << ", \"type\": \"" << smol::ggml_type_name(info.type)
        << "\", \"shape\": " << shape_of(info) << ", \"bytes\": " << info.bytes
        << ", \"offset\": " << info.offset << "}";
  }
  out << (summary.tensors.empty() ? "],\n" : "\n  ],\n");
  out << "  \"tensor_types\": {";
  bool first = true;
  for (const auto& [type, totals] : summary.types) {
    out << (first ? "" : ", ") << json_string(type) << ": {\"count\": " << totals.count
        << ", \"bytes\": " << totals.bytes << "}";
    first = false;
  }
  out << "},\n";
  out << "  \"total_parameters\": " << summary.parameters << ",\n";
  out << "  \"total_bytes\": " << summary.bytes << "\n";
  out << "}\n";
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

}  // namespace

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
