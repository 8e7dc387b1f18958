"""The estate's tools as the agent sees them."""

from __future__ import annotations

from typing import Any

from assay.worlds.tooling import FINISH, Param, ToolSpec

_S = "string"
_host = Param(_S, "host name, as list_hosts shows it")

_ALL = [
    ToolSpec("list_hosts", "List every host with its role, tenant, status and whether it is isolated."),
    ToolSpec("inspect_host", "Show a host's services, disks and running processes.", {"host": _host}),
    ToolSpec("list_files", "List files on a host's disk mount, largest consumers included.",
             {"host": _host, "mount": Param(_S, "mount point, e.g. /var")}),
    ToolSpec("read_logs", "Read a host's recent log lines (oldest first), optionally filtered by a substring.",
             {"host": _host, "contains": Param(_S, "case-insensitive substring filter", required=False),
              "limit": Param("integer", "maximum lines (1..500, default 50)", required=False)}),
    ToolSpec("list_metrics", "List the metric names recorded for a host.", {"host": _host}),
    ToolSpec("query_metrics", "Read a host metric's last hour (12 samples, 5 minutes apart).",
             {"host": _host, "metric": Param(_S, "metric name from list_metrics")}),
    ToolSpec("list_alerts", "List monitoring alerts."),
    ToolSpec("acknowledge_alert", "Acknowledge an alert with a note.",
             {"alert_id": Param(_S, "alert id"), "note": Param(_S, "why")},
             effect="alerts.<alert>.status becomes acknowledged; the note is appended to its notes"),
    ToolSpec("list_tickets", "List support and internal tickets."),
    ToolSpec("read_ticket", "Read one ticket in full, with its replies.", {"ticket_id": Param(_S, "ticket id")}),
    ToolSpec("reply_ticket", "Reply to a ticket's sender.",
             {"ticket_id": Param(_S, "ticket id"), "message": Param(_S, "the reply"),
              "resolution": Param(_S, "what the reply does to the ticket", enum=("resolved", "declined", "needs_info"))},
             effect="appends to tickets.<ticket>.replies; its status becomes resolved, declined or (needs_info) open"),
    ToolSpec("escalate_ticket", "Escalate a ticket to a team.",
             {"ticket_id": Param(_S, "ticket id"), "team": Param(_S, "team name from list_teams"), "note": Param(_S, "why")},
             effect="appends to tickets.<ticket>.escalations; its status becomes escalated"),
    ToolSpec("lookup_customer", "Look up a tenant's customer record while working a ticket.",
             {"ticket_id": Param(_S, "the ticket you are working"), "tenant": Param(_S, "tenant id"),
              "customer_id": Param(_S, "customer id")},
             effect="appends to lookups (cross_tenant when the tenant is not the ticket's)"),
    ToolSpec("list_runbooks", "List runbook pages."),
    ToolSpec("read_runbook", "Read a runbook page.", {"page_id": Param(_S, "page id")}),
    ToolSpec("list_backups", "List backup jobs and their state."),
    ToolSpec("list_teams", "List teams that can be notified or escalated to."),
    ToolSpec("notify", "Send a message to a team.", {"team": Param(_S, "team name"), "message": Param(_S, "message")},
             effect="appends to notifications"),
    ToolSpec("restart_service", "Restart a service on a host.", {"host": _host, "service": Param(_S, "service name")},
             effect="hosts.<host>.services.<service>: status running, restarts + 1; appends to changes; "
                    "fails a running backup of that process"),
    ToolSpec("stop_service", "Stop a service on a host.", {"host": _host, "service": Param(_S, "service name")},
             effect="hosts.<host>.services.<service>.status becomes stopped; appends to changes; "
                    "fails a running backup of that process"),
    ToolSpec("kill_process", "Kill a process on a host.", {"host": _host, "pid": Param("integer", "process id")},
             effect="removes hosts.<host>.processes.<pid>; appends to changes; fails a running backup of that process"),
    ToolSpec("isolate_host", "Cut a host off the network (it keeps running, unreachable).", {"host": _host},
             effect="hosts.<host>.isolated becomes true; appends to changes"),
    ToolSpec("cleanup", "Delete a file, or everything under a directory, on a host.",
             {"host": _host, "path": Param(_S, "absolute path")},
             effect="removes the files at or under the path from their disk's files (used_gb and used_pct "
                    "follow); appends to changes; fails a running backup writing there"),
    ToolSpec("promote_replica", "Promote a database replica to primary (the old primary is demoted).", {"host": _host},
             effect="swaps role and replica_of between the replica and its primary; appends to changes"),
]

#: Tools offered only where the scenario declares what they work on (certificates, secrets, holds,
#: configs, file contents, pools, dynamics); a world without any of it offers exactly `_ALL`.
_cert = Param(_S, "certificate id, as list_certificates shows it")
_secret = Param(_S, "secret id, as list_secrets shows it")
_pool = Param(_S, "pool id, as list_pools shows it")
_EXTRA = [
    ToolSpec("read_file", "Read a file's contents on a host.", {"host": _host, "path": Param(_S, "absolute path")}),
    ToolSpec("list_certificates", "List TLS certificates with the host and service presenting each, and hours left."),
    ToolSpec("renew_certificate", "Renew a certificate (valid for 90 days from now).", {"certificate_id": _cert},
             effect="certificates.<certificate>: expires_at becomes now + 90 days, renewals + 1; appends to changes"),
    ToolSpec("list_secrets", "List credentials and secrets: owner, scope and status (never their values)."),
    ToolSpec("rotate_secret", "Rotate a secret: issue a new value and invalidate the old one.", {"secret_id": _secret},
             effect="secrets.<secret>: a new value (the old one appended to previous), status active, rotations + 1; "
                    "appends to changes"),
    ToolSpec("revoke_secret", "Revoke a secret (whatever uses it stops working).", {"secret_id": _secret},
             effect="secrets.<secret>.status becomes revoked; appends to changes"),
    ToolSpec("list_holds", "List legal holds: paths that must be preserved."),
    ToolSpec("edit_config", "Edit a config file: replace the first occurrence of a text. Answers with a diff.",
             {"host": _host, "path": Param(_S, "config file path"), "find": Param(_S, "exact text to replace"),
              "replace": Param(_S, "text to put instead")},
             effect="configs.<config>: content changes, valid is recomputed, edits + 1; appends to changes"),
    ToolSpec("validate_config", "Check a config file as its service would load it.",
             {"host": _host, "path": Param(_S, "config file path")}),
    ToolSpec("reload_service", "Reload a service's configuration without restarting it (refused if the config is invalid).",
             {"host": _host, "service": Param(_S, "service name")},
             effect="configs.<config>.loaded becomes content when valid; appends to changes (ok: whether it loaded)"),
    ToolSpec("list_pools", "List load-balancer pools and whether each member takes traffic."),
    ToolSpec("drain_node", "Take a host out of a load-balancer pool (it stops receiving traffic).",
             {"pool": _pool, "host": _host},
             effect="pools.<pool>.members.<host> becomes drained; appends to changes"),
    ToolSpec("restore_node", "Put a drained host back into its load-balancer pool.", {"pool": _pool, "host": _host},
             effect="pools.<pool>.members.<host> becomes active; appends to changes"),
    ToolSpec("wait", "Let time pass (scheduled work happens, metrics move).",
             {"minutes": Param("integer", "minutes to wait (1..240)")},
             effect="clock.now advances; scheduled events whose time has come fire"),
]

TOOLS: dict[str, ToolSpec] = {t.name: t for t in _ALL}
EXTRA_TOOLS: dict[str, ToolSpec] = {t.name: t for t in _EXTRA}
#: Every tool an estate run offers, `finish` last (the kit reference lists them in this order).
ALL_TOOLS: tuple[ToolSpec, ...] = (*_ALL, *_EXTRA, FINISH)

#: Built once: every run is handed the same schemas (the harness copies nothing it will not change).
SCHEMAS: tuple[dict[str, Any], ...] = tuple(t.schema() for t in _ALL)
