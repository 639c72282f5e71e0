"""Append-only, named schema migrations. Never edit one that has shipped; add a new one."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from .. import keys


def _run(conn: sqlite3.Connection, script: str) -> None:
    # executescript() would commit the surrounding transaction; run statement by statement instead.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def m0001_sessions_messages(conn: sqlite3.Connection) -> None:
    _run(
        conn,
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            profile TEXT NOT NULL,
            title TEXT,
            source TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX sessions_profile_updated ON sessions (profile, updated_at DESC);
        CREATE UNIQUE INDEX sessions_profile_title ON sessions (profile, title) WHERE title IS NOT NULL;
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id),
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            tool_calls TEXT,
            tool_call_id TEXT,
            name TEXT,
            run_id TEXT,
            created_at REAL NOT NULL
        );
        CREATE INDEX messages_session ON messages (session_id, id);
        """,
    )


def m0002_runs(conn: sqlite3.Connection) -> None:
    _run(
        conn,
        """
        CREATE TABLE runs (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            idempotency_key TEXT NOT NULL UNIQUE,
            fingerprint TEXT NOT NULL,
            sender TEXT NOT NULL,
            profile TEXT NOT NULL,
            session_id TEXT NOT NULL REFERENCES sessions (id),
            message TEXT NOT NULL,
            hops INTEGER NOT NULL DEFAULT 0,
            chain TEXT NOT NULL DEFAULT '[]',
            state TEXT NOT NULL,
            reply TEXT,
            error TEXT,
            error_code TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            owner TEXT,
            lease_until REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            expires_at REAL
        );
        CREATE INDEX runs_session_state ON runs (session_id, state, seq);
        CREATE INDEX runs_state ON runs (state, seq);
        """,
    )


def m0003_messaging(conn: sqlite3.Connection) -> None:
    """Agent-to-agent messaging: where a run came from, whether to wake its sender, refusals for the ledger."""
    _run(
        conn,
        """
        ALTER TABLE runs ADD COLUMN origin TEXT;
        ALTER TABLE runs ADD COLUMN sender_profile TEXT;
        ALTER TABLE runs ADD COLUMN sender_session TEXT;
        ALTER TABLE runs ADD COLUMN wait_seconds REAL;
        ALTER TABLE runs ADD COLUMN wake INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX runs_pair ON runs (sender_profile, profile, origin);
        CREATE INDEX runs_origin ON runs (origin);
        CREATE TABLE refusals (
            id INTEGER PRIMARY KEY,
            sender TEXT NOT NULL,
            target TEXT NOT NULL,
            code TEXT NOT NULL,
            reason TEXT NOT NULL,
            message TEXT NOT NULL,
            hops INTEGER NOT NULL DEFAULT 0,
            wait_seconds REAL,
            created_at REAL NOT NULL
        );
        CREATE INDEX refusals_created ON refusals (created_at);
        """,
    )


def m0004_outbound(conn: sqlite3.Connection) -> None:
    """Messages this gateway's agents sent to other gateways, for the ledger and to wake their senders."""
    _run(
        conn,
        """
        CREATE TABLE outbound (
            id INTEGER PRIMARY KEY,
            sender TEXT NOT NULL,
            sender_profile TEXT,
            sender_session TEXT,
            origin TEXT,
            target TEXT NOT NULL,
            peer TEXT NOT NULL,
            agent TEXT,
            message TEXT NOT NULL,
            hops INTEGER NOT NULL DEFAULT 0,
            wait_seconds REAL,
            state TEXT NOT NULL,
            reply TEXT,
            error TEXT,
            idempotency_key TEXT,
            remote_session_id TEXT,
            remote_run_id TEXT,
            wake INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX outbound_pending ON outbound (wake, state);
        CREATE INDEX outbound_pair ON outbound (sender_profile, target, origin)
        """,
    )


def m0005_lean_run_indexes(conn: sqlite3.Connection) -> None:
    """Index agent-sent runs only where only they are searched: a person's turn writes fewer index entries."""
    _run(
        conn,
        """
        DROP INDEX runs_pair;
        DROP INDEX runs_origin;
        CREATE INDEX runs_agent_pair ON runs (sender_profile, profile, origin) WHERE sender_profile IS NOT NULL
        """,
    )


def m0006_sliding_dedup_and_outbound_keys(conn: sqlite3.Connection) -> None:
    """Keyless HTTP sends are deduplicated over a sliding window (by fingerprint and time); messages sent to
    peers are found by their idempotency key (a retried send) and by the run id the peer gave."""
    _run(
        conn,
        """
        CREATE INDEX runs_dedup_fingerprint ON runs (fingerprint, created_at) WHERE idempotency_key GLOB 'dedup:*';
        CREATE INDEX outbound_key ON outbound (idempotency_key);
        CREATE INDEX outbound_remote_run ON outbound (remote_run_id)
        """,
    )


def m0007_remote_sessions(conn: sqlite3.Connection) -> None:
    """A session of an engine that keeps its sessions elsewhere (a Hermes gateway) records the id it has there."""
    _run(
        conn,
        """
        ALTER TABLE sessions ADD COLUMN remote_id TEXT;
        CREATE INDEX sessions_profile_remote ON sessions (profile, remote_id) WHERE remote_id IS NOT NULL
        """,
    )


def m0008_peer_keys_and_peer_senders(conn: sqlite3.Connection) -> None:
    """A key per peer (only its hash is kept); runs found by their peer sender (hop floor, inbound budget) and
    messages to a peer by peer and time (which of our sessions wait on which peer)."""
    _run(
        conn,
        """
        CREATE TABLE peer_keys (
            name TEXT PRIMARY KEY,
            key_hash TEXT NOT NULL UNIQUE,
            profiles TEXT NOT NULL,
            read INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            rotated_at REAL,
            last_used_at REAL
        );
        CREATE INDEX runs_peer_sender ON runs (sender, created_at) WHERE sender GLOB 'peer:*';
        CREATE INDEX outbound_peer_created ON outbound (peer, created_at)
        """,
    )


def m0009_a2a_tasks(conn: sqlite3.Connection) -> None:
    """A caller's A2A tasks in a profile, most recently updated first (ListTasks pages through them)."""
    _run(
        conn,
        """
        CREATE INDEX runs_a2a_tasks ON runs (profile, sender, updated_at DESC, seq DESC)
            WHERE idempotency_key GLOB 'a2a:*'
        """,
    )


def m0010_web_logouts(conn: sqlite3.Connection) -> None:
    """The web view's sessions logged out before their cookies expire (a restart must not let them back in)."""
    _run(conn, "CREATE TABLE web_logouts (sid TEXT PRIMARY KEY, until REAL NOT NULL)")


def m0011_a2a_contexts(conn: sqlite3.Connection) -> None:
    """A contextId an A2A client chose, bound per caller and profile to the session it started (another caller's
    same contextId is another session)."""
    _run(
        conn,
        """
        CREATE TABLE a2a_contexts (
            caller TEXT NOT NULL,
            profile TEXT NOT NULL,
            context_id TEXT NOT NULL,
            session_id TEXT NOT NULL UNIQUE REFERENCES sessions (id),
            created_at REAL NOT NULL,
            PRIMARY KEY (caller, profile, context_id)
        )
        """,
    )


def m0012_push_notifications(conn: sqlite3.Connection) -> None:
    """A2A push notification configs per task, and the outbox their notifications are delivered from: one row
    per notification, unique per config and event (each state change is told once), tried until delivered."""
    _run(
        conn,
        """
        CREATE TABLE push_configs (
            seq INTEGER PRIMARY KEY,
            task_id TEXT NOT NULL,
            config_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            profile TEXT NOT NULL,
            url TEXT NOT NULL,
            token TEXT NOT NULL DEFAULT '',
            auth_scheme TEXT NOT NULL DEFAULT '',
            auth_credentials TEXT NOT NULL DEFAULT '',
            version TEXT NOT NULL DEFAULT '1.0',
            notified TEXT NOT NULL DEFAULT '',
            done INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (task_id, config_id)
        );
        CREATE INDEX push_configs_watching ON push_configs (task_id) WHERE done = 0;
        CREATE INDEX push_configs_owner ON push_configs (owner) WHERE done = 0;
        CREATE TABLE push_outbox (
            seq INTEGER PRIMARY KEY,
            config_seq INTEGER NOT NULL REFERENCES push_configs (seq) ON DELETE CASCADE,
            event_key TEXT NOT NULL,
            notification_id TEXT NOT NULL,
            body BLOB NOT NULL,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_at REAL NOT NULL,
            last_error TEXT,
            created_at REAL NOT NULL,
            finished_at REAL,
            UNIQUE (config_seq, event_key)
        );
        CREATE INDEX push_outbox_queue ON push_outbox (config_seq, state, seq);
        CREATE INDEX push_outbox_due ON push_outbox (next_at) WHERE state = 'pending';
        CREATE INDEX push_outbox_finished ON push_outbox (finished_at) WHERE state != 'pending'
        """,
    )


def m0013_peer_senders_keys_and_exchanges(conn: sqlite3.Connection) -> None:
    """A peer's message without a sending profile is from `peer:NAME/default` (as every rule now sees it), and
    a peer's own idempotency keys are its own (filed under its sender): the runs and refusals recorded before
    are brought to both, so a peer's retry of an old message is still its replay and the person's keys keep
    their meaning. A rewritten key another run already holds is left as it was (that run stays findable).
    An exchange's hop floor is read by exchange: runs past hop 0 and messages to peers, by their `origin`."""
    for row in conn.execute(
        "SELECT seq, sender, session_id, message, idempotency_key FROM runs WHERE sender GLOB 'peer:*'"
        " AND idempotency_key NOT GLOB 'wake:*'"
    ).fetchall():
        old_sender, old_key = str(row[1]), str(row[4])
        sender = old_sender if "/" in old_sender else f"{old_sender}/default"
        key = old_key
        if old_key.startswith(f"a2a:{old_sender}>"):  # an A2A messageId, scoped to the sender already
            key = f"a2a:{sender}>" + old_key[len(f"a2a:{old_sender}>") :]
        elif not old_key.startswith(("dedup:", "send:", "wake:", "a2a:", "peer:")):  # the peer's own key
            key = f"{sender}>{old_key}"
        if key != old_key and conn.execute("SELECT 1 FROM runs WHERE idempotency_key = ?", (key,)).fetchone():
            key = old_key
        if (sender, key) == (old_sender, old_key):
            continue
        conn.execute(
            "UPDATE runs SET sender = ?, idempotency_key = ?, fingerprint = ? WHERE seq = ?",
            (sender, key, keys.fingerprint(sender, str(row[2]), str(row[3])), row[0]),
        )
    conn.execute(
        "UPDATE refusals SET sender = sender || '/default' WHERE sender GLOB 'peer:*' AND sender NOT GLOB '*/*'"
    )
    conn.execute("CREATE INDEX runs_exchange_hops ON runs (origin, hops) WHERE hops > 0")
    conn.execute("CREATE INDEX outbound_exchange_hops ON outbound (origin, hops)")


def m0015_run_files(conn: sqlite3.Connection) -> None:
    """The files a message came with (an A2A file part: its bytes, or only its URL), kept with its run."""
    _run(
        conn,
        """
        CREATE TABLE run_files (
            run_id TEXT NOT NULL REFERENCES runs (id),
            ordinal INTEGER NOT NULL,
            name TEXT,
            media_type TEXT,
            url TEXT,
            content BLOB,
            size INTEGER NOT NULL,
            PRIMARY KEY (run_id, ordinal)
        )
        """,
    )


def m0016_shared_store(conn: sqlite3.Connection) -> None:
    """What the PostgreSQL store has too: a claim's fencing token (one more at each claim: a turn's writes are
    refused once the run was claimed again), at most one running run per session said by the schema, the
    store's own facts (`store_meta`: the gateway id the gateways on one store share), and the profiles'
    memories and the senders' rates (kept here by gateways that share a store), the idle notices agents
    asked for (`notify_when_idle`), what each run's model calls used and cost (the budgets), and where a message
    landed (started, steered into the running turn, or queued) and the turn a steered one joined; and the rooms
    (their members, each member's room session and what it has seen, the rounds a person's messages start, and
    the transcript)."""
    _run(
        conn,
        """
        ALTER TABLE runs ADD COLUMN fencing INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN tokens_in INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN tokens_out INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN landed TEXT;
        ALTER TABLE peer_keys ADD COLUMN metrics INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN steered_into TEXT;
        CREATE INDEX runs_profile_created ON runs (profile, created_at);
        CREATE INDEX runs_steered_into ON runs (steered_into) WHERE steered_into IS NOT NULL;
        CREATE UNIQUE INDEX runs_one_running ON runs (session_id) WHERE state = 'running';
        CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE memories (
            profile TEXT NOT NULL,
            target TEXT NOT NULL,
            content TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (profile, target)
        );
        CREATE TABLE sender_rates (
            sender TEXT NOT NULL,
            minute INTEGER NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (sender, minute)
        );
        CREATE TABLE idle_watches (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id),
            target TEXT NOT NULL,
            sender TEXT NOT NULL,
            sender_session TEXT NOT NULL,
            hops INTEGER NOT NULL DEFAULT 0,
            origin TEXT,
            created_at REAL NOT NULL,
            noticed_at REAL
        );
        CREATE INDEX idle_watches_pending ON idle_watches (created_at) WHERE noticed_at IS NULL;
        CREATE TABLE rooms (
            name TEXT PRIMARY KEY,
            members TEXT NOT NULL DEFAULT '[]',
            owner TEXT,
            lease_until REAL,
            created_at REAL NOT NULL
        );
        CREATE TABLE room_members (
            room TEXT NOT NULL REFERENCES rooms (name),
            member TEXT NOT NULL,
            session_id TEXT,
            seen INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (room, member)
        );
        CREATE TABLE room_rounds (
            id TEXT PRIMARY KEY,
            room TEXT NOT NULL REFERENCES rooms (name),
            line INTEGER NOT NULL,
            waiting TEXT NOT NULL DEFAULT '[]',
            answers INTEGER NOT NULL DEFAULT 0,
            pending INTEGER,
            depth INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL,
            created_at REAL NOT NULL,
            finished_at REAL
        );
        CREATE INDEX room_rounds_open ON room_rounds (room, created_at) WHERE state = 'open';
        CREATE TABLE room_lines (
            seq INTEGER PRIMARY KEY,
            room TEXT NOT NULL REFERENCES rooms (name),
            round TEXT NOT NULL,
            speaker TEXT NOT NULL,
            text TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL,
            run_id TEXT,
            error TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX room_lines_room ON room_lines (room, seq)
        """,
    )


def m0017_traces(conn: sqlite3.Connection) -> None:
    """The trace each run continues (W3C `traceparent`/`tracestate` of what caused it), its own span's context
    once it ended (its wake-up continues from there), when a held run was let go; and the trace context of each
    message sent to a peer (the wake-up its late reply brings continues it). And the ledger's newest-first pages
    read on an index, however many runs the store holds, and when a run's text was removed (`store.keep_days`);
    an exchange's runs found on its origin whatever their hop (the index had only hops past 0, and the exchange
    view read every run): every run but the one that began the exchange (found by its id) is in it."""
    _run(
        conn,
        """
        ALTER TABLE runs ADD COLUMN traceparent TEXT;
        ALTER TABLE runs ADD COLUMN tracestate TEXT;
        ALTER TABLE runs ADD COLUMN trace_span TEXT;
        ALTER TABLE runs ADD COLUMN released_at REAL;
        ALTER TABLE outbound ADD COLUMN traceparent TEXT;
        ALTER TABLE outbound ADD COLUMN tracestate TEXT;
        ALTER TABLE runs ADD COLUMN pruned_at REAL;
        CREATE INDEX runs_created ON runs (created_at);
        DROP INDEX runs_exchange_hops;
        CREATE INDEX runs_exchange_hops ON runs (origin, hops) WHERE hops > 0 OR id <> origin;
        CREATE INDEX outbound_created ON outbound (created_at)
        """,
    )


def m0018_push_outbox_references(conn: sqlite3.Connection) -> None:
    """The push outbox keeps a reference, not a body: what its run was when the notification was owed (its state
    and updated_at, `told_state` and `told_at`), the body built from the run at delivery (core/push_bodies.py).
    A notification still pending keeps the body it was queued with (`body`, sent as it is: the same bytes, the
    same signature); a settled one's is dropped (never read again). The table is made again: SQLite cannot
    drop a NOT NULL."""
    _run(
        conn,
        """
        CREATE TABLE push_outbox_0018 (
            seq INTEGER PRIMARY KEY,
            config_seq INTEGER NOT NULL REFERENCES push_configs (seq) ON DELETE CASCADE,
            event_key TEXT NOT NULL,
            notification_id TEXT NOT NULL,
            body BLOB,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_at REAL NOT NULL,
            last_error TEXT,
            created_at REAL NOT NULL,
            finished_at REAL,
            told_state TEXT NOT NULL DEFAULT '',
            told_at REAL,
            UNIQUE (config_seq, event_key)
        );
        INSERT INTO push_outbox_0018 (seq, config_seq, event_key, notification_id, body, state, attempts, next_at,
            last_error, created_at, finished_at)
            SELECT seq, config_seq, event_key, notification_id, CASE WHEN state = 'pending' THEN body END, state,
            attempts, next_at, last_error, created_at, finished_at FROM push_outbox;
        DROP TABLE push_outbox;
        ALTER TABLE push_outbox_0018 RENAME TO push_outbox;
        CREATE INDEX push_outbox_queue ON push_outbox (config_seq, state, seq);
        CREATE INDEX push_outbox_due ON push_outbox (next_at) WHERE state = 'pending';
        CREATE INDEX push_outbox_finished ON push_outbox (finished_at) WHERE state != 'pending'
        """,
    )


def m0019_agent_keys(conn: sqlite3.Connection) -> None:
    """A key may act as one profile's sessions (`acts_as`: an agent key, such as `hermes connect` makes for a Hermes
    home, whose folder is kept in `hermes_home` for `doctor`); NULL for a peer's key."""
    _run(
        conn,
        """
        ALTER TABLE peer_keys ADD COLUMN acts_as TEXT;
        ALTER TABLE peer_keys ADD COLUMN hermes_home TEXT
        """,
    )


def m0020_chat_handoffs(conn: sqlite3.Connection) -> None:
    """Turns handed to the Backchannel plugin inside a Hermes gateway, one per run (`store.handoffs`), and who
    takes each profile's handoffs and when it last asked."""
    _run(
        conn,
        """
        CREATE TABLE chat_handoffs (
            run_id TEXT PRIMARY KEY,
            profile TEXT NOT NULL,
            remote_session TEXT NOT NULL,
            message TEXT NOT NULL,
            state TEXT NOT NULL,
            taker TEXT,
            reply TEXT,
            error TEXT,
            detail TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX chat_handoffs_offered ON chat_handoffs (profile, state, created_at);
        CREATE TABLE chat_takers (
            profile TEXT PRIMARY KEY,
            taker TEXT NOT NULL,
            seen_at REAL NOT NULL
        )
        """,
    )


def m0022_questions(conn: sqlite3.Connection) -> None:
    """The questions turns ask their person (`store.questions`, issue 42), and where a run their answer put back in
    the queue goes in it (`runs.resumed_after`: after every run recorded before the answer)."""
    _run(
        conn,
        """
        CREATE TABLE questions (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            profile TEXT NOT NULL,
            session_id TEXT NOT NULL,
            asker TEXT NOT NULL,
            origin TEXT,
            question TEXT NOT NULL,
            choices TEXT,
            default_answer TEXT,
            expires_at REAL,
            state TEXT NOT NULL,
            answer TEXT,
            answered_by TEXT,
            answered_at REAL,
            created_at REAL NOT NULL
        );
        CREATE INDEX questions_of_run ON questions (run_id, created_at);
        CREATE INDEX questions_by_state ON questions (state, expires_at);
        ALTER TABLE runs ADD COLUMN resumed_after INTEGER
        """,
    )


def m0023_session_owner(conn: sqlite3.Connection) -> None:
    """A session's owning gateway and its epoch (`store.runs`: one more each time another gateway takes it), and the
    epoch a run was claimed under. SQLite has one gateway: the columns exist, and every claim may take its session."""
    _run(
        conn,
        """
        ALTER TABLE sessions ADD COLUMN owner TEXT;
        ALTER TABLE sessions ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX sessions_owner ON sessions (owner) WHERE owner IS NOT NULL
        """,
    )


def m0024_relayed_questions(conn: sqlite3.Connection) -> None:
    """A peer's question relayed to our sender (`store.questions.relay`): the outbound message it came back on."""
    _run(conn, "ALTER TABLE questions ADD COLUMN outbound_id INTEGER")


def m0025_consumed(conn: sqlite3.Connection) -> None:
    """A run's consumed receipt (`outcome.Consumed` as JSON): the model call that first held its message."""
    _run(conn, "ALTER TABLE runs ADD COLUMN consumed TEXT")


def m0026_deadlines(conn: sqlite3.Connection) -> None:
    """A run's deadline (`backchannel.deadlines`: when its sender stops waiting), and the queued runs that have one,
    by it, for the sweep that ends those past it unstarted."""
    _run(
        conn,
        """
        ALTER TABLE runs ADD COLUMN deadline REAL;
        CREATE INDEX runs_queued_deadline ON runs (deadline) WHERE state = 'queued' AND deadline IS NOT NULL
        """,
    )


def m0027_in_turn_questions(conn: sqlite3.Connection) -> None:
    """What closing a question does (`store.questions`): `next_turn` (ask_person: its run is queued again) or `in_turn`
    (a far side's turn waits for the answer, as a Hermes approval does: the waiting turn takes it)."""
    _run(conn, "ALTER TABLE questions ADD COLUMN kind TEXT NOT NULL DEFAULT 'next_turn'")


MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("0001_sessions_messages", m0001_sessions_messages),
    ("0002_runs", m0002_runs),
    ("0003_messaging", m0003_messaging),
    ("0004_outbound", m0004_outbound),
    ("0005_lean_run_indexes", m0005_lean_run_indexes),
    ("0006_sliding_dedup_and_outbound_keys", m0006_sliding_dedup_and_outbound_keys),
    ("0007_remote_sessions", m0007_remote_sessions),
    ("0008_peer_keys_and_peer_senders", m0008_peer_keys_and_peer_senders),
    ("0009_a2a_tasks", m0009_a2a_tasks),
    ("0010_web_logouts", m0010_web_logouts),
    ("0011_a2a_contexts", m0011_a2a_contexts),
    ("0012_push_notifications", m0012_push_notifications),
    ("0013_peer_senders_keys_and_exchanges", m0013_peer_senders_keys_and_exchanges),
    ("0015_run_files", m0015_run_files),
    ("0016_shared_store", m0016_shared_store),
    ("0017_traces", m0017_traces),
    ("0018_push_outbox_references", m0018_push_outbox_references),
    ("0019_agent_keys", m0019_agent_keys),
    ("0020_chat_handoffs", m0020_chat_handoffs),
    ("0022_questions", m0022_questions),
    ("0023_session_owner", m0023_session_owner),
    ("0024_relayed_questions", m0024_relayed_questions),
    ("0025_consumed", m0025_consumed),
    ("0026_deadlines", m0026_deadlines),
    ("0027_in_turn_questions", m0027_in_turn_questions),
]
