//! The built-in sandbox tools, offered when the host installs a sandbox: `read`, `write`, `edit`,
//! `bash`, `grep` and `glob`, with Flue's semantics (read truncates at 2000 lines or 50 KB and
//! says so, write creates parent folders, edit replaces exact text and says when it is absent or
//! not unique). Their names are reserved: no user tool may take one.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use futures_util::lock::Mutex as AsyncMutex;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::builtin::arguments;
use crate::context::CallContext;
use crate::descriptor::{InputSpec, Location, ToolDescriptor};
use crate::effect::Effect;
use crate::error::{ErrorCode, ToolError, quoted_prefix};
use crate::output::{CallOutput, ModelOutput};
use crate::sandbox::{ExecRequest, GrepRequest, Sandbox, SandboxError};

/// Most lines `read` returns at once.
pub const READ_MAX_LINES: usize = 2000;
/// Most bytes `read` returns at once.
pub const READ_MAX_BYTES: usize = 50 * 1024;
/// Largest file `edit` rewrites.
pub const EDIT_MAX_BYTES: usize = 10 * 1024 * 1024;
/// Most matches `grep` and paths `glob` return.
pub const FIND_MAX: usize = 200;
/// The longest `bash` may run, and its default.
pub const BASH_MAX_TIMEOUT: Duration = Duration::from_secs(600);
const BASH_DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Arguments of `read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The file, relative to the sandbox root.
    #[schemars(length(min = 1))]
    pub path: String,
    /// The first line to return, from 1 (default 1).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// How many lines to return at most (default and maximum 2000).
    #[serde(default)]
    #[schemars(range(min = 1, max = 2000))]
    pub limit: Option<u64>,
}

/// Arguments of `write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The file, relative to the sandbox root; missing parent folders are created.
    #[schemars(length(min = 1))]
    pub path: String,
    /// The whole new content of the file.
    pub content: String,
}

/// Arguments of `edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// The file, relative to the sandbox root.
    #[schemars(length(min = 1))]
    pub path: String,
    /// The exact text to replace, whitespace included; it must appear exactly once.
    #[schemars(length(min = 1))]
    pub old_text: String,
    /// The text to put in its place.
    pub new_text: String,
}

/// Arguments of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command line, run by `sh -c` in the sandbox root.
    #[schemars(length(min = 1))]
    pub command: String,
    /// How long it may run, in seconds (default 120, at most 600).
    #[serde(default)]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_seconds: Option<u64>,
}

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// The regular expression to search for.
    #[schemars(length(min = 1))]
    pub pattern: String,
    /// The file or folder to search, relative to the sandbox root (default: all of it).
    #[serde(default)]
    pub path: Option<String>,
    /// Only files matching this glob, e.g. `*.rs`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Ignore case.
    #[serde(default)]
    pub case_insensitive: bool,
}

/// Arguments of `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// The pattern, e.g. `**/*.md`.
    #[schemars(length(min = 1))]
    pub pattern: String,
    /// The folder to search in, relative to the sandbox root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
}

/// The six built-in sandbox tools.
pub fn sandbox_tools() -> [&'static ToolDescriptor; 6] {
    [&READ, &WRITE, &EDIT, &BASH, &GREP, &GLOB]
}

/// Whether `descriptor` is one of the built-in sandbox tools.
pub fn is_sandbox_tool(descriptor: &ToolDescriptor) -> bool {
    sandbox_tools()
        .iter()
        .any(|builtin| std::ptr::eq(*builtin, descriptor))
}

/// What a person approving a built-in sandbox tool's call is shown: the command, the file or the
/// pattern, not just the tool's name. Kept when the host sets another request policy.
///
/// Each value is shown as a JSON string: line breaks, control characters and quotes are
/// visible, so a command cannot end the quotation and write its own prompt. A value too long
/// for a prompt is never cut in the middle (the cut part could hold `curl … | sh`): the prompt
/// shows its start and says that the whole value is in the request's `input`, which holds it
/// in full.
pub fn approval_prompt(call: &crate::approval::ApprovalCall<'_>) -> Result<String, ToolError> {
    let field = |name: &str| {
        quoted(
            name,
            call.input
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )
    };
    Ok(match call.tool_name {
        "bash" => format!("Run the command {} in the sandbox?", field("command")),
        "write" => {
            let size = call
                .input
                .get("content")
                .and_then(Value::as_str)
                .map_or(0, str::len);
            format!("Write {size} bytes to {} in the sandbox?", field("path"))
        }
        "edit" => format!("Edit {} in the sandbox?", field("path")),
        "read" => format!("Read {} in the sandbox?", field("path")),
        "grep" => format!("Search the sandbox's files for {}?", field("pattern")),
        "glob" => format!("List the sandbox's files matching {}?", field("pattern")),
        other => format!("Run `{other}` in the sandbox?"),
    })
}

/// The longest value a prompt shows whole, in characters.
const PROMPT_VALUE_CHARS: usize = 500;

/// How much of a longer value the prompt shows, from its start.
const PROMPT_PREFIX_CHARS: usize = 300;

/// `text`, the value of input field `name`, as a JSON string; past 500 characters, its first
/// 300 and a note that the full value is in the request's input (never a middle cut).
fn quoted(name: &str, text: &str) -> String {
    let json = |part: &str| Value::String(part.to_owned()).to_string();
    let total = text.chars().count();
    if total <= PROMPT_VALUE_CHARS {
        return json(text);
    }
    let head: String = text.chars().take(PROMPT_PREFIX_CHARS).collect();
    let head = json(&head);
    // The open quotation ends in `…`: the value goes on.
    format!(
        "{}…\" (too long to show here: the full {name}, {total} characters, is in the request's input)",
        &head[..head.len() - 1]
    )
}

fn sandbox_of(cx: &CallContext) -> Result<Arc<dyn Sandbox>, ToolError> {
    cx.host().sandbox().ok_or_else(|| {
        ToolError::with_code(
            ErrorCode::MissingState,
            format!(
                "`{}` needs the sandbox, and none is installed",
                cx.tool_name()
            ),
        )
    })
}

/// The lock of file `path` of `sandbox` in this process. The calls of one step run at once, and
/// two `edit`s of one file must not both start from the original (the second would undo the
/// first); `write` takes it too. Entries go when no call holds them.
fn file_lock(sandbox: &Arc<dyn Sandbox>, path: &str) -> Arc<AsyncMutex<()>> {
    type Locks = std::sync::Mutex<HashMap<(usize, String), Weak<AsyncMutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let normal: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    let key = (Arc::as_ptr(sandbox).cast::<()>() as usize, normal.join("/"));
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(lock) = locks.get(&key).and_then(Weak::upgrade) {
        return lock;
    }
    if locks.len() >= 1024 {
        locks.retain(|_, lock| lock.strong_count() > 0);
    }
    let lock = Arc::new(AsyncMutex::new(()));
    locks.insert(key, Arc::downgrade(&lock));
    lock
}

fn failed(error: SandboxError) -> ToolError {
    ToolError::with_code(ErrorCode::ToolFailed, error.to_string())
}

fn text(value: Value, text: String) -> CallOutput {
    CallOutput {
        value,
        ends_turn: false,
        model: Some(ModelOutput::Text(text)),
        complete_label: None,
    }
}

async fn read(input: Value, cx: CallContext) -> Result<CallOutput, ToolError> {
    let args: ReadArgs = arguments("read", input)?;
    let sandbox = sandbox_of(&cx)?;
    let first = args.offset.unwrap_or(1).max(1);
    let limit = args
        .limit
        .map_or(READ_MAX_LINES, |l| (l as usize).min(READ_MAX_LINES));
    let mut page = Page::new(first, limit);
    // 64 KB at a time; lines before `first` are only counted, and a line is kept up to 50 KB:
    // memory stays bounded whatever the file's size and shape.
    let mut offset = 0u64;
    loop {
        let chunk = sandbox
            .read(&args.path, offset, 64 * 1024)
            .await
            .map_err(failed)?;
        if offset == 0 && chunk.data.iter().take(8000).any(|&b| b == 0) {
            return Ok(text(
                json!({ "path": args.path, "binary": true, "size": chunk.size }),
                format!(
                    "`{}` is a binary file ({} bytes); it is not shown. Use `bash` with a tool made for its format.",
                    args.path, chunk.size
                ),
            ));
        }
        if chunk.data.is_empty() {
            page.end();
            break;
        }
        offset += chunk.data.len() as u64;
        if page.feed(&chunk.data) {
            break;
        }
    }
    let shown = page.lines.len() as u64;
    let last = first + shown.saturating_sub(1);
    let mut body = page.lines.join("\n");
    if let Some((line, size)) = page.long_line {
        body.push_str(&format!(
            "\n\n[Line {line} is {size} bytes; only its first 50 KB are shown. Look at it in parts with `bash` (e.g. `cut -c` or `head -c`).]"
        ));
        if page.more {
            body.push_str(&format!(
                " The file goes on: read again with offset={}.",
                line + 1
            ));
        }
    } else if shown == 0 {
        body = format!(
            "`{}` has fewer than {first} lines; read from an earlier `offset`.",
            args.path
        );
    } else if page.more {
        body.push_str(&format!(
            "\n\n[Showing lines {first}-{last} of `{}` ({}); the file goes on: read again with offset={} to continue.]",
            args.path,
            if page.cut_by_bytes {
                "cut at 50 KB"
            } else {
                "cut at the line limit"
            },
            last + 1
        ));
    }
    Ok(text(
        json!({ "path": args.path, "offset": first, "lines": shown, "truncated": page.more || page.long_line.is_some() }),
        body,
    ))
}

/// The lines `read` collects from a stream of chunks.
struct Page {
    first: u64,
    limit: usize,
    /// The number of the line being read.
    line: u64,
    /// The line being read, kept up to 50 KB (only from `first` on).
    current: Vec<u8>,
    /// Its whole length so far.
    current_len: usize,
    lines: Vec<String>,
    bytes: usize,
    /// Whether the file has more than what is shown.
    more: bool,
    cut_by_bytes: bool,
    /// A line over 50 KB, shown in part: its number and size.
    long_line: Option<(u64, usize)>,
}

impl Page {
    fn new(first: u64, limit: usize) -> Self {
        Page {
            first,
            limit,
            line: 1,
            current: Vec::new(),
            current_len: 0,
            lines: Vec::new(),
            bytes: 0,
            more: false,
            cut_by_bytes: false,
            long_line: None,
        }
    }

    /// Takes in a chunk; returns whether the page is complete.
    fn feed(&mut self, data: &[u8]) -> bool {
        let mut start = 0;
        while start < data.len() {
            match data[start..].iter().position(|&b| b == b'\n') {
                Some(at) => {
                    self.take(&data[start..start + at]);
                    start += at + 1;
                    if self.finish() {
                        return true;
                    }
                }
                None => {
                    self.take(&data[start..]);
                    break;
                }
            }
        }
        false
    }

    /// The end of the file: a last line without a line break is a line.
    fn end(&mut self) {
        if self.current_len > 0 {
            self.finish();
        }
    }

    fn take(&mut self, part: &[u8]) {
        if self.line < self.first {
            return;
        }
        let room = (READ_MAX_BYTES + 1).saturating_sub(self.current.len());
        self.current
            .extend_from_slice(&part[..part.len().min(room)]);
        self.current_len += part.len();
    }

    /// Ends the current line; returns whether the page is complete.
    fn finish(&mut self) -> bool {
        let number = self.line;
        self.line += 1;
        if number < self.first {
            return false;
        }
        let raw = std::mem::take(&mut self.current);
        let len = std::mem::replace(&mut self.current_len, 0);
        if self.lines.len() == self.limit {
            // A line beyond the limit exists.
            self.more = true;
            return true;
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(&raw);
        if len > READ_MAX_BYTES {
            if self.lines.is_empty() {
                // A character cut in two shows as one replacement character.
                let cut = READ_MAX_BYTES.min(raw.len());
                self.lines
                    .push(String::from_utf8_lossy(&raw[..cut]).into_owned());
                self.long_line = Some((number, len));
            } else {
                self.cut_by_bytes = true;
            }
            self.more = true;
            return true;
        }
        let text = String::from_utf8_lossy(raw).into_owned();
        if self.bytes + text.len() + 1 > READ_MAX_BYTES {
            self.cut_by_bytes = true;
            self.more = true;
            return true;
        }
        self.bytes += text.len() + 1;
        self.lines.push(text);
        false
    }
}

async fn write(input: Value, cx: CallContext) -> Result<CallOutput, ToolError> {
    let args: WriteArgs = arguments("write", input)?;
    let sandbox = sandbox_of(&cx)?;
    let lock = file_lock(&sandbox, &args.path);
    let _writing = lock.lock().await;
    let bytes = args.content.len();
    sandbox
        .write(&args.path, args.content.into_bytes())
        .await
        .map_err(failed)?;
    Ok(text(
        json!({ "path": args.path, "bytes": bytes }),
        format!("Wrote {bytes} bytes to `{}`.", quoted_prefix(&args.path)),
    ))
}

async fn edit(input: Value, cx: CallContext) -> Result<CallOutput, ToolError> {
    let args: EditArgs = arguments("edit", input)?;
    let sandbox = sandbox_of(&cx)?;
    let lock = file_lock(&sandbox, &args.path);
    let _editing = lock.lock().await;
    let chunk = sandbox
        .read(&args.path, 0, EDIT_MAX_BYTES + 1)
        .await
        .map_err(failed)?;
    if chunk.size > EDIT_MAX_BYTES as u64 {
        return Err(ToolError::with_code(
            ErrorCode::ToolFailed,
            format!(
                "`{}` is {} bytes, over the 10 MB `edit` rewrites; change it with `bash` (e.g. sed)",
                quoted_prefix(&args.path),
                chunk.size
            ),
        ));
    }
    let content = String::from_utf8(chunk.data).map_err(|_| {
        ToolError::with_code(
            ErrorCode::ToolFailed,
            format!(
                "`{}` is not UTF-8 text; `edit` changes text files only",
                quoted_prefix(&args.path)
            ),
        )
    })?;
    let found = occurrences(&content, &args.old_text);
    if found == 0 {
        return Err(ToolError::with_code(
            ErrorCode::ToolFailed,
            format!(
                "the text to replace was not found in `{}`; read the file and copy the text exactly, whitespace and line breaks included",
                quoted_prefix(&args.path)
            ),
        ));
    }
    if found > 1 {
        return Err(ToolError::with_code(
            ErrorCode::ToolFailed,
            format!(
                "the text to replace appears {found} times in `{}`; include more of the surrounding lines so that it appears once",
                quoted_prefix(&args.path)
            ),
        ));
    }
    let updated = content.replacen(args.old_text.as_str(), &args.new_text, 1);
    sandbox
        .write(&args.path, updated.into_bytes())
        .await
        .map_err(failed)?;
    Ok(text(
        json!({ "path": args.path, "replaced": 1 }),
        format!("Replaced the text in `{}`.", quoted_prefix(&args.path)),
    ))
}

/// How many times `needle` appears in `haystack`, overlapping ones included (`"aa"` appears
/// twice in `"aaa"`: replacing "the" one would be a guess).
fn occurrences(haystack: &str, needle: &str) -> usize {
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = haystack[from..].find(needle) {
        count += 1;
        let next = from + at;
        from = next + haystack[next..].chars().next().map_or(1, char::len_utf8);
    }
    count
}

async fn bash(input: Value, cx: CallContext) -> Result<CallOutput, ToolError> {
    let args: BashArgs = arguments("bash", input)?;
    let sandbox = sandbox_of(&cx)?;
    let timeout = args
        .timeout_seconds
        .map_or(BASH_DEFAULT_TIMEOUT, Duration::from_secs)
        .min(BASH_MAX_TIMEOUT);
    let request = ExecRequest {
        timeout,
        ..ExecRequest::new(args.command)
    };
    let cancel = HostCancel(&cx);
    let out = sandbox.exec(request, &cancel).await.map_err(failed)?;
    let mut body = String::new();
    match (out.exit_code, out.timed_out) {
        (_, true) => body.push_str(&format!(
            "The command ran past {}s and was killed.\n",
            timeout.as_secs()
        )),
        (Some(code), _) => body.push_str(&format!("Exit code: {code}\n")),
        (None, _) => body.push_str("The command was killed.\n"),
    }
    if !out.stdout.is_empty() {
        body.push_str(&format!("stdout:\n{}\n", out.stdout));
    }
    if !out.stderr.is_empty() {
        body.push_str(&format!("stderr:\n{}\n", out.stderr));
    }
    if out.truncated {
        body.push_str(
            "[Output cut at 50 KB per stream; redirect it to a file and `read` it in parts.]\n",
        );
    }
    Ok(text(
        json!({
            "exit_code": out.exit_code,
            "stdout": out.stdout,
            "stderr": out.stderr,
            "timed_out": out.timed_out,
            "truncated": out.truncated,
        }),
        body.trim_end().to_owned(),
    ))
}

/// The call's cancellation as the sandbox's signal.
struct HostCancel<'a>(&'a CallContext);

impl crate::approval::CancelSignal for HostCancel<'_> {
    fn is_cancelled(&self) -> bool {
        self.0.host().is_cancelled()
    }

    fn cancelled(&self) -> futures_util::future::BoxFuture<'_, ()> {
        self.0.host().cancelled()
    }
}

async fn grep(input: Value, cx: CallContext) -> Result<CallOutput, ToolError> {
    let args: GrepArgs = arguments("grep", input)?;
    let sandbox = sandbox_of(&cx)?;
    let found = sandbox
        .grep(GrepRequest {
            pattern: args.pattern.clone(),
            path: args.path.unwrap_or_default(),
            glob: args.glob,
            case_insensitive: args.case_insensitive,
            max_matches: FIND_MAX,
        })
        .await
        .map_err(failed)?;
    let mut body: Vec<String> = found
        .items
        .iter()
        .map(|m| format!("{}:{}: {}", m.path, m.line, m.text))
        .collect();
    if body.is_empty() {
        body.push(format!(
            "No line matches `{}`.",
            quoted_prefix(&args.pattern)
        ));
    }
    if found.truncated && found.items.len() < FIND_MAX {
        body.push(
            "[The search stopped early: the folder has too many files to search at once. Search a narrower `path`, or filter with `glob`.]".to_owned(),
        );
    } else if found.truncated {
        body.push(format!(
            "[First {FIND_MAX} matches shown; narrow the pattern, `path` or `glob` to see the rest.]"
        ));
    }
    let matches: Vec<Value> = found
        .items
        .iter()
        .map(|m| json!({ "path": m.path, "line": m.line, "text": m.text }))
        .collect();
    Ok(text(
        json!({ "matches": matches, "truncated": found.truncated }),
        body.join("\n"),
    ))
}

async fn glob(input: Value, cx: CallContext) -> Result<CallOutput, ToolError> {
    let args: GlobArgs = arguments("glob", input)?;
    let sandbox = sandbox_of(&cx)?;
    let found = sandbox
        .glob(
            &args.pattern,
            args.path.as_deref().unwrap_or_default(),
            FIND_MAX,
        )
        .await
        .map_err(failed)?;
    let mut body = found.items.join("\n");
    if found.items.is_empty() {
        body = format!("No file matches `{}`.", quoted_prefix(&args.pattern));
    }
    if found.truncated && found.items.len() < FIND_MAX {
        body.push_str(
            "\n[The listing stopped early: the folder has too many files to walk at once. Give a narrower `path`.]",
        );
    } else if found.truncated {
        body.push_str(&format!(
            "\n[First {FIND_MAX} paths shown; narrow the pattern to see the rest.]"
        ));
    }
    Ok(text(
        json!({ "paths": found.items, "truncated": found.truncated }),
        body,
    ))
}

const fn builtin(
    name: &'static str,
    description: &'static str,
    title: &'static str,
    effect: Effect,
    approval: Option<crate::approval::ApprovalSpec>,
    input: InputSpec,
    invoke: crate::descriptor::InvokeFn,
) -> ToolDescriptor {
    let location = Location {
        file: file!(),
        line: line!(),
        column: 1,
        module_path: module_path!(),
    };
    ToolDescriptor {
        title: Some(title),
        approval,
        ..ToolDescriptor::plain(name, description, effect, input, invoke, location)
    }
}

static READ: ToolDescriptor = builtin(
    "read",
    "Read a text file of the sandbox. Returns up to 2000 lines or 50 KB from `offset` (a line number, from 1) and says when the file goes on; read again with the offset it gives. Binary files are not shown.",
    "Read a file",
    Effect::Read,
    None,
    InputSpec {
        schema: crate::schema::schema_of::<ReadArgs>,
        fields: &["path", "offset", "limit"],
        sensitive: &[],
        type_name: "ReadArgs",
    },
    |input, cx| Box::pin(read(input, cx)),
);

static WRITE: ToolDescriptor = builtin(
    "write",
    "Write a file of the sandbox, replacing it whole; missing parent folders are created. To change part of a file, use `edit`.",
    "Write a file",
    Effect::Write,
    None,
    InputSpec {
        schema: crate::schema::schema_of::<WriteArgs>,
        fields: &["path", "content"],
        sensitive: &[],
        type_name: "WriteArgs",
    },
    |input, cx| Box::pin(write(input, cx)),
);

static EDIT: ToolDescriptor = builtin(
    "edit",
    "Replace one exact piece of text in a file of the sandbox. `old_text` must appear exactly once, whitespace included; read the file first and copy it. Fails, saying why, when the text is absent or appears more than once.",
    "Edit a file",
    Effect::Write,
    None,
    InputSpec {
        schema: crate::schema::schema_of::<EditArgs>,
        fields: &["path", "old_text", "new_text"],
        sensitive: &[],
        type_name: "EditArgs",
    },
    |input, cx| Box::pin(edit(input, cx)),
);

static BASH: ToolDescriptor = builtin(
    "bash",
    "Run a shell command in the sandbox's root folder. Returns the exit code, stdout and stderr (each cut at 50 KB). It is killed, with everything it started, after `timeout_seconds` (default 120).",
    "Run a command",
    Effect::Write,
    // A command runs with the host user's rights (only the file API is confined): each one
    // asks, unless the host says otherwise (`RuntimeBuilder::sandbox_approval`).
    Some(crate::approval::ApprovalSpec {
        prompt: Some(approval_prompt),
        ..crate::approval::ApprovalSpec::new(crate::approval::RequestPolicy::Always)
    }),
    InputSpec {
        schema: crate::schema::schema_of::<BashArgs>,
        fields: &["command", "timeout_seconds"],
        sensitive: &[],
        type_name: "BashArgs",
    },
    |input, cx| Box::pin(bash(input, cx)),
);

static GREP: ToolDescriptor = builtin(
    "grep",
    "Search the sandbox's files for a regular expression. Returns matching lines as `path:line: text` (at most 200); hidden and binary files are skipped.",
    "Search files",
    Effect::Read,
    None,
    InputSpec {
        schema: crate::schema::schema_of::<GrepArgs>,
        fields: &["pattern", "path", "glob", "case_insensitive"],
        sensitive: &[],
        type_name: "GrepArgs",
    },
    |input, cx| Box::pin(grep(input, cx)),
);

static GLOB: ToolDescriptor = builtin(
    "glob",
    "Find files of the sandbox by name pattern, e.g. `**/*.md`. Returns their paths (at most 200); hidden files are skipped.",
    "Find files",
    Effect::Read,
    None,
    InputSpec {
        schema: crate::schema::schema_of::<GlobArgs>,
        fields: &["pattern", "path"],
        sensitive: &[],
        type_name: "GlobArgs",
    },
    |input, cx| Box::pin(glob(input, cx)),
);
