"""The one exception type for problems with a user's input."""


class SylvieError(Exception):
    """Bad input: the message names the file or field, what is wrong and what to do.

    The CLI prints it without a traceback and exits with status 2.
    """
