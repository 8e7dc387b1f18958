"""The estate's state: what `EstateKit.materialise` builds, what its tools change, what checks read.

`EstateKit.materialise` validates every initial state against `EstateState`, and a test holds the
final state of every built-in forge run to it, so this model is the estate's contract with authors.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from assay.worlds.contract import StateModel, field, keyed

Count = Annotated[int, Field(ge=0)]
Percent = Annotated[int, Field(ge=0, le=100)]


class Clock(StateModel):
    start: int = field("when the run began, in seconds on the virtual clock", ge=0)
    now: int = field("the virtual time of the last tool call (every call advances it)", ge=0)


class Service(StateModel):
    status: Literal["running", "stopped", "crashed", "degraded"] = field(
        "restart_service sets running, stop_service stopped")
    restarts: Count = field("how many times restart_service restarted it")


class Disk(StateModel):
    size_gb: int = field("capacity", gt=0)
    base_used_gb: Count = field("space used by what is not a listed file")
    files: dict[str, Count] = keyed("file", "file path -> size in GB; cleanup removes files", "shrinks")
    used_gb: Count = field("base_used_gb plus the files' sizes")
    used_pct: Percent = field("used_gb * 100 // size_gb")


class Process(StateModel):
    name: str
    user: str
    cpu_pct: Percent
    command: str


class Host(StateModel):
    role: str = field("promote_replica swaps the roles of a replica and its primary")
    tenant: str
    status: Literal["up", "down"]
    isolated: bool = field("isolate_host sets it true")
    replica_of: str | None = field("the primary this host replicates; promote_replica moves it")
    replication_lag_s: int | None
    services: dict[str, Service] = keyed("service", "service name -> service")
    disks: dict[str, Disk] = keyed("mount", "mount point -> disk")
    processes: dict[str, Process] = keyed("pid", "process id (as text) -> process; kill_process removes one",
                                          "shrinks")


class LogLine(StateModel):
    t: int
    level: Literal["DEBUG", "INFO", "WARN", "ERROR", "CRIT"]
    source: str
    msg: str


class Alert(StateModel):
    host: str
    severity: Literal["info", "warning", "critical"]
    summary: str
    raised_at: int
    status: Literal["open", "acknowledged"] = field("acknowledge_alert sets acknowledged")
    notes: list[str] = field("acknowledge_alert's notes, in order")


class Reply(StateModel):
    t: int
    message: str
    resolution: Literal["resolved", "declined", "needs_info"]


class Escalation(StateModel):
    t: int
    team: str
    note: str


class Ticket(StateModel):
    tenant: str
    sender: str
    subject: str
    body: str
    status: Literal["open", "resolved", "declined", "escalated"] = field(
        "reply_ticket sets resolved, declined or (needs_info) open; escalate_ticket escalated")
    replies: list[Reply] = field("reply_ticket appends one")
    escalations: list[Escalation] = field("escalate_ticket appends one")


class Runbook(StateModel):
    title: str
    body: str


class Backup(StateModel):
    host: str
    status: Literal["running", "completed", "failed"] = field(
        "a running job fails when its process is stopped, restarted or killed, or what it writes is cleaned up")
    process: str | None
    writes: str | None
    only_copy: bool


class Customer(StateModel):
    name: str
    email: str
    plan: str


class Lookup(StateModel):
    t: int
    ticket: str
    tenant: str
    customer_id: str
    cross_tenant: bool = field("the customer's tenant is not the ticket's")


class Notification(StateModel):
    t: int
    team: str
    message: str


class Change(StateModel):
    """One change an acting tool made; which fields it has depends on `action` (the others are absent,
    never null)."""

    t: int
    action: Literal["restart_service", "stop_service", "kill_process", "isolate_host", "cleanup", "promote_replica"]
    host: str
    service: str = field("only restart_service, stop_service: the service", default=None)
    pid: int = field("only kill_process: the pid", default=None)
    name: str = field("only kill_process: the process's name", default=None)
    path: str = field("only cleanup: the path given", default=None)
    demoted: str = field("only promote_replica: the old primary", default=None)
    lost_s: int = field("only promote_replica: seconds of replication lag lost", default=None)


class EstateState(StateModel):
    """The estate's whole state document."""

    clock: Clock
    tenants: dict[str, str] = keyed("tenant", "tenant id -> display name")
    teams: list[str] = field("teams notify and escalate_ticket accept")
    hosts: dict[str, Host] = keyed("host", "host name -> host")
    logs: dict[str, list[LogLine]] = keyed("host", "host name -> log lines, oldest first")
    metrics: dict[str, Annotated[dict[str, list[int]], Field(json_schema_extra={"x-key": "metric", "x-keys": "fixed"})]] = \
        keyed("host", "host name -> metric name -> 12 samples, 5 minutes apart")
    alerts: dict[str, Alert] = keyed("alert", "alert id -> alert")
    tickets: dict[str, Ticket] = keyed("ticket", "ticket id -> ticket")
    runbooks: dict[str, Runbook] = keyed("runbook", "page id -> runbook page")
    backups: dict[str, Backup] = keyed("backup", "backup job id -> job")
    customers: dict[str, Annotated[dict[str, Customer], Field(json_schema_extra={"x-key": "customer", "x-keys": "fixed"})]] = \
        keyed("tenant", "tenant id -> customer id -> customer record")
    lookups: list[Lookup] = field("lookup_customer appends one")
    notifications: list[Notification] = field("notify appends one")
    changes: list[Change] = field("every acting tool appends one")
