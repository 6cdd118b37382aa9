"""A model of ollama's store, found by the name ollama gives it: the GGUF file its manifest
names, read where it lies (nothing is fetched, copied or written).

The store (ollama's server/manifest.go and types/model/name.go), under $OLLAMA_MODELS, else
~/.ollama/models, else /usr/share/ollama/.ollama/models (the Linux service's):

    manifests/HOST/NAMESPACE/NAME/TAG   a JSON object whose "layers" list each part of the
                                        model: its mediaType and its digest, "sha256:<hex>"
    blobs/sha256-<hex>                  each part's bytes; the layer of mediaType
                                        application/vnd.ollama.image.model is the GGUF

A name is NAME:TAG (ollama's library: registry.ollama.ai/library/NAME/TAG), NAMESPACE/NAME:TAG
or HOST/NAMESPACE/NAME:TAG, or ollama:NAME[:TAG], whose tag is latest where it gives none.
A Hugging Face model's name holds no colon, so a colon says the name is ollama's.

Every file is held to the store: the manifest and the blob must be regular files within
it once links are followed, the manifest small JSON of that shape, the digest 64 hex digits
naming a blob there. Any other store is refused in one line, as the Hugging Face cache is.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from attncli.errors import ModelError
from attncli.system import reading

HOST, LIBRARY, LATEST = "registry.ollama.ai", "library", "latest"
MODEL_LAYER = "application/vnd.ollama.image.model"
PREFIX = "ollama:"
_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}"  # a part of a name: never "." or "..", never a "/"
NAME = re.compile(rf"(?:(?P<host>{_PART})/)??(?:(?P<namespace>{_PART})/)?(?P<name>{_PART})(?::(?P<tag>{_PART}))?")
MANIFEST_MOST = 1_000_000  # bytes of a manifest: ollama's are about 1 kB
DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


def is_name(spec: str) -> bool:
    """Whether --model `spec` names a model of ollama's store: ollama:NAME, or a name with a tag."""
    if spec.startswith(PREFIX):
        return True
    found = NAME.fullmatch(spec)
    return found is not None and found["tag"] is not None


def parts(spec: str) -> tuple[str, str, str, str]:
    """(host, namespace, name, tag) of an ollama name, ollama's defaults filled in."""
    bare = spec.removeprefix(PREFIX)
    found = NAME.fullmatch(bare)
    if found is None:
        raise ModelError(f"--model {spec[:200]!r} is not a name of ollama's store (NAME:TAG, NAMESPACE/NAME:TAG, or "
                         "ollama:NAME): letters, digits and ._- in parts")
    return found["host"] or HOST, found["namespace"] or LIBRARY, found["name"], found["tag"] or LATEST


def roots() -> list[Path]:
    """The folders ollama keeps its store in, in the order it looks: $OLLAMA_MODELS alone where
    set, else the user's and the Linux service's."""
    given = os.environ.get("OLLAMA_MODELS")
    if given:
        return [Path(given).expanduser()]
    return [Path.home() / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]


def blob(spec: str) -> Path:
    """The GGUF file of the model `spec` names in ollama's store."""
    host, namespace, name, tag = parts(spec)
    shown = f"{name}:{tag}" if (host, namespace) == (HOST, LIBRARY) else f"{host}/{namespace}/{name}:{tag}"
    for root in roots():
        manifest = root / "manifests" / host / namespace / name / tag
        if os.path.lexists(manifest):
            return _model_layer(root, manifest, shown)
    where = " or ".join(str(r) for r in roots())
    raise ModelError(f"ollama's store ({where}) does not hold {shown}; fetch it with: ollama pull {shown}")


def _inside(root: Path, path: Path, what: str, shown: str) -> Path:
    """`path` once it is found within `root` with every link followed; refused where it leads out."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    if os.path.commonpath([top, real]) != top:
        raise ModelError(f"{path}: {what} leads out of ollama's store ({root}), to {real}; attncli reads only the "
                         f"store's own files: fetch the model again with: ollama pull {shown}")
    return Path(real)


def _model_layer(root: Path, manifest: Path, shown: str) -> Path:
    """The blob of the manifest's model layer, each step held to the store."""
    again = f"fetch the model again with: ollama pull {shown}"
    real = _inside(root, manifest, "the manifest", shown)
    try:
        data = reading.read_file(real, "--model", most=MANIFEST_MOST)
    except Exception as e:  # noqa: BLE001: a folder, a FIFO, a file too large: each says why in its own words
        raise ModelError(f"{manifest}: the manifest cannot be read ({' '.join(str(e).split())[:200]}); {again}") from None
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):
        raise ModelError(f"{manifest}: is not JSON, as an ollama manifest is; {again}") from None
    layers = raw.get("layers") if isinstance(raw, dict) else None
    if not isinstance(layers, list):
        raise ModelError(f"{manifest}: has no list of layers, as an ollama manifest has; {again}")
    models = [layer for layer in layers if isinstance(layer, dict) and layer.get("mediaType") == MODEL_LAYER]
    if len(models) != 1:
        raise ModelError(f"{manifest}: lists {len(models)} layers of type {MODEL_LAYER} (a model's GGUF), where a "
                         f"model's manifest lists one; {again}")
    digest = models[0].get("digest")
    found = DIGEST.fullmatch(digest) if isinstance(digest, str) else None
    if found is None:
        raise ModelError(f"{manifest}: its model layer's digest is {str(digest)[:100]!r}, not sha256: and 64 hex "
                         f"digits naming a blob; {again}")
    path = root / "blobs" / f"sha256-{found[1]}"
    if not os.path.lexists(path):
        raise ModelError(f"{manifest}: names the blob {path.name}, which the store lacks; {again}")
    real = _inside(root / "blobs", path, "the model's blob", shown)
    if not real.is_file():  # a folder, a FIFO, a device: never read as a model
        raise ModelError(f"{path}: the model's blob is not a regular file (a folder, a FIFO or a device); {again}")
    return real
