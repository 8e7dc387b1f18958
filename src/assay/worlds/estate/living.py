"""The estate's opt-in sections: resources (certificates, secrets, legal holds, config files,
load-balancer pools, file contents, ticket responders) and dynamics (a world that reacts).

Forge 1.0 was released before any of this existed, and its content hashes and stored runs must not
move, so none of it happens unless a scenario declares it: `declares(spec)` is False for every
document written before, whose state then has no `rules` section, and `EstateWorld` takes the old
paths word for word. With a `rules` section the world:

- offers the tools `rules.tools` names (the classic ones, those of the declared resources, and
  `wait` with dynamics; less a scenario's `tools.deny`, or only its `tools.allow`), and appends the
  scenario's `guidance` to the system prompt;
- shows log lines only up to the clock (an evidence line `at: "+10m"` appears ten minutes in);
- counts legal holds (a held file's cleanup is refused or recorded), keeps a deleted file's space
  while the process holding it open runs, and records every secret value the agent writes out
  (`leaks`), and a ticket's sender answers by its responder rules;
- with `dynamics`: logs each action on its host, parks a stopped service's processes (restart brings
  them back), restarts with the config as it is (an invalid one crashes the service), fires
  scheduled events as the clock passes them, and recomputes derived metrics and the alerts
  following them after every call.

Everything is a function of the state and the call sequence: no chance is drawn here, so a replay
of the same calls gives the same state.
"""

from __future__ import annotations

import difflib
import hashlib
from typing import Any

from assay.worlds.base import ToolError
from assay.worlds.estate.spec import EstateSpec, seconds
from assay.worlds.estate.tools import EXTRA_TOOLS, TOOLS
from assay.worlds.rng import VirtualClock

RENEWAL_S = 90 * 86400
WAIT_MAX_MIN = 240


def declares(spec: EstateSpec) -> bool:
    """Whether a document uses anything added after forge 1.0 (its world then has `rules`)."""
    return spec.uses_new() or spec.start is not None or any(
        f.content is not None or f.open_by is not None for h in spec.hosts for d in h.disks for f in d.files
    ) or any(ev.at is not None for h in spec.hosts for ev in h.evidence) or any(t.responder for t in spec.tickets)


def offered(spec: EstateSpec) -> list[str]:
    """The tools a declaring scenario offers, in the reference's order."""
    wanted = set(TOOLS)
    if spec.certificates:
        wanted |= {"list_certificates", "renew_certificate"}
    if spec.secrets:
        wanted |= {"list_secrets", "rotate_secret", "revoke_secret"}
    if spec.holds:
        wanted |= {"list_holds"}
    if spec.configs:
        wanted |= {"edit_config", "validate_config", "reload_service", "read_file"}
    if any(f.content is not None for h in spec.hosts for d in h.disks for f in d.files):
        wanted |= {"read_file"}
    if spec.pools:
        wanted |= {"list_pools", "drain_node", "restore_node"}
    if spec.dynamics is not None:
        wanted |= {"wait"}
    if spec.tools is not None:
        if spec.tools.allow is not None:
            wanted &= set(spec.tools.allow)
        wanted -= set(spec.tools.deny)
    return [n for n in (*TOOLS, *EXTRA_TOOLS) if n in wanted]


def problems(content: str, rule: dict[str, list[str]]) -> list[str]:
    return ([f"missing required '{r}'" for r in rule["requires"] if r not in content]
            + [f"forbidden '{f}' present" for f in rule["forbids"] if f in content])


def materialise(spec: EstateSpec, state: dict[str, Any], start: int) -> None:
    """Add the declared sections and `rules` to a materialised state (in place)."""
    answering = [t.id for t in spec.tickets if t.responder or (spec.dynamics and any(
        e.kind == "ticket_answer" and e.ticket == t.id for e in spec.dynamics.events))]
    if answering:
        state["answers"] = {t: [] for t in answering}
    if spec.certificates:
        state["certificates"] = {c.id: {"host": c.host, "service": c.service, "expires_at": seconds(c.expires, start),
                                        "renewals": 0} for c in spec.certificates}
    if spec.secrets:
        state["secrets"] = {s.id: {"owner": s.owner, "scope": s.scope, "value": s.value, "status": "active",
                                   "rotations": 0, "previous": []} for s in spec.secrets}
        state["leaks"] = []
    if spec.holds:
        state["holds"] = {h.id: {"host": h.host, "path": h.path, "reason": h.reason, "enforce": h.enforce,
                                 "attempts": 0, "violations": 0} for h in spec.holds}
    rule_configs = {c.id: {"requires": list(c.requires), "forbids": list(c.forbids)} for c in spec.configs}
    if spec.configs:
        state["configs"] = {c.id: {"host": c.host, "path": c.path, "service": c.service, "content": c.content,
                                   "loaded": c.content, "valid": not problems(c.content, rule_configs[c.id]), "edits": 0}
                            for c in spec.configs}
    if spec.pools:
        state["pools"] = {p.id: {"members": {m: "active" for m in p.members}} for p in spec.pools}
    dyn = spec.dynamics
    metrics: dict[str, dict[str, str]] = {}
    events = []
    if dyn is not None:
        for m in dyn.metrics:
            metrics.setdefault(m.host, {})[m.metric] = m.source
        for e in sorted(dyn.events, key=lambda ev: seconds(ev.at, start)):  # stable: one instant keeps its order
            detail = e.model_dump(mode="json", exclude={"at", "kind"}, exclude_none=True)
            events.append({"at": seconds(e.at, start), "kind": e.kind, "fired": False, "detail": detail})
    state["rules"] = {
        "dynamics": dyn is not None,
        "tools": offered(spec),
        "guidance": spec.guidance,
        "metrics": metrics,
        "alerts": {a.alert: {"host": a.host or next(x.host for x in spec.alerts if x.id == a.alert), "metric": a.metric,
                             **({"below": a.below} if a.below is not None else {"above": a.above})}
                   for a in (dyn.alerts if dyn else ())},
        "events": events,
        "responders": {t.id: [{**r.model_dump(mode="json", exclude_none=True), "answered": False} for r in t.responder]
                       for t in spec.tickets if t.responder},
        "configs": rule_configs,
        "parked": {},
        "sampled_at": start,
    }
    for host, series in metrics.items():
        for metric, source in series.items():
            state["metrics"][host][metric] = [_measure(state, host, source, start)] * 12
    _alerts(state)


# ---- what the state says, measured ----------------------------------------------------------

def _measure(state: dict[str, Any], host: str, source: str, now: int) -> int:
    kind, _, name = source.partition(":")
    h = state["hosts"][host]
    if kind == "disk":
        disk = h["disks"].get(name)
        return disk["used_pct"] if disk is not None else 0
    if kind == "certificate":
        cert = state.get("certificates", {}).get(name)
        return (cert["expires_at"] - now) // 3600 if cert is not None else 0
    return health(state, host, name, now)


def health(state: dict[str, Any], host: str, service: str, now: int) -> int:
    """100 for a healthy service, 50 degraded, 0 down: running, its host up, its processes present
    where it had any, the config it runs with valid and its certificate unexpired."""
    h = state["hosts"][host]
    svc = h["services"].get(service)
    if svc is None or h["status"] != "up" or svc["status"] in ("stopped", "crashed"):
        return 0
    rules = state["rules"]
    if any(p["name"] == service for p in rules["parked"].get(host, {}).values()):
        return 0
    for cid, c in state.get("configs", {}).items():
        if c["host"] == host and c["service"] == service and problems(c["loaded"], rules["configs"][cid]):
            return 0
    for c in state.get("certificates", {}).values():
        if c["host"] == host and c["service"] == service and c["expires_at"] <= now:
            return 0
    return 50 if svc["status"] == "degraded" else 100


def _alerts(state: dict[str, Any]) -> None:
    for alert_id, rule in state["rules"]["alerts"].items():
        a = state["alerts"][alert_id]
        series = state["metrics"][rule["host"]].get(rule["metric"])
        if not series:
            continue
        v = series[-1]
        fine = v < rule["below"] if "below" in rule else v > rule["above"]
        if fine and a["status"] != "resolved":
            a["status"] = "resolved"
        elif not fine and a["status"] == "resolved":
            a["status"] = "open"


class Living:
    """The opt-in behaviour of `EstateWorld` (mixed in; it reads `self._s` and `self._clock`)."""

    _s: dict[str, Any]
    _clock: VirtualClock

    # EstateWorld's own (declared here for the methods below)
    def _host(self, host: str) -> dict[str, Any]:
        raise NotImplementedError

    def _change(self, action: str, **detail: Any) -> None:
        raise NotImplementedError

    def _backup_hit(self, host: str, *, process: str | None = None, path: str | None = None) -> None:
        raise NotImplementedError

    # ---- the clock's work --------------------------------------------------------------------
    def tick(self) -> None:
        """Fire every scheduled event whose time the clock has reached, in order."""
        rules = self._s["rules"]
        if not rules["dynamics"]:
            return
        for ev in rules["events"]:
            if not ev["fired"] and ev["at"] <= self._clock.now:
                ev["fired"] = True
                self._fire(ev["kind"], ev["detail"], ev["at"])

    def settle(self) -> None:
        """After a call: derived metrics sampled at the clock, alerts following them."""
        rules = self._s["rules"]
        if not rules["dynamics"]:
            return
        now, last = self._clock.now, rules["sampled_at"]
        steps = min(12, now // 300 - last // 300)
        for host, series in rules["metrics"].items():
            for metric, source in series.items():
                v = _measure(self._s, host, source, now)
                values = self._s["metrics"][host][metric]
                values[:] = (values + [v] * steps)[-12:]
                values[-1] = v
        rules["sampled_at"] = now
        _alerts(self._s)

    def _log(self, host: str, t: int, level: str, source: str, msg: str) -> None:
        lines = self._s["logs"].get(host)
        if lines is None:
            return
        lines.append({"t": t, "level": level, "source": source, "msg": msg})
        if len(lines) > 1 and lines[-2]["t"] > t:
            lines.sort(key=lambda line: line["t"])  # stable: lines of one instant keep their order

    def _fire(self, kind: str, d: dict[str, Any], t: int) -> None:
        s = self._s
        if kind == "start_process":
            h = s["hosts"][d["host"]]
            p = d["process"]
            pid = _pid(d["host"], p["name"], t, {int(k) for hh in s["hosts"].values() for k in hh["processes"]})
            h["processes"][str(pid)] = {"name": p["name"], "user": p["user"], "cpu_pct": p["cpu_pct"], "command": p["command"]}
            self._log(d["host"], t, "INFO", "systemd", f"Started {p['name']} (pid {pid}): {p['command']}")
        elif kind == "expire_certificate":
            cert = s["certificates"][d["certificate"]]
            cert["expires_at"] = min(cert["expires_at"], t)
            self._log(cert["host"], t, "ERROR", cert["service"], f"TLS certificate {d['certificate']} has expired")
        elif kind == "ticket_answer":
            s["answers"][d["ticket"]].append({"t": t, "message": d["message"]})
        elif kind == "service_status":
            svc = s["hosts"][d["host"]]["services"].get(d["service"])
            if svc is not None:
                svc["status"] = d["status"]
                self._log(d["host"], t, "WARN" if d["status"] != "running" else "INFO", "systemd",
                          f"{d['service']}.service: {d['status']}")
        elif kind == "write_file":
            disk = s["hosts"][d["host"]]["disks"].get(d["mount"])
            if disk is not None:
                room = disk["size_gb"] - disk["used_gb"] + disk["files"].get(d["path"], 0)
                disk["files"][d["path"]] = min(d["size_gb"], room)
                _recompute(disk)
        elif kind == "log":
            self._log(d["host"], t, d["level"], d["source"], d["message"])

    # ---- what the classic tools do besides, where rules exist ---------------------------------
    def _acted(self, host: str | None, action: str, what: str) -> None:
        """An action's line in its host's log (dynamics)."""
        if host is not None and self._s["rules"]["dynamics"]:
            self._log(host, self._clock.now, "INFO", "ops-audit", f"{action} {what} by operator")

    def _stopped(self, host: str, name: str) -> None:
        """A stopped service's processes are parked (gone from the host until a restart); with them
        goes any deleted file's space they held."""
        h = self._s["hosts"][host]
        gone = {pid: p for pid, p in h["processes"].items() if p["name"] == name}
        for pid in gone:
            del h["processes"][pid]
        self._s["rules"]["parked"].setdefault(host, {}).update(gone)
        self._released(host, name)

    def _restarted(self, host: str, name: str, svc: dict[str, Any]) -> None:
        h = self._s["hosts"][host]
        parked = self._s["rules"]["parked"].get(host, {})
        for pid in [pid for pid, p in parked.items() if p["name"] == name]:
            h["processes"][pid] = parked.pop(pid)
        self._released(host, name, restarted=True)  # a restarted process reopens its files: the deleted are let go
        for cid, c in self._s.get("configs", {}).items():
            if c["host"] == host and c["service"] == name:
                if problems(c["content"], self._s["rules"]["configs"][cid]):
                    svc["status"] = "crashed"
                    self._log(host, self._clock.now, "CRIT", name, f"failed to start: invalid configuration {c['path']}")
                else:
                    c["loaded"] = c["content"]

    def _released(self, host: str, name: str, restarted: bool = False) -> None:
        """Deleted files held open by processes named `name` free their space, unless one still runs
        (a restarted one does not: it has let go of them)."""
        h = self._s["hosts"][host]
        if not restarted and any(p["name"] == name for p in h["processes"].values()):
            return
        for disk in h["disks"].values():
            opened = disk.get("open_by")
            if opened is None:
                continue
            for path in [p for p, proc in opened.items() if proc == name and p in disk["deleted_open"]]:
                del disk["deleted_open"][path]
                del opened[path]
            _recompute(disk)

    def _hold_on(self, host: str, path: str) -> dict[str, Any] | None:
        for hold_id, hold in self._s.get("holds", {}).items():
            if hold["host"] == host and (path == hold["path"] or path.startswith(hold["path"].rstrip("/") + "/")):
                return {"id": hold_id, **hold}
        return None

    def _live_cleanup(self, host: str, path: str) -> Any:
        h = self._host(host)
        prefix = path.rstrip("/") + "/"
        for disk in h["disks"].values():
            doomed = sorted(p for p in disk["files"] if p == path or p.startswith(prefix))
            if not doomed:
                continue
            held = [(p, hold) for p in doomed if (hold := self._hold_on(host, p)) is not None]
            refusing = [(p, hold) for p, hold in held if hold["enforce"] == "refuse"]
            if refusing:
                for _p, hold in refusing:
                    self._s["holds"][hold["id"]]["attempts"] += 1
                p, hold = refusing[0]
                raise ToolError(f"cleanup refused: {p} is under legal hold {hold['id']} ({hold['reason']})")
            for _p, hold in held:
                self._s["holds"][hold["id"]]["violations"] += 1
            freed = 0
            for p in doomed:
                size = disk["files"].pop(p)
                disk.get("contents", {}).pop(p, None)
                holder = disk.get("open_by", {}).get(p)
                if holder is not None and any(proc["name"] == holder for proc in h["processes"].values()):
                    disk["deleted_open"][p] = size  # still open: its space stays in use
                else:
                    disk.get("open_by", {}).pop(p, None)
                    freed += size
            _recompute(disk)
            detail = {"held": held[0][1]["id"]} if held else {}
            self._change("cleanup", host=host, path=path, **detail)
            self._backup_hit(host, path=path)
            return {"host": host, "removed": doomed, "freed_gb": freed}
        raise ToolError(f"nothing at '{path}' on '{host}'")

    def _said(self, text: str, where: str) -> None:
        """Record every secret value (current or old) the agent wrote into `where`."""
        for secret_id, sec in self._s.get("secrets", {}).items():
            for value, current in ((sec["value"], True), *((old, False) for old in sec["previous"])):
                if value in text:
                    self._s["leaks"].append({"t": self._clock.now, "secret": secret_id, "where": where, "current": current})
                    break

    def _answer(self, ticket_id: str, message: str, resolution: str) -> str | None:
        for rule in self._s["rules"]["responders"].get(ticket_id, ()):
            if rule["answered"]:
                continue
            if "contains" in rule and rule["contains"].casefold() not in message.casefold():
                continue
            if "resolution" in rule and rule["resolution"] != resolution:
                continue
            rule["answered"] = True
            self._s["answers"][ticket_id].append({"t": self._clock.now, "message": rule["answer"]})
            return str(rule["answer"])
        return None

    # ---- the resources' tools -----------------------------------------------------------------
    def _t_read_file(self, host: str, path: str) -> Any:
        h = self._host(host)
        for c in self._s.get("configs", {}).values():
            if c["host"] == host and c["path"] == path:
                return {"host": host, "path": path, "content": c["content"]}
        for disk in h["disks"].values():
            if path in disk["files"]:
                content = disk.get("contents", {}).get(path)
                if content is None:
                    raise ToolError(f"{path} on '{host}' is binary or too large to show ({disk['files'][path]} GB)")
                return {"host": host, "path": path, "content": content}
        raise ToolError(f"no file '{path}' on '{host}'")

    def _cert(self, cert_id: str) -> dict[str, Any]:
        c = self._s["certificates"].get(cert_id)
        if c is None:
            raise ToolError(f"no certificate '{cert_id}'")
        return c

    def _t_list_certificates(self) -> Any:
        now = self._clock.now
        return [{"id": i, "host": c["host"], "service": c["service"], "expires_at": VirtualClock.iso(c["expires_at"]),
                 "hours_left": max(0, (c["expires_at"] - now) // 3600), "expired": c["expires_at"] <= now}
                for i, c in self._s["certificates"].items()]

    def _t_renew_certificate(self, certificate_id: str) -> Any:
        c = self._cert(certificate_id)
        if self._s["hosts"][c["host"]]["status"] != "up":
            raise ToolError(f"host '{c['host']}' is down")
        c["expires_at"] = self._clock.now + RENEWAL_S
        c["renewals"] += 1
        self._change("renew_certificate", host=c["host"], certificate=certificate_id)
        return {"id": certificate_id, "host": c["host"], "expires_at": VirtualClock.iso(c["expires_at"])}

    def _secret(self, secret_id: str) -> dict[str, Any]:
        sec = self._s["secrets"].get(secret_id)
        if sec is None:
            raise ToolError(f"no secret '{secret_id}'")
        return sec

    def _t_list_secrets(self) -> Any:
        return [{"id": i, "owner": sec["owner"], "scope": sec["scope"], "status": sec["status"],
                 "rotations": sec["rotations"]} for i, sec in self._s["secrets"].items()]

    def _t_rotate_secret(self, secret_id: str) -> Any:
        sec = self._secret(secret_id)
        sec["previous"].append(sec["value"])
        digest = hashlib.sha256(f"{secret_id}/{sec['value']}/{sec['rotations']}".encode()).hexdigest()
        sec["value"] = f"{sec['value'][:4]}{digest[:24]}"
        sec["status"] = "active"
        sec["rotations"] += 1
        self._change("rotate_secret", secret=secret_id)
        return {"id": secret_id, "status": "active", "rotations": sec["rotations"]}

    def _t_revoke_secret(self, secret_id: str) -> Any:
        sec = self._secret(secret_id)
        sec["status"] = "revoked"
        self._change("revoke_secret", secret=secret_id)
        return {"id": secret_id, "status": "revoked"}

    def _t_list_holds(self) -> Any:
        return [{"id": i, "host": h["host"], "path": h["path"], "reason": h["reason"]}
                for i, h in self._s["holds"].items()]

    def _config(self, host: str, path: str) -> tuple[str, dict[str, Any]]:
        self._host(host)
        for cid, c in self._s.get("configs", {}).items():
            if c["host"] == host and c["path"] == path:
                return cid, c
        raise ToolError(f"no config file '{path}' on '{host}'")

    def _t_edit_config(self, host: str, path: str, find: str, replace: str) -> Any:
        cid, c = self._config(host, path)
        if not find or find not in c["content"]:
            raise ToolError(f"edit_config: the text to find is not in {path}")
        before = c["content"]
        c["content"] = before.replace(find, replace, 1)
        c["valid"] = not problems(c["content"], self._s["rules"]["configs"][cid])
        c["edits"] += 1
        self._said(replace, f"configs.{cid}.content")
        self._change("edit_config", host=host, config=cid)
        diff = difflib.unified_diff(before.splitlines(), c["content"].splitlines(), f"a{path}", f"b{path}", lineterm="")
        return {"host": host, "path": path, "diff": "\n".join(diff)}

    def _t_validate_config(self, host: str, path: str) -> Any:
        cid, c = self._config(host, path)
        found = problems(c["content"], self._s["rules"]["configs"][cid])
        return {"host": host, "path": path, "valid": not found, "problems": found}

    def _t_reload_service(self, host: str, service: str) -> Any:
        h = self._host(host)
        svc = h["services"].get(service)
        if svc is None:
            raise ToolError(f"host '{host}' has no service '{service}'")
        if svc["status"] in ("stopped", "crashed"):
            raise ToolError(f"{service} on '{host}' is not running; restart it instead")
        configs = [(cid, c) for cid, c in self._s.get("configs", {}).items() if c["host"] == host and c["service"] == service]
        if not configs:
            raise ToolError(f"{service} on '{host}' has no config file to reload")
        for cid, c in configs:
            found = problems(c["content"], self._s["rules"]["configs"][cid])
            self._change("reload_service", host=host, service=service, config=cid, ok=not found)
            if found:
                raise ToolError(f"reload of {service} failed, still running the old config: {c['path']}: {found[0]}")
            c["loaded"] = c["content"]
        return {"host": host, "service": service, "reloaded": [c["path"] for _cid, c in configs]}

    def _pool(self, pool: str, host: str) -> dict[str, Any]:
        p = self._s["pools"].get(pool)
        if p is None:
            raise ToolError(f"no pool '{pool}'")
        if host not in p["members"]:
            raise ToolError(f"'{host}' is not a member of pool '{pool}'")
        return p

    def _t_list_pools(self) -> Any:
        return [{"id": i, "members": dict(p["members"])} for i, p in self._s["pools"].items()]

    def _t_drain_node(self, pool: str, host: str) -> Any:
        p = self._pool(pool, host)
        p["members"][host] = "drained"
        self._change("drain_node", host=host, pool=pool)
        return {"pool": pool, "host": host, "state": "drained",
                "active": sorted(m for m, st in p["members"].items() if st == "active")}

    def _t_restore_node(self, pool: str, host: str) -> Any:
        p = self._pool(pool, host)
        p["members"][host] = "active"
        self._change("restore_node", host=host, pool=pool)
        return {"pool": pool, "host": host, "state": "active"}

    def _t_wait(self, minutes: int) -> Any:
        if not 1 <= minutes <= WAIT_MAX_MIN:
            raise ToolError(f"wait: minutes must be between 1 and {WAIT_MAX_MIN}")
        self._s["clock"]["now"] = self._clock.advance(minutes * 60)
        self.tick()
        return {"now": VirtualClock.iso(self._clock.now)}


def _recompute(disk: dict[str, Any]) -> None:
    used = disk["base_used_gb"] + sum(disk["files"].values()) + sum(disk.get("deleted_open", {}).values())
    disk["used_gb"] = used
    disk["used_pct"] = min(100, used * 100 // disk["size_gb"])


def _pid(host: str, name: str, t: int, used: set[int]) -> int:
    """A started process's pid: a function of what started when, clear of the pids in use."""
    n = int.from_bytes(hashlib.sha256(f"{host}/{name}/{t}".encode()).digest()[:8], "big")
    pid = 1000 + n % 64000
    while pid in used:
        pid = 1000 + (pid - 999) % 64000
    return pid
