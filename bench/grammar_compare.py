#!/usr/bin/env python3
"""XGrammar's and llguidance's per-token mask time on a GGUF file's vocabulary.

    python3 -m venv build/xg
    build/xg/bin/pip install xgrammar==0.2.8 --no-deps
    build/xg/bin/pip install apache-tvm-ffi==0.1.15.post2 llguidance==1.9.1 tokenizers==0.23.3 numpy==2.4.6 gguf==0.19.0
    build/xg/bin/python bench/grammar_compare.py MODEL.gguf bench/schemas/order.json \
        bench/schemas/order_example.json

The document (valid under the schema, its properties in the schema's order) is
tokenized with the GGUF's own byte-level BPE (tokens and merges, rebuilt with the
`tokenizers` package); each engine then walks its tokens: at every step the next-token
bitmask is filled and the token accepted, timed together with perf_counter_ns. The same
walk in smol: SMOL_REAL_MODEL=MODEL.gguf SMOL_GRAMMAR_SCHEMA=... SMOL_GRAMMAR_DOCUMENT=...
build/release/bench/micro_benchmarks --benchmark_filter='mask_.*/1' (it times allowed_tokens() only).

xgrammar 0.2.8 imports torch and transformers, which need gigabytes (torch's PyPI wheel
brings CUDA); the matcher itself takes a numpy (DLPack) bitmask. So when they are not
installed, stand-ins just big enough for `import xgrammar` are put on sys.path.
"""
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from importlib.metadata import version as pkgver

import numpy as np
from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

STUBS = {
    "torch": '''__version__ = "0.0.0-stub"
int32 = "int32"
class Tensor: pass
def tensor(*a, **k): return None
class _Cuda:
    @staticmethod
    def is_available(): return False
cuda = _Cuda()
def __getattr__(name): return None
''',
    "transformers": '''class PreTrainedTokenizerBase: pass
class PreTrainedTokenizerFast(PreTrainedTokenizerBase): pass
def __getattr__(name): return type(name, (), {})
''',
}


def add_stubs():
    folder = tempfile.mkdtemp(prefix="grammar_compare_stubs_")
    for name, text in STUBS.items():
        if importlib.util.find_spec(name) is None:
            os.makedirs(os.path.join(folder, name))
            with open(os.path.join(folder, name, "__init__.py"), "w") as out:
                out.write(text)
    sys.path.append(folder)


def gguf_tokenizer(path):
    reader = GGUFReader(path)

    def strings(name):
        f = reader.fields[name]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def ints(name):
        f = reader.fields[name]
        return [int(f.parts[i][0]) for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = strings("tokenizer.ggml.merges")
    types = ints("tokenizer.ggml.token_type")
    eos = int(reader.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    hf = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                              merges=[tuple(m.split(" ", 1)) for m in merges]))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([AddedToken(t, special=True) for t, ty in zip(tokens, types) if ty == 3])
    return tokens, eos, hf


def report(name, times_us, extra=""):
    times_us = sorted(times_us)
    p90 = times_us[int(0.9 * (len(times_us) - 1) + 0.5)]
    print(f"{name}: per token (mask + accept) median {statistics.median(times_us):.1f} us, "
          f"p90 {p90:.1f} us, max {times_us[-1]:.1f} us, sum {sum(times_us) / 1e3:.1f} ms "
          f"over {len(times_us)} tokens{extra}")


def main():
    gguf_path, schema_path, document_path = sys.argv[1:4]
    which = sys.argv[4] if len(sys.argv) > 4 else "both"
    tokens, eos, hf = gguf_tokenizer(gguf_path)
    schema = open(schema_path).read()
    document = open(document_path).read()
    ids = hf.encode(document, add_special_tokens=False).ids
    assert hf.decode(ids) == document, "the tokenizer does not round-trip the document"
    print(f"vocabulary {len(tokens)}, eos {eos}, document {len(ids)} tokens")

    if which in ("both", "llguidance"):
        import llguidance
        import llguidance.numpy
        start = time.perf_counter()
        tokenizer = llguidance.LLTokenizer(hf.to_str(), n_vocab=len(tokens), eos_token=eos)
        grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)
        setup = time.perf_counter() - start
        for run in range(3):
            matcher = llguidance.LLMatcher(tokenizer, grammar)
            assert not matcher.is_error(), matcher.get_error()
            mask = llguidance.numpy.allocate_token_bitmask(1, tokenizer.vocab_size)
            times = []
            for t in ids:
                s = time.perf_counter_ns()
                llguidance.numpy.fill_next_token_bitmask(matcher, mask, 0)
                ok = matcher.consume_token(t)
                times.append((time.perf_counter_ns() - s) / 1e3)
                assert ok and (int(mask[0, t // 32]) >> (t % 32)) & 1, matcher.get_error()
            report(f"llguidance {pkgver('llguidance')} run {run}", times,
                   f"; tokenizer + grammar setup {1e3 * setup:.0f} ms" if run == 0 else "")

    if which in ("both", "xgrammar"):
        add_stubs()
        import xgrammar as xgr
        info = xgr.TokenizerInfo(tokens, vocab_type=xgr.VocabType.BYTE_LEVEL,
                                 vocab_size=len(tokens), stop_token_ids=[eos])
        start = time.perf_counter()
        compiled = xgr.GrammarCompiler(info, max_threads=1).compile_json_schema(
            schema, any_whitespace=True)
        setup = time.perf_counter() - start
        for run in range(3):
            matcher = xgr.GrammarMatcher(compiled)
            mask = np.full((1, (info.vocab_size + 31) // 32), -1, dtype=np.int32)
            times = []
            for t in ids:
                s = time.perf_counter_ns()
                matcher.fill_next_token_bitmask(mask)
                ok = matcher.accept_token(t)
                times.append((time.perf_counter_ns() - s) / 1e3)
                assert ok and (int(mask[0, t // 32]) >> (t % 32)) & 1, t
            report(f"xgrammar {pkgver('xgrammar')} run {run}", times,
                   f"; compile (1 thread) {1e3 * setup:.0f} ms" if run == 0 else "")


if __name__ == "__main__":
    main()
