-- toolwright's PostgreSQL schema, version 5 (SQLite's schema version 7): the model loop's
-- conversation.
--
-- One row per message of a session, at its position from 0, with the turn that added it. Rows
-- are only appended (a taken position refuses the append), never rewritten: a round of the
-- loop writes the messages it adds, however long the session is.

CREATE TABLE conversation (
    session_id TEXT NOT NULL,
    position   BIGINT NOT NULL,
    turn_id    TEXT NOT NULL,
    json       TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
);
