#!/bin/sh
# chat_gpu.sh SMOL_CHAT SMOL_CUDA_BENCH MODEL
# smol-chat --gpu as a user runs it. Without a CUDA device (smol-cuda-bench
# --list-devices says how many there are) it must exit 1 with one line that says
# so; with one, it must reply and print its stats line.
chat=$1 bench=$2 model=$3
devices=$("$bench" --list-devices | sed -n 's/^\([0-9][0-9]*\) CUDA device.*/\1/p')
output=$("$chat" -m "$model" --gpu -p "Hello" -n 6 --temp 0 --no-think 2>&1)
rc=$?
printf '%s\n' "$output"
lines=$(printf '%s\n' "$output" | wc -l)
if [ "$devices" = 0 ]; then
  if [ "$rc" = 1 ] && [ "$lines" = 1 ] &&
     printf '%s' "$output" | grep -Eq '^smol-chat: --gpu: no CUDA device \(.+\)$'; then
    exit 0
  fi
  echo "FAIL: no CUDA device, so expected exit 1 and one line \"smol-chat: --gpu: no CUDA device (...)\"; got exit $rc"
  exit 1
fi
if [ "$rc" = 0 ] && printf '%s' "$output" | grep -Eq 'reply [0-9]+ tokens'; then
  exit 0
fi
echo "FAIL: $devices CUDA device(s), so expected a reply and its stats line; got exit $rc"
exit 1
