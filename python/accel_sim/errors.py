"""Errors that accel-sim reports to its user."""

from __future__ import annotations


class UsageError(Exception):
    """A mistake the user can fix: a bad file, argument or model.

    Its str() is one line that says what is wrong and what to do about it; the CLI prints it
    and exits with status 2, without a traceback.
    """
