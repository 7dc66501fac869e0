"""smol against llama.cpp on a real model: the same GGUF file through smol's programs
and through llama.cpp itself (llamacpp_oracle.mjs, node-llama-cpp's prebuilt CPU build).

    real_model_check.py tokenize|greedy|perplexity --model M --bin DIR --node NODE
                        --oracle llamacpp_oracle.mjs --work DIR [--steps 64] [--text FILE]
                        [--text-chars N] [--ctx 512] [--ppl-tolerance 0.005]
                        [--prompts FILE] [--near-tie X] [--top K] [--exact] [--f32-activations] [--tolerance MEAN MAX TOP1]
    real_model_check.py synthetic --make-model smol-make-model --preset qwen3-tiny
                        --bin DIR --node NODE --oracle ... --work DIR [--prompts FILE]
                        [--steps N] [--top K] [--f32-tolerance MEAN MAX]
                        [--tolerance MEAN MAX TOP1] [--quantized TYPE...] [--also TYPE...]
                        [--quantized-make-flags='FLAGS']

tokenize:   a corpus (ASCII, code, numbers, whitespace runs, accents, CJK, emoji) gives
            identical ids.
greedy:     for each prompt, llama.cpp's greedy continuation is fed back to smol
            (teacher forcing, smol-logits --all-positions); smol's top token must be
            llama.cpp's at every step, so smol's own greedy run would produce the same
            tokens. A step may differ only where llama.cpp's top two logits lie closer
            than llama.cpp moves from itself (its flash-attention path against the
            other) and than --near-tie X when given, and the report says so; smol's
            distance is held within twice llama.cpp's own. --prompts FILE: a JSON list
            of prompts instead of the SmolLM2 chat ones (tests/real_model.cmake's
            real_model_gemma3_greedy: plain-text prompts with their <bos>).
            Options for small synthetic models with random weights:
            --top K, llama.cpp's K best logits per step compared (the whole row when K is
            the vocabulary); --exact, an F32 K/V cache and no flash attention on both
            sides (llama.cpp's defaults round Q, K and V to f16); --f32-activations, smol's
            flag (llama.cpp's F32 weights take float activations);
            --tolerance MEAN MAX TOP1, per prompt: mean and max |dlogit| over the compared
            logits, and the share of steps with llama.cpp's top token, instead of the
            near-tie rule (random weights give near-ties everywhere).
synthetic:  greedy on a family's synthetic files, written into --work by
            smol-make-model --preset (tests/real_model.cmake's synthetic_*_greedy):
            F32 with --exact --f32-activations within --f32-tolerance (MEAN MAX, every
            token equal), then Q4_K_M and each --also type with --exact within
            --tolerance (default: the fixture's Q4_K_M bounds, Q4_K_M_TOLERANCE), those
            written with --quantized-make-flags too.
perplexity: smol-perplexity and llama.cpp over the same text (--text-chars N: its first
            N characters, whole lines), llama-perplexity's protocol (-c --ctx, bos first
            in every chunk for a model that adds it), within --ppl-tolerance (0.5 %).
Every run writes into --work, a directory of its own.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys

NEAR_TIE = 0.05  # logits: f32 sums in another order move them by about 1e-3 here
# synthetic: the fixture's Q4_K_M bounds (README): mean and max |dlogit|, top-1 share.
Q4_K_M_TOLERANCE = [0.15, 1.5, 0.85]

CORPUS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    " leading space",
    "trailing spaces   ",
    "many     spaces    between\twords\t\ttabs",
    "line one\nline two\n\nline four\r\nwindows line",
    "I'm sure you've seen it; they'll say we'd done it. DON'T SHOUT, IT'S LOUD",
    "1 12 123 1234 12345 1234567 3.14159 1,000,000 -42 0x1F 2026-11-26",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot",
    "<html><body class=\"main\">Hi &amp; bye</body></html>",
    "https://example.com/path?query=1&b=two#frag",
    "!!! ??? ... --- *** ### @@@ $$$ %%%",
    "Café naïve résumé Ångström façade coöperate",
    "Привет, как дела? Σωκράτης",
    "中文分词测试，日本語のテキスト、한국어 문장",
    "emoji 👋🏽 🇫🇷 👨‍👩‍👧 ❤️ 🎉🎉",
    "non\u00a0breaking\u2003spaces",
    "<|im_start|>user\nspecial spellings stay text here<|im_end|>",
    "a",
    "",
    "   ",
    "\n\n\n",
    "x" * 300,
    "ALLCAPS camelCase snake_case kebab-case PascalCase",
    "Mixed123Numbers456and789Letters",
]

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
PROMPTS = [
    # The file's own template with its default system prompt (as smol and llama.cpp's
    # --jinja render it). On this file, greedy decoding answers the literal question
    # with French nonsense in llama.cpp too; smol must give the same tokens.
    f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nWhich city is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nWrite a Python function that reverses a string.<|im_end|>\n<|im_start|>assistant\n",
    f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nMy name is Ada. Please remember it.<|im_end|>\n<|im_start|>assistant\nNice to meet you, Ada!<|im_end|>\n<|im_start|>user\nWhat is my name?<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village by the sea,",
    "The three primary colors are",
]


def run(argv, **kwargs):
    result = subprocess.run(argv, capture_output=True, **kwargs)
    if result.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (result.returncode, " ".join(argv),
                                         result.stderr.decode(errors="replace")[-2000:]))
    return result.stdout


def oracle(args, *rest):
    return json.loads(run([args.node, args.oracle, rest[0], args.model] + list(rest[1:])))


def write_json(args, name, value):
    path = os.path.join(args.work, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)
    return path


def check_tokenize(args):
    want = oracle(args, "tokenize", write_json(args, "corpus.json", CORPUS))
    failures = 0
    for i, (text, ids) in enumerate(zip(CORPUS, want)):
        path = os.path.join(args.work, "text%d.txt" % i)
        with open(path, "wb") as f:
            f.write(text.encode("utf-8"))
        got = json.loads(run([os.path.join(args.bin, "smol-tokenize"), "-m", args.model, "--ids",
                              "--no-special", "-f", path]))
        if got != ids:
            failures += 1
            print("DIFFERENT %r\n  llama.cpp %s\n  smol      %s" % (text[:60], ids, got))
    print("tokenize: %d of %d texts identical (%d tokens in all)" %
          (len(CORPUS) - failures, len(CORPUS), sum(map(len, want))))
    return failures == 0


def argmax(row):
    best = 0
    for i in range(1, len(row)):
        if row[i] > row[best]:
            best = i
    return best


def check_greedy(args):
    prompts = PROMPTS
    if args.prompts:
        with open(args.prompts, encoding="utf-8") as f:
            prompts = json.load(f)
    exact = ["--exact"] if args.exact else []
    # Without a fixed tolerance, smol is held to llama.cpp's distance from itself: the
    # same tokens through llama.cpp's other attention path (flash attention on instead of
    # off) move its logits by what float order and 8-bit activation rounding allow.
    noise = not (args.tolerance or args.exact)
    flash = ["--flash", "off"] if noise else []
    runs = oracle(args, "greedy", write_json(args, "prompts.json", prompts), str(args.steps),
                  str(args.top), *exact, *flash)
    other = oracle(args, "score", write_json(args, "runs.json", runs), "--flash", "on") \
        if noise else None
    smol_flags = (["--kv-type", "f32"] if args.exact else []) + \
        (["--f32-activations"] if args.f32_activations else [])
    ok = True
    rows = []  # (path, run, its smol rows, llama.cpp's other path) for the noise rule
    for n, r in enumerate(runs):
        tokens = r["prompt"] + r["generated"]
        # llama.cpp's tokens through smol twice: in one prefill, and as a reply is
        # generated (the prompt in one prefill, then one decode step per token: the
        # decode kernels and the KV cache's growth). smol's own greedy reply is the same
        # tokens exactly as long as each row's argmax is llama.cpp's next token.
        for path, flags in (("prefill", []), ("decode", ["--decode-from", str(len(r["prompt"]))])):
            out = os.path.join(args.work, "logits%d.%s.bin" % (n, path))
            run([os.path.join(args.bin, "smol-logits"), "-m", args.model, "-t", "2",
                 "--all-positions", "--tokens", ",".join(map(str, tokens[:-1])), "-o", out] +
                flags + smol_flags)
            data = open(out, "rb").read()
            n_vocab = len(data) // 4 // (len(tokens) - 1)
            first = len(r["prompt"]) - 1
            # Bound now: the rows are read after the loop, when these names have moved on.
            row_of = lambda step, data=data, n_vocab=n_vocab, first=first: struct.unpack_from(
                "<%df" % n_vocab, data, (first + step) * n_vocab * 4)
            if args.tolerance or args.exact:
                print("%s:" % path, end=" ")
                ok = within_tolerance(args, r, row_of) and ok
            else:
                rows.append((path, r, row_of, other[n]))
    if rows:
        # llama.cpp's largest move over every prompt: one prompt's maximum is too few
        # samples to bound smol's (0.56-1.41 from prompt to prompt on SmolLM2).
        largest = max(abs(a - l) for _, r, _, again in rows for step, top in enumerate(r["top"])
                      for (_, l), (_, a) in zip(top, again[step]))
        for path, r, row_of, again in rows:
            print("%s:" % path, end=" ")
            ok = within_own_noise(r, row_of, again, largest, args.near_tie) and ok
    return ok


def within_tolerance(args, r, row_of):
    """Fixed bounds (synthetic models): llama.cpp's top-K logits, and near-ties below
    NEAR_TIE or, with --tolerance, a share of equal top tokens."""
    ok = True
    same, ties, worst, total, compared = 0, [], 0.0, 0.0, 0
    for step in range(len(r["generated"])):
        row = row_of(step)
        top = r["top"][step]
        for token, logit in top:
            worst = max(worst, abs(row[token] - logit))
            total += abs(row[token] - logit)
            compared += 1
        if argmax(row) == r["generated"][step]:
            same += 1
        elif not args.tolerance:  # with one, a different top token counts against TOP1
            margin = top[0][1] - top[1][1]
            if margin < NEAR_TIE:
                ties.append("step %d (margin %.4f)" % (step, margin))
            else:
                ok = False
                print("DIFFERENT at step %d: llama.cpp %d (margin %.3f), smol %d" %
                      (step, r["generated"][step], margin, argmax(row)))
    steps = len(r["generated"])
    print("greedy: %d of %d tokens equal, |dlogit| over llama.cpp's top %d: max %.4g, "
          "mean %.4g%s; %r" %
          (same, steps, args.top, worst, total / compared,
           ", near-ties allowed: " + ", ".join(ties) if ties else "", r["text"][-60:]))
    if args.tolerance:
        mean_allowed, max_allowed, top1_allowed = args.tolerance
        if total / compared > mean_allowed or worst > max_allowed or same < top1_allowed * steps:
            ok = False
            print("  beyond the tolerance: mean %g, max %g, top-1 %g" % tuple(args.tolerance))
    return ok


def within_own_noise(r, row_of, again, largest, cap):
    """smol's greedy tokens equal llama.cpp's until a near-tie, where a near-tie is two
    logits closer than llama.cpp's own largest move (`again`: the same ids' logits from
    its other attention path) and than `cap` (--near-tie) when given; smol's mean
    distance within twice llama.cpp's own on this prompt, its largest within twice
    `largest`, llama.cpp's largest over every prompt."""
    smol_d, self_d = [], []
    diverged = None  # (step, margin): where smol's own greedy run would part
    for step in range(len(r["generated"])):
        row = row_of(step)
        for (token, logit), (_, other) in zip(r["top"][step], again[step]):
            smol_d.append(abs(row[token] - logit))
            self_d.append(abs(other - logit))
        if diverged is None and argmax(row) != r["generated"][step]:
            diverged = (step, r["top"][step][0][1] - r["top"][step][1][1])
    mean = lambda v: sum(v) / len(v)
    near_tie = min(max(self_d), cap) if cap else max(self_d)
    ok = True
    line = ("greedy: smol vs llama.cpp mean |d| %.4f max %.4f; llama.cpp vs itself (flash "
            "attention on/off) mean %.4f max %.4f; " %
            (mean(smol_d), max(smol_d), mean(self_d), max(self_d)))
    if diverged is None:
        line += "all %d greedy tokens equal" % len(r["generated"])
    else:
        step, margin = diverged
        line += "equal for %d tokens, then llama.cpp's top two %.3f apart" % (step, margin)
        if margin < near_tie:
            line += " (a near-tie, closer than %.3f; allowed)" % near_tie
        else:
            ok = False
            line += ": NOT a near-tie"
    if mean(smol_d) > 2 * mean(self_d) + 0.05 or max(smol_d) > 2 * largest:
        ok = False
        line += "; smol's distance exceeds twice llama.cpp's own"
    print(line + "; " + repr(r["text"][-50:]))
    return ok


def check_perplexity(args):
    text = args.text
    if args.text_chars:  # the text's beginning, cut at a line's end
        with open(args.text, encoding="utf-8") as f:
            head = f.read(args.text_chars)
        text = os.path.join(args.work, "text.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write(head[:head.rfind("\n") + 1] or head)
    want = oracle(args, "perplexity", text, str(args.ctx))
    out = run([os.path.join(args.bin, "smol-perplexity"), "-m", args.model, "-f", text, "-c",
               str(args.ctx), "-t", "2"]).decode()
    line = [l for l in out.splitlines() if l.startswith("Final estimate")][-1]
    ours = float(line.split("=")[1].split()[0])
    ratio = ours / want["ppl"]
    print("perplexity over %s: smol %.4f, llama.cpp %.4f (%d tokens, %d chunks), ratio %.5f" %
          (text, ours, want["ppl"], want["tokens"], want["chunks"], ratio))
    return abs(ratio - 1) <= args.ppl_tolerance


def check_synthetic(args):
    """A family's synthetic files, written here by smol-make-model --preset (random
    weights in the family's real layout), each against llama.cpp with greedy's fixed
    bounds: F32 with float activations and an F32 K/V cache on both sides (--exact)
    within --f32-tolerance, then each --quantized type (Q4_K_M unless told) and each --also
    type within --tolerance, written
    with --quantized-make-flags (a mixture's --experts-used N: with every expert used, no
    near-tie in the router's choice can tip on the activations' rounding)."""
    ok = True
    quantized = args.tolerance or Q4_K_M_TOLERANCE
    for weights, tolerance in ([("f32", args.f32_tolerance + [1.0])] +
                               [(each, quantized) for each in args.quantized + args.also]):
        path = os.path.join(args.work, "%s.%s.gguf" % (args.preset, weights))
        extra = args.quantized_make_flags.split() if weights != "f32" else []
        print(run([args.make_model, "--preset", args.preset, "--type", weights, "-o", path] +
                  extra).decode().strip())
        each = argparse.Namespace(**vars(args))
        each.model, each.tolerance, each.exact = path, tolerance, True
        each.f32_activations = weights == "f32"
        each.work = os.path.join(args.work, weights)
        os.makedirs(each.work, exist_ok=True)
        ok = check_greedy(each) and ok
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("check", choices=["tokenize", "greedy", "perplexity", "synthetic"])
    parser.add_argument("--model", help="the GGUF file (all but synthetic)")
    parser.add_argument("--make-model", help="synthetic: smol-make-model")
    parser.add_argument("--preset", help="synthetic: smol-make-model's preset (qwen3-tiny)")
    parser.add_argument("--quantized", nargs="+", default=["q4_k_m"], metavar="TYPE",
                        help="synthetic: the quantized --type files to check (q4_k_m)")
    parser.add_argument("--also", nargs="*", default=[], metavar="TYPE",
                        help="synthetic: more of smol-make-model's --type to check (mxfp4_moe)")
    parser.add_argument("--quantized-make-flags", default="",
                        help="synthetic: more smol-make-model flags for the quantized files "
                        "(one string: --quantized-make-flags='--experts-used 16')")
    parser.add_argument("--f32-tolerance", type=float, nargs=2, metavar=("MEAN", "MAX"),
                        default=[1e-4, 1e-3], help="synthetic: the F32 file's bounds")
    parser.add_argument("--bin", required=True, help="directory of smol-tokenize, smol-logits, ...")
    parser.add_argument("--node", default="node")
    parser.add_argument("--oracle", required=True,
                        help="llamacpp_oracle.mjs beside the node_modules that hold node-llama-cpp")
    parser.add_argument("--work", required=True)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    parser.add_argument("--ctx", type=int, default=512, help="perplexity: the chunk size (-c)")
    parser.add_argument("--text-chars", type=int,
                        help="perplexity: only the text's first N characters (whole lines)")
    parser.add_argument("--ppl-tolerance", type=float, default=0.005,
                        help="perplexity: the largest |smol / llama.cpp - 1| (0.005)")
    parser.add_argument("--prompts", help="greedy: a JSON list of prompts (default: SmolLM2's)")
    parser.add_argument("--top", type=int, default=5,
                        help="greedy: llama.cpp's best K logits per step are compared")
    parser.add_argument("--exact", action="store_true",
                        help="greedy: an F32 K/V cache and no flash attention on both sides")
    parser.add_argument("--near-tie", type=float,
                        help="greedy: a divergence is a near-tie only below this margin too")
    parser.add_argument("--f32-activations", action="store_true",
                        help="greedy: smol-logits --f32-activations (as llama.cpp on F32 files)")
    parser.add_argument("--tolerance", type=float, nargs=3, metavar=("MEAN", "MAX", "TOP1"),
                        help="greedy: per-prompt bounds instead of the near-tie rule")
    args = parser.parse_args()
    if (args.check == "synthetic") != (args.model is None):
        parser.error("synthetic takes --make-model and --preset, the others --model")
    if args.check == "synthetic" and not (args.make_model and args.preset):
        parser.error("synthetic needs --make-model and --preset")
    os.makedirs(args.work, exist_ok=True)
    ok = {"tokenize": check_tokenize, "greedy": check_greedy,
          "perplexity": check_perplexity, "synthetic": check_synthetic}[args.check](args)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
