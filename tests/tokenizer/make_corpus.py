#!/usr/bin/env python3
"""Writes the tokenizer conformance corpus as a JSON array of strings.

The corpus is generated, not committed: a fixed list of hand-picked fragments that
hit the pre-tokenizer's corners, each on its own and then glued together in random
combinations by a seeded generator, so the output is the same on every machine.

Usage: make_corpus.py OUTPUT.json [COUNT]
"""
import json
import sys

FRAGMENTS = [
    # English and contractions in every case
    "Hello world", "Hello, world!", " Hello world", "hello  world", "The quick brown fox "
    "jumps over the lazy dog.", "don't I'll we're they've she'd it's you'm", "DON'T I'LL WE'RE",
    "Don'T 'S 'Ll 'rE", "rock 'n' roll", "'twas", "isn't it?", "O'Neil's", "''quoted''",
    # numbers
    "12345678", "3.14159 and 2+2=4", "1,000,000 or 0.001", "-42", "0x1F3A", "2024-01-31T12:00:00Z",
    "1e-10", "v1.2.3", "99 bottles", "٣٤٥ Arabic-Indic digits", "Ⅻ roman numeral", "½ ¾ ²",
    "१२३ Devanagari digits",
    # whitespace runs
    "   leading spaces", "trailing spaces   ", "\n\n\n", "line one\nline two\n\nline four",
    "windows\r\nline endings\r\n", "\ttab\tseparated\tvalues\t", "  \n  mixed   \t whitespace \n\n ",
    "a\u00a0b", "non\u00a0breaking space", "ideographic\u3000space", "line\u2028separator",
    " ", "  ", "\t", "\r", "\n", "\r\n\r\n", " \n", "\n ", "x \t\n y", "         deep indent",
    "\u2003em space\u2009thin space",
    # punctuation and symbols
    "Punctuation!!! ... ??? (parens) [brackets] {braces} \"quotes\" 'single'", "!!!", "?!",
    "-->", "<=>", "a+b=c", "100%", "$5.00", "#hashtag @mention", "~/path/to/file.txt",
    "email@example.com https://example.org/path?q=1&r=2", "C:\\Windows\\System32", "«guillemets»",
    "„Anführungszeichen“", "—em dash–en dash", "…", "§ ¶ † ‡ •", "©®™", "→ ← ↑ ↓", "∑∫√∞≠≤≥",
    # code
    "    def foo(x):\n        return x * 2\n", "int main() { return 0; }", "for (int i = 0; i < n; ++i) {",
    "std::vector<std::string> v;", "if x == 1:\n\tpass", "console.log(`template ${x}`);",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "<div class=\"x\">text</div>",
    "SELECT * FROM users WHERE id = 42;", "#!/bin/bash\necho \"$HOME\"", "x=>x**2", "a&&b||!c",
    "// comment\n/* block */", "```python\nprint('hi')\n```",
    # accents and other Latin text
    "héllo wörld", "naïve café résumé", "Ångström", "e\u0301 combining accent", "ﬁ ligature",
    "Straße", "ÀÉÎÕÜ", "çãõ", "İstanbul", "ǅ titlecase",
    # other scripts
    "中文字符测试", "日本語のテキスト", "カタカナ", "한국어 텍스트", "Привет мир", "Ελληνικά",
    "العربية نص", "עברית", "ภาษาไทย", "हिन्दी पाठ", "ქართული", "Հայերեն", "தமிழ்",
    "中文, English, 日本語 mixed", "漢字123漢字",
    # emoji
    "emoji 🙂🚀 test", "👍🏽", "👨‍👩‍👧‍👦 family", "🇫🇷🇯🇵 flags", "❤️", "🏳️‍🌈", "😀😃😄😁",
    "a🙂b", "🙂 🙂  🙂",
    # control-token look-alikes (special tokens are parsed in the conformance run)
    "<|begin_of_text|>Hello<|end_of_text|>", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|eot_id|", "<|reserved_special_token_3|>", "< |eot_id| >", "<|EOT_ID|>", "<<|eot_id|>>",
    "text<|eot_id|>more text", "<|im_start|>user\nHi<|im_end|>",
    # odd but valid code points
    "\ufffd replacement", "\ufeffBOM", "zero\u200bwidth", "\u0000nul", "bell\u0007", "\u001b[31mred\u001b[0m",
    "\ue000 private use", "\U0001d49c math script", "𝟘𝟙𝟚 math digits", "ｆｕｌｌｗｉｄｔｈ", "%E2%82%AC",
    "\\xff\\xfe", "\\u00e9", "a", "", "x" * 300, "ab" * 100, "1" * 50, " " * 40, "!" * 33,
]

SEPARATORS = ["", " ", "  ", "\n", "\n\n", "\t", ", ", ". ", "\r\n", " - ", "'", "0", "\u00a0"]


class Generator:
    """xorshift64*: a tiny PRNG whose sequence is fixed by this file, not by Python."""

    def __init__(self, seed):
        self.state = seed

    def next(self):
        x = self.state
        x ^= (x >> 12)
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27)
        self.state = x
        return ((x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF) >> 32

    def below(self, n):
        return self.next() % n


def corpus(count):
    strings = list(FRAGMENTS)
    rng = Generator(0x5EED1234ABCD)
    while len(strings) < count:
        parts = []
        for _ in range(2 + rng.below(5)):
            parts.append(FRAGMENTS[rng.below(len(FRAGMENTS))])
            parts.append(SEPARATORS[rng.below(len(SEPARATORS))])
        text = "".join(parts)
        if rng.below(4) == 0:  # cut at a random code point: unfinished words and runs
            text = text[: rng.below(len(text) + 1)]
        strings.append(text)
    return strings


def main():
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 600
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(corpus(count), out, ensure_ascii=True, indent=0)


if __name__ == "__main__":
    main()
