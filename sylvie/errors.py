"""The one exception type for problems with a user's input."""


class SylvieError(Exception):
    """Bad input: the message names the file or field, what is wrong and what to do.

    The CLI prints it without a traceback and exits with status 2.
    """


def one_line(e: BaseException | str, limit: int = 300) -> str:
    """An exception's message (or a text taken from a file) on one line (a library's may span several), cut at
    ``limit`` characters: for the parenthesis of a SylvieError that says why a file could not be read."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


# What the system said, in words, and what to do about it, for the refusals a user can fix (errno -> (said, do)).
_REFUSALS = {
    "EROFS": ("the file system is read-only", "write to another folder, or remount this one read-write"),
    "EACCES": ("permission denied", "make it readable (or writable) to you, or use another path"),
    "EPERM": ("permission denied", "make it readable (or writable) to you, or use another path"),
    "ENOSPC": ("no space left on the device", "free some space or write to another disk, then rerun"),
    "EDQUOT": ("the disk quota is used up", "free some space or write to another disk, then rerun"),
    "ENOTDIR": ("a part of this path is a file, not a folder", "choose a path whose folders are folders"),
    "EEXIST": ("a file is in the way: a folder was to be made here", "move the file away or choose another path"),
    "EISDIR": ("this is a folder; a file was expected here", "name the file, not the folder"),
    "ENOENT": ("no such file or folder", "check the path"),
    "ENAMETOOLONG": ("the path is too long for the file system", "choose a shorter path"),
    "EIO": ("input/output error (a failing disk or network file system?)", "check the disk, then rerun"),
}


def system_said(error: OSError) -> tuple[str, str]:
    """What the system said in ``error``, in words, and what to do about it."""
    import errno

    return _REFUSALS.get(errno.errorcode.get(error.errno, ""), (error.strerror or str(error), "check the path"))


def refused_by_the_system(error: OSError) -> SylvieError | None:
    """The system's refusal to read or write a path (``error`` names the path: ``filename``) as one line: the path,
    what the system said, what to do; None for other errors (a connection, a timeout: not the user's path)."""
    if error.filename is None or isinstance(error, (ConnectionError, TimeoutError)):
        return None
    said, do = system_said(error)
    path = error.filename if error.filename2 is None else f"{error.filename} -> {error.filename2}"
    return SylvieError(f"{path}: the system refused: {said}; {do}")
