"""Atomic writes: an output file or folder appears complete or not at all, even if the process is killed mid-write.

Everything is written beside its destination (same filesystem, so the final step is a rename, which POSIX makes
atomic), flushed to disk, then renamed into place:

* `atomic_write_bytes(path, data)` / `atomic_write_text(path, text)`: one file.
* `atomic_directory(final_dir)`: a context manager yielding a temporary sibling folder to fill; on success it
  replaces `final_dir` in one step where the system can (Linux: `renameat2(RENAME_EXCHANGE)` swaps the new folder and
  the old one atomically, then the old one is deleted), else in two (the old folder moved aside, the new one renamed
  in); on error the temporary folder is removed and `final_dir` is untouched.
* `recover_directory(final_dir)`: after a crash, finish or undo an interrupted replacement and delete stale
  temporary siblings. Call it before reading a folder that a killed run may have been writing.
* `file_lock(path)`: an exclusive advisory lock, for read-modify-write of a file several processes share.
* `check_output_folder(out, overwrite=..., inputs=...)`: the one rule every command that writes a folder follows
  before it starts: stale temporary siblings of a killed run are cleaned up; an output that is one of its inputs, lies
  inside one or holds one is refused, naming both; an existing, non-empty folder is refused unless the caller
  recognises it as an earlier output of its own (`earlier_output`) or the user passed `--overwrite`.

Sibling names, for a destination `name`: `.name.tmp-*` (being written, possibly incomplete), `.name.new-*` (complete,
about to be renamed in; after an atomic exchange, briefly the previous version, about to be deleted), `.name.old-*`
(the previous version, about to be deleted). A folder is only ever read under
its final name, so a reader never sees a half-written one.

This module uses only the standard library (it must not import torch or transformers, so tools and tests can load it
cheaply).
"""

import contextlib
import ctypes
import errno
import os
import sys
import shutil
import tempfile
from pathlib import Path


__all__ = ["OutputFolderError", "atomic_directory", "atomic_write_bytes", "atomic_write_text", "check_output_folder",
           "file_lock", "recover_directory"]


@contextlib.contextmanager
def file_lock(path, blocking: bool = True):
    """An exclusive advisory lock (flock) on the file `path` (created if missing), held for the block; the lock dies
    with the process, even a killed one. Yields True; with `blocking=False`, yields False at once instead of waiting
    when another process holds it (how several processes share out a study's cells)."""
    import fcntl  # POSIX only: imported here so that the rest of the module works on Windows too

    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def atomic_write_bytes(path, data: bytes) -> None:
    """Write `data` to `path` atomically: a temporary file beside it, flushed to disk, then renamed over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes the file private; give it the usual permissions
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_directory(path.parent)


def atomic_write_text(path, text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` atomically (see `atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode(encoding))


@contextlib.contextmanager
def atomic_directory(final_dir):
    """Yield a new, empty temporary folder beside `final_dir` (a `Path`). When the block ends without an exception,
    its files are flushed to disk and the folder replaces `final_dir`; if the block raises (including
    KeyboardInterrupt), the temporary folder is deleted and `final_dir` is left exactly as it was."""
    final = Path(final_dir)
    if final.exists() and not final.is_dir():
        raise NotADirectoryError(f"{final} exists and is not a folder; refusing to replace a file with a folder.")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes the folder private; give it the usual permissions
        yield tmp
        _fsync_tree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _replace_directory(tmp, final)


def _replace_directory(tmp: Path, final: Path) -> None:
    # A folder cannot be renamed over a non-empty one. Where the system can, swap the complete new folder with the
    # old one in one atomic step: `final` is never missing, and the old version left under the `.new-` name is deleted
    # (`recover_directory` deletes it too, if a crash comes first). Elsewhere: move the old one aside, rename the new
    # one in, then delete the old one; a crash between those two renames leaves no `final`, but a complete `.new-`
    # and `.old-` that `recover_directory` puts back in order.
    suffix = tmp.name[len(f".{final.name}.tmp-") :]
    ready = final.parent / f".{final.name}.new-{suffix}"
    os.replace(tmp, ready)
    if final.is_dir() and not final.is_symlink() and _exchange(ready, final):
        _fsync_directory(final.parent)
        shutil.rmtree(ready, ignore_errors=True)
        return
    old = None
    if final.exists():
        old = final.parent / f".{final.name}.old-{suffix}"
        os.replace(final, old)
    try:
        os.replace(ready, final)
    except BaseException:
        if old is not None:
            os.replace(old, final)  # put the previous version back
        shutil.rmtree(ready, ignore_errors=True)
        raise
    _fsync_directory(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def recover_directory(final_dir) -> Path | None:
    """Clean up after a run killed while writing `final_dir` with `atomic_directory`.

    If `final_dir` is missing because the run died between moving the old version aside and renaming the new one in,
    the newest complete version (`.new-`, else `.old-`) is renamed into place. Incomplete (`.tmp-`) and superseded
    siblings are then deleted. Returns `final_dir` if it exists afterwards, else None. Call it only when no other
    process is writing `final_dir` (e.g. when a command starts): it deletes temporary folders in progress too."""
    final = Path(final_dir)
    if not final.parent.is_dir():
        return None

    def siblings(kind):
        # Newest first: the one renamed most recently holds the latest complete version.
        found = [p for p in final.parent.glob(f".{final.name}.{kind}-*") if p.is_dir()]
        return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)

    if not final.exists():
        for candidate in siblings("new") + siblings("old"):
            os.replace(candidate, final)
            _fsync_directory(final.parent)
            break
    for kind in ("tmp", "new", "old"):
        for stale in siblings(kind):
            shutil.rmtree(stale, ignore_errors=True)
    for stale in final.parent.glob(f".{final.name}.tmp-*"):  # a file `atomic_write_bytes(final)` left half-written
        if not stale.is_dir():
            stale.unlink(missing_ok=True)
    return final if final.exists() else None


class OutputFolderError(ValueError):
    """An output folder a command must not write: it is one of the command's inputs (or inside or around one), or it
    holds files the command did not make and the user did not pass --overwrite."""


def check_output_folder(output_dir, overwrite: bool = False, *, inputs=(), earlier_output=None,
                        label: str = "The output folder", flag: str = "--overwrite") -> Path:
    """The rule every command that writes a folder follows when it starts, before any long work: nothing of the
    user's is written over unless they said so, and an input is never written over at all.

    1. An output that is one of `inputs` (paths; names that are no local path, such as Hub ids, are skipped), lies
       inside one, or holds one is refused, naming both: replacing it would delete or change what the command reads.
    2. Temporary siblings a killed run left (`.NAME.tmp-*`, `.NAME.new-*`, `.NAME.old-*`) are cleaned up
       (`recover_directory`), so a complete version an interrupted replacement left aside is put back first.
    3. An existing file, or a non-empty folder, is refused unless `overwrite` is set or `earlier_output(path)` says
       the folder is an earlier output of the same command (which it replaces without asking).

    `label` names the output in messages (e.g. "--output-dir"), `flag` the option that allows replacing it. Returns
    the output as a `Path`; raises `OutputFolderError` (a ValueError) naming the folder and the fix."""
    path = Path(output_dir)
    for source in inputs:
        _refuse_overlap(path, source, label)
    recover_directory(path)
    if path.exists() and not path.is_dir():
        raise OutputFolderError(f"{label} {path} exists and is not a folder; pick a new folder name.")
    if not path.is_dir() or overwrite:
        return path
    entries = sorted(entry.name for entry in path.iterdir())
    if entries and not (earlier_output is not None and earlier_output(path)):
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise OutputFolderError(
            f"{label} {path} exists and is not empty; pass {flag} to replace it, or pick a new folder. Replacing it "
            f"deletes everything it holds: {shown}.")
    return path


def check_output_file(output, overwrite: bool = False, *, inputs=(), earlier_output=None,
                      label: str = "The output file", flag: str = "--overwrite") -> Path:
    """`check_output_folder`'s rule for a single file a command writes: never one of its `inputs` (or inside one);
    an existing file only with `overwrite`, or when `earlier_output(path)` says this command wrote it."""
    path = Path(output)
    for source in inputs:
        _refuse_overlap(path, source, label)
    if path.is_dir():
        raise OutputFolderError(f"{label} {path} is a folder; name a file to write, e.g. {path / 'results.json'}.")
    if path.exists() and not overwrite and not (earlier_output is not None and earlier_output(path)):
        raise OutputFolderError(
            f"{label} {path} exists and was not written by this command; pass {flag} to replace it, or pick a new "
            "file name.")
    return path


def _refuse_overlap(output: Path, source, label: str) -> None:
    if source is None or not os.path.exists(os.fspath(source)):
        return  # a Hub id or a name resolved elsewhere: nothing on this disk to protect
    out, given = output.resolve(), Path(source).resolve()
    if out == given:
        relation = "is the input"
    elif given in out.parents:
        relation = "is inside the input"
    elif out in given.parents:
        relation = "holds the input"
    else:
        return
    raise OutputFolderError(
        f"{label} {output} {relation} {source}: writing it would replace or change what this command reads. Pick an "
        f"output folder outside {source} that does not contain it.")


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 with RENAME_EXCHANGE); False where the system cannot, changing
    nothing."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # a C library without it (glibc < 2.28, musl)
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV, errno.EPERM):
        return False  # not supported here (kernel, filesystem): fall back to two renames
    raise OSError(error, os.strerror(error), str(first), None, str(second))


def _umask() -> int:
    # There is no way to read the umask without setting it; set it back at once.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_tree(folder: Path) -> None:
    """Flush every file under `folder`, and the folders themselves, so a rename never lands before the data."""
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        _fsync_directory(Path(root))


def _fsync_directory(folder: Path) -> None:
    """Flush a folder's entries (new names, renames). Not possible on every platform; best effort there."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
