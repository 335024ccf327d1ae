-- toolwright's PostgreSQL schema, version 4 (SQLite's schema version 6): answers recorded
-- beside their turn until the next write of the whole turn takes them in.
--
-- Each row is one `StepPatch` (JSON): the answered request and the calls it gated, in their new
-- states; `seq` is the turn version the answer made. Reading a turn applies its patches in
-- `seq` order; writing the whole turn deletes them in the same transaction. Answering one
-- request of a big parked step thus writes one small row, not the step again.

CREATE TABLE turn_patches (
    turn_id TEXT NOT NULL,
    seq     BIGINT NOT NULL,
    json    TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
);
