//! Answers to input requests: who may give them, and what they say.

use serde_json::Value;
use toolwright_core::approval::requester_only;
use toolwright_core::{
    AskAnswer, AskRequest, ContentPart, ModelOutput, ResponseCall, ResponseDecision,
    ResponseVerdict, SessionInfo, Tool,
};

use super::HookRef;
use crate::call::InputResponse;
use crate::record::{Decision, EntryKind, InputRequest, JournalEntry, RequestKind};

/// The decision an answer records.
pub(crate) fn decision_of(decision: ResponseDecision) -> Decision {
    match decision {
        ResponseDecision::Approve => Decision::Approved,
        ResponseDecision::Cancel => Decision::Cancelled,
    }
}

/// What a workflow body's answer says in words: the chosen option's id or the text.
pub(crate) fn answer_text(answer: &AskAnswer) -> Option<String> {
    match answer {
        AskAnswer::Answered { option_id, text } => option_id.clone().or_else(|| text.clone()),
        AskAnswer::Filled { fields } => Some(fields.to_string()),
        _ => None,
    }
}

/// Whether the responder holds the token a tool's `approval(require_auth = ..)` names, as the
/// runtime's credential broker said before the verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenCheck {
    /// The tool requires no token (or the request is not an approval).
    NotRequired,
    /// The responder holds a valid token.
    Held,
    /// The responder holds none: why, in words for the responder.
    Lacking(String),
}

/// What the tool's response policy (or, without one, `requester_only`) says of `response` to
/// `request`, with the token `require_auth` names checked first for an approval. With
/// `require_auth` and no response policy, the token alone decides who may approve, and a
/// cancel is the requester's or a token holder's. A response policy that panics keeps the
/// request pending: fail closed.
pub(crate) fn response_verdict(
    tool: Option<&Tool>,
    info: &SessionInfo,
    request: &InputRequest,
    response: &InputResponse,
    token: &TokenCheck,
) -> ResponseVerdict {
    let input = request.input.clone().unwrap_or(Value::Null);
    let call = ResponseCall::new(
        info,
        &request.request_id,
        request.call_id.as_deref().unwrap_or_default(),
        request.tool.as_deref().unwrap_or_default(),
        &input,
        request.requester.as_ref(),
        response.decision,
        response.principal.as_ref(),
    );
    if let (ResponseDecision::Approve, TokenCheck::Lacking(reason)) = (response.decision, token) {
        return ResponseVerdict::rejected(reason.clone());
    }
    match tool.and_then(|t| t.approval()).and_then(|a| a.response) {
        Some(policy) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| policy(&call)))
            .unwrap_or_else(|_| {
                ResponseVerdict::rejected(format!(
                    "the response policy of `{}` failed; the request stays pending",
                    call.tool_name
                ))
            }),
        None if *token == TokenCheck::Held => ResponseVerdict::Allowed,
        None => match (requester_only(&call), token) {
            (ResponseVerdict::Rejected(_), TokenCheck::Lacking(reason)) => {
                // A cancel by neither the requester nor a token holder.
                ResponseVerdict::rejected(reason.clone())
            }
            (verdict, _) => verdict,
        },
    }
}

/// Who settles a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settler {
    /// A person's response, held to the tool's response policy.
    Person,
    /// The question's deadline passed ([`toolwright_core::AskRequest::timeout`]): the runtime
    /// withdraws it, and the body's answer is [`AskAnswer::Timeout`].
    Deadline,
    /// A delivery to the hook the body waits on: its payload (in the response's `fields`,
    /// checked against the hook's schema before) is the answer, [`AskAnswer::Received`].
    Hook,
}

impl Settler {
    /// The response a question's deadline gives it: a cancel by nobody, with a note saying why.
    pub(crate) fn withdrawal(request_id: &str) -> InputResponse {
        InputResponse::cancel(request_id, None)
            .note("nobody answered before the question's deadline")
    }

    /// What a workflow body's question is answered with: `response` checked against `request`
    /// (a refusal says why), or `timeout` when the deadline settles it.
    pub(crate) fn answer(
        self,
        request: &InputRequest,
        response: &InputResponse,
    ) -> Result<AskAnswer, String> {
        match self {
            Settler::Person => workflow_answer(request, response),
            Settler::Deadline => Ok(AskAnswer::Timeout),
            Settler::Hook => Ok(AskAnswer::Received {
                payload: response.fields.clone().unwrap_or(Value::Null),
            }),
        }
    }

    /// Why this settler may not settle `request` at all: a person cannot answer a hook's
    /// wait (only a delivery to the hook does), and a delivery answers nothing else.
    pub(crate) fn refusal(self, request: &InputRequest) -> Option<String> {
        let hook = request.kind == RequestKind::Hook;
        match self {
            Settler::Person if hook => Some(format!(
                "this request is {}, not a question for a person: deliver to the hook's token with `Runtime::resume_hook` (or its webhook URL), or cancel the turn or task",
                request.prompt
            )),
            Settler::Hook if !hook => {
                Some("a hook's delivery settles only a wait on that hook".into())
            }
            _ => None,
        }
    }

    /// How the request ended, as `input.resolved` says.
    pub(crate) fn outcome(self) -> crate::record::Outcome {
        match self {
            Settler::Person | Settler::Hook => crate::record::Outcome::Answered,
            Settler::Deadline => crate::record::Outcome::Expired,
        }
    }
}

/// The journal entry that records `answer` to workflow request `request` at `position`: a
/// question's answer, or how a hook's wait ended.
pub(crate) fn journal_entry(
    request: &InputRequest,
    position: u32,
    answer: &AskAnswer,
) -> JournalEntry {
    let (kind, name) = match HookRef::of(request) {
        Some(hook) => (EntryKind::HookWait, crate::ids::wait_name(&hook.name)),
        None => (EntryKind::Ask, crate::ids::ask_name(position)),
    };
    JournalEntry {
        position,
        kind,
        name,
        value: serde_json::to_value(answer).unwrap_or(Value::Null),
    }
}

/// The answer to a workflow body's question: an option by id (or label), or free text when the
/// question allows it (or has no options).
pub(crate) fn workflow_answer(
    request: &InputRequest,
    response: &InputResponse,
) -> Result<AskAnswer, String> {
    if response.decision == ResponseDecision::Cancel {
        return Ok(AskAnswer::Cancelled);
    }
    let ask: AskRequest = request
        .input
        .clone()
        .and_then(|input| serde_json::from_value(input).ok())
        .ok_or_else(|| "the question's record cannot be read".to_owned())?;
    if let Some(form) = &ask.form {
        return form_answer(form, response);
    }
    let pick = |wanted: &str| {
        ask.options
            .iter()
            .find(|o| o.id == wanted || o.label == wanted)
            .map(|o| o.id.clone())
    };
    if let Some(option) = &response.option {
        return match pick(option) {
            Some(id) => Ok(AskAnswer::Answered {
                option_id: Some(id),
                text: None,
            }),
            None => Err(format!(
                "`{option}` is not one of the options: {}",
                ask.options
                    .iter()
                    .map(|o| o.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        };
    }
    let text = response.text.as_deref().map(str::trim).unwrap_or_default();
    if text.is_empty() {
        return Err("an answer needs an option or some text".into());
    }
    if let Some(id) = pick(text) {
        return Ok(AskAnswer::Answered {
            option_id: Some(id),
            text: None,
        });
    }
    if ask.options.is_empty() || ask.allow_freeform {
        return Ok(AskAnswer::Answered {
            option_id: None,
            text: Some(text.to_owned()),
        });
    }
    Err(format!(
        "choose one of the options: {}",
        ask.options
            .iter()
            .map(|o| o.label.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The answer to a form question: the fields, when the form's schema accepts them.
fn form_answer(form: &Value, response: &InputResponse) -> Result<AskAnswer, String> {
    let Some(fields) = &response.fields else {
        return Err(
            "this question is a form: answer with its fields (`InputResponse::fill`)".to_owned(),
        );
    };
    let validator = toolwright_core::schema::InputValidator::compile(form)
        .map_err(|e| format!("the question's form is not a valid JSON Schema: {e}"))?;
    validator.check("form", fields).map_err(|e| {
        let problems: Vec<String> = e
            .problems
            .iter()
            .map(|p| {
                format!(
                    "{}: {}",
                    if p.pointer.is_empty() {
                        "(the form)"
                    } else {
                        &p.pointer
                    },
                    p.message
                )
            })
            .collect();
        format!(
            "the answer does not fit the form ({}); answer again with fields the form accepts",
            problems.join("; ")
        )
    })?;
    Ok(AskAnswer::Filled {
        fields: fields.clone(),
    })
}

/// The answer to question `request`: a chosen option (by label) or free text.
pub(crate) fn question_answer(
    request: &InputRequest,
    response: &InputResponse,
) -> Result<String, String> {
    let labels: Vec<&str> = request
        .input
        .as_ref()
        .and_then(|input| input.get("options"))
        .and_then(Value::as_array)
        .map(|options| {
            options
                .iter()
                .filter_map(|o| o.get("label")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    if let Some(option) = &response.option {
        return if labels.contains(&option.as_str()) {
            Ok(option.clone())
        } else {
            Err(format!(
                "`{option}` is not one of the options: {}",
                labels.join(", ")
            ))
        };
    }
    match response.text.as_deref().map(str::trim) {
        Some(text) if !text.is_empty() => Ok(text.to_owned()),
        _ => Err("an answer needs an option or some text".into()),
    }
}

/// `model` followed by the approver's note.
pub(crate) fn with_note(model: &ModelOutput, note: &str) -> ModelOutput {
    let note = format!("Note from the approver: {note}");
    match model {
        ModelOutput::Text(text) | ModelOutput::Json(Value::String(text)) => {
            ModelOutput::Text(format!("{text}\n\n{note}"))
        }
        ModelOutput::Json(value) => ModelOutput::Content(vec![
            ContentPart::text(value.to_string()),
            ContentPart::text(note),
        ]),
        ModelOutput::Content(parts) => {
            let mut parts = parts.clone();
            parts.push(ContentPart::text(note));
            ModelOutput::Content(parts)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolwright_core::{AskOption, Caller, Principal};

    use super::*;
    use crate::record::TurnRecord;

    fn alice() -> Option<Principal> {
        Some(Principal::user("test", "alice"))
    }

    fn info() -> SessionInfo {
        SessionInfo {
            id: "s1".into(),
            turn_id: "t1".into(),
            parent: None,
            initiator: None,
            current: alice(),
            interactive: true,
        }
    }

    fn workflow_question(freeform: bool) -> InputRequest {
        let turn = TurnRecord::begin("t1".into(), "s1".into(), alice(), Caller::Model, false);
        let mut ask = AskRequest::new("Deploy?")
            .option(AskOption::new("yes", "Yes"))
            .option(AskOption::new("no", "No"));
        ask.allow_freeform = freeform;
        InputRequest::workflow_ask(&turn, "c1", "deploy", 0, &ask, None)
    }

    #[test]
    fn a_form_question_takes_fields_its_schema_accepts_and_refuses_the_rest() {
        let turn = TurnRecord::begin("t1".into(), "s1".into(), alice(), Caller::Model, false);
        let ask = AskRequest::new("Who?").with_form(serde_json::json!({
            "type": "object",
            "properties": { "age": { "type": "integer", "minimum": 0 } },
            "required": ["age"],
        }));
        let request = InputRequest::workflow_ask(&turn, "c1", "who", 0, &ask, None);
        let fill = |fields| InputResponse::fill(&request.request_id, alice(), fields);
        assert_eq!(
            workflow_answer(&request, &fill(serde_json::json!({ "age": 30 }))),
            Ok(AskAnswer::Filled {
                fields: serde_json::json!({ "age": 30 })
            })
        );
        let refused = workflow_answer(&request, &fill(serde_json::json!({ "age": -1 })));
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("/age") && e.contains("does not fit the form")),
            "{refused:?}"
        );
        let text = InputResponse::answer(&request.request_id, alice(), "thirty");
        assert_eq!(
            workflow_answer(&request, &text),
            Err("this question is a form: answer with its fields (`InputResponse::fill`)".into())
        );
        let cancelled = InputResponse::cancel(&request.request_id, alice());
        assert_eq!(
            workflow_answer(&request, &cancelled),
            Ok(AskAnswer::Cancelled)
        );
    }

    #[test]
    fn a_workflow_answer_picks_an_option_by_id_or_label_or_takes_free_text_when_allowed() {
        let request = workflow_question(false);
        let chose = |option: &str| InputResponse {
            option: Some(option.into()),
            ..InputResponse::approve(&request.request_id, alice())
        };
        let picked = AskAnswer::Answered {
            option_id: Some("yes".into()),
            text: None,
        };
        assert_eq!(workflow_answer(&request, &chose("yes")), Ok(picked.clone()));
        assert_eq!(workflow_answer(&request, &chose("Yes")), Ok(picked.clone()));
        assert_eq!(
            workflow_answer(
                &request,
                &InputResponse::answer(&request.request_id, alice(), " Yes ")
            ),
            Ok(picked)
        );
        assert_eq!(
            workflow_answer(&request, &chose("maybe")),
            Err("`maybe` is not one of the options: yes, no".to_owned())
        );
        assert_eq!(
            workflow_answer(
                &request,
                &InputResponse::answer(&request.request_id, alice(), "later")
            ),
            Err("choose one of the options: Yes, No".to_owned())
        );
        assert_eq!(
            workflow_answer(
                &request,
                &InputResponse::cancel(&request.request_id, alice())
            ),
            Ok(AskAnswer::Cancelled)
        );
        let free = workflow_question(true);
        assert_eq!(
            workflow_answer(
                &free,
                &InputResponse::answer(&free.request_id, alice(), "later")
            ),
            Ok(AskAnswer::Answered {
                option_id: None,
                text: Some("later".into())
            })
        );
    }

    #[test]
    fn a_question_answer_is_an_offered_label_or_some_text() {
        let input =
            json!({ "question": "Color?", "options": [{ "label": "Red" }, { "label": "Blue" }] });
        let request = InputRequest::question(&info(), "c1", &input);
        let chose = InputResponse::choose(&request.request_id, alice(), "Blue");
        assert_eq!(question_answer(&request, &chose), Ok("Blue".to_owned()));
        let wrong = InputResponse::choose(&request.request_id, alice(), "Green");
        assert_eq!(
            question_answer(&request, &wrong),
            Err("`Green` is not one of the options: Red, Blue".to_owned())
        );
        let text = InputResponse::answer(&request.request_id, alice(), "  teal ");
        assert_eq!(question_answer(&request, &text), Ok("teal".to_owned()));
        let empty = InputResponse::answer(&request.request_id, alice(), " ");
        assert_eq!(
            question_answer(&request, &empty),
            Err("an answer needs an option or some text".to_owned())
        );
    }

    #[test]
    fn without_a_response_policy_only_the_requester_may_answer() {
        let request = InputRequest::question(&info(), "c1", &json!({ "question": "?" }));
        let own = InputResponse::approve(&request.request_id, alice());
        assert_eq!(
            response_verdict(None, &info(), &request, &own, &TokenCheck::NotRequired),
            ResponseVerdict::Allowed
        );
        let bob = Some(Principal::user("test", "bob"));
        let other = InputResponse::approve(&request.request_id, bob);
        assert!(matches!(
            response_verdict(None, &info(), &request, &other, &TokenCheck::NotRequired),
            ResponseVerdict::Rejected(_)
        ));
    }

    #[test]
    fn a_required_token_decides_who_may_approve_and_the_requester_may_still_cancel() {
        let request = InputRequest::question(&info(), "c1", &json!({ "question": "?" }));
        let bob = Some(Principal::user("test", "bob"));
        let lacking = TokenCheck::Lacking("connect `github` to approve".into());
        let verdict = |response: &InputResponse, token: &TokenCheck| {
            response_verdict(None, &info(), &request, response, token)
        };
        // A token holder who is not the requester approves; one without a token cannot.
        let approve = InputResponse::approve(&request.request_id, bob.clone());
        assert_eq!(
            verdict(&approve, &TokenCheck::Held),
            ResponseVerdict::Allowed
        );
        assert_eq!(
            verdict(&approve, &lacking),
            ResponseVerdict::rejected("connect `github` to approve")
        );
        let own = InputResponse::approve(&request.request_id, alice());
        assert!(matches!(
            verdict(&own, &lacking),
            ResponseVerdict::Rejected(_)
        ));
        // A cancel: the requester's, or a token holder's.
        let own_cancel = InputResponse::cancel(&request.request_id, alice());
        assert_eq!(verdict(&own_cancel, &lacking), ResponseVerdict::Allowed);
        let cancel = InputResponse::cancel(&request.request_id, bob);
        assert_eq!(
            verdict(&cancel, &TokenCheck::Held),
            ResponseVerdict::Allowed
        );
        assert!(matches!(
            verdict(&cancel, &lacking),
            ResponseVerdict::Rejected(_)
        ));
    }

    #[test]
    fn an_approvers_note_follows_the_output() {
        let note = "Note from the approver: once";
        assert_eq!(
            with_note(&ModelOutput::Text("done".into()), "once"),
            ModelOutput::Text(format!("done\n\n{note}"))
        );
        assert_eq!(
            with_note(&ModelOutput::Json(json!({ "a": 1 })), "once"),
            ModelOutput::Content(vec![
                ContentPart::text("{\"a\":1}"),
                ContentPart::text(note)
            ])
        );
        assert_eq!(decision_of(ResponseDecision::Cancel), Decision::Cancelled);
        assert_eq!(answer_text(&AskAnswer::Unavailable), None);
    }
}
