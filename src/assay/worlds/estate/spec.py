"""The `world` block of an estate scenario: what the author stages; the seed supplies the rest."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from assay.located import at, checked, names, once, references, refuse, repeats, unknown

NAME = r"^[a-z0-9][a-z0-9\-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ServiceSpec(_Strict):
    name: str = Field(pattern=NAME)
    status: Literal["running", "stopped", "crashed", "degraded"] = "running"


class FileSpec(_Strict):
    path: str = Field(pattern=r"^/[^\s]*$")
    size_gb: StrictInt = Field(ge=0)


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


class TicketSpec(_Strict):
    id: str
    tenant: str
    sender: str
    subject: str
    body: str


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

    # Every id once (a repeat is located at its second use, naming the first), and every reference
    # to a host or tenant known; each problem is its own located line. References are read from
    # the raw document, so they are checked even when some field of it is invalid.

    @field_validator("hosts", "metrics", "alerts", "tickets", "runbooks", "backups")
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
                 *references(raw, "tickets", "tenant", tenants, "tenant")]
        customers = raw.get("customers") if isinstance(raw, dict) else None
        if tenants is not None and isinstance(customers, dict):
            found += [at(("customers", t), unknown("tenant", t, tenants), t) for t in customers if t not in tenants]
        return checked(lambda: handler(raw), found, cls.__name__)
