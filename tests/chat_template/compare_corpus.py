#!/usr/bin/python3
"""Renders a set of conversations with one Jinja chat template, by jinja2 and by smol.

  compare_corpus.py --driver EXE --template FILE --cases JSON --work DIR
                    [--bos TEXT] [--eos TEXT] [--jinja-only]

The reference is Hugging Face transformers' apply_chat_template: an
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols
extension and transformers' {% generation %} block (its body written unchanged), its
tojson filter (json.dumps, no ASCII escapes), raise_exception and strftime_now globals.
strftime_now formats a fixed instant, NOW (2026-01-15 12:00:00 UTC), so that renders are
reproducible. The context: messages, add_generation_prompt, bos_token, eos_token (--bos,
--eos: "<s>" and "</s>" unless given), tools (None when the conversation has none, as
transformers passes it), documents (None), and each key
of its "kwargs". As llama-server does, an assistant tool call's arguments (a JSON string,
as OpenAI sends them) are parsed into an object first; the driver does the same from the
same file.

The driver, EXE --template FILE --cases JSON --bos B --eos E --now NOW, writes
{"renders": {name: text or null}, "errors": {name: {"kind": "raised" or "error",
"message": ...}}}; a non-zero exit means it could not parse the template (its stderr
says why). A conversation passes when both texts are identical, when jinja2's template
called raise_exception and smol reports "raised", or when jinja2 failed otherwise
(undefined, type error, ...) and smol reports an error of either kind. Both renderings
go to DIR/jinja/NAME.txt and DIR/smol/NAME.txt. --jinja-only skips the driver and
reports what jinja2 does with each conversation.

Needs Debian's python3-jinja2: run it with /usr/bin/python3.
"""
import argparse
import copy
import json
import os
import re
import subprocess
import sys
import time

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

NOW = 1768478400  # 2026-01-15 12:00:00 UTC
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
CONTEXT = 80  # characters shown each side of a difference


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    """What raise_exception raises: a TemplateError, as in transformers, told apart here."""


class GenerationBlock(jinja2.ext.Extension):
    """transformers' AssistantTracker without the tracking: {% generation %}...{% endgeneration %}
    writes its body unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def jinja_environment():
    # transformers' _compile_jinja_template (src/transformers/utils/chat_template_utils.py).
    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return time.strftime(format, time.gmtime(NOW))

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def parsed_tool_calls(messages):
    """The messages with each tool call's arguments (a JSON string) parsed, as llama-server
    does before it renders."""
    messages = copy.deepcopy(messages)
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                function["arguments"] = json.loads(function["arguments"])
    return messages


def render_with_jinja(compiled, conversation, bos, eos):
    """("text", str) or ("raised", message) or ("error", "Kind: message")."""
    context = {"messages": parsed_tool_calls(conversation["messages"]),
               "add_generation_prompt": conversation["add_generation_prompt"],
               "bos_token": bos, "eos_token": eos}
    # transformers passes tools and documents always, None when there are none.
    context["tools"] = conversation.get("tools")
    context["documents"] = None
    context.update(conversation.get("kwargs", {}))
    try:
        return "text", compiled.render(**context)
    except RaisedByTemplate as e:
        return "raised", str(e.message)
    except Exception as e:  # what jinja2 (or Python under it) refuses
        return "error", "%s: %s" % (type(e).__name__, e)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write(text)


def first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def show(outcome):
    kind, value = outcome
    return value if kind == "text" else "(%s) %s" % (kind, value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--driver", help="render_jinja_template (not with --jinja-only)")
    parser.add_argument("--template", required=True, help="the Jinja chat template")
    parser.add_argument("--cases", required=True, help="the conversations (JSON)")
    parser.add_argument("--work", required=True, help="where both renderings go")
    parser.add_argument("--bos", default="<s>")
    parser.add_argument("--eos", default="</s>")
    parser.add_argument("--jinja-only", action="store_true",
                        help="only report what jinja2 renders or raises")
    args = parser.parse_args()
    if not args.jinja_only and not args.driver:
        parser.error("--driver is needed unless --jinja-only")

    label = os.path.basename(args.template)
    with open(args.template, encoding="utf-8", newline="") as source:
        template = source.read()
    with open(args.cases, encoding="utf-8") as cases:
        conversations = json.load(cases)["conversations"]
    names = [c["name"] for c in conversations]
    for name in names:
        if not NAME.match(name) or names.count(name) > 1:
            sys.exit("%s: bad or repeated conversation name %r" % (args.cases, name))
    os.makedirs(args.work, exist_ok=True)

    try:
        compiled = jinja_environment().from_string(template)
        compile_error = None
    except Exception as e:
        compiled, compile_error = None, "%s: %s" % (type(e).__name__, e)

    expected = {}
    for conversation in conversations:
        name = conversation["name"]
        if compiled is None:
            expected[name] = ("error", compile_error)
        else:
            expected[name] = render_with_jinja(compiled, conversation, args.bos, args.eos)
        write(os.path.join(args.work, "jinja", name + ".txt"), show(expected[name]))

    if args.jinja_only:
        counts = {"text": 0, "raised": 0, "error": 0}
        for name, (kind, value) in expected.items():
            counts[kind] += 1
            if kind == "text":
                print("  %-28s rendered, %d characters" % (name, len(value)))
            else:
                print("  %-28s %s: %s" % (name, kind, value.splitlines()[0] if value else ""))
        if compile_error:
            print("jinja2 cannot compile the template: %s" % compile_error)
        print("%s: jinja2 renders %d, raises %d, fails %d of %d" %
              (label, counts["text"], counts["raised"], counts["error"], len(expected)))
        return 0

    command = [args.driver, "--template", args.template, "--cases", args.cases,
               "--bos", args.bos, "--eos", args.eos, "--now", str(NOW)]
    run = subprocess.run(command, capture_output=True)
    if run.returncode != 0:
        print("smol could not take the template (the driver exited with %d):\n%s" %
              (run.returncode, run.stderr.decode("utf-8", "replace").rstrip()))
        if compile_error:
            # Neither engine takes it: they agree.
            print("jinja2 cannot compile it either: %s" % compile_error)
            print("%s: %d of %d identical (both refuse the template)" %
                  (label, len(expected), len(expected)))
            return 0
        print("FAIL %s: jinja2 compiles the template" % label)
        return 1
    try:
        smol = json.loads(run.stdout.decode("utf-8"))
        renders, errors = smol["renders"], smol.get("errors", {})
    except (ValueError, KeyError, TypeError) as e:
        print("FAIL %s: the driver's output is not the expected JSON (%s): %r" %
              (label, e, run.stdout[:400]))
        return 1

    identical = 0
    for name, want in expected.items():
        if name in renders and renders[name] is not None:
            got = ("text", renders[name])
        elif name in errors:
            error = errors[name]
            got = (error.get("kind", "?"), error.get("message", ""))
        else:
            got = ("missing", "the driver said nothing of this conversation")
        write(os.path.join(args.work, "smol", name + ".txt"), show(got))
        if want[0] == "text" and got == want:
            identical += 1
            continue
        if want[0] == "raised" and got[0] == "raised":
            identical += 1
            print("  %s: both raise\n    jinja2: %s\n    smol:   %s" % (name, want[1], got[1]))
            continue
        if want[0] == "error" and got[0] in ("raised", "error"):
            identical += 1
            print("  %s: both fail\n    jinja2: %s\n    smol:   (%s) %s" %
                  (name, want[1], got[0], got[1]))
            continue
        print("MISMATCH %s" % name)
        if want[0] == "text" and got[0] == "text":
            a, b = want[1], got[1]
            at = first_difference(a, b)
            print("  lengths %d (jinja2) and %d (smol); first difference at offset %d" %
                  (len(a), len(b), at))
            print("  jinja2: %r" % a[max(0, at - CONTEXT):at + CONTEXT])
            print("  smol:   %r" % b[max(0, at - CONTEXT):at + CONTEXT])
        else:
            for who, (kind, value) in (("jinja2", want), ("smol", got)):
                if kind == "text":
                    print("  %s: rendered %d characters: %r" % (who, len(value), value[:2 * CONTEXT]))
                else:
                    print("  %s: %s: %s" % (who, kind, value))
    print("%s: %d of %d identical" % (label, identical, len(expected)))
    return 0 if identical == len(expected) else 1


if __name__ == "__main__":
    sys.exit(main())
