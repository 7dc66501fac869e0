#!/usr/bin/env python3
"""Schema-constrained extraction on real weights (SmolLM2-135M-Instruct, Q4_1).

    extraction.py SMOL_CHAT SMOL_SERVER MODEL

For a few short texts, smol-chat answers one-shot, greedy, with -j SCHEMA; the reply must
parse as JSON, validate against the schema and hold the values the text states. One more
case goes through smol-server's OpenAI API with response_format json_schema.

The cases are ones this 135M model gets right on every path: the same values with 1 and 2
threads and under SMOL_ISA=scalar, avx2, avx512vnni and amx (whose sums round apart), and
each value's tokens lead the runner-up the grammar allows by 2 logits or more (smol-logits
on the reply). Left out:
  wrong values: "Extract the city. Text: Maria ... lives in Lisbon." ("Malais"); "Extract
    the country. Text: Kenji was born in Japan in 1990." ("Kenji"); a job ("Baker",
    capitalized; asked for in lowercase, a sentence that runs on); products ("The red
    bicycle", "A Laptop": the article kept); an email address (a string that runs on);
  right but near ties: a car's color, as a string or an enum ("blue" 0.25 and 0.67 logits
    above "red"); a year ("1998", its "1" 0.42 above "2"); Kenji's birth year ("Ken" 1.0
    above "K", "1" 1.6 above "2").

Only the standard library: the schemas use type, properties, required and
additionalProperties, which validate() below checks by hand (enum too). Nothing is written
to disk; the server listens on a port of its own (--port 0).
"""
import json
import subprocess
import sys
import threading
import urllib.request


def obj(props):
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


STR, INT = {"type": "string"}, {"type": "integer"}

# (prompt, schema, the reply's values)
CHAT_CASES = [
    ("Extract the person's name and age. Text: Maria is 34 years old and lives in Lisbon.",
     obj({"name": STR, "age": INT}), {"name": "Maria", "age": 34}),
    ("Extract the person's name and age from the text as JSON. Text: John Smith is 52 years old.",
     obj({"name": STR, "age": INT}), {"name": "John Smith", "age": 52}),
    ("Extract the person's name, age and city. Text: Maria is 34 years old and lives in Lisbon.",
     obj({"name": STR, "age": INT, "city": STR}), {"name": "Maria", "age": 34, "city": "Lisbon"}),
    ("Extract the name of the city where Tom lives. Text: Tom lives in Paris and works as a baker.",
     obj({"city": STR}), {"city": "Paris"}),
    ("How many apples does Sam have? Text: Sam has 7 apples and 3 oranges.",
     obj({"apples": INT}), {"apples": 7}),
]
SERVER_CASE = ("Extract the dog's name. Text: My dog Max likes to play in the garden.",
               obj({"dog_name": STR}), {"dog_name": "Max"})

TYPES = {"object": dict, "string": str, "array": list, "boolean": bool, "null": type(None)}


def validate(value, schema, where="$"):
    """The errors of value under schema (the keywords the cases use); [] when valid."""
    errors = []
    t = schema.get("type")
    if t == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif t == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif t is not None:
        ok = isinstance(value, TYPES[t])
    else:
        ok = True
    if not ok:
        return [f"{where}: {json.dumps(value)} is not of type {t}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {json.dumps(value)} is not one of {schema['enum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{where}: no \"{k}\"" for k in schema.get("required", []) if k not in value]
        for k, v in value.items():
            if k in props:
                errors += validate(v, props[k], f"{where}.{k}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: \"{k}\" is not allowed")
    return errors


def check(label, text, schema, want):
    """The reply text parses, validates and holds want; returns whether it does."""
    print(f"{label}: {json.dumps(text)}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        print(f"  FAIL: not JSON ({e})")
        return False
    errors = validate(value, schema)
    if errors:
        print("  FAIL: not valid under the schema: " + "; ".join(errors))
        return False
    if value != want:
        print(f"  FAIL: want {json.dumps(want)}")
        return False
    return True


def chat_cases(smol_chat, model):
    ok = True
    for prompt, schema, want in CHAT_CASES:
        cmd = [smol_chat, "-m", model, "--temp", "0", "-t", "2", "-c", "512", "-n", "64",
               "-j", json.dumps(schema), "-p", prompt]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print(f"smol-chat exited {r.returncode} on {prompt!r}:\n{r.stderr}")
            ok = False
            continue
        ok = check(f"smol-chat {prompt!r}", r.stdout.strip(), schema, want) and ok
    return ok


def server_case(smol_server, model):
    server = subprocess.Popen(
        [smol_server, "-m", model, "--port", "0", "--parallel", "1", "-c", "1024", "-t", "2"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url, log = None, []
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
            return False
        prompt, schema, want = SERVER_CASE
        body = {"model": "smol", "temperature": 0, "max_tokens": 64,
                "messages": [{"role": "user", "content": prompt}],
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "extraction", "strict": True,
                                                    "schema": schema}}}
        request = urllib.request.Request(f"{url}/v1/chat/completions",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            reply = json.load(response)
        choice = reply["choices"][0]
        ok = check(f"smol-server {prompt!r}", choice["message"]["content"].strip(), schema, want)
        if choice["finish_reason"] != "stop":
            print(f"  FAIL: finish_reason {choice['finish_reason']!r}, not 'stop'")
            ok = False
        return ok
    finally:
        server.terminate()
        try:
            code = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            code = server.wait()
        if code != 0:
            print(f"smol-server exited {code}:\n" + "".join(log))


def main():
    if len(sys.argv) != 4:
        print("usage: extraction.py SMOL_CHAT SMOL_SERVER MODEL", file=sys.stderr)
        return 2
    smol_chat, smol_server, model = sys.argv[1:]
    ok = chat_cases(smol_chat, model)
    ok = server_case(smol_server, model) and ok
    print("extraction: ok" if ok else "extraction: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
