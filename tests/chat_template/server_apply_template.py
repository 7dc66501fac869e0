#!/usr/bin/python3
"""smol-server's chat template flags and POST /apply-template, against jinja2.

  server_apply_template.py --server SMOL_SERVER --model GGUF --corpus DIR --cases JSON

Starts smol-server on the model with another model's template (--chat-template-file, a
template of the corpus fetch_template_corpus.py writes) and --chat-template-kwargs, asks
/apply-template for the prompt of each conversation of JSON, and compares it byte for
byte with jinja2's rendering of the same template under transformers' conventions, with
the variables the server passes (enable_thinking true unless the request's
chat_template_kwargs says otherwise, the model's bos and eos). For a template whose
tool-call syntax the server knows (serve/tool_call_formats.hpp: Llama 3.1's, Qwen3's,
Mistral Nemo's, DeepSeek R1's, Kimi K2's, Qwen3.5's, Functionary v3.2's) the conversations with tools, calls and tool
results are compared too: the template itself writes them, a call's arguments an
object as llama-server passes them; the others get tools None (the generic format
describes tools in the system prompt instead). Also checks that a request's chat_template_kwargs reach the
template, that a template the engine cannot parse stops the server with its line and
column, and that --no-jinja with --chat-template-file is refused.

Needs Debian's python3-jinja2: run it with /usr/bin/python3.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_corpus  # noqa: E402  (the jinja2 environment transformers uses)

# The fixture's vocabulary: SmolLM3's (no bos added by the tokenizer).
BOS, EOS = "<|begin_of_text|>", "<|im_end|>"
DATE = "15 Jan 2026"


def start(server, model, *flags):
    process = subprocess.Popen([server, "-m", model, "--port", "0", *flags],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        match = re.search(r"listening on (http://\S+)", line)
        if match:
            return process, match.group(1)
    process.wait()
    return process, None


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--cases", required=True)
    args = parser.parse_args()
    every = json.load(open(args.cases, encoding="utf-8"))["conversations"]
    plain = [c for c in every
             if not any("tool_calls" in m or m["role"] == "tool" for m in c["messages"])
             and "tools" not in c]
    # With tools: the conversations a client could send (OpenAI's shapes, no variables of
    # one template's own), each call answered.
    with_tools = [c for c in every if "tools" in c and set(c.get("kwargs", {})) <= {"enable_thinking"}]
    failures = 0
    env = compare_corpus.jinja_environment()
    for name, tool_syntax in (("meta-llama-Llama-3.1-8B-Instruct.jinja", True),
                              ("Qwen-Qwen3-0.6B.jinja", True),
                              ("google-gemma-2-2b-it.jinja", False),
                              ("mistralai-Mistral-Nemo-Instruct-2407.jinja", True),
                              ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", True),
                              ("moonshotai-Kimi-K2.jinja", True),
                              ("Qwen3.5-4B.jinja", True),
                              ("meetkai-functionary-medium-v3.2.jinja", True)):
        path = os.path.join(args.corpus, name)
        source = open(path, encoding="utf-8").read()
        compiled = env.from_string(source)
        process, url = start(args.server, args.model, "--chat-template-file", path,
                             "--chat-template-kwargs", json.dumps({"date_string": DATE}))
        if url is None:
            sys.exit("%s: smol-server did not start" % name)
        conversations = plain + (with_tools if tool_syntax else [])
        try:
            for conversation in conversations:
                for kwargs in ({}, {"enable_thinking": False}):
                    context = {"messages": compare_corpus.parsed_tool_calls(
                                   conversation["messages"]),
                               "tools": conversation.get("tools"),
                               "documents": None, "add_generation_prompt": True,
                               "enable_thinking": True, "bos_token": BOS, "eos_token": EOS,
                               "date_string": DATE}
                    context.update(kwargs)
                    try:
                        want = (200, compiled.render(**context))
                    except compare_corpus.RaisedByTemplate:
                        want = (400, None)
                    except Exception:  # noqa: BLE001  failed in the template: a null content
                        # (Qwen3's `'</think>' in content`) is given as "" then, as llama.cpp
                        # gives it to templates that need a text.
                        # Then a call's arguments as their JSON text (Functionary v3.2
                        # concatenates them), as llama.cpp gives them to such templates.
                        for message in context["messages"]:
                            if "content" in message and message["content"] is None:
                                message["content"] = ""
                        want = (400, None)
                        for as_text in (False, True):
                            if as_text:
                                for message in context["messages"]:
                                    for call in message.get("tool_calls") or []:
                                        call["function"]["arguments"] = json.dumps(
                                            call["function"]["arguments"], ensure_ascii=False)
                            try:
                                want = (200, compiled.render(**context))
                                break
                            except Exception:  # noqa: BLE001
                                pass
                    request = {"messages": conversation["messages"], "chat_template_kwargs": kwargs}
                    if "tools" in conversation:
                        request["tools"] = conversation["tools"]
                    status, body = post(url + "/apply-template", request)
                    got = (status, body.get("prompt") if status == 200 else None)
                    if got != want:
                        failures += 1
                        print("MISMATCH %s %s %s\n  jinja2: %r\n  smol:   %r %r" %
                              (name, conversation["name"], kwargs, want, got, body))
            # A generation through the same template works end to end.
            status, body = post(url + "/v1/chat/completions",
                                {"messages": [{"role": "user", "content": "Hi"}],
                                 "max_tokens": 2})
            # (The random model may end its turn within the two tokens.)
            if status != 200 or body["choices"][0]["finish_reason"] not in ("length", "stop"):
                failures += 1
                print("%s: chat completion failed: %s %s" % (name, status, body))
        finally:
            process.terminate()
            process.wait()
        print("%s: %d conversations compared" % (name, 2 * len(conversations)))

    # A template the engine cannot parse stops the server, naming the line and column.
    process = subprocess.run([args.server, "-m", args.model, "--port", "0",
                              "--chat-template", "{% for m in messages %}{{ m.content }}"],
                             capture_output=True, text=True, timeout=60)
    if process.returncode == 0 or "line 1" not in process.stderr + process.stdout:
        failures += 1
        print("an unparsable --chat-template was not refused with its place: %r" %
              (process.stderr + process.stdout))
    process = subprocess.run([args.server, "-m", args.model, "--port", "0", "--no-jinja",
                              "--chat-template", "chatml"],
                             capture_output=True, text=True, timeout=60)
    if process.returncode == 0 or "--no-jinja" not in process.stderr:
        failures += 1
        print("--no-jinja with --chat-template was not refused: %r" % process.stderr)
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
