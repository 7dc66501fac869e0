#!/usr/bin/python3
"""Renders small templates, each on its own context, by jinja2 and by smol; compares them.

  compare_snippets.py --driver EXE --snippets JSON --work DIR [--only NAME ...]

Where compare_corpus.py runs real chat templates on conversations, this checks the
language itself: whitespace control, literals, operators, tests, filters, methods, loops,
scopes, macros, undefined values, one snippet per behaviour. JSON is {"snippets": [{"name",
"template", "context": {...}}]}. jinja2 renders each as transformers' apply_chat_template
would (compare_corpus.py's environment: ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, transformers' tojson, raise_exception, strftime_now at NOW)
with the snippet's context as keyword arguments.

The driver, EXE --snippets JSON --now NOW, writes {"renders": {name: text or null},
"errors": {name: {"kind": "raised" or "error", "message": ...}}}. A snippet passes when
both texts are identical, when jinja2's template called raise_exception and smol reports
"raised", or when jinja2 failed otherwise (a syntax error, undefined, a type error, ...)
and smol reports an error of either kind. Both renderings go to DIR/jinja/NAME.txt and
DIR/smol/NAME.txt; the exit status is 1 when any snippet differs.

Needs Debian's python3-jinja2: run it with /usr/bin/python3.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_corpus import (CONTEXT, NAME, NOW, RaisedByTemplate,  # noqa: E402
                            first_difference, jinja_environment, show, write)


def render_with_jinja(environment, snippet):
    """("text", str) or ("raised", message) or ("error", "Kind: message")."""
    try:
        compiled = environment.from_string(snippet["template"])
        return "text", compiled.render(**snippet.get("context", {}))
    except RaisedByTemplate as e:
        return "raised", str(e.message)
    except Exception as e:  # what jinja2 (or Python under it) refuses
        return "error", "%s: %s" % (type(e).__name__, e)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--driver", required=True, help="render_jinja_template")
    parser.add_argument("--snippets", required=True, help="the snippets (JSON)")
    parser.add_argument("--work", required=True, help="where both renderings go")
    parser.add_argument("--only", nargs="*", help="check only these snippets")
    parser.add_argument("--quiet", action="store_true", help="report only mismatches")
    args = parser.parse_args()

    with open(args.snippets, encoding="utf-8") as source:
        snippets = json.load(source)["snippets"]
    names = [s["name"] for s in snippets]
    for name in names:
        if not NAME.match(name) or names.count(name) > 1:
            sys.exit("%s: bad or repeated snippet name %r" % (args.snippets, name))
    if args.only:
        unknown = set(args.only) - set(names)
        if unknown:
            sys.exit("no such snippets: %s" % ", ".join(sorted(unknown)))
        snippets = [s for s in snippets if s["name"] in args.only]
    os.makedirs(args.work, exist_ok=True)

    table = args.snippets
    if args.only:  # the driver renders what is checked, no more
        table = os.path.join(args.work, "snippets.json")
        with open(table, "w", encoding="utf-8") as out:
            json.dump({"snippets": snippets}, out, ensure_ascii=False)

    environment = jinja_environment()
    expected = {}
    for snippet in snippets:
        name = snippet["name"]
        expected[name] = render_with_jinja(environment, snippet)
        write(os.path.join(args.work, "jinja", name + ".txt"), show(expected[name]))

    run = subprocess.run([args.driver, "--snippets", table, "--now", str(NOW)],
                         capture_output=True)
    if run.returncode != 0:
        print("FAIL: the driver exited with %d:\n%s" %
              (run.returncode, run.stderr.decode("utf-8", "replace").rstrip()))
        return 1
    try:
        smol = json.loads(run.stdout.decode("utf-8"))
        renders, errors = smol["renders"], smol.get("errors", {})
    except (ValueError, KeyError, TypeError) as e:
        print("FAIL: the driver's output is not the expected JSON (%s): %r" % (e, run.stdout[:400]))
        return 1

    agree = 0
    for name, want in expected.items():
        if name in renders and renders[name] is not None:
            got = ("text", renders[name])
        elif name in errors:
            error = errors[name]
            got = (error.get("kind", "?"), error.get("message", ""))
        else:
            got = ("missing", "the driver said nothing of this snippet")
        write(os.path.join(args.work, "smol", name + ".txt"), show(got))
        if want[0] == "text" and got == want:
            agree += 1
            continue
        if (want[0] == "raised" and got[0] == "raised") or \
           (want[0] == "error" and got[0] in ("raised", "error")):
            agree += 1
            if not args.quiet:
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
    print("snippets: %d of %d agree" % (agree, len(expected)))
    return 0 if agree == len(expected) else 1


if __name__ == "__main__":
    sys.exit(main())
