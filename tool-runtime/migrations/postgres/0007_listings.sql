-- toolwright's PostgreSQL schema, version 7: the indexes the paged listings read newest first
-- from where the last page ended (`Store::list_sessions`, `list_turns`, `list_tasks`), so that
-- a page costs the same however many records the database holds: sessions by their last write,
-- turns in write order (all of them, those in the statuses without a partial index of their
-- own, those of a session), tasks in creation order. (Waiting and running turns have
-- `turns_waiting` and `turns_running`, open tasks `tasks_open`, a session's tasks
-- `tasks_by_session`.) What SQLite's schema version 9 adds, and `turns_by_update`, which
-- SQLite had from its first version.

CREATE INDEX sessions_by_update ON sessions (updated_ms, id);
CREATE INDEX turns_by_update ON turns (updated);
CREATE INDEX turns_by_status ON turns (status, updated) WHERE status NOT IN ('waiting', 'running');
CREATE INDEX turns_by_session_update ON turns (session_id, updated);
CREATE INDEX tasks_by_creation ON tasks (created);
