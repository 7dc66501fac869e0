"""smol's WordPiece tokens against Hugging Face's `tokenizers` (PyPI, the Rust library)
and llama.cpp's, on the tokenizer conformance corpus.

smol-make-model's bert-tiny vocabulary is written back out as the tokenizer.json a BERT
model ships (BertNormalizer lowercasing and stripping accents, BertPreTokenizer,
WordPiece with "##" continuations: llama.cpp's converter turned "##x" into "x" and a
word's first piece "x" into "\u2581x", which is undone here). Each corpus string's ids
from smol-server's /tokenize must equal Hugging Face's; where they do not, they must equal
llama.cpp's (node-llama-cpp on the same file) and llama.cpp's must differ from Hugging
Face's too: smol follows llama.cpp, the reference for every number a model produces, and
the string is counted as one where llama.cpp's WPM and Hugging Face part. Measured: 576 of
the 600 strings equal Hugging Face's; the other 24 all hold a word of over 100 characters,
which Hugging Face makes one [UNK] (max_input_chars_per_word) and llama.cpp cuts into
pieces. Any other difference fails, and so does a corpus with fewer than 95 % of its
strings equal to Hugging Face's.

  wordpiece_check.py --make-model M --server S --node N --oracle O --work DIR
                     --corpus CORPUS.json --tokenizers-path DIR
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embedding_check import post, start_server, stop  # noqa: E402
from gguf_metadata import gguf_value  # noqa: E402

def bert_tokenizer_json(tokens):
    """The tokenizer.json of a BERT uncased model with this (llama.cpp-converted) vocabulary."""
    vocab = {}
    for i, piece in enumerate(tokens):
        if piece.startswith("[") and piece.endswith("]"):
            hf = piece
        elif piece.startswith("\u2581"):
            hf = piece[1:]
        else:
            hf = "##" + piece
        vocab.setdefault(hf, i)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--make-model", "--server", "--node", "--oracle", "--work", "--corpus",
                 "--tokenizers-path"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    sys.path.insert(0, args.tokenizers_path)
    from tokenizers import Tokenizer, __version__  # the pinned wheel, installed there

    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "bert-wordpiece.gguf")
    subprocess.run([args.make_model, "--preset", "bert-tiny", "--layers", "1", "-o", model],
                   check=True, stdout=subprocess.DEVNULL)
    corpus = json.load(open(args.corpus, encoding="utf-8"))
    hf = Tokenizer.from_str(json.dumps(bert_tokenizer_json(gguf_value(model, "tokenizer.ggml.tokens"))))
    theirs = [hf.encode(text, add_special_tokens=False).ids for text in corpus]
    llama = json.loads(subprocess.run([args.node, args.oracle, "tokenize", model, args.corpus],
                                      check=True, capture_output=True, text=True).stdout)
    server, url = start_server(args.server, model, "--embeddings", [])
    try:
        ours = [post(f"{url}/tokenize", {"content": text})["tokens"] for text in corpus]
    finally:
        stop(server)

    def short(text, ids):
        return f"{text[:60]!r}{'...' if len(text) > 60 else ''}", ids[:16]

    same, parted, bad = 0, {"a word over 100 characters": 0, "other": 0}, []
    for text, a, h, l in zip(corpus, ours, theirs, llama):
        if a == h:
            same += 1
        elif a == l and l != h:
            long_word = any(len(word) > 100 for word in text.split())
            parted["a word over 100 characters" if long_word else "other"] += 1
            if not long_word:
                print("  llama.cpp and Hugging Face part on %s:\n    smol, llama.cpp %s\n"
                      "    Hugging Face    %s" % (*short(text, a), h[:16]))
        else:
            bad.append((text, a, h, l))
    for text, a, h, l in bad:
        print("  FAIL %s:\n    smol         %s\n    Hugging Face %s\n    llama.cpp    %s" %
              (*short(text, a), h[:16], l[:16]))
    enough = same >= 0.95 * len(corpus)
    print(f"wordpiece: {same} of {len(corpus)} corpus strings as Hugging Face tokenizers "
          f"{__version__}; as llama.cpp where the two part: {parted}; {len(bad)} otherwise "
          f"{'ok' if not bad and enough else 'FAIL'}")
    return 0 if not bad and enough and len(ours) == len(corpus) else 1


if __name__ == "__main__":
    sys.exit(main())
