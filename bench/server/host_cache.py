#!/usr/bin/env python3
"""Time to a returning conversation's first token: from smol-server's host-memory prompt
cache (--cache-ram) against a cold prefill of the same prompt.

A server with one slot of -c positions (a pool of one context) serves N conversations of
about L tokens in turn, so that each evicts the one before from the pool; then the first
conversation comes back with its next turn. Each request asks for one token, so its wall
time is the time to the first token (the HTTP round trip and the template included, the
same for both). Three servers, alternated R times: --cache-ram (the returning turn's
prompt copied back from host memory), none (prefilled again), and the same returning
request as a cold first request on a fresh server (the reference).

  bench/server/host_cache.py SERVER_BINARY MODEL_GGUF [--conversations 8] [--tokens 3000]
"""
import argparse
import json
import subprocess
import time
import urllib.request


def post(port, messages):
    body = json.dumps({"messages": messages, "max_tokens": 1, "temperature": 0}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                     {"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as response:
        reply = json.load(response)
    return time.perf_counter() - started, reply


def start(binary, model, context, extra):
    process = subprocess.Popen([binary, "-m", model, "-np", "1", "-c", str(context), "--port", "0",
                                *extra], stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if "listening on http://127.0.0.1:" in line:
            return process, int(line.rsplit(":", 1)[1])
    raise SystemExit("the server did not start")


def conversation(index, words):
    text = f"Conversation {index}:" + "".join(f" note{index}x{w}" for w in range(words))
    return [{"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": text}]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("model")
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--words", type=int, default=700, help="words per conversation (~4 tokens each)")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = {"host": [], "none": [], "cold": []}
    for _ in range(args.repeats):
        for kind in ("host", "none", "cold"):
            extra = ["--cache-ram", "4096"] if kind == "host" else []
            process, port = start(args.server, args.model, args.context, extra)
            try:
                chats = [conversation(i, args.words) for i in range(args.conversations)]
                first = None
                if kind != "cold":
                    for i, chat in enumerate(chats):
                        _, reply = post(port, chat)
                        if i == 0:
                            first = reply
                else:
                    # The same first turn on another server: its reply text, for the same
                    # returning prompt.
                    first = post(port, chats[0])[1]
                    process.terminate()
                    process.wait()
                    process, port = start(args.server, args.model, args.context, extra)
                back = chats[0] + [{"role": "assistant",
                                    "content": first["choices"][0]["message"]["content"]},
                                   {"role": "user", "content": "And then?"}]
                seconds, reply = post(port, back)
                usage = reply["usage"]
                results[kind].append((seconds, usage["prompt_tokens"],
                                      usage["prompt_tokens_details"]["cached_tokens"]))
            finally:
                process.terminate()
                process.wait()
    for kind, runs in results.items():
        print(f"{kind:5s} " + "  ".join(f"{s * 1e3:7.1f} ms (prompt {p}, cached {c})" for s, p, c in runs))
    cold = sorted(s for s, _, _ in results["cold"])[len(results["cold"]) // 2]
    host = sorted(s for s, _, _ in results["host"])[len(results["host"]) // 2]
    none = sorted(s for s, _, _ in results["none"])[len(results["none"]) // 2]
    print(f"median time to first token: host {host * 1e3:.1f} ms, none {none * 1e3:.1f} ms, "
          f"cold {cold * 1e3:.1f} ms: host/cold = {host / cold:.3f}")


if __name__ == "__main__":
    main()
