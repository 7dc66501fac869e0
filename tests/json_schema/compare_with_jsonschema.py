#!/usr/bin/env python3
"""JSON Schema -> grammar (smol/grammar/json_schema.hpp) against Python's jsonschema.

For each schema of cases.json, sample_grammar converts it and walks its grammar at
random; then:
  - every random text of the grammar must be valid under jsonschema (the grammar writes
    only valid JSON);
  - mutations of those texts (each number one step, one unit, a tenth and a thousandth
    up and down, negated, scaled; array items and object members dropped, added,
    duplicated; values replaced) and each case's own "probes": every one jsonschema
    rejects, the grammar must refuse too (no invalid text gets through);
  - "exact_integers" [from, to] and "exact_decimals" [[from, to], ...] (numbers with up to
    three fraction digits in those ranges): the grammar accepts exactly the valid ones, except
    negative zeros ("-0", "-0.0"), which it writes only below a negative minimum;
  - "accept": texts that must be valid and accepted (the grammar is not empty-handed);
  - "refused": the conversion must refuse the schema with a message holding this text.
Needs Debian's python3-jsonschema (scripts/install-deps.sh --test).
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys

import jsonschema


def validator(case):
    if case.get("draft") == "4":
        return jsonschema.Draft4Validator(case["schema"])
    return jsonschema.Draft202012Validator(case["schema"])


def number_mutations(v):
    out = []
    if isinstance(v, bool):
        return out
    if isinstance(v, int):
        for d in (1, -1, 2, -2, 5, -5, 7, -7, 10, -10, 1000, -1000):
            out.append(v + d)
        out += [-v, v * 10, v * 2, v // 2, 0, v + 0.5, v - 0.5]
    else:
        for d in (1, -1, 0.1, -0.1, 0.001, -0.001, 1e-9, -1e-9):
            out.append(v + d)
        out += [-v, v * 10, v / 2, 0.0, math.floor(v), math.ceil(v)]
        out += [math.nextafter(v, math.inf), math.nextafter(v, -math.inf)]
    return out


def mutations(value, rng):
    """Values that differ from `value` in one place (each place, a few ways)."""
    out = []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out += number_mutations(value)
    elif isinstance(value, str):
        out += [value + "x", "", 1]
    elif isinstance(value, list):
        if value:
            out += [value[:-1], value[1:], value + value[-1:], value[:1] + value]
        out += [value + [0], value + ["x"], value + [None], [], None]
        if len(value) >= 2:
            out.append([value[1], value[0]] + value[2:])
        for i, item in enumerate(value):
            for m in mutations(item, rng):
                out.append(value[:i] + [m] + value[i + 1:])
    elif isinstance(value, dict):
        keys = list(value)
        for k in keys:
            out.append({j: value[j] for j in keys if j != k})
            out.append({**value, k: None})
            for m in mutations(value[k], rng):
                out.append({**value, k: m})
        for extra in ("zz", "x-extra", "1", "b"):
            if extra not in value:
                out.append({**value, extra: 1})
                out.append({**value, extra: "s"})
        out.append({})
    elif value is None:
        out += [0, "null", False]
    return out


def texts_of(value):
    return [json.dumps(value, ensure_ascii=False),
            json.dumps(value, ensure_ascii=False, separators=(",", ":"))]


def decimals(ranges):
    """Number texts with 0 to 3 fraction digits within the ranges (by thousandths)."""
    out = set()
    for lo, hi in ranges:
        for i in range(round(lo * 1000), round(hi * 1000) + 1):
            for digits in (0, 1, 2, 3):
                out.add("%.*f" % (digits, i / 1000))
    return sorted(out)


def negative_zero(text):
    return text.startswith("-") and float(text) == 0


def run_tool(tool, work, name, request):
    req_path = os.path.join(work, name + "-request.json")
    res_path = os.path.join(work, name + "-response.json")
    with open(req_path, "w", encoding="utf-8") as f:
        json.dump(request, f, ensure_ascii=False)
    subprocess.run([tool, req_path, res_path], check=True)
    with open(res_path, encoding="utf-8") as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True, help="the sample_grammar executable")
    parser.add_argument("--cases", required=True)
    parser.add_argument("--work", required=True, help="a folder of this test's own")
    parser.add_argument("--walks", type=int, default=60)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    with open(args.cases, encoding="utf-8") as f:
        cases = json.load(f)

    failures = []

    def fail(case, message):
        failures.append("%s: %s" % (case["name"], message))

    # Round one: the random texts.
    first = run_tool(args.tool, args.work, "samples",
                     [{"schema": c["schema"], "walks": args.walks, "seed": i + 1}
                      for i, c in enumerate(cases)])
    probes = []
    rng = random.Random(70)
    for case, answer in zip(cases, first):
        if "refused" in case:
            if answer["error"] is None or case["refused"] not in answer["error"]:
                fail(case, "expected a refusal holding %r, got %r" % (case["refused"], answer["error"]))
            probes.append([])
            continue
        if answer["error"] is not None:
            fail(case, "refused: " + answer["error"])
            probes.append([])
            continue
        check = validator(case)
        samples = answer["samples"]
        if len(samples) < args.walks // 4:
            fail(case, "only %d of %d walks finished" % (len(samples), args.walks))
        texts = set(case.get("probes", [])) | set(case.get("accept", []))
        for text in samples:
            value = json.loads(text)
            if not check.is_valid(value):
                fail(case, "the grammar wrote an invalid text: " + text)
            for m in mutations(value, rng):
                texts.update(texts_of(m))
        if "exact_integers" in case:
            lo, hi = case["exact_integers"]
            texts.update(str(i) for i in range(lo, hi + 1))
        if "exact_decimals" in case:
            texts.update(decimals(case["exact_decimals"]))
        probes.append(sorted(texts))

    # Round two: every probe through the grammar.
    second = run_tool(args.tool, args.work, "probes",
                      [{"schema": c["schema"], "probes": p} for c, p in zip(cases, probes)])
    total_invalid = 0
    for case, texts, answer in zip(cases, probes, second):
        if not texts:
            continue
        check = validator(case)
        exact = set()
        if "exact_integers" in case:
            lo, hi = case["exact_integers"]
            exact.update(str(i) for i in range(lo, hi + 1))
        if "exact_decimals" in case:
            exact.update(decimals(case["exact_decimals"]))
        invalid = refused_invalid = 0
        for text, accepted in zip(texts, answer["accepted"]):
            try:
                value = json.loads(text)
            except ValueError:
                continue
            ok = check.is_valid(value)
            if not ok:
                invalid += 1
                if accepted:
                    fail(case, "the grammar accepts a text jsonschema rejects: " + text)
                else:
                    refused_invalid += 1
            if text in exact and not negative_zero(text) and accepted != ok:
                fail(case, "%s is %s but %s" % (text, "valid" if ok else "invalid",
                                                "accepted" if accepted else "refused"))
            if text in case.get("accept", []) and not (ok and accepted):
                fail(case, "%s should be valid and accepted (valid: %s, accepted: %s)"
                     % (text, ok, accepted))
        total_invalid += refused_invalid
        if invalid == 0:
            fail(case, "no invalid text was tried: the probes prove nothing")
        print("%-40s %5d samples, %6d probes, %5d invalid ones refused"
              % (case["name"], len(first[cases.index(case)]["samples"]), len(texts), refused_invalid))

    print("%d cases, %d invalid texts refused" % (len(cases), total_invalid))
    if failures:
        for f in failures[:50]:
            print("FAIL " + f)
        print("%d failures" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
