#!/usr/bin/python3
"""llama.cpp's chat template corpus (models/templates/*.jinja), fetched once per build tree.

    fetch_template_corpus.py --out DIR

PyPI's llama-cpp-python source package vendors llama.cpp, templates included: pip
downloads the pinned sdist (--require-hashes: pip refuses any other file), its SHA-256 is
checked again here, and only the members VERSION_DIR/vendor/llama.cpp/models/templates/
NAME.jinja are copied out of the tar, as DIR/NAME.jinja (regular files only, each name
checked: no member is extracted by the tar module, so no member can write outside DIR).
DIR/.complete, written last, holds the sdist's SHA-256; a second run that finds it does
nothing. Nothing is installed, and the templates never enter git.

pip prepares the sdist's metadata (it installs the build backend, scikit-build-core, in
a throwaway environment) but builds nothing: a few seconds.
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "llama-cpp-python"
VERSION = "0.3.36"
SDIST = "llama_cpp_python-%s.tar.gz" % VERSION
SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# VERSION_DIR/vendor/llama.cpp/models/templates/NAME.jinja, nothing deeper.
MEMBER = re.compile(r"^[^/]+/vendor/llama\.cpp/models/templates/([^/]+\.jinja)$")
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\.jinja$")


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def complete(out):
    try:
        with open(os.path.join(out, ".complete"), encoding="utf-8") as f:
            return f.read().strip() == SHA256
    except OSError:
        return False


def download(dest):
    """The sdist, downloaded by pip into dest with its hash checked; its path."""
    requirements = os.path.join(dest, "requirements.txt")
    with open(requirements, "w") as f:
        f.write("%s==%s --hash=sha256:%s\n" % (PACKAGE, VERSION, SHA256))
    # --no-binary for this package only: pip would otherwise take a wheel; for the build
    # backend too (:all:), it would build scikit-build-core and its dependencies from
    # source (minutes).
    pip = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
                          "--no-binary", PACKAGE, "--disable-pip-version-check",
                          "--progress-bar", "off", "-r", requirements, "-d", dest])
    if pip.returncode != 0:
        sys.exit("pip download %s==%s failed (%d), as pip says above: is PyPI reachable, does "
                 "%s have pip (Debian: python3-pip), does the file still have SHA-256 %s?" %
                 (PACKAGE, VERSION, pip.returncode, sys.executable, SHA256))
    path = os.path.join(dest, SDIST)
    if not os.path.isfile(path):
        sys.exit("pip download reported success, but %s is not in %s" % (SDIST, dest))
    have = sha256_of(path)
    if have != SHA256:
        sys.exit("%s has SHA-256 %s, not the pinned %s" % (SDIST, have, SHA256))
    return path


def extract(sdist, out):
    """Copies the templates out of the sdist into out; their names, sorted."""
    names = []
    with tarfile.open(sdist, "r:gz") as archive:
        for member in archive:
            match = MEMBER.match(member.name)
            if not match:
                continue
            name = match.group(1)
            if not member.isfile():
                sys.exit("%s: %s is not a regular file (type %r)" % (SDIST, member.name, member.type))
            if not SAFE_NAME.match(name) or name in names:
                sys.exit("%s: refusing the template name %r" % (SDIST, name))
            source = archive.extractfile(member)
            partial = os.path.join(out, "." + name + ".partial")
            with source, open(partial, "wb") as target:
                shutil.copyfileobj(source, target)
            os.replace(partial, os.path.join(out, name))
            names.append(name)
    return sorted(names)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="the folder the templates go to")
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    if complete(out):
        print("the chat template corpus (%s %s) is already in %s" % (PACKAGE, VERSION, out))
        return 0
    os.makedirs(out, exist_ok=True)
    # A previous, other or unfinished corpus goes first.
    for entry in os.listdir(out):
        if entry == ".complete" or entry.endswith(".jinja") or entry.endswith(".partial"):
            os.remove(os.path.join(out, entry))
    with tempfile.TemporaryDirectory(prefix=".download-", dir=os.path.dirname(out)) as dest:
        sdist = download(dest)
        names = extract(sdist, out)
    if not names:
        sys.exit("%s holds no vendor/llama.cpp/models/templates/*.jinja" % SDIST)
    with open(os.path.join(out, ".complete"), "w", encoding="utf-8") as f:
        f.write(SHA256 + "\n")
    print("%d chat templates from %s %s (SHA-256 %s) in %s" % (len(names), PACKAGE, VERSION,
                                                               SHA256, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
