//! Bad input through the runtime: at least 10,000 generated malformed or adversarial calls and
//! 1,000 bad answers. Each call gets a structured error result, nothing panics, and turns parked
//! before the barrage are neither lost nor altered, and still resolve.
//!
//! Input is parsed once and strictly: duplicate keys are rejected (never last-one-wins) and
//! numbers that cannot be represented exactly in the target type are rejected.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use toolwright::context::PrincipalType;
use toolwright::prelude::*;
use toolwright::runtime::{
    CallResult, InputResponse, RespondOutcome, Runtime, RuntimeError, Session, SessionSpec,
    StepOutcome, ToolCall, Turn, TurnRecord, TurnStatus,
};
use toolwright::{Caller, ErrorCode, Principal};

use crate::support::{alice, builder};

// ---------------------------------------------------------------------------------------------
// Tools. Each counts its runs: no bad call may reach a tool.

/// Runs per tool, in one runtime.
#[derive(Default)]
struct Runs {
    set_limit: AtomicUsize,
    strict_echo: AtomicUsize,
    deferred_export: AtomicUsize,
    admin_only: AtomicUsize,
    measure: AtomicUsize,
    /// `parked_write` runs: (turn id, call id).
    parked: Mutex<Vec<(String, String)>>,
}

impl Runs {
    /// Runs of the tools no bad call may reach.
    fn of_bad_targets(&self) -> usize {
        self.set_limit.load(Ordering::SeqCst)
            + self.strict_echo.load(Ordering::SeqCst)
            + self.deferred_export.load(Ordering::SeqCst)
            + self.admin_only.load(Ordering::SeqCst)
    }

    fn parked(&self) -> usize {
        self.parked.lock().unwrap().len()
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Fast,
    Slow,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Inner {
    depth: u8,
    label: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema, ToolInput)]
struct LimitArgs {
    /// A 32-bit limit.
    limit: u32,
    /// A byte.
    small: u8,
    /// A ratio.
    ratio: f64,
    /// A signed count.
    signed: i64,
    /// A short name.
    #[schemars(length(max = 256))]
    name: String,
    /// Tags.
    tags: Vec<String>,
    /// The mode.
    mode: Mode,
    /// Optional nested settings.
    #[serde(default)]
    inner: Option<Inner>,
}

/// Sets a limit (runs without approval).
#[tool(effect = write)]
async fn set_limit(args: LimitArgs, runs: State<Arc<Runs>>) -> LimitArgs {
    runs.set_limit.fetch_add(1, Ordering::SeqCst);
    args
}

#[derive(Deserialize, JsonSchema, ToolInput)]
#[serde(deny_unknown_fields)]
struct StrictArgs {
    #[schemars(length(max = 1024))]
    text: String,
}

/// Echoes text; its input object is closed (unknown fields are refused).
#[tool(effect = read)]
async fn strict_echo(args: StrictArgs, runs: State<Arc<Runs>>) -> String {
    runs.strict_echo.fetch_add(1, Ordering::SeqCst);
    args.text
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ExportArgs {
    dataset: String,
}

/// Exports a dataset (deferred: found with tool_search, called with tool_call).
#[tool(effect = write, deferred)]
async fn deferred_export(args: ExportArgs, runs: State<Arc<Runs>>) -> String {
    runs.deferred_export.fetch_add(1, Ordering::SeqCst);
    args.dataset
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct AdminArgs {
    x: u8,
}

/// Only users may call it.
#[tool(effect = write, user_only)]
async fn admin_only(args: AdminArgs, runs: State<Arc<Runs>>) -> u8 {
    runs.admin_only.fetch_add(1, Ordering::SeqCst);
    args.x
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ParkArgs {
    n: u64,
}

/// Always asks first; parked turns wait on it.
#[tool(effect = write, approval = always)]
async fn parked_write(args: ParkArgs, ctx: ToolContext, runs: State<Arc<Runs>>) -> u64 {
    runs.parked
        .lock()
        .unwrap()
        .push((ctx.turn_id().to_owned(), ctx.call_id().to_owned()));
    args.n
}

#[derive(Debug, Deserialize, Serialize, JsonSchema, ToolInput)]
struct MeasureArgs {
    /// A double.
    double: Option<f64>,
    /// A float.
    float: Option<f32>,
    /// An unsigned 64-bit integer.
    unsigned: Option<u64>,
    /// A signed 64-bit integer.
    signed: Option<i64>,
    /// A 32-bit unsigned integer.
    word: Option<u32>,
}

/// Echoes the numbers it received, as the tool saw them.
#[tool(effect = read)]
async fn measure(args: MeasureArgs, runs: State<Arc<Runs>>) -> MeasureArgs {
    runs.measure.fetch_add(1, Ordering::SeqCst);
    args
}

fn runtime() -> (Runtime, Arc<Runs>) {
    let runs = Arc::new(Runs::default());
    let runtime = builder([
        set_limit::TOOL,
        strict_echo::TOOL,
        deferred_export::TOOL,
        admin_only::TOOL,
        parked_write::TOOL,
        measure::TOOL,
    ])
    .state(Arc::clone(&runs))
    .build()
    .unwrap();
    (runtime, runs)
}

// ---------------------------------------------------------------------------------------------
// The generator

/// xorshift64*: deterministic, no `rand` dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn word(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| (b'a' + self.below(26) as u8) as char)
            .collect()
    }
}

/// One generated bad call and the error codes it may get.
struct Case {
    category: &'static str,
    name: String,
    arguments: String,
    codes: &'static [ErrorCode],
    /// A word the error message must contain (e.g. "duplicate key").
    mentions: Option<&'static str>,
}

const INVALID: &[ErrorCode] = &[ErrorCode::InvalidInput];
const UNKNOWN: &[ErrorCode] = &[ErrorCode::UnknownTool];
const HIDDEN: &[ErrorCode] = &[ErrorCode::UnknownTool, ErrorCode::NotVisible];

fn case(
    category: &'static str,
    name: &str,
    arguments: String,
    codes: &'static [ErrorCode],
) -> Case {
    Case {
        category,
        name: name.to_owned(),
        arguments,
        codes,
        mentions: None,
    }
}

/// A valid input of `set_limit`, as a map the generator mutates.
fn valid_limit(rng: &mut Rng) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("limit".into(), json!(rng.below(1000)));
    map.insert("small".into(), json!(rng.below(256)));
    map.insert("ratio".into(), json!(0.25));
    map.insert("signed".into(), json!(-(rng.below(1000) as i64)));
    map.insert("name".into(), json!(rng.word(8)));
    map.insert("tags".into(), json!(["a", "b"]));
    map.insert("mode".into(), json!("fast"));
    if rng.chance(50) {
        map.insert("inner".into(), json!({ "depth": 3, "label": "x" }));
    }
    map
}

const LIMIT_FIELDS: &[&str] = &["limit", "small", "ratio", "signed", "name", "tags", "mode"];

/// A value of the wrong type for `field`.
fn wrong_value(rng: &mut Rng, field: &str) -> Value {
    let numbers = [
        json!("12"),
        json!(true),
        json!(null),
        json!([1]),
        json!({ "v": 1 }),
        json!(""),
        json!("NaN"),
    ];
    let strings = [
        json!(12),
        json!(true),
        json!(null),
        json!(["x"]),
        json!({ "v": "x" }),
        json!(1.5),
    ];
    let pool: &[Value] = match field {
        "limit" | "small" | "signed" => &[
            numbers[0].clone(),
            numbers[1].clone(),
            numbers[2].clone(),
            numbers[3].clone(),
            numbers[4].clone(),
            numbers[5].clone(),
            numbers[6].clone(),
            json!(1.5),
            json!(-0.5),
        ],
        "ratio" => &numbers,
        "name" | "mode" => &strings,
        "tags" => &[
            json!("a,b"),
            json!(1),
            json!({ "0": "a" }),
            json!([1, 2]),
            json!([null]),
            json!([["a"]]),
            json!(null),
        ],
        other => panic!("{other}"),
    };
    rng.pick(pool).clone()
}

fn nested(depth: usize, array: bool) -> String {
    if array {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    } else {
        format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
    }
}

/// Bad number literals and the field they go into; each is wrong for that field's type.
const BAD_NUMBERS: &[(&str, &str)] = &[
    // Not representable by the parser at all.
    ("limit", "1e400"),
    ("ratio", "1e400"),
    ("ratio", "-1e400"),
    ("ratio", "1e-400"),
    ("ratio", "9007199254740993.0"),
    ("ratio", "0.1000000000000000055511151231257827"),
    ("limit", "1180591620717411303424"), // 2^70
    ("signed", "-1180591620717411303424"),
    ("signed", "-9223372036854775809"),
    ("limit", "123456789012345678901234567890"),
    ("limit", "18446744073709551616"), // 2^64
    // Representable as JSON, not in the target type.
    ("limit", "4294967296"), // u32::MAX + 1
    ("limit", "-1"),
    ("limit", "1.5"),
    ("limit", "-0.0"),
    ("small", "256"),
    ("small", "-1"),
    ("small", "1e3"),
    ("signed", "9223372036854775808"), // i64::MAX + 1
    ("signed", "18446744073709551615"),
    ("signed", "0.5"),
    // Not numbers in JSON.
    ("limit", "NaN"),
    ("ratio", "Infinity"),
    ("ratio", "-Infinity"),
    ("limit", "0x10"),
    ("limit", "+1"),
    ("limit", "01"),
    ("ratio", ".5"),
    ("ratio", "1."),
    ("limit", "-"),
    ("ratio", "1e"),
    ("ratio", "1e+"),
    ("limit", "1_000"),
];

const BAD_ESCAPES: &[&str] = &[
    r"\ud800",
    r"\udc00",
    r"\ud800\u0041",
    r"\udbff",
    r"\uZZZZ",
    r"\u12",
    r"\x41",
    r"\q",
    r"\U0001F600",
    "\u{1}",
    "\n",
    "\t",
    r"\ ",
];

const GARBAGE: &[&str] = &[
    "not json",
    "{",
    "}",
    "[1,2",
    "{\"a\":}",
    "{\"a\" 1}",
    "{'limit': 1}",
    "{limit: 1}",
    "{\"limit\": 1,}",
    "{\"a\":1}{\"b\":2}",
    "{} {}",
    "{}x",
    "\u{feff}{}",
    "/* comment */ {}",
    "{\"a\":1 // comment\n}",
    "True",
    "undefined",
    "nul",
    "\"unterminated",
    "{\"a\":\"b}",
    "[,]",
    "{,}",
    "{\"a\":1,,\"b\":2}",
    "\u{0}",
    "{\"a\":\u{0}}",
    "<xml/>",
    "```json\n{}\n```",
];

fn generate(rng: &mut Rng) -> Vec<Case> {
    let mut cases = Vec::new();
    let limit_text = |map: &Map<String, Value>| serde_json::to_string(map).unwrap();

    // Wrong types, at the top and nested.
    for _ in 0..1500 {
        let mut map = valid_limit(rng);
        let field = *rng.pick(LIMIT_FIELDS);
        map.insert(field.into(), wrong_value(rng, field));
        if rng.chance(20) {
            map.insert(
                "inner".into(),
                rng.pick(&[
                    json!({ "depth": "3", "label": "x" }),
                    json!({ "depth": 300, "label": "x" }),
                    json!("inner"),
                    json!([1]),
                ])
                .clone(),
            );
        }
        cases.push(case("wrong type", "set_limit", limit_text(&map), INVALID));
    }
    // Missing fields.
    for _ in 0..800 {
        let mut map = valid_limit(rng);
        let remove = 1 + rng.below(LIMIT_FIELDS.len());
        for _ in 0..remove {
            let field = *rng.pick(LIMIT_FIELDS);
            map.remove(field);
        }
        if map.len() == LIMIT_FIELDS.len() + usize::from(map.contains_key("inner")) {
            map.remove("limit");
        }
        if rng.chance(10) {
            map.insert("inner".into(), json!({ "depth": 1 }));
        }
        cases.push(case(
            "missing field",
            "set_limit",
            limit_text(&map),
            INVALID,
        ));
    }
    // Extra fields in a closed input.
    for i in 0..800 {
        let mut map = Map::new();
        if rng.chance(90) {
            map.insert("text".into(), json!(rng.word(5)));
        }
        let extra = match i % 6 {
            0 => {
                let len = 1 + rng.below(12);
                rng.word(len)
            }
            1 => "__proto__".to_owned(),
            2 => String::new(),
            3 => "constructor".to_owned(),
            4 => format!("text{}", rng.below(10)),
            _ => "Text".to_owned(),
        };
        map.insert(extra, json!(rng.below(100)));
        cases.push(case(
            "extra field",
            "strict_echo",
            serde_json::to_string(&map).unwrap(),
            INVALID,
        ));
    }
    // Huge strings and inputs.
    let mib = "x".repeat(1 << 20);
    cases.push(case(
        "huge",
        "set_limit",
        limit_text(&{
            let mut map = valid_limit(rng);
            map.insert("name".into(), json!(mib));
            map
        }),
        INVALID,
    ));
    cases.push(case(
        "huge",
        "strict_echo",
        json!({ "text": mib }).to_string(),
        INVALID,
    ));
    cases.push(case(
        "huge",
        "strict_echo",
        format!("{{\"{mib}\": 1}}"),
        INVALID,
    ));
    cases.push(case(
        "huge",
        "set_limit",
        format!("{{\"tags\": [{}\"a\"]}}", "\"a\",".repeat(300_000)),
        INVALID,
    ));
    cases.push(case(
        "huge",
        "set_limit",
        format!("{{\"name\": \"{}\"}}", "y".repeat(5 << 20)),
        INVALID,
    ));
    cases.push(case("huge", "set_limit", " ".repeat(5 << 20), INVALID));
    cases.push(case(
        "huge",
        "set_limit",
        format!("{{\"limit\": {}}}", "9".repeat(100_000)),
        INVALID,
    ));
    cases.push(case(
        "huge",
        "set_limit",
        format!("{{\"ratio\": 0.{}1}}", "0".repeat(100_000)),
        INVALID,
    ));
    cases.push(case(
        "huge",
        "set_limit",
        format!("{{\"ratio\": 1e{}}}", "9".repeat(1000)),
        INVALID,
    ));
    cases.push(case(
        "huge",
        "strict_echo",
        json!({ "text": "\u{1F600}".repeat(1 << 18) }).to_string(),
        INVALID,
    ));
    // Huge numbers and inexact numbers.
    for _ in 0..1000 {
        let (field, literal) = *rng.pick(BAD_NUMBERS);
        let mut map = valid_limit(rng);
        map.insert(field.into(), json!("@@"));
        let text = limit_text(&map).replace("\"@@\"", literal);
        cases.push(case("bad number", "set_limit", text, INVALID));
    }
    // Deep nesting.
    for &depth in &[101, 127, 128, 129, 500, 1000, 10_000, 100_000] {
        for array in [true, false] {
            let deep = nested(depth, array);
            cases.push(case("deep nesting", "set_limit", deep.clone(), INVALID));
            let mut map = valid_limit(rng);
            map.insert("tags".into(), json!("@@"));
            cases.push(case(
                "deep nesting",
                "set_limit",
                limit_text(&map).replace("\"@@\"", &deep),
                INVALID,
            ));
            cases.push(case(
                "deep nesting",
                "strict_echo",
                format!("{{\"text\": {deep}}}"),
                INVALID,
            ));
            cases.push(case(
                "deep nesting",
                "tool_call",
                format!("{{\"name\": \"deferred_export\", \"input\": {{\"dataset\": {deep}}}}}"),
                INVALID,
            ));
            cases.push(case(
                "deep nesting",
                "tool_call",
                format!("{{\"name\": \"deferred_export\", \"input\": {deep}}}"),
                INVALID,
            ));
        }
    }
    // Just over the limit, repeated with varying content.
    for _ in 0..200 {
        let depth = 101 + rng.below(200);
        cases.push(case(
            "deep nesting",
            "set_limit",
            nested(depth, rng.chance(50)),
            INVALID,
        ));
    }
    // Duplicate keys: never last-one-wins.
    for i in 0..1000 {
        let map = valid_limit(rng);
        let text = limit_text(&map);
        let field = *rng.pick(LIMIT_FIELDS);
        let value = serde_json::to_string(&map[field]).unwrap();
        let duplicated = match i % 5 {
            // The same key twice with the same value.
            0 => text.replacen('{', &format!("{{\"{field}\":{value},"), 1),
            // Twice with a different (valid) value.
            1 => text.replacen(
                '{',
                &format!(
                    "{{\"{field}\":{},",
                    serde_json::to_string(&valid_limit(rng)[field]).unwrap()
                ),
                1,
            ),
            // Written differently, equal after unescaping.
            2 => {
                let escaped: String = field
                    .chars()
                    .map(|c| format!("\\u{:04x}", c as u32))
                    .collect();
                text.replacen('{', &format!("{{\"{escaped}\":{value},"), 1)
            }
            // Nested.
            3 => {
                let mut map = map.clone();
                map.insert("inner".into(), json!("@@"));
                limit_text(&map).replace("\"@@\"", "{\"depth\": 1, \"label\": \"a\", \"depth\": 2}")
            }
            // In the strict tool.
            _ => "{\"text\": \"a\", \"text\": \"b\"}".to_owned(),
        };
        let name = if i % 5 == 4 {
            "strict_echo"
        } else {
            "set_limit"
        };
        cases.push(Case {
            mentions: Some("duplicate key"),
            ..case("duplicate key", name, duplicated, INVALID)
        });
    }
    for envelope in [
        r#"{"name": "deferred_export", "name": "set_limit", "input": {"dataset": "a"}}"#,
        r#"{"name": "deferred_export", "input": {"dataset": "a"}, "input": {"dataset": "b"}}"#,
        r#"{"name": "deferred_export", "input": {"dataset": "a", "dataset": "b"}}"#,
        r#"{"name": "deferred_export", "input": {"dataset": "a", "d\u0061taset": "b"}}"#,
    ] {
        for _ in 0..25 {
            cases.push(Case {
                mentions: Some("duplicate key"),
                ..case("duplicate key", "tool_call", envelope.to_owned(), INVALID)
            });
        }
    }
    // Unknown tools.
    let near_misses = [
        "set_limt",
        "setlimit",
        "Set_Limit",
        "set_limit ",
        " set_limit",
        "set-limit",
        "strict_echo2",
        "deferred",
        "export",
        "parked",
        "tool",
        "toolcall",
        "Tool_Call",
        "TOOL_SEARCH",
        "set_limit\u{0}",
        "set_limit\n",
        "séт_limit",
        "measure()",
        "functions.set_limit",
    ];
    for i in 0..1500 {
        let name = match i % 5 {
            0 => rng.pick(&near_misses).to_string(),
            1 => {
                let len = 1 + rng.below(30);
                rng.word(len)
            }
            2 => String::new(),
            3 => format!("{}_{}", rng.word(4), rng.below(1000)),
            _ => "x".repeat(65 + rng.below(2000)),
        };
        cases.push(case("unknown tool", &name, "{}".to_owned(), UNKNOWN));
    }
    for _ in 0..3 {
        cases.push(case(
            "unknown tool",
            &"z".repeat(1 << 20),
            "{}".to_owned(),
            UNKNOWN,
        ));
    }
    for _ in 0..100 {
        cases.push(case(
            "hidden tool",
            "admin_only",
            r#"{"x": 1}"#.to_owned(),
            HIDDEN,
        ));
        cases.push(case(
            "hidden tool",
            "tool_call",
            r#"{"name": "admin_only", "input": {"x": 1}}"#.to_owned(),
            HIDDEN,
        ));
    }
    // Invalid escapes and raw control characters.
    for i in 0..800 {
        let escape = *rng.pick(BAD_ESCAPES);
        let text = match i % 3 {
            0 => format!("{{\"text\": \"a{escape}b\"}}"),
            1 => format!("{{\"te{escape}xt\": \"a\"}}"),
            _ => format!("{{\"text\": \"{escape}\"}}"),
        };
        cases.push(case("invalid escape", "strict_echo", text, INVALID));
    }
    // Not JSON: garbage, random printable noise and cut-off valid inputs.
    for i in 0..1000 {
        let text = match i % 3 {
            0 => rng.pick(GARBAGE).to_string(),
            1 => (0..1 + rng.below(40))
                .map(|_| (b' ' + rng.below(95) as u8) as char)
                .collect(),
            _ => {
                let valid = limit_text(&valid_limit(rng));
                let cut = rng.below(valid.len());
                valid[..cut].to_owned()
            }
        };
        // Noise can be valid JSON by chance ("1", "[]"): none of it is a valid input either way.
        cases.push(case("not json", "set_limit", text, INVALID));
    }
    // Empty and null, for tools with required fields.
    for i in 0..200 {
        let text = ["", " ", "\n\t ", "null", " null "][i % 5];
        let name = if i % 2 == 0 {
            "set_limit"
        } else {
            "strict_echo"
        };
        cases.push(case("empty", name, text.to_owned(), INVALID));
    }
    // JSON, but not an object.
    for i in 0..300 {
        let text = [
            "[]", "1", "\"s\"", "true", "false", "[{}]", "-0", "0", "[null]", "\"{}\"",
        ][i % 10];
        cases.push(case("not an object", "set_limit", text.to_owned(), INVALID));
    }
    // Enum values that do not exist.
    for i in 0..200 {
        let mut map = valid_limit(rng);
        let mode = ["turbo", "FAST", "Fast", "fast ", "", "slow\u{0}"][i % 6];
        map.insert("mode".into(), json!(mode));
        cases.push(case("bad enum", "set_limit", limit_text(&map), INVALID));
    }
    // `tool_call` misuse that must fail whatever the envelope's strictness.
    let envelopes: &[(&str, &'static [ErrorCode])] = &[
        (r#"{"name": 5, "input": {}}"#, INVALID),
        (r#"{"name": null, "input": {}}"#, INVALID),
        (r#"{"input": {"dataset": "a"}}"#, INVALID),
        (r#"{"name": ["deferred_export"], "input": {}}"#, INVALID),
        (
            r#"{"name": "deferred_export", "input": "dataset=a"}"#,
            INVALID,
        ),
        (r#"{"name": "deferred_export", "input": ["a"]}"#, INVALID),
        (
            r#"{"name": "deferred_export", "input": {"dataset": 5}}"#,
            INVALID,
        ),
        (r#"{"name": "deferred_export", "input": {}}"#, INVALID),
        (r#"{"name": "deferred_export", "input": null}"#, INVALID),
        (r#"{"name": "nope", "input": {}}"#, UNKNOWN),
        (r#"{"name": "", "input": {}}"#, UNKNOWN),
        (
            r#"{"name": "tool_call", "input": {"name": "deferred_export", "input": {"dataset": "a"}}}"#,
            UNKNOWN,
        ),
        (
            r#"{"name": "tool_search", "input": {"query": "x"}}"#,
            UNKNOWN,
        ),
        (r#"{"name": "set_limit", "input": {"limit": "x"}}"#, INVALID),
        ("[]", INVALID),
        ("\"deferred_export\"", INVALID),
        ("{", INVALID),
        (
            "{\"name\": \"deferred_export\", \"input\": {\"dataset\": \"\\ud800\"}}",
            INVALID,
        ),
        (
            "{\"name\": \"deferred_export\", \"input\": {\"dataset\": 1e400}}",
            INVALID,
        ),
    ];
    for i in 0..600 {
        let (text, codes) = envelopes[i % envelopes.len()];
        cases.push(case(
            "tool_call misuse",
            "tool_call",
            text.to_owned(),
            codes,
        ));
    }
    // Nesting is refused for its depth, not for what happens to lie at the bottom.
    for case in cases.iter_mut().filter(|c| c.category == "deep nesting") {
        case.mentions = Some("nest");
    }
    cases
}

// ---------------------------------------------------------------------------------------------
// Parked turns that must survive

/// Parks `count` turns of `session`, each on one `parked_write` call, plus returns the request
/// ids.
async fn park(session: &Session, count: u64, prefix: &str) -> Vec<(Turn, String)> {
    let mut parked = Vec::new();
    for n in 0..count {
        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        let outcome = turn
            .step(vec![ToolCall::new(
                format!("{prefix}{n}"),
                "parked_write",
                json!({ "n": n }).to_string(),
            )])
            .await
            .unwrap();
        let StepOutcome::Waiting { requests, .. } = outcome else {
            panic!("did not park: {outcome:?}");
        };
        parked.push((turn, requests[0].request_id.clone()));
    }
    parked
}

type Snapshot = BTreeMap<String, (TurnRecord, u64)>;

async fn snapshot(runtime: &Runtime, parked: &[(Turn, String)]) -> Snapshot {
    let mut records = BTreeMap::new();
    for (turn, _) in parked {
        let stored = runtime
            .store()
            .turn(turn.id())
            .await
            .unwrap()
            .expect("a parked turn is stored");
        records.insert(turn.id().to_owned(), stored);
    }
    records
}

/// The parked turns are exactly as they were (record and version), still listed as waiting, and
/// each still resolves: approving runs its call once.
async fn assert_intact_then_resolve(
    runtime: &Runtime,
    parked: &[(Turn, String)],
    before: &Snapshot,
) {
    let after = snapshot(runtime, parked).await;
    for (id, (record, version)) in before {
        let (now, now_version) = &after[id];
        assert_eq!(now, record, "parked turn {id} was altered");
        assert_eq!(now_version, version, "parked turn {id} was rewritten");
    }
    let waiting = runtime.waiting_turns().await.unwrap();
    for (turn, _) in parked {
        assert!(
            waiting.iter().any(|w| w == turn.id()),
            "parked turn {} is no longer waiting",
            turn.id()
        );
    }
    for (turn, request_id) in parked {
        let outcome = runtime
            .respond(InputResponse::approve(request_id, Some(alice())))
            .await
            .unwrap();
        let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
            panic!("parked turn {} did not resume: {outcome:?}", turn.id());
        };
        assert!(!results[0].is_error, "{results:?}");
        assert_eq!(turn.record().await.unwrap().status, TurnStatus::Active);
    }
}

// ---------------------------------------------------------------------------------------------
// Checking results

#[derive(Default)]
struct Findings {
    /// Calls per category.
    counts: BTreeMap<&'static str, usize>,
    /// Problems per category, with up to 3 examples each.
    problems: BTreeMap<&'static str, (usize, Vec<String>)>,
    /// The longest error message seen, in bytes, and its category.
    longest_message: (usize, &'static str, String),
}

impl Findings {
    fn problem(&mut self, category: &'static str, example: String) {
        let entry = self.problems.entry(category).or_default();
        entry.0 += 1;
        if entry.1.len() < 3 {
            entry.1.push(example.chars().take(400).collect());
        }
    }

    fn report(&self) -> String {
        self.problems
            .iter()
            .map(|(category, (count, examples))| {
                format!(
                    "{category}: {count} of {} calls\n    {}",
                    self.counts[category],
                    examples.join("\n    ")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn short(text: &str) -> String {
    if text.len() <= 120 {
        format!("{text:?}")
    } else {
        let cut = (0..=120)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        format!("{:?}... ({} bytes)", &text[..cut], text.len())
    }
}

fn check(case: &Case, result: Option<&CallResult>, findings: &mut Findings) {
    *findings.counts.entry(case.category).or_default() += 1;
    let what = || format!("{} {} -> ", short(&case.name), short(&case.arguments));
    let Some(result) = result else {
        findings.problem(case.category, format!("{}no result", what()));
        return;
    };
    let Some(error) = result.error.as_ref().filter(|_| result.is_error) else {
        findings.problem(
            case.category,
            format!("{}accepted: {}", what(), short(&result.output.to_string())),
        );
        return;
    };
    if error.message().len() > findings.longest_message.0 {
        findings.longest_message = (error.message().len(), case.category, short(error.message()));
    }
    let structured = result.output["code"].as_str() == Some(error.code().as_str())
        && !error.message().trim().is_empty();
    if !case.codes.contains(&error.code()) || !structured {
        findings.problem(
            case.category,
            format!("{}{:?}: {}", what(), error.code(), short(error.message())),
        );
        return;
    }
    if let Some(word) = case.mentions
        && !error.message().contains(word)
    {
        findings.problem(
            case.category,
            format!(
                "{}message lacks {word:?}: {}",
                what(),
                short(error.message())
            ),
        );
    }
}

/// Runs one step in a task of its own, so a panic is caught and reported instead of ending the
/// test.
async fn step(
    turn: &Turn,
    calls: Vec<ToolCall>,
) -> Result<Result<StepOutcome, RuntimeError>, String> {
    let turn = turn.clone();
    tokio::spawn(async move { turn.step(calls).await })
        .await
        .map_err(|error| format!("the step panicked: {error}"))
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_bad_calls_each_get_a_structured_error() {
    let (runtime, runs) = runtime();
    let session = runtime
        .open_session(SessionSpec::new("s").initiator(alice()))
        .await
        .unwrap();
    let parked = park(&session, 20, "p").await;
    let before = snapshot(&runtime, &parked).await;

    let mut rng = Rng(0x0bad_1dea_5eed_f00d);
    let cases = generate(&mut rng);
    assert!(cases.len() >= 10_000, "only {} cases", cases.len());
    let started = std::time::Instant::now();
    let mut findings = Findings::default();
    let mut panics = Vec::new();
    let mut turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let mut index = 0;
    let mut slowest = (std::time::Duration::ZERO, Vec::new());
    while index < cases.len() {
        let size = 1 + rng.below(100);
        let batch = &cases[index..(index + size).min(cases.len())];
        let calls: Vec<ToolCall> = batch
            .iter()
            .enumerate()
            .map(|(i, c)| {
                ToolCall::new(
                    format!("b{}", index + i),
                    c.name.clone(),
                    c.arguments.clone(),
                )
            })
            .collect();
        let batch_started = std::time::Instant::now();
        let outcome = step(&turn, calls).await;
        let took = batch_started.elapsed();
        if took > slowest.0 {
            let mut categories: Vec<&str> = batch.iter().map(|c| c.category).collect();
            categories.dedup();
            slowest = (took, categories);
        }
        match outcome {
            Ok(Ok(StepOutcome::Completed { results, .. })) => {
                assert_eq!(results.len(), batch.len());
                for (i, case) in batch.iter().enumerate() {
                    let call_id = format!("b{}", index + i);
                    check(
                        case,
                        results.iter().find(|r| r.call_id == call_id).map(|r| &**r),
                        &mut findings,
                    );
                }
            }
            Ok(Ok(waiting @ StepOutcome::Waiting { .. })) => {
                panic!("a batch of bad calls parked: {waiting:?}");
            }
            Ok(Err(error)) => panic!("the step failed instead of giving error results: {error}"),
            Err(panic) => {
                let categories: Vec<&str> = batch.iter().map(|c| c.category).collect();
                panics.push(format!("{panic} in a batch of {categories:?}"));
                turn = session
                    .begin_turn(Some(alice()), Caller::Model)
                    .await
                    .unwrap();
            }
        }
        index += batch.len();
    }
    let elapsed = started.elapsed();
    println!(
        "{} bad calls in {elapsed:?}; per category: {:?}; longest error message: {} bytes ({}: {}); slowest step: {:?} ({:?})",
        cases.len(),
        findings.counts,
        findings.longest_message.0,
        findings.longest_message.1,
        findings.longest_message.2,
        slowest.0,
        slowest.1,
    );
    assert!(panics.is_empty(), "panics:\n{}", panics.join("\n"));
    assert_intact_then_resolve(&runtime, &parked, &before).await;
    assert!(
        findings.problems.is_empty(),
        "calls without the structured error they need:\n{}",
        findings.report()
    );
    assert_eq!(runs.of_bad_targets(), 0, "a bad call reached a tool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_answers_change_no_parked_turn() {
    let (runtime, runs) = runtime();
    let session = runtime
        .open_session(SessionSpec::new("s").initiator(alice()))
        .await
        .unwrap();
    let parked = park(&session, 30, "p").await;

    // Requests that are already settled: approved, cancelled, revoked by a message, or of a
    // cancelled turn.
    let done = park(&session, 8, "d").await;
    for (i, (turn, request_id)) in done.iter().enumerate() {
        match i % 4 {
            0 => drop(
                runtime
                    .respond(InputResponse::approve(request_id, Some(alice())))
                    .await
                    .unwrap(),
            ),
            1 => drop(
                runtime
                    .respond(InputResponse::cancel(request_id, Some(alice())))
                    .await
                    .unwrap(),
            ),
            2 => drop(turn.message("never mind").await.unwrap()),
            _ => turn.cancel().await.unwrap(),
        }
    }
    let ran_before = runs.parked();
    let before = snapshot(&runtime, &parked).await;
    let settled_before = snapshot(&runtime, &done).await;

    let wrong = [
        Some(Principal::user("oidc", "bob")),
        Some(Principal::user("saml", "alice")),
        Some(Principal {
            issuer: Some("other".into()),
            ..alice()
        }),
        Some(Principal {
            principal_type: PrincipalType::Service,
            ..alice()
        }),
        Some(Principal::app()),
        Some(Principal::user("oidc", "Alice")),
        Some(Principal::user("oidc", "alice ")),
        Some(Principal::user("oidc", "")),
        None,
    ];
    let mut rng = Rng(0xa115_0bad);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for i in 0..3000 {
        let approve = rng.chance(60);
        let answer = |request_id: String, principal: Option<Principal>| {
            let response = if approve {
                InputResponse::approve(request_id, principal)
            } else {
                InputResponse::cancel(request_id, principal)
            };
            if i % 7 == 0 {
                response.note("please")
            } else {
                response
            }
        };
        match i % 3 {
            // Unknown request ids.
            0 => {
                let id = match rng.below(8) {
                    0 => String::new(),
                    1 => format!(
                        "req_{:032x}",
                        u128::from(rng.next()) << 64 | u128::from(rng.next())
                    ),
                    2 => "' OR 1=1; DROP TABLE turns; --".to_owned(),
                    3 => "req\u{0}".to_owned(),
                    4 => "r".repeat(1 << 16),
                    5 => format!("{}%", parked[rng.below(parked.len())].1),
                    6 => parked[rng.below(parked.len())].1.to_uppercase(),
                    _ => parked[rng.below(parked.len())].0.id().to_owned(),
                };
                match runtime.respond(answer(id.clone(), Some(alice()))).await {
                    Err(RuntimeError::UnknownRequest(_)) => {
                        *counts.entry("unknown: UnknownRequest").or_default() += 1
                    }
                    other => panic!(
                        "an answer to the unknown request {} came to {other:?}",
                        short(&id)
                    ),
                }
            }
            // Settled or revoked requests, even from the right person.
            1 => {
                let (_, id) = &done[rng.below(done.len())];
                let principal = if rng.chance(50) {
                    Some(alice())
                } else {
                    wrong[rng.below(wrong.len())].clone()
                };
                match runtime.respond(answer(id.clone(), principal)).await {
                    Ok(RespondOutcome::Dropped) => {
                        *counts.entry("settled: Dropped").or_default() += 1
                    }
                    other => panic!("an answer to the settled request {id} came to {other:?}"),
                }
            }
            // Pending requests, from the wrong principal or nobody.
            _ => {
                let (_, id) = &parked[rng.below(parked.len())];
                let principal = wrong[rng.below(wrong.len())].clone();
                match runtime.respond(answer(id.clone(), principal.clone())).await {
                    Ok(RespondOutcome::Rejected { reason }) if !reason.is_empty() => {
                        *counts.entry("wrong principal: Rejected").or_default() += 1;
                    }
                    other => panic!("an answer to {id} from {principal:?} came to {other:?}"),
                }
            }
        }
    }
    // Steps and completions on parked turns are refused.
    for (turn, _) in parked.iter().take(10) {
        match turn
            .step(vec![ToolCall::new("again", "set_limit", "{}")])
            .await
        {
            Err(RuntimeError::TurnState {
                status: TurnStatus::Waiting,
                ..
            }) => *counts.entry("step on parked: TurnState").or_default() += 1,
            other => panic!("a step on a parked turn came to {other:?}"),
        }
        match turn.complete().await {
            Err(RuntimeError::TurnState {
                status: TurnStatus::Waiting,
                ..
            }) => *counts.entry("complete parked: TurnState").or_default() += 1,
            other => panic!("completing a parked turn came to {other:?}"),
        }
    }
    println!("bad answers: {counts:?}");
    assert!(counts.values().sum::<usize>() >= 1000);
    assert_eq!(runs.parked(), ran_before, "a bad answer ran a tool");
    assert_eq!(
        snapshot(&runtime, &done).await,
        settled_before,
        "a settled turn changed"
    );
    assert_intact_then_resolve(&runtime, &parked, &before).await;
    assert_eq!(runs.parked(), ran_before + parked.len());
}

/// Runs `calls` in a fresh turn and returns the results by call id.
async fn results_of(runtime: &Runtime, calls: Vec<ToolCall>) -> BTreeMap<String, CallResult> {
    let session = runtime
        .open_session(SessionSpec::new("focused").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    match turn.step(calls).await.unwrap() {
        StepOutcome::Completed { results, .. } => results
            .into_iter()
            .map(|r| (r.call_id.clone(), std::sync::Arc::unwrap_or_clone(r)))
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn duplicate_keys_are_rejected_never_last_one_wins() {
    let (runtime, runs) = runtime();
    let texts = [
        r#"{"unsigned": 1, "unsigned": 2}"#,
        r#"{"unsigned": 2, "unsigned": 2}"#,
        r#"{"unsigned": 1, "\u0075nsigned": 2}"#,
        r#"{"signed": -1, "word": 3, "signed": 1}"#,
    ];
    let mut calls: Vec<ToolCall> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| ToolCall::new(format!("m{i}"), "measure", *text))
        .collect();
    calls.push(ToolCall::new(
        "tc-envelope",
        "tool_call",
        r#"{"name": "deferred_export", "input": {"dataset": "a"}, "input": {"dataset": "b"}}"#,
    ));
    calls.push(ToolCall::new(
        "tc-input",
        "tool_call",
        r#"{"name": "deferred_export", "input": {"dataset": "a", "dataset": "b"}}"#,
    ));
    calls.push(ToolCall::new(
        "tc-name",
        "tool_call",
        r#"{"name": "admin_only", "name": "deferred_export", "input": {"dataset": "a"}}"#,
    ));
    let results = results_of(&runtime, calls).await;
    for (call_id, result) in &results {
        let error = result.error.as_ref().unwrap_or_else(|| {
            panic!(
                "{call_id}: a duplicate key was accepted: {:?}",
                result.output
            )
        });
        assert_eq!(
            error.code(),
            ErrorCode::InvalidInput,
            "{call_id}: {error:?}"
        );
        assert!(
            error.message().contains("duplicate key"),
            "{call_id}: {error:?}"
        );
        let details = error
            .details_value()
            .unwrap_or_else(|| panic!("{call_id}: no details: {error:?}"));
        assert!(details[0]["pointer"].is_string(), "{call_id}: {details}");
    }
    assert_eq!(runs.measure.load(Ordering::SeqCst), 0);
    assert_eq!(runs.deferred_export.load(Ordering::SeqCst), 0);
}

/// Numbers are taken as written or refused: none is rounded, wrapped or saturated on its way to
/// the tool.
#[tokio::test]
async fn numbers_not_exact_in_the_target_type_are_rejected() {
    let (runtime, runs) = runtime();
    let rejected = [
        // Not exact even as JSON numbers.
        ("double", "1e400"),
        ("double", "1e-400"),
        ("double", "9007199254740993.0"),
        ("unsigned", "18446744073709551616"),
        ("unsigned", "1180591620717411303424"),
        ("signed", "-9223372036854775809"),
        // Exact as JSON numbers, not in the field's type.
        ("unsigned", "-1"),
        ("unsigned", "1.5"),
        ("signed", "9223372036854775808"),
        ("word", "4294967296"),
        ("word", "-1"),
        ("word", "0.5"),
        // 2^53 + 1 is an exact JSON integer but has no exact `f64`.
        ("double", "9007199254740993"),
        ("double", "18446744073709551615"),
        // 2^24 + 1 has no exact `f32`; 1e300 is infinite as an `f32`.
        ("float", "16777217"),
        ("float", "1e300"),
        ("float", "-3.5e38"),
    ];
    let accepted = [
        ("double", "9007199254740992", json!(9007199254740992.0_f64)),
        ("double", "0.1", json!(0.1)),
        ("double", "-0.0", json!(-0.0)),
        ("double", "1e308", json!(1e308)),
        ("float", "0.5", json!(0.5)),
        ("float", "16777216", json!(16777216.0)),
        ("unsigned", "18446744073709551615", json!(u64::MAX)),
        ("signed", "-9223372036854775808", json!(i64::MIN)),
        ("word", "4294967295", json!(u32::MAX)),
    ];
    let mut calls = Vec::new();
    for (i, (field, literal)) in rejected.iter().enumerate() {
        calls.push(ToolCall::new(
            format!("bad{i}"),
            "measure",
            format!("{{\"{field}\": {literal}}}"),
        ));
    }
    for (i, (field, literal, _)) in accepted.iter().enumerate() {
        calls.push(ToolCall::new(
            format!("ok{i}"),
            "measure",
            format!("{{\"{field}\": {literal}}}"),
        ));
    }
    let results = results_of(&runtime, calls).await;
    let mut wrong = Vec::new();
    for (i, (field, literal)) in rejected.iter().enumerate() {
        let result = &results[&format!("bad{i}")];
        match &result.error {
            Some(error) if error.code() == ErrorCode::InvalidInput => {}
            Some(error) => wrong.push(format!(
                "{field} = {literal}: {:?} instead of INVALID_INPUT",
                error.code()
            )),
            None => wrong.push(format!(
                "{field} = {literal}: accepted, the tool saw {}",
                result.output[field]
            )),
        }
    }
    for (i, (field, literal, expected)) in accepted.iter().enumerate() {
        let result = &results[&format!("ok{i}")];
        if result.is_error || &result.output[field] != expected {
            wrong.push(format!(
                "{field} = {literal}: expected {expected}, got {:?}",
                result.output
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "numbers mishandled:\n{}",
        wrong.join("\n")
    );
    assert_eq!(runs.measure.load(Ordering::SeqCst), accepted.len());
}

/// A field the tool does not have is an error, not silently dropped: the model would believe
/// it had an effect.
#[tokio::test]
async fn extra_fields_are_rejected_even_when_the_struct_does_not_deny_them() {
    let (runtime, runs) = runtime();
    let results = results_of(
        &runtime,
        vec![
            ToolCall::new("top", "set_limit", r#"{"limit": 1, "small": 1, "ratio": 0.5, "signed": 1, "name": "x", "tags": [], "mode": "fast", "force": true}"#),
            ToolCall::new("nested", "set_limit", r#"{"limit": 1, "small": 1, "ratio": 0.5, "signed": 1, "name": "x", "tags": [], "mode": "fast", "inner": {"depth": 1, "label": "a", "unsafe": true}}"#),
            ToolCall::new("measure", "measure", r#"{"unsigned": 1, "units": "bytes"}"#),
        ],
    )
    .await;
    let accepted: Vec<&String> = results
        .iter()
        .filter(|(_, r)| !r.is_error)
        .map(|(id, _)| id)
        .collect();
    assert!(
        accepted.is_empty(),
        "calls with unknown fields ran (the unknown fields were dropped): {accepted:?}; runs: set_limit {}, measure {}",
        runs.set_limit.load(Ordering::SeqCst),
        runs.measure.load(Ordering::SeqCst)
    );
}

/// The meta-tools publish closed schemas (`query` required; `name` and `input` required, nothing
/// else): their arguments are validated like any tool's.
#[tokio::test]
async fn meta_tool_arguments_are_validated_against_their_published_schemas() {
    let (runtime, runs) = runtime();
    let cases = [
        ("search-number", "tool_search", r#"{"query": 5}"#),
        ("search-missing", "tool_search", r#"{}"#),
        ("search-empty-text", "tool_search", ""),
        ("search-array", "tool_search", r#"[]"#),
        (
            "search-extra",
            "tool_search",
            r#"{"query": "export", "limit": 100}"#,
        ),
        ("search-null", "tool_search", r#"{"query": null}"#),
        (
            "call-extra",
            "tool_call",
            r#"{"name": "deferred_export", "input": {"dataset": "a"}, "approved": true}"#,
        ),
        (
            "call-missing-input",
            "tool_call",
            r#"{"name": "deferred_export"}"#,
        ),
    ];
    let calls = cases
        .iter()
        .map(|(id, name, text)| ToolCall::new(*id, *name, *text))
        .collect();
    let results = results_of(&runtime, calls).await;
    let accepted: Vec<String> = cases
        .iter()
        .filter(|(id, _, _)| !results[*id].is_error)
        .map(|(id, _, text)| format!("{id} {text}"))
        .collect();
    assert!(
        accepted.is_empty(),
        "meta-tool calls that break the published schema were accepted:\n{}\n(deferred_export ran {} times)",
        accepted.join("\n"),
        runs.deferred_export.load(Ordering::SeqCst)
    );
}

/// Two calls of one step with the same call id (a confused or hostile host): neither may run
/// twice, and the one that asks for approval must not run on the other's approval.
#[tokio::test]
async fn duplicate_call_ids_in_one_step_never_run_a_call_twice() {
    let (runtime, runs) = runtime();
    let session = runtime
        .open_session(SessionSpec::new("dup-ids").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let outcome = turn
        .step(vec![
            ToolCall::new("same", "parked_write", r#"{"n": 1}"#),
            ToolCall::new("same", "measure", r#"{"unsigned": 7}"#),
        ])
        .await
        .unwrap();
    let measure_runs_at_step = runs.measure.load(Ordering::SeqCst);
    let mut answered = None;
    if let StepOutcome::Waiting { requests, .. } = &outcome {
        answered = Some(
            runtime
                .respond(InputResponse::approve(
                    &requests[0].request_id,
                    Some(alice()),
                ))
                .await
                .unwrap(),
        );
    }
    let record = turn.record().await.unwrap();
    assert!(
        runs.measure.load(Ordering::SeqCst) <= 1,
        "`measure` ran {} times (after the step: {measure_runs_at_step}); step: {outcome:?}; answer: {answered:?}",
        runs.measure.load(Ordering::SeqCst)
    );
    assert!(
        runs.parked() <= 1,
        "`parked_write` ran {} times",
        runs.parked()
    );
    assert_ne!(record.status, TurnStatus::Running, "{record:?}");
}

/// Error messages quote at most a bounded prefix of what the model sent: a 100 kB tool name,
/// field name, value, call id or task id comes back as its first 200 characters and a count.
#[tokio::test]
async fn errors_quote_a_bounded_prefix_of_100_kb_model_text() {
    let (runtime, runs) = runtime();
    let huge = |c: &str| c.repeat(100_000);
    let calls = vec![
        ToolCall::new("name", huge("x"), "{}"),
        ToolCall::new("bad-chars", format!("x {}", huge("y")), "{}"),
        ToolCall::new(
            "field",
            "strict_echo",
            json!({ "text": "hi", huge("k"): 1 }).to_string(),
        ),
        ToolCall::new(
            "value",
            "strict_echo",
            json!({ "text": huge("v") }).to_string(),
        ),
        ToolCall::new(
            "deferred",
            "tool_call",
            json!({ "name": huge("t"), "input": {} }).to_string(),
        ),
        ToolCall::new(
            "duplicate",
            "strict_echo",
            format!(r#"{{"text": "a", "{k}": 1, "{k}": 2}}"#, k = huge("d")),
        ),
    ];
    let results = results_of(&runtime, calls).await;
    assert_eq!(results.len(), 6);
    for (id, result) in &results {
        let message = result.error.as_ref().expect("an error").message();
        assert!(
            message.chars().count() < 1_500,
            "{id}: a {} character message: {}…",
            message.chars().count(),
            message.chars().take(300).collect::<String>()
        );
        assert!(
            message.contains("more characters)"),
            "{id}: the message says how much it left out: {message}"
        );
    }
    let name = results["name"].error.as_ref().unwrap().message();
    assert!(
        name.starts_with(&format!(
            "no tool named `{}… (99800 more characters)`",
            &huge("x")[..200]
        )),
        "{name}"
    );
    assert_eq!(runs.strict_echo.load(Ordering::SeqCst), 0);

    // Two calls with one 100 kB id: neither runs, and the message names the id briefly.
    let id = huge("i");
    let repeated = vec![
        ToolCall::new(id.clone(), "strict_echo", r#"{"text":"a"}"#),
        ToolCall::new(id.clone(), "strict_echo", r#"{"text":"b"}"#),
    ];
    let session = runtime
        .open_session(SessionSpec::new("focused-ids").initiator(alice()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .unwrap();
    let StepOutcome::Completed { results, .. } = turn.step(repeated).await.unwrap() else {
        panic!("a step of repeated ids completes with errors")
    };
    let message = results[0].error.as_ref().unwrap().message();
    assert!(message.len() < 1_000, "{}", &message[..300]);
    assert_eq!(runs.strict_echo.load(Ordering::SeqCst), 0);
}
