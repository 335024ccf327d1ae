//! Peers on 2026-07-28 (input-required results, sealed request state) and clients of the MCP
//! tasks extension.

use super::*;

/// A client on the 2026-07-28 revision: no server-to-client requests; input goes through
/// input-required results and retried calls.
async fn connect_modern(server: McpServer, client: Client) -> RunningService<RoleClient, Client> {
    let (a, b) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = server.serve(a).await.unwrap();
        let _ = running.waiting().await;
    });
    rmcp::service::serve_client_with_lifecycle(
        client,
        b,
        rmcp::service::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn peers_on_2026_07_28_answer_through_input_required_results() {
    let alice = Principal::user("local", "alice");
    let accepting = Client {
        elicit: Some((ElicitationAction::Accept, None)),
        ..Client::default()
    };
    let asked = accepting.asked.clone();
    let client = connect_modern(
        McpServer::new(runtime()).principal(alice.clone()),
        accepting,
    )
    .await;
    let before = RESTARTS.load(Ordering::SeqCst);
    // rmcp's client answers the input request with its handler and calls again with
    // `inputResponses` and the sealed `requestState`.
    let result = client
        .call_tool(
            CallToolRequestParams::new("restart")
                .with_arguments(args(json!({ "service": "queue" }))),
        )
        .await
        .unwrap();
    assert_eq!(text(&result), "queue restarted");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0],
        "Restart queue?\n\nThe call to `restart`, with its input in full:\n{\n  \"service\": \"queue\"\n}"
    );
    assert!(RESTARTS.load(Ordering::SeqCst) > before);

    // One round by hand: the first call returns the question and nothing runs yet.
    let response = client
        .call_tool_once(
            CallToolRequestParams::new("restart")
                .with_arguments(args(json!({ "service": "mail" }))),
        )
        .await
        .unwrap();
    let rmcp::model::CallToolResponse::InputRequired(required) = response else {
        panic!("expected an input-required result, got {response:?}");
    };
    let state = required.request_state.clone().unwrap();
    let request =
        serde_json::to_value(&required.input_requests.as_ref().unwrap()["input"]).unwrap();
    assert_eq!(request["method"], "elicitation/create");
    let message = request["params"]["message"].as_str().unwrap();
    assert!(message.starts_with("Restart mail?\n\n"), "{message}");
    assert!(message.contains("\"service\": \"mail\""), "{message}");

    // A forged state is refused; a declined answer denies the call.
    let forged = client
        .call_tool_once(
            CallToolRequestParams::new("restart")
                .with_arguments(args(json!({ "service": "mail" })))
                .with_request_state("not-a-state")
                .with_input_responses([("input".to_owned(), json!({ "action": "accept" }))].into()),
        )
        .await
        .unwrap_err();
    assert!(forged.to_string().contains("requestState"), "{forged}");
    let declined = client
        .call_tool_once(
            CallToolRequestParams::new("restart")
                .with_arguments(args(json!({ "service": "mail" })))
                .with_request_state(state.clone())
                .with_input_responses(
                    [("input".to_owned(), json!({ "action": "decline" }))].into(),
                ),
        )
        .await
        .unwrap();
    let rmcp::model::CallToolResponse::Complete(declined) = declined else {
        panic!("expected a result, got {declined:?}");
    };
    assert_eq!(declined.is_error, Some(true));
    assert!(text(&declined).contains("declined"), "{}", text(&declined));

    // The state belongs to its principal: another server sharing the key, acting for bob,
    // refuses it.
    let key = [7u8; 32];
    let shared = McpServer::new(runtime())
        .principal(alice.clone())
        .request_state_key(key)
        .unwrap();
    // Clients that declare elicitation: a 2026-07-28 client without it is told it cannot be
    // asked instead (tool-mcp/tests/hardening.rs).
    let asking = || Client {
        elicit: Some((ElicitationAction::Accept, None)),
        ..Client::default()
    };
    let alices = connect_modern(shared.clone(), asking()).await;
    let response = alices
        .call_tool_once(
            CallToolRequestParams::new("restart").with_arguments(args(json!({ "service": "dns" }))),
        )
        .await
        .unwrap();
    let rmcp::model::CallToolResponse::InputRequired(required) = response else {
        panic!("expected an input-required result");
    };
    let bobs = connect_modern(
        McpServer::new(shared.runtime().clone())
            .principal(Principal::user("local", "bob"))
            .request_state_key(key)
            .unwrap(),
        asking(),
    )
    .await;
    let stolen = bobs
        .call_tool_once(
            CallToolRequestParams::new("restart")
                .with_arguments(args(json!({ "service": "dns" })))
                .with_request_state(required.request_state.unwrap())
                .with_input_responses([("input".to_owned(), json!({ "action": "accept" }))].into()),
        )
        .await
        .unwrap_err();
    assert!(stolen.to_string().contains("another client"), "{stolen}");
}

#[tokio::test]
async fn task_tools_become_mcp_tasks_for_clients_of_the_tasks_extension() {
    use rmcp::model::{CallToolResponse, GetTaskParams, TaskStatus, UpdateTaskParams};
    let client = connect(
        McpServer::new(runtime()).principal(Principal::user("local", "alice")),
        Client {
            tasks: true,
            ..Client::default()
        },
    )
    .await;
    let response = client
        .call_tool_once(
            CallToolRequestParams::new("migrate").with_arguments(args(json!({ "table": "users" }))),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(created) = response else {
        panic!("expected a CreateTaskResult, got {response:?}");
    };
    let id = created.task.task_id.clone();
    assert!(id.starts_with("migrate-"), "{id}");
    assert_eq!(created.task.status, TaskStatus::Working);

    // The task asks its question through tasks/get, and tasks/update answers it.
    let mut waiting = None;
    for _ in 0..200 {
        let state = client.get_task(GetTaskParams::new(&id)).await.unwrap();
        if state.task.task.status == TaskStatus::InputRequired {
            waiting = Some(state);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waiting = waiting.expect("the task asks");
    let rmcp::model::TaskPayload::InputRequired { input_requests } = &waiting.task.payload else {
        panic!("{waiting:?}");
    };
    let (key, request) = input_requests.iter().next().unwrap();
    let request = serde_json::to_value(request).unwrap();
    assert_eq!(request["params"]["message"], "users copied. Switch over?");
    client
        .update_task(UpdateTaskParams::new(
            &id,
            [(
                key.clone(),
                json!({ "action": "accept", "content": { "answer": "switch" } }),
            )]
            .into(),
        ))
        .await
        .unwrap();
    let mut done = None;
    for _ in 0..200 {
        let state = client.get_task(GetTaskParams::new(&id)).await.unwrap();
        if state.task.task.status == TaskStatus::Completed {
            done = Some(state);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let done = done.expect("the task completes");
    let rmcp::model::TaskPayload::Completed { result } = &done.task.payload else {
        panic!("{done:?}");
    };
    assert_eq!(result["content"][0]["text"], "users migrated");

    // tasks/cancel on another task: it ends cancelled.
    let CallToolResponse::Task(created) = client
        .call_tool_once(
            CallToolRequestParams::new("migrate")
                .with_arguments(args(json!({ "table": "orders" }))),
        )
        .await
        .unwrap()
    else {
        panic!("a task");
    };
    client
        .cancel_task(rmcp::model::CancelTaskParams::new(&created.task.task_id))
        .await
        .unwrap();
    let mut status = TaskStatus::Working;
    for _ in 0..300 {
        status = client
            .get_task(GetTaskParams::new(&created.task.task_id))
            .await
            .unwrap()
            .task
            .task
            .status;
        if status == TaskStatus::Cancelled {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, TaskStatus::Cancelled);

    // Without the extension the same tool answers with the receipt.
    let plain = connect(
        McpServer::new(runtime()).principal(Principal::user("local", "alice")),
        Client::default(),
    )
    .await;
    let receipt = plain
        .call_tool(
            CallToolRequestParams::new("migrate").with_arguments(args(json!({ "table": "logs" }))),
        )
        .await
        .unwrap();
    assert!(
        text(&receipt).starts_with("Started task migrate-"),
        "{}",
        text(&receipt)
    );
}
