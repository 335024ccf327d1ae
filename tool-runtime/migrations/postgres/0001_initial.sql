-- toolwright's PostgreSQL schema, version 1: what SQLite's schema versions 1 to 3 hold.
--
-- A released migration is never edited (sqlx stores its checksum and refuses a database whose
-- applied script differs); a schema change adds the next numbered file.
--
-- Records are JSON in TEXT columns, not JSONB: JSONB rejects the escape `\u0000`, which a
-- record may hold, and the store never queries inside a record.

CREATE TABLE sessions (
    id      TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    json    TEXT NOT NULL
);

-- `updated` is a store-wide write sequence, not a clock: the clocks of two instances disagree,
-- the sequence orders every write. A refused write takes a number too, and leaves a gap.
CREATE SEQUENCE turns_updated;

-- `lease_expires` is Unix milliseconds by the database server's clock (never an instance's),
-- so instances with skewed clocks agree on which leases have expired; `0` means no lease.
-- `wake_at` is set only while a turn waits on a durable timer.
CREATE TABLE turns (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL,
    status        TEXT NOT NULL,
    version       BIGINT NOT NULL,
    json          TEXT NOT NULL,
    updated       BIGINT NOT NULL,
    wake_at       BIGINT NULL,
    lease_owner   TEXT NULL,
    lease_token   BIGINT NOT NULL DEFAULT 0,
    lease_expires BIGINT NOT NULL DEFAULT 0
);
-- Partial indexes keep listing waiting, running and due turns proportional to their number,
-- however many finished turns the table holds.
CREATE INDEX turns_waiting ON turns (updated, id) WHERE status = 'waiting';
CREATE INDEX turns_running ON turns (updated, id) WHERE status = 'running';
CREATE INDEX turns_by_owner ON turns (lease_owner) WHERE status = 'running';
CREATE INDEX turns_due ON turns (wake_at) WHERE wake_at IS NOT NULL;

-- Grows only: a request of a closed step still resolves to its turn.
CREATE TABLE requests (
    request_id TEXT PRIMARY KEY,
    turn_id    TEXT NOT NULL
);
CREATE INDEX requests_by_turn ON requests (turn_id);

CREATE TABLE journal (
    run_id   TEXT NOT NULL,
    position BIGINT NOT NULL,
    json     TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);

CREATE TABLE approvals (
    session_id TEXT NOT NULL,
    key        TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
);

-- `created` orders a session's tasks (and open tasks) by creation.
CREATE SEQUENCE tasks_created;

CREATE TABLE tasks (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL,
    status        TEXT NOT NULL,
    version       BIGINT NOT NULL,
    json          TEXT NOT NULL,
    created       BIGINT NOT NULL,
    wake_at       BIGINT NULL,
    lease_owner   TEXT NULL,
    lease_token   BIGINT NOT NULL DEFAULT 0,
    lease_expires BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX tasks_by_session ON tasks (session_id, created);
CREATE INDEX tasks_open ON tasks (created, id) WHERE status NOT IN ('finished', 'cancelled');
CREATE INDEX tasks_leased ON tasks (created, id) WHERE status IN ('running', 'cancelling');
CREATE INDEX tasks_by_owner ON tasks (lease_owner) WHERE status IN ('running', 'cancelling');
CREATE INDEX tasks_due ON tasks (wake_at) WHERE wake_at IS NOT NULL;

CREATE TABLE task_requests (
    request_id TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL
);
