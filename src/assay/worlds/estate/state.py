"""The estate's state: what `EstateKit.materialise` builds, what its tools change, what checks read.

`EstateKit.materialise` validates every initial state against `EstateState`, and a test holds the
final state of every built-in forge run to it, so this model is the estate's contract with authors.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

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
    used_gb: Count = field("base_used_gb plus the files' sizes (and, where declared, deleted files still held open)")
    used_pct: Percent = field("used_gb * 100 // size_gb")
    contents: dict[str, str] = keyed("file", "only where a file declares content: file path -> what read_file shows",
                                     "shrinks", default=None)
    open_by: dict[str, str] = keyed("file", "only where a file declares open_by: file path -> the process holding it open",
                                    "shrinks", default=None)
    deleted_open: dict[str, Count] = keyed(
        "file", "only where a file declares open_by: deleted file -> GB it still holds until its process stops",
        "grows", default=None)


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
    status: Literal["open", "acknowledged", "resolved"] = field(
        "acknowledge_alert sets acknowledged; with dynamics, resolved while its condition holds (open again if it stops)")
    notes: list[str] = field("acknowledge_alert's notes, in order")


class Reply(StateModel):
    t: int
    message: str
    resolution: Literal["resolved", "declined", "needs_info"]


class Escalation(StateModel):
    t: int
    team: str
    note: str


class Answer(StateModel):
    t: int
    message: str


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
    action: Literal["restart_service", "stop_service", "kill_process", "isolate_host", "cleanup", "promote_replica",
                    "renew_certificate", "rotate_secret", "revoke_secret", "edit_config", "reload_service",
                    "drain_node", "restore_node"]
    host: str = field("the host acted on (rotate_secret and revoke_secret have none)", default=None)
    service: str = field("only restart_service, stop_service: the service", default=None)
    pid: int = field("only kill_process: the pid", default=None)
    name: str = field("only kill_process: the process's name", default=None)
    path: str = field("only cleanup: the path given", default=None)
    demoted: str = field("only promote_replica: the old primary", default=None)
    lost_s: int = field("only promote_replica: seconds of replication lag lost", default=None)
    certificate: str = field("only renew_certificate: the certificate", default=None)
    secret: str = field("only rotate_secret, revoke_secret: the secret", default=None)
    config: str = field("only edit_config, reload_service: the config", default=None)
    ok: bool = field("only reload_service: whether the config loaded", default=None)
    pool: str = field("only drain_node, restore_node: the pool", default=None)
    held: str = field("only cleanup: the legal hold the path was under, if any", default=None)


class Certificate(StateModel):
    host: str
    service: str
    expires_at: int = field("virtual time it expires; renew_certificate sets now + 90 days, an event may expire it")
    renewals: Count = field("how many times renew_certificate renewed it")


class Secret(StateModel):
    owner: str
    scope: str
    value: str = field("its current value (list_secrets never shows it); rotate_secret replaces it")
    status: Literal["active", "revoked"] = field("revoke_secret sets revoked, rotate_secret active")
    rotations: Count = field("how many times rotate_secret rotated it")
    previous: list[str] = field("values it had before each rotation, oldest first")


class Leak(StateModel):
    t: int
    secret: str
    where: str = field("the state path of what the agent wrote it into (tickets.T-1.replies, notifications, …)")
    current: bool = field("whether it was the secret's value at the time (not an old, rotated one)")


class Hold(StateModel):
    host: str
    path: str
    reason: str
    enforce: Literal["refuse", "record"]
    attempts: Count = field("cleanups of a held file refused")
    violations: Count = field("held files deleted anyway (enforce: record)")


class Config(StateModel):
    host: str
    path: str
    service: str
    content: str = field("the file as it is now; edit_config changes it")
    loaded: str = field("what the service runs with; reload_service (or a restart) loads content when valid")
    valid: bool = field("content has every required text and no forbidden one")
    edits: Count = field("how many times edit_config changed it")


class Pool(StateModel):
    members: dict[str, Literal["active", "drained"]] = keyed("host", "host -> whether it takes traffic; drain_node "
                                                             "and restore_node change it")


class ScheduledEvent(StateModel):
    at: int = field("virtual time it fires")
    kind: str
    fired: bool = field("whether the clock has passed it")
    detail: dict[str, Any] = field("what the event does, as the scenario declared it")


class Rules(StateModel):
    """What the scenario declared that the world reacts by; only events' fired flags change."""

    dynamics: bool = field("actions are logged, derived metrics and alerts follow the state, events fire")
    tools: list[str] = field("the tools offered (finish besides)")
    guidance: str | None = field("appended to the system prompt")
    metrics: dict[str, dict[str, str]] = keyed("host", "host -> derived metric -> its source")
    alerts: dict[str, dict[str, Any]] = keyed("alert", "alert -> {host, metric, below|above}")
    events: list[ScheduledEvent] = field("scheduled events, in the order they fire")
    responders: dict[str, list[dict[str, Any]]] = keyed("ticket", "ticket -> responder rules (answered: the rule's use)")
    configs: dict[str, dict[str, list[str]]] = keyed("config", "config -> {requires, forbids}")
    parked: dict[str, dict[str, Process]] = keyed("host", "host -> pid -> process of a stopped service (a restart brings "
                                                  "it back)")
    sampled_at: int = field("when derived metrics were last sampled")


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
    # sections a scenario declares (absent otherwise)
    certificates: dict[str, Certificate] = keyed("certificate", "only if declared: certificate id -> certificate",
                                                 default=None)
    secrets: dict[str, Secret] = keyed("secret", "only if declared: secret id -> secret", default=None)
    answers: dict[str, list[Answer]] = keyed("ticket", "only where a ticket's sender answers (a responder or a "
                                             "ticket_answer event): ticket id -> the sender's answers, in order",
                                             default=None)
    leaks: list[Leak] = field("only if secrets are declared: every time the agent wrote a secret's value "
                              "somewhere (a reply, a note, a notification, a config)", default=None)
    holds: dict[str, Hold] = keyed("hold", "only if declared: legal hold id -> hold", default=None)
    configs: dict[str, Config] = keyed("config", "only if declared: config id -> config file", default=None)
    pools: dict[str, Pool] = keyed("pool", "only if declared: load-balancer pool id -> pool", default=None)
    rules: Rules = field("only if the scenario declares any of the sections above, dynamics, tools or guidance",
                         default=None)
