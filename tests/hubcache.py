"""A model put into the Hugging Face cache the tests run with (conftest.py points HF_HUB_CACHE
at a folder of the run's own), in the hub's layout as huggingface_hub writes it:

    models--ORG--NAME/blobs/SHA256              each file's bytes, named by its SHA-256
    models--ORG--NAME/snapshots/COMMIT/FILE     a relative symbolic link to its blob
    models--ORG--NAME/refs/BRANCH               the commit the branch points to
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def hub_cache() -> Path:
    return Path(os.environ["HF_HUB_CACHE"])


def put(repo: str, folder: Path, *, refs: tuple[str, ...] = ("main",), commit: str | None = None) -> Path:
    """Every file of `folder` as the snapshot `commit` of `repo` (ORG/NAME or NAME), which the
    branches or tags `refs` point to; the snapshot's folder."""
    commit = commit or hashlib.sha1(f"{repo} {sorted(p.name for p in folder.iterdir())}".encode()).hexdigest()
    root = hub_cache() / ("models--" + repo.replace("/", "--"))
    snapshot = root / "snapshots" / commit
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.iterdir()):
        data = path.read_bytes()
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / path.name
        if link.is_symlink():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, snapshot))
    for ref in refs:
        (root / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (root / "refs" / ref).write_text(commit)
    return snapshot
