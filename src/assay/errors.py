"""Errors that reach a user.

`BadInput` is the one exception the CLI turns into a single stderr line and exit code 2
(DESIGN.md, Errors). Anything else escaping to the CLI is a bug.
"""

from __future__ import annotations


class BadInput(Exception):
    """Bad input: a malformed document, an unknown spec, a missing file, a refused operation.

    `where` names the file, field or object; the message says what is wrong.
    """

    def __init__(self, message: str, where: str | None = None) -> None:
        # One line, always: user text with newlines in it must not break the error contract.
        message = message.replace("\r", "\\r").replace("\n", "\\n")
        where = where.replace("\r", "\\r").replace("\n", "\\n") if where else where
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)
