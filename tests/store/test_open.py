"""Where the store lives and how a database that will not open is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.errors import BadInput
from assay.store import default_url, mask_url, open_store


def test_default_url_prefers_assay_db(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_DB", "postgresql+psycopg://u@h/db")
    assert default_url() == "postgresql+psycopg://u@h/db"


def test_default_url_is_sqlite_in_the_user_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import platformdirs

    target = tmp_path / "data" / "assay"
    monkeypatch.delenv("ASSAY_DB", raising=False)
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda name: str(target))
    assert default_url() == f"sqlite:///{target}/assay.db"
    assert target.is_dir()


def test_open_store_uses_the_default_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ASSAY_DB", f"sqlite:///{tmp_path}/env.db")
    open_store().close()
    assert (tmp_path / "env.db").exists()


def test_mask_url_hides_the_password() -> None:
    assert mask_url("postgresql+psycopg://me:s3cret@db:5432/x") == (
        "postgresql+psycopg://me:***@db:5432/x"
    )
    assert "s3cret" not in mask_url("not a url://me:s3cret@host/x")


def test_unreachable_server_is_one_line_naming_the_url_without_its_password() -> None:
    url = "postgresql://assay:hunter2@127.0.0.1:1/assay"
    with pytest.raises(BadInput) as caught:
        open_store(url)
    text = str(caught.value)
    assert "hunter2" not in text
    assert "127.0.0.1:1/assay" in text and "***" in text
    assert "\n" not in text


@pytest.mark.parametrize(
    "url",
    ["nonsense://x", "::::", "sqlite:////no/such/dir/assay.db", "mysql+nodriver://u:pw@h/d"],
)
def test_bad_urls_are_bad_input(url: str) -> None:
    with pytest.raises(BadInput, match="cannot open database") as caught:
        open_store(url)
    assert "\n" not in str(caught.value)
    assert ":pw@" not in str(caught.value)


def test_a_file_that_is_not_sqlite_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are not the tables you are looking for\n" * 100)
    with pytest.raises(BadInput, match="cannot open database"):
        open_store(f"sqlite:///{path}")


def test_sqlite_connections_enforce_foreign_keys_and_use_wal(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/a.db")
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert (conn.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0) > 0
    finally:
        store.close()
