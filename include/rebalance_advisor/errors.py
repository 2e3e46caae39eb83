"""The one error type the CLI turns into a clear message and a non-zero exit instead of a traceback."""


class AdvisorError(Exception):
    """A problem the user can fix: the message says what is wrong and what to do."""
