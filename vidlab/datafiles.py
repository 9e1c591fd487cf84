"""The one path rule for files that name other files (question files, labelled rows, list files, layouts,
compbench manifests).

A path written inside a data file is read the same way by every command:

* absolute paths, and paths starting with ``~`` (expanded), are used as they are;
* a relative path resolves against ``video_root`` when one is given (``--video-root``), else against the
  folder of the data file that names it -- never against the working directory.

So a question file and its ``videos/`` folder can be moved, copied to a cluster or read from any working
directory, and a file one command writes (``vidlab classify``'s labelled rows) feeds the next one
(``vidlab train-agent``, ``vidlab eval-qa``) unchanged: a file a command writes names its paths relative to
*its own* folder (:func:`relative_to_file`), so they resolve the same way when it is read back.

    from vidlab.datafiles import resolve_path
    video = resolve_path(row["video"], data_file="data/train.jsonl", root=args.video_root)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["base_folder", "relative_to_file", "resolve_path"]

PathLike = str | os.PathLike


def base_folder(data_file: PathLike | None, root: PathLike | None = None) -> Path:
    """The folder relative paths inside ``data_file`` resolve against: ``root`` (``--video-root``; itself a
    command-line path, so relative to the working directory) when given, else the data file's folder."""
    if root is not None and str(root) != "":
        return Path(root).expanduser()
    if data_file is None:
        return Path(".")
    return Path(data_file).expanduser().parent


def resolve_path(name: PathLike, data_file: PathLike | None = None, root: PathLike | None = None) -> Path:
    """The file ``name`` (as written inside ``data_file``) refers to, as an absolute path (so every message names
    it unambiguously): absolute and ``~`` paths as they are; a relative one under ``root`` when given, else under
    ``data_file``'s folder. ``data_file=None`` and no ``root`` leave a relative path relative to the working
    directory (a path typed on the command line)."""
    text = os.fspath(name)
    p = Path(text).expanduser()
    if p.is_absolute():
        return p
    return Path(os.path.abspath(base_folder(data_file, root) / p))


def relative_to_file(path: PathLike, out_file: PathLike) -> str:
    """How a file written to ``out_file`` should name ``path`` so that :func:`resolve_path` finds it again:
    relative to ``out_file``'s folder (so the two can move together), or absolute when no relative path
    exists (another drive on Windows)."""
    target = os.path.abspath(os.fspath(Path(path).expanduser()))
    folder = os.path.abspath(os.fspath(Path(out_file).expanduser().parent))
    try:
        return os.path.relpath(target, folder)
    except ValueError:
        return target
