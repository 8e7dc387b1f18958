"""Who is asking. Every service operation takes an `Actor`, and every write checks it here.

The CLI is the local operator (whoever holds the database holds the platform); the web app will
turn an API key into an account's actor, an agent key into an agent of an account, an admin
session into an admin, and no credential into the public. The rules live in this one module so
the CLI and the web app cannot drift apart:

- the operator may do anything, and only the operator files baselines and variance notes;
- an admin administers the platform (accounts, configuration, eras), never on an account's behalf;
- an account acts for itself: submits as itself, reads and unpublishes its own submissions;
- an agent of an account plays that account's runs and nothing else;
- the public reads boards and cards.

What an actor may not see is refused as if it did not exist (`NotFound`), so an id or an owner is
never confirmed to someone who may not know it; what it may see but not do is `Forbidden`.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Literal

from assay.errors import Forbidden, NotFound

Kind = Literal["operator", "admin", "account", "agent", "public"]


@dataclass(frozen=True, slots=True)
class Actor:
    kind: Kind
    #: the account an `account` or `agent` actor belongs to; None for the others
    account: str | None = None

    def __post_init__(self) -> None:
        if (self.kind in ("account", "agent")) != (self.account is not None):
            raise ValueError(f"a {self.kind} actor {'needs' if self.account is None else 'has no'} account")

    @property
    def is_staff(self) -> bool:
        """The operator or an admin: those who administer the platform."""
        return self.kind in ("operator", "admin")

    def speaks_for(self, account: str | None) -> bool:
        """May this actor act as `account` (submit as it, read its owner views)?"""
        return self.kind == "operator" or (self.kind == "account" and account is not None and self.account == account)

    def describe(self) -> str:
        return f"{self.kind} '{self.account}'" if self.account else f"the {self.kind}"


OPERATOR = Actor("operator")
PUBLIC = Actor("public")
ADMIN = Actor("admin")


def account_actor(name: str) -> Actor:
    return Actor("account", name)


def agent_of(name: str) -> Actor:
    return Actor("agent", name)


# -- visibility: decided here only --------------------------------------------------------------


def may_see(actor: Actor, release: Mapping[str, Any]) -> bool:
    """Whether `release` exists for `actor` at all: an internal suite is the staff's alone (to
    anyone else it does not exist); public and unlisted versions exist for everyone (an unlisted one
    is found when named, never listed: `listed_visibilities`)."""
    return actor.is_staff or release["visibility"] != "internal"


def listed_visibilities(actor: Actor) -> frozenset[str]:
    """The release visibilities an actor's index lists."""
    if actor.is_staff:
        return frozenset({"public", "unlisted", "internal"})
    if actor.kind == "agent":
        return frozenset({"public", "unlisted"})
    return frozenset({"public"})


def is_listed(actor: Actor, release: Mapping[str, Any]) -> bool:
    """Whether `actor`'s index lists `release` (`listed_visibilities`). Listed to `PUBLIC`: a public
    version, the versions with a public board (and in a public export)."""
    return release["visibility"] in listed_visibilities(actor)


def require_operator(actor: Actor, what: str, field: str) -> None:
    """Only the local operator may do `what` (file a baseline, a variance note)."""
    if actor.kind != "operator":
        raise Forbidden(f"only the platform operator may {what}; {actor.describe()} may not", field)


def require_staff(actor: Actor, what: str, field: str) -> None:
    """Only the operator or an admin may do `what` (create accounts, change configuration)."""
    if not actor.is_staff:
        raise Forbidden(f"only the platform operator or an admin may {what}; {actor.describe()} may not", field)


def require_speaks_for(actor: Actor, account: str, what: str, field: str = "account") -> None:
    """`actor` acts as `account` (e.g. submits as it): the account itself or the operator."""
    if not actor.speaks_for(account):
        raise Forbidden(f"{actor.describe()} may not {what} as account '{account}'", field)


def require_owner(actor: Actor, owner: str | None, noun: str, ident: str, field: str) -> None:
    """`actor` may see what `owner` owns; anyone else is told it does not exist."""
    if not actor.speaks_for(owner):
        raise NotFound(f"no such {noun}", field, value=ident)


def require_agent_of(actor: Actor, account: str, ident: str) -> None:
    """An agent plays only its own account's runs; another account's run does not exist for it."""
    if not (actor.kind == "operator" or (actor.kind == "agent" and actor.account == account)):
        raise NotFound("no such run", "run", value=ident)


def prefix_owner(actor: Actor) -> str | None:
    """Whose ids an id prefix typed by `actor` may expand to: everyone's (None) for the operator,
    an account's own for that account, no one's (`""`) for anyone else, who names ids in full. A
    prefix thus never finds, nor names when ambiguous, an id its asker may not see."""
    if actor.kind == "operator":
        return None
    return actor.account if actor.kind == "account" and actor.account else ""
