-- toolwright's PostgreSQL schema, version 6 (SQLite's schema version 8): attachments, and what
-- deleting and retention walk: the indexes of a session's turns, of a task's questions and of
-- the journal by run id in the "C" collation (where a turn's runs, `<turn>/<call>`, are one
-- range of bytes whatever the database's collation), and when a session was last written and a
-- turn or task finished (Unix milliseconds by the server's clock; rows from before the migration
-- count from the migration).
--
-- The files tools return, stored once per session and named by id (`sha256:` and the digest of
-- the bytes) in results, events and conversations. A row holds the bytes (`data`) or, when the
-- runtime keeps them in its sandbox, their path there (`path`): exactly one of the two. Rows are
-- written once (a second store of the same id is a no-op) and deleted with their session's
-- attachments.

CREATE TABLE attachments (
    session_id TEXT NOT NULL,
    id         TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size       BIGINT NOT NULL,
    data       BYTEA,
    path       TEXT,
    PRIMARY KEY (session_id, id),
    CHECK ((data IS NULL) <> (path IS NULL))
);

CREATE INDEX turns_by_session ON turns (session_id);
CREATE INDEX task_requests_by_task ON task_requests (task_id);
CREATE INDEX journal_by_run_c ON journal (run_id COLLATE "C");

ALTER TABLE sessions ADD COLUMN updated_ms BIGINT;
ALTER TABLE turns ADD COLUMN finished_ms BIGINT;
ALTER TABLE tasks ADD COLUMN finished_ms BIGINT;
UPDATE sessions SET updated_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint;
UPDATE turns SET finished_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint
    WHERE status IN ('completed', 'cancelled');
UPDATE tasks SET finished_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint
    WHERE status IN ('finished', 'cancelled');
CREATE INDEX turns_finished ON turns (finished_ms) WHERE finished_ms IS NOT NULL;
