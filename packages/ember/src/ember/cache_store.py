"""The warm-start cache on disk: one file per entry, checked when read, replaced atomically.

Note [warm-start entries]: an entry is `<cache_dir>/warm/<kind>/<key[:2]>/<key>.bin`, holding
MAGIC, the SHA-256 of the payload, then the payload (a pickle). A file that is short, has
another magic, does not match its digest or does not unpickle is corrupt: it is deleted, counted
and reported with one warning, and the caller compiles as if it were absent. Entries are written
to a temporary file in the same folder and renamed into place (`os.replace` is atomic on POSIX),
so a process reading while another writes sees the old entry, the new one or none, never half
of one. The key names everything that changes what is stored (warm_start.py), so an entry
never needs invalidating: a change makes a new key.

Ops (`torch._ops.OpOverload`) do not pickle; they are stored by their qualified name and looked
up again in `torch.ops` on load.
"""
from __future__ import annotations

import collections
import hashlib
import io
import os
import pickle
import tempfile
import warnings
from typing import Any

import torch

MAGIC = b"EMBERWS1"
_DIGEST = 32

# kind -> event -> count; events: hit, miss, store, corrupt, uncacheable (what could not be pickled)
COUNTERS: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


class Uncacheable(Exception):
    """A value the warm-start cache cannot store (an op or object that does not pickle)."""


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, torch._ops.OpOverload):
            return ("op", obj.namespace, obj._opname, obj._overloadname)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            return ("packet", obj._qualified_op_name)
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        if pid[0] == "op":
            _, namespace, name, overload = pid
            return getattr(getattr(getattr(torch.ops, namespace), name), overload)
        if pid[0] == "packet":
            namespace, name = pid[1].split("::")
            return getattr(getattr(torch.ops, namespace), name)
        raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")


def dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except Exception as exc:  # a lambda, a C object...: this graph is compiled, never stored
        raise Uncacheable(f"{type(exc).__name__}: {exc}") from exc
    return buffer.getvalue()


def loads(payload: bytes) -> Any:
    with warnings.catch_warnings():  # torch's pytree specs warn about their own pickled form
        warnings.simplefilter("ignore", FutureWarning)
        return _Unpickler(io.BytesIO(payload)).load()


def entry_path(cache_dir: str, kind: str, key: str) -> str:
    return os.path.join(cache_dir, "warm", kind, key[:2], f"{key}.bin")


def read(cache_dir: str, kind: str, key: str) -> Any | None:
    """The stored value, or None when absent or corrupt (Note [warm-start entries])."""
    path = entry_path(cache_dir, kind, key)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        COUNTERS[kind]["miss"] += 1
        return None
    try:
        value = loads(_payload(blob))
    except Exception as exc:
        COUNTERS[kind]["corrupt"] += 1
        COUNTERS[kind]["miss"] += 1
        _discard(path)
        warnings.warn(f"ember: the warm-start cache entry {path} is corrupt ({type(exc).__name__}: {exc}); "
                      "it was discarded and the graph is compiled again", RuntimeWarning, stacklevel=2)
        return None
    COUNTERS[kind]["hit"] += 1
    return value


def write(cache_dir: str, kind: str, key: str, value: Any) -> bool:
    """Store `value` (False, and counted, if it cannot be pickled or written)."""
    try:
        payload = dumps(value)
    except Uncacheable:
        COUNTERS[kind]["uncacheable"] += 1
        return False
    try:
        write_bytes(entry_path(cache_dir, kind, key), MAGIC + hashlib.sha256(payload).digest() + payload)
    except OSError:  # a read-only or full disk: the compile stands, the next process compiles again
        return False
    COUNTERS[kind]["store"] += 1
    return True


def write_bytes(path: str, data: bytes) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


def _payload(blob: bytes) -> bytes:
    if len(blob) < len(MAGIC) + _DIGEST or not blob.startswith(MAGIC):
        raise ValueError("not an ember warm-start entry (truncated or overwritten)")
    digest, payload = blob[len(MAGIC):len(MAGIC) + _DIGEST], blob[len(MAGIC) + _DIGEST:]
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("its contents do not match their checksum (truncated or damaged)")
    return payload


def _discard(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


# --- moving a cache between machines --------------------------------------------------------------

def save_all(cache_dir: str) -> bytes:
    """Every valid warm-start entry under `cache_dir`, as one blob."""
    root = os.path.join(cache_dir, "warm")
    entries = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".bin"):
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    blob = f.read()
                try:
                    _payload(blob)
                except ValueError:
                    continue
                entries[os.path.relpath(path, root)] = blob
    return MAGIC + pickle.dumps({"version": 1, "entries": entries}, protocol=pickle.HIGHEST_PROTOCOL)


def load_all(cache_dir: str, blob: bytes) -> int:
    """Write the entries of a `save_all` blob under `cache_dir`; returns how many were valid."""
    if not isinstance(blob, (bytes, bytearray)) or not blob.startswith(MAGIC):
        raise ValueError("not a blob made by ember.save_cache_artifacts()")
    data = pickle.loads(blob[len(MAGIC):])
    root = os.path.join(cache_dir, "warm")
    count = 0
    for rel, entry in data["entries"].items():
        target = os.path.normpath(os.path.join(root, rel))
        if not target.startswith(root + os.sep):  # a name that climbs out of the cache: skipped
            continue
        try:
            _payload(entry)
        except ValueError:
            continue
        write_bytes(target, entry)
        count += 1
    return count
