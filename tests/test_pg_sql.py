"""The PostgreSQL driver's pure parts: sqlite3's `?` placeholders numbered for PostgreSQL outside quoted text,
rowcounts read from asyncpg's status, and URLs and errors that never show a password. No server needed."""

from __future__ import annotations

import time

import pytest

from backchannel.errors import StoreError
from backchannel.store.pg import PgDatabase, dollar_params, rowcount
from backchannel.store.pg_errors import map_pg_errors, redact_url, url_secrets

pytestmark = pytest.mark.quick  # pure: no home on disk, no process, no gateway (make quick)


def test_placeholders_are_numbered_and_a_question_mark_in_quotes_or_comments_is_left_alone() -> None:
    assert dollar_params("SELECT * FROM runs WHERE id = ? AND state IN (?, ?)") == (
        "SELECT * FROM runs WHERE id = $1 AND state IN ($2, $3)"
    )
    assert dollar_params("SELECT 'why?', ?, 'it''s ?', ?") == "SELECT 'why?', $1, 'it''s ?', $2"
    assert dollar_params('SELECT "odd?" FROM t WHERE a = ?') == 'SELECT "odd?" FROM t WHERE a = $1'
    assert dollar_params("SELECT ? -- really?\n, ? /* and ? */") == "SELECT $1 -- really?\n, $2 /* and ? */"
    assert dollar_params("SELECT 1") == "SELECT 1"


def test_each_distinct_statement_is_rewritten_once() -> None:
    sql = f"SELECT ? AS once_{time.monotonic_ns()}"
    before = dollar_params.cache_info()
    assert dollar_params(sql) == dollar_params(sql) == dollar_params(sql)
    after = dollar_params.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)


def test_rowcount_reads_the_status_of_each_kind_of_statement() -> None:
    assert rowcount("INSERT 0 1") == 1
    assert rowcount("UPDATE 3") == 3
    assert rowcount("DELETE 0") == 0
    assert rowcount("SELECT 2") == 2
    assert rowcount("CREATE TABLE") == 0


def test_a_url_names_its_database_without_the_password() -> None:
    assert redact_url("postgresql://gw:s3cret@db.example:5432/bc") == "postgresql://gw@db.example:5432/bc"
    assert redact_url("postgresql://:s3cret@db/bc") == "postgresql://db/bc"
    assert redact_url("postgres://gw@db/bc?password=s3cret&sslmode=require") == "postgres://gw@db/bc?sslmode=require"
    assert redact_url("host=db password=s3cret user=gw") == "host=db password=*** user=gw"


def test_an_error_that_repeats_the_url_loses_the_password_on_the_way_out() -> None:
    url = "postgresql://gw:s3cr%40t@db.example/bc?sslpassword=k3y"
    db = PgDatabase(url)
    with pytest.raises(StoreError) as caught, map_pg_errors(db.name, url_secrets(url)):
        raise OSError(f"cannot connect to {url} (password s3cr@t, key k3y)")
    assert "s3cr" not in caught.value.message and "k3y" not in caught.value.message
    assert caught.value.message.startswith(repr("postgresql://gw@db.example/bc")), caught.value.message
