-- toolwright's PostgreSQL schema, version 6 (SQLite's schema version 8): attachments, and the
-- indexes deleting a session walks (its turns, the questions of a task, and the journal by run
-- id in the "C" collation, where a turn's runs, `<turn>/<call>`, are one range of bytes
-- whatever the database's collation).
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
