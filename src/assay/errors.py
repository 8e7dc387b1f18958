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


class Problems(BadInput):
    """Every problem found in one piece of input, each one `BadInput` line of its own.

    Authoring goes faster when a document's mistakes are all named at once, so validation collects
    them rather than stopping at the first. `assay validate` prints `problems`, one line each;
    every other caller of `BadInput` still gets its single line: the first problem, and how many
    more there are. Nested `Problems` are flattened.
    """

    def __init__(self, problems: Sequence[BadInput]) -> None:
        flat: list[BadInput] = []
        for p in problems:
            flat.extend(p.problems if isinstance(p, Problems) else (p,))
        if not flat:
            raise ValueError("Problems needs at least one problem")
        self.problems: tuple[BadInput, ...] = tuple(flat)
        first = flat[0]
        more = f" (and {len(flat) - 1} more)" if len(flat) > 1 else ""
        super().__init__(first.message + more, first.where)

    def __reduce__(self):  # noqa: ANN204 - pickles (to a worker process and back) as its problems
        return (type(self), (self.problems,))


from collections.abc import Sequence  # noqa: E402 - appended with the class that uses it
