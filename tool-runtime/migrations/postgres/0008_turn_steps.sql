-- toolwright's PostgreSQL schema, version 8 (SQLite's schema version 10): the history of a
-- turn's closed steps (`Store::turn_steps`).
--
-- One row per step index of a turn, holding its `ClosedStep` as the turn's write last carried
-- it (`TurnRecord::last_step`): written in the transaction of that write, replaced when a step
-- is closed again with the same index, deleted with the turn. The turns the database holds
-- keep the one closed step their record has: it is copied in, as the record holds it, except
-- from a record holding the escape `\u0000` (a NUL character), which PostgreSQL's JSON
-- functions cannot read: such a turn's history starts with its next write (a changed copy
-- would be worse than none).

CREATE TABLE turn_steps (
    turn_id TEXT NOT NULL,
    step    BIGINT NOT NULL,
    json    TEXT NOT NULL,
    PRIMARY KEY (turn_id, step)
);

INSERT INTO turn_steps (turn_id, step, json)
SELECT id, (json::json -> 'last_step' ->> 'index')::bigint, (json::json -> 'last_step')::text
FROM turns
WHERE CASE WHEN strpos(json, E'\\u0000') = 0
           THEN json_typeof(json::json -> 'last_step') = 'object'
           ELSE false END;
