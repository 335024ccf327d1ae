-- toolwright's PostgreSQL schema, version 3 (SQLite's schema version 5): `once` grants per
-- requester, and what the last write of a turn or task indexed of its requests.
--
-- `grants` replaces `approvals`. A requester is the key `store::requester_key` gives the
-- principal a call ran for (`user:oidc:alice`, `anonymous`). A grant remembered before had no
-- requester: in a session whose turns were all taken on behalf of one requester, it was given
-- for that requester's calls and stays theirs; in any other session it goes to `unknown`,
-- which matches no call (each requester is asked again, once). The expression below is
-- `requester_key` in SQL; a `current` it cannot read counts as a requester of its own.

CREATE TABLE grants (
    session_id TEXT NOT NULL,
    requester  TEXT NOT NULL,
    key        TEXT NOT NULL,
    PRIMARY KEY (session_id, requester, key)
);

INSERT INTO grants (session_id, requester, key)
SELECT a.session_id, coalesce(sole.requester, 'unknown'), a.key
FROM approvals a
LEFT JOIN (
    SELECT acted.session_id, min(acted.requester) AS requester
    FROM (
        SELECT t.session_id,
            CASE
                WHEN t.json::json -> 'current' IS NULL
                    OR json_typeof(t.json::json -> 'current') = 'null' THEN 'anonymous'
                ELSE coalesce(
                    (t.json::json -> 'current' ->> 'principal_type') || ':'
                    || replace(replace(replace(t.json::json -> 'current' ->> 'authenticator',
                        '%', '%25'), ':', '%3A'), '@', '%40')
                    || coalesce('@' || replace(replace(replace(
                        t.json::json -> 'current' ->> 'issuer',
                        '%', '%25'), ':', '%3A'), '@', '%40'), '')
                    || ':'
                    || replace(replace(replace(t.json::json -> 'current' ->> 'principal_id',
                        '%', '%25'), ':', '%3A'), '@', '%40'),
                    'unknown')
            END AS requester
        FROM turns t
        WHERE t.session_id IN (SELECT session_id FROM approvals)
    ) acted
    GROUP BY acted.session_id
    HAVING count(DISTINCT acted.requester) = 1
) sole ON sole.session_id = a.session_id;

DROP TABLE approvals;

-- The number of request ids the record held at its last write and a digest of them: a write
-- indexes only the requests added since (`NULL`: index them all).
ALTER TABLE turns ADD COLUMN indexed TEXT;
ALTER TABLE tasks ADD COLUMN indexed TEXT;
