"""Errors that reach a user.

`BadInput` is the one exception the CLI turns into a single stderr line and exit code 2
(docs/architecture.md, Errors). Anything else escaping to the CLI is a bug.

`service/` and `store/` refuse with domain errors, subclasses of `BadInput` that say what kind of
refusal it is and which domain field is at fault, never how a front end spells it: `NotFound`,
`Conflict`, `Forbidden` and `Invalid`. Each front end translates them: the CLI into its one line
naming the flag (`assay.cli.errors`), the web app into `http_status(exc)` with a JSON `detail`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


class BadInput(Exception):
    """Bad input: a malformed document, an unknown spec, a missing file, a refused operation.

    `where` names the file, field or object; the message says what is wrong.
    """

    def __init__(self, message: str, where: str | None = None) -> None:
        # One line, always: user text with newlines in it must not break the error contract.
        message = _one_line(message)
        where = _one_line(where) if where else where
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)


class UnknownName(BadInput):
    """A name nothing answers to (a kit, an agent, …), with the known name nearest to it, if any is
    close: a caller may go on as if that was meant, to report the rest of a document in one pass."""

    def __init__(self, message: str, where: str | None = None, *, nearest: str | None = None) -> None:
        super().__init__(message, where)
        self.nearest = nearest


class DomainError(BadInput):
    """A refusal by the domain: `message` says what is wrong, `field` names the domain field at
    fault ("label", "account", "submission", …; None when no one field is), and `value` the
    object or value it is about, when the message does not already name it.

    The message never names a front end's spelling of the field (a CLI flag, a form name).
    """

    http_status: int = 422

    def __init__(self, message: str, field: str | None = None, *, value: str | None = None) -> None:
        super().__init__(message, value)
        self.field = field
        self.value = self.where

    def __reduce__(self) -> tuple[Callable[..., DomainError], tuple[object, ...]]:  # pickles with its field (to a worker process and back)
        return (_rebuild, (type(self), self.message, self.field, self.value))


def _rebuild(kind: type[DomainError], message: str, field: str | None, value: str | None) -> DomainError:
    return kind(message, field, value=value)


class NotFound(DomainError):
    """What was named does not exist (or is not visible to the one asking)."""

    http_status = 404


class Conflict(DomainError):
    """The request is well formed but the stored state refuses it: already exists, already
    released, not published, a cap reached."""

    http_status = 409


class Forbidden(DomainError):
    """The one asking may not do this (only the suite owner may …)."""

    http_status = 403


class Unauthenticated(DomainError):
    """No credential, or one that is not valid here: an unknown or revoked key, or a key of the
    wrong kind. Every such case reads the same, so a caller learns nothing about which keys exist."""

    http_status = 401


class Invalid(DomainError):
    """A malformed value: the field says which."""

    http_status = 422


def http_status(exc: BaseException) -> int:
    """The HTTP status a refusal maps to: the domain error's own, 422 for any other `BadInput`
    (a malformed document), 500 for anything else (a bug)."""
    if isinstance(exc, DomainError):
        return exc.http_status
    if isinstance(exc, BadInput):
        return 422
    return 500


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

    def __reduce__(self) -> tuple[Callable[..., Problems], tuple[object, ...]]:  # pickles (to a worker process and back) as its problems
        return (type(self), (self.problems,))
