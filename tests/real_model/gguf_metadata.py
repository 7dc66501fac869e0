"""A GGUF file's metadata values, read without the gguf package (the tests run on a bare
Python): the few the checks need, a string or a list of strings."""
import struct

SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_value(path, wanted):
    """The value of metadata key `wanted` in a GGUF file (read as the format lays it out:
    strings, arrays of them; other scalars are skipped), or None where it has none."""
    with open(path, "rb") as f:
        data = f.read(64 << 20)
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    offset = 8
    _, n_kv = struct.unpack_from("<QQ", data, offset)
    offset += 16

    def string():
        nonlocal offset
        (n,) = struct.unpack_from("<Q", data, offset)
        value = data[offset + 8:offset + 8 + n].decode("utf-8")
        offset += 8 + n
        return value

    def value(kind):
        nonlocal offset
        if kind == 8:
            return string()
        if kind == 9:
            element, n = struct.unpack_from("<IQ", data, offset)
            offset += 12
            return [value(element) for _ in range(n)]
        offset += SCALAR_SIZES[kind]
        return None

    for _ in range(n_kv):
        key = string()
        (kind,) = struct.unpack_from("<I", data, offset)
        offset += 4
        item = value(kind)
        if key == wanted:
            return item
    return None
