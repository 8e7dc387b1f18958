"""The `world` block of an estate scenario: what the author stages; the seed supplies the rest."""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from assay.located import at, checked, names, once, references, refuse, repeats, unknown

NAME = r"^[a-z0-9][a-z0-9\-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    #: Fields added after forge 1.0 was released: left out of the dump (which the content hash is
    #: taken over) while they hold their default, so a document that does not use them hashes as before.
    _OPT_IN: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_unused(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        for name in self._OPT_IN:
            if isinstance(out, dict) and name in out and getattr(self, name) == _default(type(self), name):
                del out[name]
        return out


#: (model, field) -> the field's default, made once: pydantic inspects a default factory's
#: signature on every `get_default` (a few ms per scenario loaded), and the value is only compared.
_DEFAULTS: dict[tuple[type[BaseModel], str], Any] = {}


def _default(model: type[BaseModel], name: str) -> Any:
    key = (model, name)
    if key not in _DEFAULTS:
        _DEFAULTS[key] = model.model_fields[name].get_default(call_default_factory=True)
    return _DEFAULTS[key]


#: A time in a scenario: an offset from the world's start (`+45m`, `-1h30m`, `+2d`) or a UTC instant
#: (`2026-11-30T08:00:00Z`).
TIME = r"^([+-](\d+d)?(\d+h)?(\d+m)?(\d+s)?|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$"
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
#: the instant virtual time 0 names (`rng.VirtualClock.EPOCH`)
EPOCH = dt.datetime(2026, 11, 30, tzinfo=dt.timezone.utc)


def _time(value: str) -> str:
    if not re.fullmatch(TIME, value, re.ASCII):
        raise ValueError(f"{value!r} is not a time; write an offset from the start ('+45m', '-1h30m', '+2d') "
                         "or a UTC instant ('2026-11-30T08:00:00Z')")
    if value[0] in "+-" and len(value) == 1:
        raise ValueError(f"{value!r} has no amount; write e.g. '+45m'")
    if value[0] not in "+-":
        try:
            dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            raise ValueError(f"{value!r} is not a date and time") from None
    return value


def seconds(value: str, start: int) -> int:
    """A scenario time in virtual seconds, offsets counted from `start`."""
    if value[0] in "+-":
        n = sum(int(amount) * _UNITS[unit] for amount, unit in re.findall(r"(\d+)([dhms])", value))
        return start + (n if value[0] == "+" else -n)
    instant = dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    return int((instant - EPOCH).total_seconds())


Time = Annotated[str, AfterValidator(_time)]


class ServiceSpec(_Strict):
    name: str = Field(pattern=NAME)
    status: Literal["running", "stopped", "crashed", "degraded"] = "running"


class FileSpec(_Strict):
    path: str = Field(pattern=r"^/[^\s]*$")
    size_gb: StrictInt = Field(ge=0)
    content: str | None = Field(default=None, description="what read_file shows (offers read_file)")
    open_by: str | None = Field(default=None, pattern=NAME, description=(
        "name of a process holding the file open: deleting it frees its space only when that process stops"))

    _OPT_IN = frozenset({"content", "open_by"})


class DiskSpec(_Strict):
    mount: str = Field(pattern=r"^/[^\s]*$")
    size_gb: StrictInt = Field(gt=0)
    base_used_gb: StrictInt = Field(ge=0)
    files: list[FileSpec] = Field(default_factory=list)

    _files_once = once("files", "file path", "path")

    @model_validator(mode="after")
    def _fits(self) -> DiskSpec:
        used = self.base_used_gb + sum(f.size_gb for f in self.files)
        if used > self.size_gb:
            raise ValueError(f"disk {self.mount}: {used} GB used exceeds its size of {self.size_gb} GB")
        return self


class ProcessSpec(_Strict):
    name: str = Field(pattern=NAME)
    user: str = Field(pattern=NAME)
    cpu_pct: StrictInt = Field(ge=0, le=100)
    command: str


class LogLine(_Strict):
    level: Literal["DEBUG", "INFO", "WARN", "ERROR", "CRIT"]
    source: str
    msg: str
    at: Time | None = Field(default=None, description="when it was logged (default: a seeded time in the hour and a half before the start)")

    _OPT_IN = frozenset({"at"})


class HostSpec(_Strict):
    name: str = Field(pattern=NAME)
    role: str = Field(pattern=NAME)
    tenant: str = Field(pattern=NAME)
    status: Literal["up", "down"] = "up"
    replica_of: str | None = None
    replication_lag_s: StrictInt | None = None
    services: list[ServiceSpec] = Field(default_factory=list)
    disks: list[DiskSpec] = Field(default_factory=list)
    processes: list[ProcessSpec] = Field(default_factory=list)
    evidence: list[LogLine] = Field(default_factory=list, description="log lines staged among the noise")

    _services_once = once("services", "service name", "name")
    _disks_once = once("disks", "disk mount", "mount")


class MetricSpec(_Strict):
    host: str
    metric: str = Field(pattern=r"^[a-z0-9_]+$")
    base: StrictInt
    spread: StrictInt = Field(ge=0)


class AlertSpec(_Strict):
    id: str
    host: str
    severity: Literal["info", "warning", "critical"]
    summary: str


class ResponderRule(_Strict):
    """How a ticket's sender answers a reply: the first rule whose conditions all hold answers, once."""

    contains: str | None = Field(default=None, min_length=1, description="the reply contains this text (case ignored)")
    resolution: Literal["resolved", "declined", "needs_info"] | None = Field(default=None, description="the reply's resolution")
    answer: str = Field(min_length=1, description="the sender's answer, appended to the ticket's answers")


class TicketSpec(_Strict):
    id: str
    tenant: str
    sender: str
    subject: str
    body: str
    responder: list[ResponderRule] = Field(default_factory=list, description="scripted answers of the sender")

    _OPT_IN = frozenset({"responder"})


class RunbookSpec(_Strict):
    id: str = Field(pattern=NAME)
    title: str
    body: str


class BackupSpec(_Strict):
    id: str = Field(pattern=NAME)
    host: str
    status: Literal["running", "completed", "failed"]
    process: str | None = Field(default=None, description="process name of the running job")
    writes: str | None = Field(default=None, description="file the running job writes")
    only_copy: StrictBool = False


class CustomerSpec(_Strict):
    id: str
    name: str
    email: str
    plan: str


class NoiseSpec(_Strict):
    lines_per_host: StrictInt = Field(default=24, ge=0, le=200)


class CertificateSpec(_Strict):
    id: str = Field(pattern=NAME)
    host: str
    service: str = Field(pattern=NAME, description="the service presenting it")
    expires: Time = Field(description="when it expires, e.g. '+5h' from the start")


class SecretSpec(_Strict):
    id: str = Field(pattern=NAME)
    owner: str = Field(description="the team that owns it (rotate, then tell them)")
    scope: str = Field(description="what it opens, in words")
    value: str = Field(min_length=8, description="its value: world state an agent can leak (checks see where it went)")


class HoldSpec(_Strict):
    id: str = Field(pattern=NAME)
    host: str
    path: str = Field(pattern=r"^/[^\s]*$", description="a file, or a directory whose files it covers")
    reason: str
    enforce: Literal["refuse", "record"] = Field(default="refuse", description=(
        "refuse: cleanup of a held file is refused (and counted in attempts); record: it goes through "
        "and is counted in violations"))


class ConfigSpec(_Strict):
    id: str = Field(pattern=NAME)
    host: str
    path: str = Field(pattern=r"^/[^\s]*$")
    service: str = Field(pattern=NAME, description="the service that loads it (reload_service)")
    content: str
    requires: list[str] = Field(default_factory=list, description="text a valid config must contain")
    forbids: list[str] = Field(default_factory=list, description="text a valid config must not contain")


class PoolSpec(_Strict):
    id: str = Field(pattern=NAME)
    members: list[str] = Field(min_length=1, description="hosts behind the load balancer, all active at the start")


class DerivedMetric(_Strict):
    host: str
    metric: str = Field(pattern=r"^[a-z0-9_]+$")
    source: str = Field(description="disk:MOUNT (used %), certificate:ID (hours left) or service:NAME (100 healthy, 0 not)")

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if not re.fullmatch(r"disk:/\S*|certificate:[a-z0-9][a-z0-9\-]*|service:[a-z0-9][a-z0-9\-]*", value):
            raise ValueError(f"{value!r} is not a source; write disk:MOUNT, certificate:ID or service:NAME")
        return value


class AlertRule(_Strict):
    alert: str
    host: str | None = Field(default=None, description="the host whose metric it reads (default: the alert's)")
    metric: str = Field(description="a metric of that host")
    below: StrictInt | None = None
    above: StrictInt | None = None

    @model_validator(mode="after")
    def _one(self) -> AlertRule:
        if (self.below is None) == (self.above is None):
            raise ValueError("say exactly one of below or above")
        return self


EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "start_process": ("host", "process"),
    "expire_certificate": ("certificate",),
    "ticket_answer": ("ticket", "message"),
    "service_status": ("host", "service", "status"),
    "write_file": ("host", "mount", "path", "size_gb"),
    "log": ("host", "level", "source", "message"),
}


class EventSpec(_Strict):
    """Something that happens when the virtual clock passes `at` (kinds: see EVENT_FIELDS)."""

    at: Time
    kind: Literal["start_process", "expire_certificate", "ticket_answer", "service_status", "write_file", "log"]
    host: str | None = None
    process: ProcessSpec | None = None
    certificate: str | None = None
    ticket: str | None = None
    message: str | None = None
    service: str | None = None
    status: Literal["running", "stopped", "crashed", "degraded"] | None = None
    mount: str | None = None
    path: str | None = Field(default=None, pattern=r"^/[^\s]*$")
    size_gb: StrictInt | None = Field(default=None, ge=0)
    level: Literal["DEBUG", "INFO", "WARN", "ERROR", "CRIT"] | None = None
    source: str | None = None

    @model_validator(mode="after")
    def _fields(self) -> EventSpec:
        wanted = EVENT_FIELDS[self.kind]
        # a field given as null is not given: a stored document (dumped whole) spells every field
        given = {f for f in self.model_fields_set if f not in ("at", "kind") and getattr(self, f) is not None}
        missing = [f for f in wanted if getattr(self, f) is None]
        extra = sorted(given - set(wanted))
        if missing:
            raise ValueError(f"a {self.kind} event needs {', '.join(missing)}")
        if extra:
            raise ValueError(f"a {self.kind} event takes no {', '.join(extra)} (it takes {', '.join(wanted)})")
        return self


class DynamicsSpec(_Strict):
    """The world reacts: actions are logged on their host, a stopped service's process is gone, derived
    metrics and alerts follow the state, and scheduled events fire as the clock passes them."""

    metrics: list[DerivedMetric] = Field(default_factory=list)
    alerts: list[AlertRule] = Field(default_factory=list)
    events: list[EventSpec] = Field(default_factory=list)


class ToolsSpec(_Strict):
    allow: list[str] | None = Field(default=None, description="only these tools (finish always stays)")
    deny: list[str] = Field(default_factory=list, description="these tools are not offered, and refused if called")

    @field_validator("allow", "deny")
    @classmethod
    def _known(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        from assay.worlds.estate.tools import ALL_TOOLS

        known = [t.name for t in ALL_TOOLS if t.name != "finish"]
        refuse([at((i,), unknown("tool", n, known) if n != "finish" else "finish is always offered", n)
                for i, n in enumerate(value or ()) if n not in known])
        return value


class EstateSpec(_Strict):
    tenants: dict[str, str] = Field(min_length=1, description="tenant id -> display name")
    hosts: list[HostSpec] = Field(min_length=1)
    metrics: list[MetricSpec] = Field(default_factory=list)
    alerts: list[AlertSpec] = Field(default_factory=list)
    tickets: list[TicketSpec] = Field(default_factory=list)
    runbooks: list[RunbookSpec] = Field(default_factory=list)
    backups: list[BackupSpec] = Field(default_factory=list)
    customers: dict[str, list[CustomerSpec]] = Field(default_factory=dict)
    teams: list[str] = Field(default_factory=lambda: ["ops", "security", "storage", "database", "privacy"])
    noise: NoiseSpec = Field(default_factory=NoiseSpec)
    start: Time | None = Field(default=None, description="when the world's clock starts (a UTC instant)")
    certificates: list[CertificateSpec] = Field(default_factory=list)
    secrets: list[SecretSpec] = Field(default_factory=list)
    holds: list[HoldSpec] = Field(default_factory=list, description="legal holds on paths")
    configs: list[ConfigSpec] = Field(default_factory=list)
    pools: list[PoolSpec] = Field(default_factory=list, description="load-balancer pools")
    dynamics: DynamicsSpec | None = Field(default=None, description="the world reacts (see DynamicsSpec)")
    tools: ToolsSpec | None = Field(default=None, description="the tools this scenario offers")
    guidance: str | None = Field(default=None, min_length=1, description="appended to the system prompt")

    _OPT_IN = frozenset({"start", "certificates", "secrets", "holds", "configs", "pools", "dynamics", "tools", "guidance"})

    @field_validator("start")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and value[0] in "+-":
            raise ValueError("the start is an instant, e.g. '2026-11-30T07:40:00Z'")
        if value is not None and seconds(value, 0) < 0:
            raise ValueError(f"the start must not be before {EPOCH:%Y-%m-%dT%H:%M:%SZ}")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> EstateSpec:
        """What the new sections name exists where they name it (a service on its host, a mount, a
        metric an alert rule reads), so nothing declared is silently inert."""
        hosts = {h.name: h for h in self.hosts}
        found = []

        def service(loc: tuple[str | int, ...], host: str | None, name: str | None) -> None:
            h = hosts.get(host or "")
            if h is not None and name is not None and name not in {s.name for s in h.services}:
                found.append(at(loc, unknown("service", name, [s.name for s in h.services], f"on host '{h.name}'"), name))

        for i, c in enumerate(self.certificates):
            service(("certificates", i, "service"), c.host, c.service)
        for i, cf in enumerate(self.configs):
            service(("configs", i, "service"), cf.host, cf.service)
        values: dict[str, int] = {}
        for i, sec in enumerate(self.secrets):
            if sec.value in values:
                found.append(at(("secrets", i, "value"), f"the same value as secrets[{values[sec.value]}]", sec.id))
            values.setdefault(sec.value, i)
        if self.dynamics is not None:
            declared = {(m.host, m.metric) for m in self.metrics}
            derived = set()
            certs = {c.id for c in self.certificates}
            for i, m in enumerate(self.dynamics.metrics):
                loc: tuple[str | int, ...] = ("dynamics", "metrics", i)
                if (m.host, m.metric) in declared or (m.host, m.metric) in derived:
                    found.append(at((*loc, "metric"), f"metric '{m.metric}' of host '{m.host}' is declared twice", m.metric))
                derived.add((m.host, m.metric))
                kind, _, name = m.source.partition(":")
                h = hosts.get(m.host)
                if h is None:
                    continue
                if kind == "disk" and name not in {d.mount for d in h.disks}:
                    found.append(at((*loc, "source"), unknown("disk mount", name, [d.mount for d in h.disks],
                                                               f"on host '{h.name}'"), m.source))
                elif kind == "certificate" and name not in certs:
                    found.append(at((*loc, "source"), unknown("certificate", name, certs), m.source))
                elif kind == "service":
                    service((*loc, "source"), m.host, name)
            alerts = {a.id: a.host for a in self.alerts}
            for i, r in enumerate(self.dynamics.alerts):
                host = r.host or alerts.get(r.alert)
                if host in hosts and (host, r.metric) not in declared | derived:
                    found.append(at(("dynamics", "alerts", i, "metric"), unknown(
                        "metric", r.metric, sorted(m for h, m in declared | derived if h == host), f"on host '{host}'"), r.metric))
            for i, e in enumerate(self.dynamics.events):
                if e.kind == "service_status":
                    service(("dynamics", "events", i, "service"), e.host, e.service)
                h = hosts.get(e.host or "")
                if e.kind == "write_file" and h is not None and e.mount not in {d.mount for d in h.disks}:
                    found.append(at(("dynamics", "events", i, "mount"), unknown(
                        "disk mount", str(e.mount), [d.mount for d in h.disks], f"on host '{h.name}'"), e.mount))
        refuse(found)
        return self

    def uses_new(self) -> bool:
        """Whether the document declares anything added after forge 1.0 (which decides whether its
        world is the reacting one)."""
        return bool(self.certificates or self.secrets or self.holds or self.configs or self.pools
                    or self.dynamics is not None or self.tools is not None or self.guidance is not None)

    # Every id once (a repeat is located at its second use, naming the first), and every reference
    # to a host or tenant known; each problem is its own located line. References are read from
    # the raw document, so they are checked even when some field of it is invalid.

    @field_validator("hosts", "metrics", "alerts", "tickets", "runbooks", "backups", "certificates", "secrets",
                     "holds", "configs", "pools")
    @classmethod
    def _ids_once(cls, items: list[Any], info: ValidationInfo) -> list[Any]:
        field = str(info.field_name)
        if field == "hosts":
            found = repeats(items, field, "host name", "name")
        elif field == "metrics":
            # a host's metric is `metrics.HOST.METRIC` in the state
            found = repeats(items, field, "metric", "metric", value=lambda m: f"{m.host}.{m.metric}")
        else:
            found = repeats(items, field, f"{field[:-1]} id", "id")
        refuse(found)
        return items

    @field_validator("customers")
    @classmethod
    def _customers_once(cls, customers: dict[str, list[CustomerSpec]]) -> dict[str, list[CustomerSpec]]:
        refuse([p for tenant, listed in customers.items()
                for p in repeats(listed, f"customers.{tenant}", "customer id", "id", prefix=(tenant,))])
        return customers

    _teams_once = once("teams", "team")

    @model_validator(mode="wrap")
    @classmethod
    def _references(cls, raw: Any, handler: ModelWrapValidatorHandler[EstateSpec]) -> EstateSpec:
        tenants = sorted(raw["tenants"]) if isinstance(raw, dict) and isinstance(raw.get("tenants"), dict) else None
        hosts = names(raw, "hosts", "name")
        found = [*references(raw, "hosts", "tenant", tenants, "tenant"),
                 *references(raw, "hosts", "replica_of", hosts, "host"),
                 *(p for field in ("metrics", "alerts", "backups") for p in references(raw, field, "host", hosts, "host")),
                 *references(raw, "tickets", "tenant", tenants, "tenant"),
                 *(p for field in ("certificates", "holds", "configs") for p in references(raw, field, "host", hosts, "host"))]
        for i, pool in enumerate(raw.get("pools") or () if isinstance(raw, dict) else ()):
            if isinstance(pool, dict) and hosts is not None:
                found += [at(("pools", i, "members", j), unknown("host", m, hosts), m)
                          for j, m in enumerate(pool.get("members") or ()) if isinstance(m, str) and m not in hosts]
        found += _dynamics_references(raw, hosts)
        customers = raw.get("customers") if isinstance(raw, dict) else None
        if tenants is not None and isinstance(customers, dict):
            found += [at(("customers", t), unknown("tenant", t, tenants), t) for t in customers if t not in tenants]
        return checked(lambda: handler(raw), found, cls.__name__)


def _dynamics_references(raw: Any, hosts: set[str] | None) -> list[Any]:
    """Each host, certificate, ticket and alert a dynamics block names, known to the world."""
    if not isinstance(raw, dict) or not isinstance(raw.get("dynamics"), dict):
        return []
    dyn = raw["dynamics"]
    def ids(field: str) -> set[str] | None:
        return names(raw, field, "id") if field in raw else set()

    known = {"host": hosts, "certificate": ids("certificates"), "ticket": ids("tickets"), "alert": ids("alerts")}
    found = []
    for field, keys in (("metrics", ("host",)), ("alerts", ("alert", "host")), ("events", ("host", "certificate", "ticket"))):
        for key in keys:
            found += [{**p, "loc": ("dynamics", *p["loc"])} for p in references(dyn, field, key, known[key], key)]
    return found
