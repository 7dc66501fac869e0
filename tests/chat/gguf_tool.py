#!/usr/bin/env python3
"""Small GGUF files for the smol-chat and smol-tokenize tests.

  gguf_tool.py vocab-only IN OUT      IN's metadata (tokenizer included), no tensors
  gguf_tool.py unsupported OUT        a valid GGUF whose architecture smol does not run
  gguf_tool.py truncate IN OUT BYTES  the first BYTES bytes of IN
"""
import struct
import sys

# Sizes of the fixed-width GGUF value types, by type id; 8 is string, 9 is array.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(data, pos, value_type):
    if value_type in FIXED:
        return pos + FIXED[value_type]
    if value_type == 8:
        (length,) = struct.unpack_from("<Q", data, pos)
        return pos + 8 + length
    if value_type == 9:
        element_type, count = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if element_type in FIXED:
            return pos + FIXED[element_type] * count
        for _ in range(count):
            pos = skip_value(data, pos, element_type)
        return pos
    raise ValueError("unknown GGUF value type %d" % value_type)


def string(text):
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def vocab_only(source, target):
    data = open(source, "rb").read()
    magic, version, _tensors, kv_count = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == b"GGUF", "not a GGUF file"
    pos = 24
    for _ in range(kv_count):
        (key_length,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + key_length
        (value_type,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(data, pos + 4, value_type)
    with open(target, "wb") as out:
        out.write(struct.pack("<4sIQQ", b"GGUF", version, 0, kv_count))
        out.write(data[24:pos])


def unsupported(target):
    with open(target, "wb") as out:
        out.write(struct.pack("<4sIQQ", b"GGUF", 3, 0, 1))
        out.write(string("general.architecture") + struct.pack("<I", 8) + string("mamba"))


def main():
    command = sys.argv[1]
    if command == "vocab-only":
        vocab_only(sys.argv[2], sys.argv[3])
    elif command == "unsupported":
        unsupported(sys.argv[2])
    elif command == "truncate":
        data = open(sys.argv[2], "rb").read()
        open(sys.argv[3], "wb").write(data[: int(sys.argv[4])])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
