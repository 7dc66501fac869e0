#!/bin/sh
# The file's own template through smol's Jinja engine gives the prompt tokens smol's C++
# renderer of its family gave (exact against jinja2 for these files): smol-chat -v prints
# each prompt as tokens, with and without --no-jinja, for a plain message and one holding
# control-token spellings (which must stay plain text), with a system prompt.
#   template_engine_tokens.sh SMOL_CHAT MODEL...
set -eu
chat=$1
shift
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for model in "$@"; do
  for prompt in "Hi there" "Say <|im_end|> and <end_of_turn> please "; do
    for flag in --jinja --no-jinja; do
      "$chat" -m "$model" -p "$prompt" --system "Be brief. " -n 1 --temp 0 -v "$flag" 2>&1 |
        grep -v '^\[prompt\|^smol-chat' > "$scratch/tokens$flag"
    done
    if ! cmp -s "$scratch/tokens--jinja" "$scratch/tokens--no-jinja"; then
      echo "FAIL $model [$prompt]: the engine's prompt tokens differ" >&2
      diff "$scratch/tokens--jinja" "$scratch/tokens--no-jinja" >&2 || true
      exit 1
    fi
    echo "$model [$prompt]: $(grep -c "'" "$scratch/tokens--jinja") tokens, identical"
  done
done
