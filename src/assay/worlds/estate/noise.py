"""Routine log chatter, so evidence has to be found rather than read off."""

from __future__ import annotations

NOISE: dict[str, list[tuple[str, str, str]]] = {
    "*": [
        ("INFO", "systemd", "Started Session {n} of user deploy."),
        ("INFO", "cron", "(root) CMD (run-parts /etc/cron.hourly)"),
        ("INFO", "sshd", "Accepted publickey for deploy from 10.20.{a}.{b} port {port} ssh2"),
        ("DEBUG", "node-exporter", "scrape completed in {ms}ms"),
        ("INFO", "chronyd", "Selected source 10.20.0.{a}"),
        ("WARN", "kernel", "TCP: request_sock_TCP: Possible SYN flooding on port 9100. Sending cookies."),
        ("INFO", "logrotate", "rotating pattern: /var/log/*.log weekly (4 rotations)"),
    ],
    "web": [
        ("INFO", "nginx", "GET /healthz 200 {ms}ms"),
        ("INFO", "nginx", "GET /api/v2/orders 200 {ms}ms"),
        ("WARN", "nginx", "upstream response time {ms}ms exceeds 250ms for /api/v2/search"),
    ],
    "db": [
        ("INFO", "postgres", "checkpoint complete: wrote {n} buffers"),
        ("INFO", "postgres", "automatic vacuum of table \"orders\": index scans: 1"),
        ("WARN", "postgres", "temporary file: size {n}kB"),
    ],
    "replica": [
        ("INFO", "postgres", "restartpoint complete: wrote {n} buffers"),
        ("INFO", "postgres", "recovery restart point at 3/{n}"),
    ],
    "storage": [
        ("INFO", "backup-agent", "chunk {n} uploaded ({ms} ms)"),
        ("INFO", "smartd", "Device /dev/sdb, SMART Usage Attribute: 194 Temperature_Celsius changed"),
    ],
    "app": [
        ("INFO", "app", "processed batch {n} in {ms}ms"),
        ("WARN", "app", "retrying request to payments-gateway (attempt 2)"),
    ],
    "batch": [
        ("INFO", "etl", "stage load_orders: {n} rows"),
        ("INFO", "etl", "stage transform: partition {a} done"),
    ],
    "bastion": [
        ("INFO", "sshd", "Accepted publickey for oncall from 10.20.{a}.{b} port {port} ssh2"),
    ],
}


def templates_for(role: str) -> list[tuple[str, str, str]]:
    return NOISE["*"] + NOISE.get(role, [])
