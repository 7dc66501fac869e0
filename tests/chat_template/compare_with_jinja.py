#!/usr/bin/python3
"""Renders conversations.json with jinja2 and with smol, and compares them byte for byte.

  compare_with_jinja.py --driver RENDER --template FILE --cases JSON --work DIR
                        [--replace OLD NEW] [--bos TEXT --eos TEXT]

FILE is a GGUF file (its tokenizer.chat_template, and its bos and eos tokens) or the
Jinja text itself. --replace derives a variant of the template (written into DIR),
to check that a known template's parameters are read from the text. The template is
rendered as Hugging Face's apply_chat_template does: an ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, the loopcontrols extension, raise_exception and
tojson, the special tokens, add_generation_prompt, and enable_thinking when the
conversation sets it; a leading bos_token it writes is dropped, as llama.cpp does. A
conversation the template refuses (raise_exception) must be refused by smol too. Both renderings are written into DIR (DIR/jinja/NAME.txt and
DIR/smol/NAME.txt) to diff by hand. Fails when smol does not recognize the template
as one it knows exactly, or when any prompt differs.

Needs Debian's python3-jinja2: run it with /usr/bin/python3.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox


def gguf_metadata(path):
    """The metadata of a GGUF file, as a dict (only what this test needs to decode)."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    formats = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
               10: "<Q", 11: "<q", 12: "<d"}
    data = open(path, "rb").read()
    magic, _version, _tensors, count = struct.unpack_from("<4sIQQ", data, 0)
    if magic != b"GGUF":
        sys.exit("%s: not a GGUF file" % path)

    def value(pos, kind):
        if kind in sizes:
            return struct.unpack_from(formats[kind], data, pos)[0], pos + sizes[kind]
        if kind == 8:
            (length,) = struct.unpack_from("<Q", data, pos)
            return data[pos + 8:pos + 8 + length].decode("utf-8"), pos + 8 + length
        if kind == 9:
            element, length = struct.unpack_from("<IQ", data, pos)
            pos += 12
            items = []
            for _ in range(length):
                item, pos = value(pos, element)
                items.append(item)
            return items, pos
        sys.exit("%s: unknown GGUF value type %d" % (path, kind))

    metadata, pos = {}, 24
    for _ in range(count):
        (length,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8:pos + 8 + length].decode("utf-8")
        (kind,) = struct.unpack_from("<I", data, pos + 8 + length)
        metadata[key], pos = value(pos + 12 + length, kind)
    return metadata


def special_tokens(metadata):
    tokens = metadata.get("tokenizer.ggml.tokens", [])
    named = {}
    for name, key in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"),
                      ("pad_token", "padding")):
        index = metadata.get("tokenizer.ggml.%s_token_id" % key)
        if index is not None and index < len(tokens):
            named[name] = tokens[index]
    return named


def jinja_environment():
    # transformers' _compile_jinja_template, the reference for these templates.
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write(text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--driver", required=True)
    parser.add_argument("--template", required=True)
    parser.add_argument("--cases", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--replace", nargs=2, metavar=("OLD", "NEW"))
    parser.add_argument("--bos")
    parser.add_argument("--eos")
    parser.add_argument("--engine", action="store_true",
                        help="render through smol's Jinja engine (the driver's --jinja), "
                             "not the family's C++ renderer")
    args = parser.parse_args()

    os.makedirs(args.work, exist_ok=True)
    if args.template.endswith(".gguf"):
        metadata = gguf_metadata(args.template)
        template = metadata["tokenizer.chat_template"]
        tokens = special_tokens(metadata)
    else:
        with open(args.template, encoding="utf-8", newline="") as source:
            template = source.read()
        tokens = {}
    if args.bos is not None:
        tokens["bos_token"] = args.bos
    if args.eos is not None:
        tokens["eos_token"] = args.eos
    template_path = args.template
    if args.replace:
        old, new = args.replace
        if old not in template:
            sys.exit("--replace: %r is not in the template" % old)
        template = template.replace(old, new)
        template_path = os.path.join(args.work, "template.jinja")
        write(template_path, template)

    conversations = json.load(open(args.cases, encoding="utf-8"))["conversations"]
    compiled = jinja_environment().from_string(template)
    expected = {}
    for conversation in conversations:
        context = dict(tokens, messages=conversation["messages"],
                       add_generation_prompt=conversation["add_generation_prompt"])
        if "enable_thinking" in conversation:
            context["enable_thinking"] = conversation["enable_thinking"]
        # OpenAI's tools, as Hugging Face's apply_chat_template passes them. smol's
        # templates have no tool section (serve/tool_calls.hpp): smol renders the messages
        # alone, so a template that used `tools` would differ here.
        if "tools" in conversation:
            context["tools"] = conversation["tools"]
        try:
            text = compiled.render(**context)
        except jinja2.exceptions.TemplateError:
            # The template refuses the conversation (Gemma's alternating roles): smol
            # must refuse it too, which the driver reports as null.
            expected[conversation["name"]] = None
            continue
        # llama.cpp drops a leading bos the template writes ({{ bos_token }}, as
        # Gemma's does): the tokenizer adds it. smol's prompts never hold it.
        bos = tokens.get("bos_token")
        if bos and template.startswith("{{ bos_token }}") and text.startswith(bos):
            text = text[len(bos):]
        expected[conversation["name"]] = text

    command = [args.driver, template_path, args.cases]
    if args.engine:
        command.append("--jinja")
        if not args.template.endswith(".gguf"):
            command += [tokens.get("bos_token", "<s>"), tokens.get("eos_token", "</s>")]
    run = subprocess.run(command, capture_output=True)
    if run.returncode != 0:
        sys.exit("the driver failed (%d): %s" % (run.returncode, run.stderr.decode()))
    smol = json.loads(run.stdout.decode("utf-8"))

    failures = 0
    for name, want in expected.items():
        got = smol["renders"].get(name, "(missing)")
        write(os.path.join(args.work, "jinja", name + ".txt"), want if want is not None else "(refused)")
        write(os.path.join(args.work, "smol", name + ".txt"), got if got is not None else "(refused)")
        if got == want:
            continue
        failures += 1
        print("MISMATCH %s\n  jinja2: %r\n  smol:   %r" % (name, want, got))
    known_as = smol["known_as"]
    for warning in smol["warnings"]:
        print("smol warned: %s" % warning)
    print("%s: recognized as %s; %d of %d conversations identical" %
          (args.template + (" (with %r -> %r)" % tuple(args.replace) if args.replace else ""),
           known_as, len(expected) - failures, len(expected)))
    if known_as is None:
        print("FAIL: smol does not know this template exactly")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
