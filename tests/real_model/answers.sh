#!/bin/sh
# It answers: greedy replies of smol-chat on the real model, with the file's own template.
#   answers.sh SMOL_CHAT MODEL
# This 135M model in Q4_1 is fragile: its first token for "What is the capital of
# France?" is a near-tie ("The" 24.77 against "L" 24.67; llama.cpp's flash-attention-off
# path picks "L'Étoile, ..."), so a phrasing with a clear margin (about 1) stands beside
# the literal question. The memory test asks for a friend's name: asked "What is my
# name?", the model answers with a name of its own on some instruction sets.
set -eu
chat="$1 -m $2 --temp 0 -t 2 -n 48"
check() {  # check WANT REPLY
  printf '%s\n' "$2"
  printf '%s\n' "$2" | grep -q "$1" || { echo "no \"$1\" in the reply" >&2; exit 1; }
}
check Paris "$($chat -p 'What is the capital of France?')"
check Paris "$($chat -p 'Name the capital city of France.')"
# Two turns through a pipe: the second reply names what only the first turn said.
reply=$(printf "My friend's name is Alice.\nWhat is my friend's name?\n" | $chat | tail -n 1)
check Alice "$reply"
echo "answers: ok"
