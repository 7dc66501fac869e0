// Pre-tokenizers: how byte-level BPE cuts text into pieces before merging, chosen by the
// file's tokenizer.ggml.pre, as llama.cpp chooses them.
//
// kPreTokenizers is the one place that maps a name to its splitting: each row lists the
// names llama.cpp gives one set of regexes (llama_vocab::impl::load) and the regexes it
// applies in sequence (the LLAMA_VOCAB_PRE_TYPE_* switch of llm_tokenizer_bpe), spelled as
// llama.cpp spells them. The next pre-tokenizer is one more row. Each regex splits every
// piece the previous one produced; a match is a piece, and so is the text between two
// matches (llama.cpp's unicode_regex_split). A regex runs on CodepointRegex, except that
// GPT-2's and Llama-3's run on hand-written scanners that give the same pieces faster
// (pre_tokenizer_scanners.hpp; a test holds them equal on a corpus).
//
// A name that no row lists is refused, as llama.cpp refuses it: splitting text another
// way would give ids the model was not trained on, silently.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/classified_text.hpp"
#include "smol/text/codepoint_regex.hpp"
#include "smol/text/pre_tokenizer_scanners.hpp"

namespace smol {

// The regexes, as llama.cpp writes them. Where a model's tokenizer.json says
// (?i:'s|'t|...), llama.cpp writes (?:'[sS]|'[tT]|...), since std::regex has no (?i:).
namespace pre_tokenizer_regex {

// GPT-2's pattern. llama.cpp drops its final |\s+; what that alternative matched (one
// whitespace code point before \S) is left unmatched and so becomes a piece just the same.
inline constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
inline constexpr std::string_view kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Llama-3's pattern with single digits (Qwen2's tokenizer.json).
inline constexpr std::string_view kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k's pattern (GPT-4o, gpt-oss) as llama.cpp runs it: its \p{Lu}\p{Lt}... classes are
// written "a letter other than a-z" and "a letter other than A-Z", so non-ASCII letters
// count as both upper and lower case (as in llama.cpp's std::regex over its collapsed
// text); the contractions are spelled case by case.
inline constexpr std::string_view kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kEachNumber = R"(\p{N})";
inline constexpr std::string_view kNumberRuns = R"(\p{N}+)";
inline constexpr std::string_view kLineBreak = R"([\r\n])";
inline constexpr std::string_view kThreeAsciiDigits = R"([0-9][0-9][0-9])";
// llama.cpp's default (and Falcon's first step): runs of punctuation and of $+<=>^~|.
inline constexpr std::string_view kPunctuationRuns = R"([\p{P}\$\+<=>\^~\|]+)";
// DeepSeek's tokenizer.json spells its letters as the ranges of the cased letters (Lu, Ll,
// Lt) of its Unicode version, and its punctuation and CJK as literal ranges. The escapes
// keep code points such as U+2126 OHM SIGN and U+212A KELVIN SIGN from being normalized
// into Greek Omega and ASCII K by an editor.
inline constexpr std::string_view kDeepseekLetters =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293"
    "\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C"
    "\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5"
    "\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77"
    "\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59"
    "\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC"
    "\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107"
    "\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE"
    "\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E"
    "\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A"
    "\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2"
    "\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+";
inline constexpr std::string_view kDeepseekPunctuation =
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+";
inline constexpr std::string_view kTrailingWhitespace = R"(\s+$)";
inline constexpr std::string_view kDeepseekCjk = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";
inline constexpr std::string_view kDeepseekCoderLetters = R"(\s?\p{L}+)";
inline constexpr std::string_view kDeepseekCoderPunctuation = R"(\s?\p{P}+)";

}  // namespace pre_tokenizer_regex

struct PreTokenizerSpec {
  std::span<const std::string_view> names;    // tokenizer.ggml.pre values, llama.cpp's
  std::span<const std::string_view> regexes;  // applied in this order
  // Whole pieces that are a token become that token without merging (llama.cpp's
  // tokenizer_ignore_merges; Llama-3's tokenizer.json says ignore_merges).
  bool ignore_merges = false;
  // Whether a file without tokenizer.ggml.add_bos_token starts with bos.
  bool add_bos = false;
};

namespace detail::pre_tokenizer_rows {
namespace re = pre_tokenizer_regex;
using Names = std::string_view;

// tokenizer.ggml.pre "default", and what load_vocabulary writes when the key is missing.
inline constexpr Names kDefaultNames[] = {"default"};
inline constexpr std::string_view kDefaultRegexes[] = {re::kPunctuationRuns, re::kGpt2,
                                                       re::kNumberRuns, re::kThreeAsciiDigits};

inline constexpr Names kLlama3Names[] = {"llama-bpe", "llama3",    "llama-v3",
                                         "falcon3",   "falcon-h1", "pixtral",
                                         "midm-2.0",  "lfm2",      "jina-v5-nano"};
inline constexpr Names kDbrxNames[] = {"dbrx", "smaug-bpe"};
inline constexpr std::string_view kLlama3Regexes[] = {re::kLlama3};

inline constexpr Names kGpt2Names[] = {
    "gpt-2",      "phi-2",      "mpt",         "olmo",           "jais",    "trillion",
    "exaone4",    "gigachat",   "a.x-4.0",     "mellum",         "jina-es", "jina-de",
    "jina-v2-es", "jina-v2-de", "modern-bert", "granite-docling"};
inline constexpr std::string_view kGpt2Regexes[] = {re::kGpt2};

inline constexpr Names kSmollmNames[] = {"smollm",    "starcoder", "refact",     "command-r",
                                         "codeshell", "exaone",    "minerva-7b", "mellum2"};
inline constexpr std::string_view kSmollmRegexes[] = {re::kEachNumber, re::kGpt2};

inline constexpr Names kQwen2Names[] = {"qwen2",   "deepseek-r1-qwen", "megrez", "stablelm2",
                                        "hunyuan", "solar-open",       "kormo",  "f2llmv2"};
inline constexpr std::string_view kQwen2Regexes[] = {re::kQwen2};

inline constexpr Names kDeepseekLlmNames[] = {"deepseek-llm"};
inline constexpr std::string_view kDeepseekLlmRegexes[] = {
    re::kLineBreak,          re::kDeepseekLetters, re::kDeepseekPunctuation,
    re::kTrailingWhitespace, re::kDeepseekCjk,     re::kNumberRuns};

inline constexpr Names kDeepseekCoderNames[] = {"deepseek-coder"};
inline constexpr std::string_view kDeepseekCoderRegexes[] = {
    re::kLineBreak, re::kDeepseekCoderLetters, re::kDeepseekCoderPunctuation, re::kDeepseekCjk,
    re::kEachNumber};

inline constexpr Names kGpt4oNames[] = {"gpt-4o", "llama4", "kanana2", "talkie"};
inline constexpr std::string_view kGpt4oRegexes[] = {re::kGpt4o};

inline constexpr Names kFalconNames[] = {"falcon"};
inline constexpr std::string_view kFalconRegexes[] = {re::kPunctuationRuns, re::kGpt2,
                                                      re::kThreeAsciiDigits};

}  // namespace detail::pre_tokenizer_rows

// Rows for the GPT-2 family of regexes. Names llama.cpp maps to these regexes but with
// other settings smol does not apply (chatglm's bos, the jina/roberta add_sep) are absent.
inline constexpr std::array<PreTokenizerSpec, 10> kPreTokenizers = [] {
  namespace rows = detail::pre_tokenizer_rows;
  return std::array<PreTokenizerSpec, 10>{{
      {.names = rows::kDefaultNames, .regexes = rows::kDefaultRegexes},
      {.names = rows::kLlama3Names,
       .regexes = rows::kLlama3Regexes,
       .ignore_merges = true,
       .add_bos = true},
      {.names = rows::kDbrxNames, .regexes = rows::kLlama3Regexes},
      {.names = rows::kGpt2Names, .regexes = rows::kGpt2Regexes},
      {.names = rows::kSmollmNames, .regexes = rows::kSmollmRegexes},
      {.names = rows::kQwen2Names, .regexes = rows::kQwen2Regexes},
      {.names = rows::kDeepseekLlmNames, .regexes = rows::kDeepseekLlmRegexes},
      {.names = rows::kDeepseekCoderNames, .regexes = rows::kDeepseekCoderRegexes},
      {.names = rows::kFalconNames, .regexes = rows::kFalconRegexes},
      {.names = rows::kGpt4oNames, .regexes = rows::kGpt4oRegexes},
  }};
}();

// The row that lists `name`, or null.
inline const PreTokenizerSpec* find_pre_tokenizer(std::string_view name) {
  for (const PreTokenizerSpec& spec : kPreTokenizers) {
    for (const std::string_view known : spec.names) {
      if (known == name) return &spec;
    }
  }
  return nullptr;
}

// Every known name, comma-separated, for messages.
inline std::string known_pre_tokenizers() {
  std::string list;
  for (const PreTokenizerSpec& spec : kPreTokenizers) {
    for (const std::string_view name : spec.names) {
      if (!list.empty()) list += ", ";
      list += name;
    }
  }
  return list;
}

// The row for `name`; throws smol::Error listing the known names if there is none.
inline const PreTokenizerSpec& pre_tokenizer_spec(std::string_view name) {
  if (const PreTokenizerSpec* spec = find_pre_tokenizer(name)) return *spec;
  fail("tokenizer: unknown pre-tokenizer \"", name, "\" (tokenizer.ggml.pre); smol knows ",
       known_pre_tokenizers());
}

class PreTokenizer {
 public:
  // `fast_scanners` off runs every regex on CodepointRegex (the tests compare the two).
  enum class FastScanners : bool { off = false, on = true };

  explicit PreTokenizer(const PreTokenizerSpec& spec, FastScanners fast = FastScanners::on)
      : spec_(&spec) {
    for (const std::string_view regex : spec.regexes) {
      Step step;
      if (fast == FastScanners::on) step.scanner = scanner_for(regex);
      if (step.scanner == nullptr) step.regex.emplace(regex);
      steps_.push_back(std::move(step));
    }
  }

  // The pre-tokenizer tokenizer.ggml.pre names; throws smol::Error for an unknown name.
  static PreTokenizer named(std::string_view name, FastScanners fast = FastScanners::on) {
    return PreTokenizer(pre_tokenizer_spec(name), fast);
  }

  const PreTokenizerSpec& spec() const { return *spec_; }

  // Splits `text` into pieces (views into `text`) that concatenate back to it.
  std::vector<std::string_view> split(std::string_view text) const {
    const ClassifiedText classified(text);
    std::vector<std::size_t> ends;  // the end of each piece, in code points
    if (classified.size() > 0) ends.push_back(classified.size());
    std::vector<std::size_t> next;
    for (const Step& step : steps_) {
      next.clear();
      std::size_t begin = 0;
      for (const std::size_t end : ends) {
        if (step.scanner != nullptr) {
          for (std::size_t i = begin; i < end; i = next.back()) {
            next.push_back(step.scanner(classified, i, end));
          }
        } else {
          step.regex->split(classified, begin, end, next);
        }
        begin = end;
      }
      ends.swap(next);
    }
    std::vector<std::string_view> pieces;
    pieces.reserve(ends.size());
    std::size_t begin = 0;
    for (const std::size_t end : ends) {
      const std::size_t from = classified.byte_offset(begin);
      pieces.push_back(text.substr(from, classified.byte_offset(end) - from));
      begin = end;
    }
    return pieces;
  }

 private:
  using Scanner = std::size_t (*)(const ClassifiedText&, std::size_t, std::size_t);

  struct Step {
    Scanner scanner = nullptr;
    std::optional<CodepointRegex> regex;
  };

  // The hand-written scanner that stands for `regex`, matched on its exact text as
  // llama.cpp matches its own (unicode_regex_split_custom); null for the others.
  static Scanner scanner_for(std::string_view regex) {
    if (regex == pre_tokenizer_regex::kGpt2) return pre_tokenizer_scanners::gpt2_match_end;
    if (regex == pre_tokenizer_regex::kLlama3) return pre_tokenizer_scanners::llama3_match_end;
    return nullptr;
  }

  const PreTokenizerSpec* spec_;
  std::vector<Step> steps_;
};

}  // namespace smol
