//! The terminal side of the chat: lines typed in, the model's text and the tools' status lines
//! printed as they arrive, approvals and questions asked and turned into answers.

use std::future::Future;
use std::io::{BufRead, Write};

use serde_json::Value;
use tokio::sync::{broadcast, mpsc};
use toolwright::Principal;
use toolwright::agent::{AgentEvent, StreamEvent};
use toolwright::runtime::{Event, InputRequest, InputResponse, RequestKind};

/// What is typed in and printed out, on behalf of the person at the terminal.
pub(crate) struct Terminal {
    lines: mpsc::Receiver<String>,
    you: Principal,
    /// Whether the cursor is after text the model streamed (a status line starts a new line).
    mid_line: bool,
}

impl Terminal {
    /// Reads stdin on a thread of its own: a blocking read that never ends would keep an async
    /// runtime from shutting down, while this thread simply ends with the process.
    pub(crate) fn new(you: Principal) -> Terminal {
        let (sender, lines) = mpsc::channel(1);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if sender.blocking_send(line).is_err() {
                    break;
                }
            }
        });
        Terminal {
            lines,
            you,
            mid_line: false,
        }
    }

    /// The next line typed after `prompt`, trimmed; `None` once the input ends.
    pub(crate) async fn line(&mut self, prompt: &str) -> Option<String> {
        self.end_line();
        print!("{prompt}");
        let _ = std::io::stdout().flush();
        Some(self.lines.recv().await?.trim().to_owned())
    }

    /// Ends the line the model's text left open.
    pub(crate) fn end_line(&mut self) {
        if std::mem::take(&mut self.mid_line) {
            println!();
        }
    }

    /// Shows what the agent streams: the model's text as it comes, the session's events.
    pub(crate) fn show_agent(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Model {
                event: StreamEvent::TextDelta(text) | StreamEvent::RefusalDelta(text),
                ..
            } => {
                print!("{text}");
                let _ = std::io::stdout().flush();
                self.mid_line = true;
            }
            AgentEvent::Runtime(event) => self.show_runtime(event),
            _ => {}
        }
    }

    /// Shows the tools' labels as status lines: started, in progress, done or failed.
    pub(crate) fn show_runtime(&mut self, event: Event) {
        let line = match event {
            Event::ActionRequested { label, .. } => format!("  · {label}"),
            Event::ActionPartial {
                label: Some(label), ..
            } => format!("  · {label}"),
            Event::ActionResult { result, .. } if result.is_error => {
                format!("  ✗ {}: {}", result.tool, result.model().to_text())
            }
            Event::ActionResult { result, .. } => {
                let label = result.label.as_deref().unwrap_or(&result.tool);
                format!("  ✓ {label} {}", shortened(&result.output))
            }
            _ => return,
        };
        self.end_line();
        println!("{line}");
    }

    /// Asks the person `request`; `None` when they leave it for later (`later`, or the input
    /// ended).
    pub(crate) async fn ask(&mut self, request: &InputRequest) -> Option<InputResponse> {
        self.end_line();
        println!("? {}", request.prompt);
        if let (Some(tool), Some(input)) = (&request.tool, &request.input)
            && request.kind != RequestKind::Question
        {
            println!("  {tool} {input}");
        }
        for reason in &request.reasons {
            println!("  because {reason}");
        }
        match request.kind {
            RequestKind::Question => self.question(request).await,
            // An outside system answers it, through the hook's token: nothing to ask here.
            RequestKind::Hook => {
                println!("  (an outside system answers this; it stays waiting)");
                None
            }
            _ => self.approval(request).await,
        }
    }

    async fn approval(&mut self, request: &InputRequest) -> Option<InputResponse> {
        println!("  approve? y or n, a note may follow (`n not now`); `later` leaves it waiting");
        loop {
            let line = self.line("> ").await?;
            let (word, note) = line.split_once(' ').unwrap_or((line.as_str(), ""));
            let you = Some(self.you.clone());
            let response = match word.to_lowercase().as_str() {
                "y" | "yes" => InputResponse::approve(&request.request_id, you),
                "n" | "no" => InputResponse::cancel(&request.request_id, you),
                "later" => return None,
                _ => continue,
            };
            let note = note.trim();
            return Some(if note.is_empty() {
                response
            } else {
                response.note(note)
            });
        }
    }

    async fn question(&mut self, request: &InputRequest) -> Option<InputResponse> {
        // Both `ask_question`'s arguments and a workflow's `AskRequest` list `options` with a
        // `label`; a workflow may ask for a form instead.
        let input = request.input.as_ref();
        let options = input.and_then(|i| i["options"].as_array());
        let labels: Vec<&str> = options
            .into_iter()
            .flatten()
            .filter_map(|o| o["label"].as_str())
            .collect();
        let form = input.is_some_and(|i| i.get("form").is_some_and(|f| !f.is_null()));
        for (number, label) in labels.iter().enumerate() {
            println!("  {}. {label}", number + 1);
        }
        let hint = if form {
            "the fields as a JSON object"
        } else if labels.is_empty() {
            "your answer"
        } else {
            "a number, or your own words"
        };
        println!("  answer with {hint}; `later` leaves it waiting");
        let (id, you) = (&request.request_id, Some(self.you.clone()));
        loop {
            let text = self.line("> ").await?;
            if text == "later" {
                return None;
            }
            if form {
                match serde_json::from_str(&text) {
                    Ok(fields) => return Some(InputResponse::fill(id, you, fields)),
                    Err(error) => println!("  not a JSON object: {error}"),
                }
                continue;
            }
            let chosen = text
                .parse::<usize>()
                .ok()
                .and_then(|n| labels.get(n.checked_sub(1)?));
            return Some(match chosen {
                Some(label) => InputResponse::choose(id, you, *label),
                None if !text.is_empty() => InputResponse::answer(id, you, text),
                None => continue,
            });
        }
    }
}

/// Runs `work`, passing `show` what `events` brings meanwhile and what is left once it is done,
/// so that every line is printed before `work`'s result is looked at.
pub(crate) async fn watching<T, E: Clone>(
    events: &mut broadcast::Receiver<E>,
    mut show: impl FnMut(E),
    work: impl Future<Output = T>,
) -> T {
    tokio::pin!(work);
    let done = loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Ok(event) => show(event),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break (&mut work).await,
            },
            done = &mut work => break done,
        }
    };
    while let Ok(event) = events.try_recv() {
        show(event);
    }
    done
}

/// `value` as compact JSON, cut to one line of the terminal.
fn shortened(value: &Value) -> String {
    const MAX: usize = 120;
    let text = value.to_string();
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}
