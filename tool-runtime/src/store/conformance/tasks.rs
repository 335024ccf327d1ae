//! The part `tasks`.

use toolwright_core::{Caller, PrincipalType};

use super::fixtures::{awkward_json, principal, turn};
use super::part::Part;
use crate::record::{Approver, RequestKind, TaskCall, TaskRecord, TaskStatus, TurnStatus};
use crate::store::Store;

/// Workflow tasks: versioned writes, the request index, listing by session (oldest first) and
/// of open tasks (neither finished nor cancelled), and a full round trip.
pub async fn tasks(store: &dyn Store) {
    let part = Part::new("tasks");
    let session = part.id("session");
    let (a, b) = (part.id("task-a"), part.id("task-b"));
    let request = part.id("question");
    let mut task_a = full_task(&a, &session, &part.id("turn"));
    assert!(
        part.ok("reading a missing task", store.task(&a).await)
            .is_none(),
        "{part}: a task never written is absent"
    );
    let v1 = part.ok("inserting a task", store.put_task(&task_a, None).await);
    part.refused(
        "inserting a task twice",
        store.put_task(&task_a, None).await,
    );
    let (read, version) = part
        .ok("reading a task", store.task(&a).await)
        .expect("just written");
    assert_eq!((&read, version), (&task_a, v1), "{part}: round trip");

    // Parked on a question: the request resolves to the task, not to a turn.
    task_a.status = TaskStatus::Waiting;
    let mut question = turn(&part.id("t"), &session, TurnStatus::Waiting, &[&request])
        .pending
        .expect("a pending step")
        .requests
        .remove(0);
    question.kind = RequestKind::Question;
    question.task_id = Some(a.clone());
    question.journal_position = Some(3);
    task_a.requests.push(question);
    let v2 = part.ok(
        "writing a task with a question",
        store.put_task(&task_a, Some(v1)).await,
    );
    part.refused(
        "writing a task with a stale version",
        store.put_task(&task_a, Some(v1)).await,
    );
    assert_eq!(
        part.ok(
            "looking up a task request",
            store.task_of_request(&request).await
        ),
        Some(a.clone()),
        "{part}: the question belongs to the task"
    );
    assert_eq!(
        part.ok(
            "looking up a task request as a turn's",
            store.turn_of_request(&request).await
        ),
        None,
        "{part}: a task's question is not a turn's"
    );

    let mut task_b = task_a.clone();
    task_b.id = b.clone();
    task_b.requests.clear();
    task_b.status = TaskStatus::Sleeping { until_ms: 42 };
    part.ok(
        "inserting a second task",
        store.put_task(&task_b, None).await,
    );
    assert_eq!(
        part.ok(
            "listing a session's tasks",
            store.session_tasks(&session).await
        ),
        [a.clone(), b.clone()],
        "{part}: a session's tasks, oldest first"
    );
    let open = part.ok("listing open tasks", store.open_tasks().await);
    assert!(
        open.contains(&a) && open.contains(&b),
        "{part}: waiting and sleeping tasks are open"
    );

    task_a.status = TaskStatus::Finished;
    task_a.calls[0].delivered = true;
    part.ok("finishing a task", store.put_task(&task_a, Some(v2)).await);
    let open = part.ok("listing open tasks", store.open_tasks().await);
    assert!(
        !open.contains(&a) && open.contains(&b),
        "{part}: a finished task is not open"
    );
    let (read, _) = part
        .ok("reading a finished task", store.task(&a).await)
        .expect("written");
    assert_eq!(read, task_a, "{part}: round trip of a finished task");
}

/// A running `serve` task of turn `turn_id` with every field set: the principal it acts for (who
/// also approved it), a call with awkward input, and an answer recorded at position 2.
fn full_task(id: &str, session: &str, turn_id: &str) -> TaskRecord {
    let user = principal(PrincipalType::User, "u_42");
    TaskRecord {
        id: id.to_owned(),
        tool: "render".to_owned(),
        entry: toolwright_core::Entry::Serve,
        session_id: session.to_owned(),
        turn_id: turn_id.to_owned(),
        caller: Caller::Model,
        current: Some(user.clone()),
        approved_by: Some(Approver {
            principal: Some(user),
        }),
        status: TaskStatus::Running,
        cancel_requested: false,
        calls: vec![TaskCall {
            call_id: "call-1".to_owned(),
            turn_id: turn_id.to_owned(),
            step: 7,
            input: awkward_json(),
            result: None,
            delivered: false,
            cancelled: true,
            step_input: Some(crate::record::StepInput::Conversation { end: u64::MAX }),
        }],
        requests: Vec::new(),
        answers: [(
            2,
            toolwright_core::AskAnswer::Answered {
                option_id: Some("go".to_owned()),
                text: Some(awkward_json().to_string()),
            },
        )]
        .into_iter()
        .collect(),
    }
}
