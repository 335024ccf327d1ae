-- toolwright's PostgreSQL schema, version 2: the pinned definitions of remote tools (SQLite's
-- schema version 4). One row per connection and tool; `json` is the pin record, `digest` the
-- definition's digest, compared by the approval of a changed definition.

CREATE TABLE pins (
    connection TEXT NOT NULL,
    tool       TEXT NOT NULL,
    digest     TEXT NOT NULL,
    json       TEXT NOT NULL,
    PRIMARY KEY (connection, tool)
);
