//! Tool names: the model-facing name rule, reserved names and the humanized fallback label.

/// Longest model-facing name providers accept (OpenAI, Anthropic: `^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_NAME_LEN: usize = 64;

/// Names of the meta-tools and built-in tools the runtime defines; no user tool may take one.
///
/// `tool_search`/`tool_call` reach deferred tools, `ask_question` asks the user, `task_wait` and
/// `task_cancel` manage workflow tasks, `task` delegates to a subagent, and `read`, `write`, `edit`, `bash`, `grep`, `glob` are the
/// built-in sandbox tools.
pub const RESERVED_NAMES: &[&str] = &[
    "tool_search",
    "tool_call",
    "ask_question",
    "task_wait",
    "task_cancel",
    "task",
    "read",
    "write",
    "edit",
    "bash",
    "grep",
    "glob",
];

/// Separator between a toolset and a tool name in the model-facing name (`wallet__card_balance`).
pub const TOOLSET_SEPARATOR: &str = "__";

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`.
///
/// ```
/// assert!(toolwright_core::names::is_valid_name("read_logs"));
/// assert!(!toolwright_core::names::is_valid_name("read logs"));
/// ```
pub const fn is_valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_NAME_LEN {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `name` is one of [`RESERVED_NAMES`]. A `const fn`, usable in constants; `#[tool]`
/// refuses a reserved name itself, with its own copy of the list.
pub const fn is_reserved(name: &str) -> bool {
    let mut i = 0;
    while i < RESERVED_NAMES.len() {
        if str_eq(RESERVED_NAMES[i], name) {
            return true;
        }
        i += 1;
    }
    false
}

/// `const` string equality.
pub const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `list` holds `name`, in a `const` context.
pub const fn contains(list: &[&str], name: &str) -> bool {
    let mut i = 0;
    while i < list.len() {
        if str_eq(list[i], name) {
            return true;
        }
        i += 1;
    }
    false
}

/// The model-facing name of a tool: `toolset__name`, or `name` without a toolset.
pub fn model_name(toolset: Option<&str>, name: &str) -> String {
    match toolset {
        Some(set) => format!("{set}{TOOLSET_SEPARATOR}{name}"),
        None => name.to_owned(),
    }
}

/// The id of a tool: `toolset.name`, or `name` without a toolset.
pub fn tool_id(toolset: Option<&str>, name: &str) -> String {
    match toolset {
        Some(set) => format!("{set}.{name}"),
        None => name.to_owned(),
    }
}

/// The readable form of a tool name, used when a label is missing or fails:
/// `sync_accounts` → `Sync accounts`, `wallet__card_balance` → `Wallet card balance`.
///
/// ```
/// assert_eq!(toolwright_core::names::humanize("sync_accounts"), "Sync accounts");
/// assert_eq!(toolwright_core::names::humanize("cardBalance"), "Card balance");
/// ```
pub fn humanize(name: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' || c.is_whitespace() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    let mut out = words.join(" ");
    if let Some(first) = out.chars().next() {
        let upper: String = first.to_uppercase().collect();
        out.replace_range(..first.len_utf8(), &upper);
    }
    out
}

/// Names from `candidates` close to `word`, closest first (for "did you mean" hints).
pub fn similar<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let word_lower = word.to_lowercase();
    let mut scored: Vec<(f64, &'a str)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let lower = candidate.to_lowercase();
            let score = strsim::jaro_winkler(&word_lower, &lower);
            let related = score >= 0.8
                || lower.contains(&word_lower)
                || word_lower.contains(&lower)
                || strsim::levenshtein(&word_lower, &lower) <= 2;
            related.then_some((score, candidate))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.into_iter().map(|(_, name)| name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rule() {
        assert!(is_valid_name("a"));
        assert!(is_valid_name("wallet__card-balance_2"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("wallet.card"));
        assert!(!is_valid_name(&"a".repeat(65)));
        assert!(is_valid_name(&"a".repeat(64)));
        assert!(!is_valid_name("naïve"));
    }

    #[test]
    fn reserved() {
        assert!(is_reserved("tool_search"));
        assert!(is_reserved("bash"));
        assert!(is_reserved("task"));
        assert!(!is_reserved("bash2"));
    }

    #[test]
    fn humanized() {
        assert_eq!(humanize("sync_accounts"), "Sync accounts");
        assert_eq!(humanize("wallet__card_balance"), "Wallet card balance");
        assert_eq!(humanize("getHTTPStatus"), "Get httpstatus");
        assert_eq!(humanize(""), "");
    }

    #[test]
    fn similar_names() {
        let names = ["read_logs", "restart_service", "get_service_status"];
        assert_eq!(similar("read_log", names), vec!["read_logs"]);
        assert_eq!(similar("service_status", names)[0], "get_service_status");
        assert!(similar("zzz", names).is_empty());
    }
}
