"""The tests' throwaway PostgreSQL cluster (tests/postgres.py): it answers over its socket and, with its password,
over loopback TCP; it refuses a wrong password; it never runs as root; its databases are fresh.

Skipped when PostgreSQL is not installed (`make postgres`), failed instead under BACKCHANNEL_REQUIRE_POSTGRES=1.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from postgres import SUPERUSER, Cluster


def psql_tcp(cluster: Cluster, password: str, sql: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cluster.bin_dir / "psql"), "-X", "-A", "-t", "-w", "-h", "127.0.0.1", "-p", str(cluster.port),
         "-U", SUPERUSER, "-d", "postgres", "-c", sql],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PGPASSWORD": password}, check=False,
    )  # fmt: skip


def test_the_cluster_answers_over_its_socket(postgres_cluster: Cluster) -> None:
    assert postgres_cluster.psql("SELECT 6 * 7") == "42"
    assert postgres_cluster.psql("SHOW unix_socket_directories") == str(postgres_cluster.socket_dir)


def test_over_tcp_the_cluster_takes_its_password_and_refuses_another(postgres_cluster: Cluster) -> None:
    good = psql_tcp(postgres_cluster, postgres_cluster.password, "SELECT current_user")
    assert good.returncode == 0 and good.stdout.strip() == SUPERUSER, good.stderr
    bad = psql_tcp(postgres_cluster, postgres_cluster.password + "x", "SELECT 1")
    assert bad.returncode != 0 and "password authentication failed" in bad.stderr, bad.stderr


def test_the_server_does_not_run_as_root(postgres_cluster: Cluster) -> None:
    server = int((postgres_cluster.data / "postmaster.pid").read_text().split()[0])  # the postmaster's process id
    owner = Path(f"/proc/{server}").stat().st_uid
    assert owner != 0
    if postgres_cluster.os_user is not None:  # the tests run as root: the server runs as the user the module names
        import pwd

        assert owner == pwd.getpwnam(postgres_cluster.os_user).pw_uid


def test_each_database_is_new_and_empty(postgres_url: str, postgres_cluster: Cluster) -> None:
    name = postgres_url.rsplit("/", 1)[1]
    tables = postgres_cluster.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'", database=name)
    assert tables == "0"
    assert postgres_cluster.new_database().rsplit("/", 1)[1] != name


def test_a_missing_server_skips_with_its_reason_or_fails_when_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import postgres

    monkeypatch.setenv(postgres.BIN_VAR, str(tmp_path))
    monkeypatch.delenv(postgres.REQUIRE_VAR, raising=False)
    with pytest.raises(pytest.skip.Exception, match="make postgres"):
        postgres.require()
    monkeypatch.setenv(postgres.REQUIRE_VAR, "1")
    with pytest.raises(pytest.fail.Exception, match="make postgres"):
        postgres.require()
