"""Writing a cache file so that no reader ever sees part of it.

Note [atomic cache writes]: several processes (the ranks of a distributed job, on one host or on
several sharing a home directory) compile the same graphs at once into the same cache folder. A
file is written under a name no other writer can pick (mkstemp, in the file's own folder, so the
rename stays on one filesystem) and renamed into place with os.replace, which is atomic: a
reader finds no file or a whole one, and two writers of the same key leave one whole copy (the
content is a function of the key, so either is right). A process id alone does not make the
temporary name unique: two hosts sharing the folder can run the same pid, and two threads of one
process share it.
"""
from __future__ import annotations

import os
import tempfile


def write_text_atomic(path: str, text: str) -> None:
    """Write `text` to `path` (its folder is created); readers see the old file or the new one."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
