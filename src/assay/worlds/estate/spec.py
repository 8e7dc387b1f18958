"""The `world` block of an estate scenario: what the author stages; the seed supplies the rest."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator

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


    @model_validator(mode="after")
    def _fits(self) -> "DiskSpec":
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

    @model_validator(mode="after")
    def _references(self) -> "EstateSpec":
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError("duplicate host names")
        known = set(names)
        for h in self.hosts:
            if h.tenant not in self.tenants:
                raise ValueError(f"host {h.name}: unknown tenant '{h.tenant}'")
            if h.replica_of is not None and h.replica_of not in known:
                raise ValueError(f"host {h.name}: replica_of names unknown host '{h.replica_of}'")
        for kind, items in (("metric", self.metrics), ("alert", self.alerts), ("backup", self.backups)):
            for item in items:
                if item.host not in known:
                    raise ValueError(f"{kind} on unknown host '{item.host}'")
        for t in self.tickets:
            if t.tenant not in self.tenants:
                raise ValueError(f"ticket {t.id}: unknown tenant '{t.tenant}'")
        for tenant in self.customers:
            if tenant not in self.tenants:
                raise ValueError(f"customers of unknown tenant '{tenant}'")
        return self
