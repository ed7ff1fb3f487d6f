"""Fetches speedscope's published file-format schema (from its npm package, pinned by hash) into
tests/.cache/speedscope/, for the test that validates `pttrace export --format speedscope` against it.

The npm registry is a package registry, like PyPI: the one place the tests' oracle can come from.
Runs once (scripts/setup.sh calls it); prints the schema's path."""
from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

VERSION = "1.25.0"
URL = f"https://registry.npmjs.org/speedscope/-/speedscope-{VERSION}.tgz"
SHA256 = "2831f1e0d26df914b477e522d78b8485511495a6af81a0b88158f8b48f9e0d03"
MEMBER = "package/dist/release/file-format-schema.json"
ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "tests" / ".cache" / "speedscope" / "file-format-schema.json"


def main() -> int:
    if TARGET.is_file():
        print(TARGET)
        return 0
    with urllib.request.urlopen(URL, timeout=60) as response:  # noqa: S310 (a fixed https URL)
        blob = response.read()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != SHA256:
        print(f"fetch_speedscope_schema: {URL} has sha256 {digest}, not the pinned {SHA256}", file=sys.stderr)
        return 1
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        member = tar.extractfile(MEMBER)
        if member is None:
            print(f"fetch_speedscope_schema: {MEMBER} is not in {URL}", file=sys.stderr)
            return 1
        data = member.read()
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_bytes(data)
    print(TARGET)
    return 0


if __name__ == "__main__":
    sys.exit(main())
