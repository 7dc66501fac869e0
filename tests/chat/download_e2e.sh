#!/bin/sh
# download_e2e.sh SMOL_CHAT MODEL_FILE WORK_DIR
# smol-chat's first run as a user meets it, against a loopback server instead of
# Hugging Face: no model in $SMOL_MODELS, SMOL_DOWNLOAD=1, so it downloads the file
# (interrupted halfway once, then resumed), verifies its sha256 and answers.
set -eu
chat=$1 model=$2 work=$3
here=$(dirname "$0")
rm -rf "$work" && mkdir -p "$work/models"
python3 "$here/range_server.py" --file "$model" >"$work/port" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in 1 2 3 4 5 6 7 8 9 10; do
  [ -s "$work/port" ] && break
  sleep 0.2
done
port=$(head -n1 "$work/port")
export SMOL_MODELS="$work/models" SMOL_DOWNLOAD=1

# The download was asked for, so a failure is an error (exit 1), never an answer from
# the random demo model. The first attempt is cut off halfway: the .part file stays
# for the next run.
rc=0
SMOL_MODEL_URL="http://127.0.0.1:$port/drop/file" "$chat" -p hi -n 2 --temp 0 >"$work/first.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ]
grep -q "interrupted" "$work/first.log"
grep -q "could not get the default model" "$work/first.log"
if grep -q "RANDOM" "$work/first.log"; then exit 1; fi
[ -f "$work/models/SmolLM3-3B-Q4_K_M.gguf.part" ]

# The second run resumes, verifies and chats with the downloaded model.
SMOL_MODEL_URL="http://127.0.0.1:$port/drop/file" "$chat" -p hi -n 2 --temp 0 >"$work/second.log" 2>&1
grep -q "verified" "$work/second.log"
if grep -q "RANDOM" "$work/second.log"; then exit 1; fi
cmp "$model" "$work/models/SmolLM3-3B-Q4_K_M.gguf"
[ ! -e "$work/models/SmolLM3-3B-Q4_K_M.gguf.part" ]

# A wrong checksum: the file is refused, exit 1.
rm -f "$work/models/SmolLM3-3B-Q4_K_M.gguf"
rc=0
SMOL_MODEL_URL="http://127.0.0.1:$port/bad-etag/file" "$chat" -p hi -n 2 --temp 0 >"$work/bad.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ]
grep -q "checksum mismatch" "$work/bad.log"
if grep -q "RANDOM" "$work/bad.log"; then exit 1; fi
[ ! -e "$work/models/SmolLM3-3B-Q4_K_M.gguf" ]
[ ! -e "$work/models/SmolLM3-3B-Q4_K_M.gguf.part" ]

# No server at all (--yes with no network): exit 1, one clear line, no empty .part.
rc=0
SMOL_DOWNLOAD= SMOL_MODEL_URL="http://127.0.0.1:9/file" "$chat" --yes -p hi -n 2 --temp 0 >"$work/offline.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ]
grep -q "could not get the default model" "$work/offline.log"
if grep -q "RANDOM" "$work/offline.log"; then exit 1; fi
[ ! -e "$work/models/SmolLM3-3B-Q4_K_M.gguf.part" ]
echo "download end-to-end: ok"
