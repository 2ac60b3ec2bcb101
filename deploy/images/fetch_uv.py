"""Fetch uv (the version given) from the package index into a directory, for the image's
build stage: the Debian base has Python but neither pip nor uv. The wheel's sha256 comes
from the index's JSON page (PEP 691) and is checked before anything is unpacked.

    python3 fetch_uv.py VERSION DEST_DIR

INDEX_URL names a PEP 691 index (default https://pypi.org/simple); SSL_CERT_FILE the CA
bundle that verifies it."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import ssl
import sys
import urllib.parse
import urllib.request
import zipfile
from io import BytesIO
from pathlib import Path

# uv's manylinux wheels, by the machine they run on.
WHEEL_TAGS = {"x86_64": "manylinux_2_17_x86_64", "aarch64": "manylinux_2_17_aarch64"}


def fetch(url: str, context: ssl.SSLContext, accept: str = "*/*") -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, context=context, timeout=120) as answer:
        return bytes(answer.read())


def main(version: str, dest: Path) -> None:
    index = os.environ.get("INDEX_URL") or "https://pypi.org/simple"
    context = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE") or None)
    tag = WHEEL_TAGS[platform.machine()]
    page_url = f"{index.rstrip('/')}/uv/"
    page = json.loads(fetch(page_url, context, "application/vnd.pypi.simple.v1+json"))
    wanted = f"uv-{version}-py3-none-"
    files = [f for f in page["files"] if f["filename"].startswith(wanted) and tag in f["filename"]]
    if not files:
        sys.exit(f"fetch_uv: no uv {version} wheel for {tag} on {index}")
    wheel = fetch(urllib.parse.urljoin(page_url, files[0]["url"]), context)
    if hashlib.sha256(wheel).hexdigest() != files[0]["hashes"]["sha256"]:
        sys.exit(f"fetch_uv: {files[0]['filename']} does not match the index's sha256")
    with zipfile.ZipFile(BytesIO(wheel)) as archive:
        name = next(n for n in archive.namelist() if n.endswith("/scripts/uv"))
        target = dest / "uv"
        target.write_bytes(archive.read(name))
    target.chmod(0o755)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
