//! The part `leases`: a turn's lease passes from one instance to another, then a task's.

use std::time::Duration;

use serde_json::{Value, json};

use super::fixtures::{minimal_task, turn};
use super::part::Part;
use crate::record::{EntryKind, JournalEntry, TaskStatus, TurnRecord, TurnStatus};
use crate::store::{Claim, Lease, LeaseKind, Store, StoreError};

/// The time to live of a lease that lasts as long as the part.
const LIVE: Duration = Duration::from_secs(300);

/// The time to live of a lease whose holder stopped renewing it: expired once written.
const GONE: Duration = Duration::ZERO;

/// Leases: a taking write gives a new, larger fencing token; a live lease cannot be taken over;
/// an expired one can, after which every write and journal record under the old token is
/// refused with [`StoreError::Fenced`] and changes nothing; renewal lists exactly the running
/// work an owner still holds; expired work is listed until someone takes it over.
pub async fn leases(store: &dyn Store) {
    let part = Part::new("leases");
    let session = part.id("session");
    let leased = LeasedTurn {
        store,
        part: &part,
        id: part.id("turn"),
        a: part.id("instance-a"),
        b: part.id("instance-b"),
        run: part.id("run"),
    };
    let mut record = turn(&leased.id, &session, TurnStatus::Active, &[]);
    let v1 = part.ok("inserting a turn", store.put_turn(&record, None).await);
    record.status = TurnStatus::Running;
    let (first, version) = leased.held(&record, v1).await;
    let (old, new, version) = leased.taken_over(&record, version, &first).await;
    leased
        .fenced(&mut record, version, [&first, &old, &new])
        .await;
    tasks_are_fenced(&leased, &session).await;
}

/// The turn of the part, the two instances that hold its lease one after the other, and the
/// durable run that records its journal under the lease.
struct LeasedTurn<'a> {
    store: &'a dyn Store,
    part: &'a Part,
    id: String,
    a: String,
    b: String,
    run: String,
}

impl LeasedTurn<'_> {
    /// Instance `a` claims the running turn (version `v1`): the lease it gets is renewed, is
    /// not expired and cannot be taken over, and its holder writes and records under it.
    /// Returns the lease and the turn's version.
    async fn held(&self, record: &TurnRecord, v1: u64) -> (Lease, u64) {
        let (store, part) = (self.store, self.part);
        let (id, a, b, run) = (&self.id, &self.a, &self.b, &self.run);
        let claimed = part.ok(
            "claiming a turn",
            store
                .write_turn(
                    record,
                    Some(v1),
                    Claim::Take {
                        owner: a,
                        ttl: LIVE,
                    },
                )
                .await,
        );
        let first = claimed
            .lease
            .clone()
            .unwrap_or_else(|| panic!("{part}: a taking write must return its lease"));
        assert_eq!(
            (
                first.kind,
                first.id.as_str(),
                first.owner.as_str(),
                claimed.version
            ),
            (LeaseKind::Turn, id.as_str(), a.as_str(), v1 + 1),
            "{part}: the lease names the record and its owner; the version grows as for any write"
        );
        assert!(first.token >= 1, "{part}: fencing tokens start at 1");
        let held = part.ok(
            "renewing",
            store.renew_leases(std::slice::from_ref(&first), LIVE).await,
        );
        assert_eq!(
            mine(held, id).as_ref(),
            Some(&first),
            "{part}: renewal returns the lease its owner holds"
        );
        assert!(
            !expired(
                part.ok("listing expired leases", store.expired_leases().await),
                id
            ),
            "{part}: a live lease is not expired"
        );
        part.refused(
            "taking over a live lease",
            store
                .write_turn(
                    record,
                    Some(claimed.version),
                    Claim::TakeOver {
                        owner: b,
                        ttl: LIVE,
                    },
                )
                .await,
        );
        let kept = part.ok(
            "a write by the holder",
            store
                .write_turn(record, Some(claimed.version), Claim::Keep(&first))
                .await,
        );
        assert_eq!(
            (kept.version, kept.lease),
            (claimed.version + 1, None),
            "{part}: a holder's write keeps the lease"
        );
        part.ok(
            "recording a journal entry under a live lease",
            store
                .record_journal(run, &entry(0, json!(1)), Some(&first))
                .await,
        );
        (first, kept.version)
    }

    /// `a` stops renewing: its lease expires, and `b` takes the turn (at `version`) over.
    /// Returns the expired lease, the new one and the turn's version.
    async fn taken_over(
        &self,
        record: &TurnRecord,
        version: u64,
        first: &Lease,
    ) -> (Lease, Lease, u64) {
        let (store, part) = (self.store, self.part);
        let (id, a, b) = (&self.id, &self.a, &self.b);
        let stale = part.ok(
            "re-claiming with no time to live",
            store
                .write_turn(
                    record,
                    Some(version),
                    Claim::Take {
                        owner: a,
                        ttl: GONE,
                    },
                )
                .await,
        );
        let old = stale
            .lease
            .clone()
            .expect("a taking write returns its lease");
        assert!(
            old.token > first.token,
            "{part}: every claim gives a larger token"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(
            expired(
                part.ok("listing expired leases", store.expired_leases().await),
                id
            ),
            "{part}: a lease past its time to live is listed as expired"
        );
        let taken = part.ok(
            "taking over an expired lease",
            store
                .write_turn(
                    record,
                    Some(stale.version),
                    Claim::TakeOver {
                        owner: b,
                        ttl: LIVE,
                    },
                )
                .await,
        );
        let new = taken.lease.clone().expect("a take-over returns its lease");
        assert!(
            new.token > old.token && new.owner == *b,
            "{part}: a take-over gives the new owner a larger token"
        );
        assert!(
            !expired(
                part.ok("listing expired leases", store.expired_leases().await),
                id
            ),
            "{part}: work taken over is live again"
        );
        (old, new, taken.version)
    }

    /// After the take-over, writes and journal records under the `first` and `old` leases are
    /// fenced and change nothing, renewal lists only the `new` lease, and its holder finishes
    /// the turn (at `version`).
    async fn fenced(&self, record: &mut TurnRecord, version: u64, [first, old, new]: [&Lease; 3]) {
        let (store, part) = (self.store, self.part);
        let (id, run) = (&self.id, &self.run);
        let before = part.ok("reading the turn", store.turn(id).await);
        match store
            .write_turn(record, Some(version), Claim::Keep(old))
            .await
        {
            Err(StoreError::Fenced {
                kind: LeaseKind::Turn,
                id: fenced,
                token,
            }) => {
                assert_eq!((fenced.as_str(), token), (id.as_str(), old.token), "{part}")
            }
            other => {
                panic!("{part}: a write under a lease taken over must be fenced, got {other:?}")
            }
        }
        assert_eq!(
            part.ok("reading the turn", store.turn(id).await),
            before,
            "{part}: a fenced write changes nothing"
        );
        match store
            .record_journal(run, &entry(1, json!(2)), Some(old))
            .await
        {
            Err(StoreError::Fenced { .. }) => {}
            other => {
                panic!("{part}: a journal record under a stale lease must be fenced, got {other:?}")
            }
        }
        assert_eq!(
            part.ok("reading the journal", store.journal(run).await)
                .len(),
            1,
            "{part}: a fenced journal record is not stored"
        );
        assert!(
            mine(
                part.ok(
                    "renewing",
                    store
                        .renew_leases(&[old.clone(), first.clone()], LIVE)
                        .await
                ),
                id
            )
            .is_none(),
            "{part}: the former holder no longer holds the lease"
        );
        assert_eq!(
            mine(
                part.ok(
                    "renewing",
                    store.renew_leases(std::slice::from_ref(new), LIVE).await
                ),
                id
            ),
            Some(new.clone()),
            "{part}: the new holder does"
        );
        part.ok(
            "recording under the new lease",
            store
                .record_journal(run, &entry(1, json!(3)), Some(new))
                .await,
        );
        record.status = TurnStatus::Completed;
        part.ok(
            "finishing under the new lease",
            store
                .write_turn(record, Some(version), Claim::Keep(new))
                .await,
        );
        assert!(
            mine(
                part.ok(
                    "renewing",
                    store.renew_leases(std::slice::from_ref(new), LIVE).await
                ),
                id
            )
            .is_none(),
            "{part}: a lease covers running work only"
        );
    }
}

/// Tasks are fenced the same way as turns.
async fn tasks_are_fenced(leased: &LeasedTurn<'_>, session: &str) {
    let (store, part) = (leased.store, leased.part);
    let (a, b) = (&leased.a, &leased.b);
    let task_id = part.id("task");
    let mut task = minimal_task(&task_id, session);
    task.status = TaskStatus::Running;
    let created = part.ok(
        "creating a claimed task",
        store
            .write_task(
                &task,
                None,
                Claim::Take {
                    owner: a,
                    ttl: GONE,
                },
            )
            .await,
    );
    let task_lease = created.lease.expect("a taking write returns its lease");
    assert_eq!(task_lease.kind, LeaseKind::Task, "{part}");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(
        part.ok("listing expired leases", store.expired_leases().await)
            .iter()
            .any(|(kind, found)| *kind == LeaseKind::Task && *found == task_id),
        "{part}: an expired task lease is listed"
    );
    let task_taken = part.ok(
        "taking over a task",
        store
            .write_task(
                &task,
                Some(created.version),
                Claim::TakeOver {
                    owner: b,
                    ttl: LIVE,
                },
            )
            .await,
    );
    match store
        .write_task(&task, Some(task_taken.version), Claim::Keep(&task_lease))
        .await
    {
        Err(StoreError::Fenced {
            kind: LeaseKind::Task,
            ..
        }) => {}
        other => panic!("{part}: a stale task write must be fenced, got {other:?}"),
    }
}

/// The lease of record `id` among `leases`.
fn mine(leases: Vec<Lease>, id: &str) -> Option<Lease> {
    leases.into_iter().find(|l| l.id == id)
}

/// Whether turn `id` is among the expired work `listed`.
fn expired(listed: Vec<(LeaseKind, String)>, id: &str) -> bool {
    listed
        .iter()
        .any(|(kind, found)| *kind == LeaseKind::Turn && found == id)
}

/// Journal entry `position` of the part's run.
fn entry(position: u32, value: Value) -> JournalEntry {
    JournalEntry {
        position,
        kind: EntryKind::Step,
        name: "charge".to_owned(),
        value,
    }
}
