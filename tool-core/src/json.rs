//! Strict parsing of the raw JSON arguments a model sends.
//!
//! A call's arguments are parsed once, here, into the [`Value`] that validation and execution
//! both use. Lenient parsing would let them disagree: with `{"limit": 5, "limit": 500}` a schema
//! check and a tool reading the text again could each pick a different `limit`, and a number
//! that silently rounds is not the number the model meant. So the parser rejects, instead of
//! resolving, everything whose meaning is ambiguous.

use std::fmt::{self, Write as _};

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};

use crate::error::{InputError, InputProblem};

/// The largest argument text accepted, in bytes (4 MiB).
pub const MAX_ARGUMENT_BYTES: usize = 4 * 1024 * 1024;

/// The deepest nesting of arrays and objects accepted: `[[1]]` nests 2 levels.
///
/// serde_json stops at 127 levels with a bare "recursion limit exceeded" and no location; this
/// limit sits below it so the problem is always reported by this module, with its pointer.
pub const MAX_DEPTH: usize = 100;

// serde_json's counter starts at 128 and fails when it reaches 0, on the 128th open container.
const _: () = assert!(MAX_DEPTH < 128 - 1);

/// Most problems reported for one input; the rest are summarised (as schema validation does).
const MAX_PROBLEMS: usize = 20;

/// Parses the raw JSON arguments of a call to `tool`, rejecting what lenient parsers would
/// silently resolve.
///
/// Accepted are JSON texts of at most [`MAX_ARGUMENT_BYTES`]. An empty or all-whitespace text and
/// `null` become `{}` (models send them for tools without arguments). The result equals what
/// `serde_json::from_str::<Value>` returns for the same text whenever this function accepts it.
///
/// Rejected, with one [`InputProblem`] each (as many as are found before parsing has to stop):
///
/// - **duplicate keys** in an object at any depth, compared after decoding escapes (`"a"` and
///   `"\u0061"` are the same key), reported at the object's pointer. Other parsers keep the last
///   or the first value; which one a reader sees must not depend on the reader.
/// - **numbers that do not survive parsing unchanged**:
///   - an integer (no fraction, no exponent) outside `-9223372036854775808..=18446744073709551615`
///     (`i64::MIN..=u64::MAX`). Inside that range it is kept exactly, as an integer, so
///     `9007199254740993` is accepted (and `-0` is the float `-0.0`, as serde_json reads it);
///   - a number with a fraction or an exponent that is not faithful to the `f64` nearest to it
///     (the one it becomes). Faithful means either a *shortest form* of that `f64`: as many
///     significant digits as Rust's shortest round-trip formatting (`{:e}`) prints for it, and
///     its exact binary value correctly rounded to those digits (at an exact tie, where Rust
///     rounds one way and serde_json, JavaScript and Python the other, both are faithful); or
///     its *exact* binary value, digit for digit. Notation does not matter (trailing zeros,
///     exponent, `e` or `E`). Accepted: `1e2`, `100.0`, `0.5`, `1.25e-3`, `0.1` (the shortest
///     form of the `f64` nearest to it) and `0.1000000000000000055511151231257827021181583404541015625`
///     (its exact value). Rejected: `9007199254740993.0` (it would become `9007199254740992`),
///     `1e-400` (it would become `0`), `0.1000000000000000055511151231257827` (neither shortest
///     nor exact) and `1e400` (too large for an `f64`). So what any correct shortest-form
///     printer writes is accepted, and no digit a model wrote is silently dropped or changed;
/// - **nesting deeper than [`MAX_DEPTH`]** levels of arrays and objects;
/// - **anything that is not exactly one JSON value**: syntax errors, text after the value, raw
///   control characters in strings, invalid escapes and lone surrogates (`"\ud800"`).
///
/// Pointers are JSON pointers into the input (`""` is the whole input); a syntax error points at
/// the value being read when parsing stopped, or at the array or object whose punctuation is
/// broken.
///
/// ```
/// use serde_json::json;
/// use toolwright_core::json::parse_arguments;
///
/// let args = parse_arguments("read_logs", r#"{"service": "api", "limit": 50}"#).unwrap();
/// assert_eq!(args, json!({ "service": "api", "limit": 50 }));
/// assert_eq!(parse_arguments("read_logs", "  ").unwrap(), json!({}));
///
/// let err = parse_arguments("read_logs", r#"{"filter": {"limit": 5, "limit": 500}}"#).unwrap_err();
/// assert_eq!(err.problems[0].pointer, "/filter");
/// assert_eq!(
///     err.problems[0].message,
///     "duplicate key `limit` in the object at /filter; send each key once"
/// );
///
/// let err = parse_arguments("read_logs", r#"{"since": 9007199254740993.0}"#).unwrap_err();
/// assert_eq!(err.problems[0].pointer, "/since");
/// ```
pub fn parse_arguments(tool: &str, text: &str) -> Result<Value, InputError> {
    let mut state = State::new(text);
    let value = state.parse();
    match value {
        Some(value) if state.problems.is_empty() => Ok(match value {
            Value::Null => Value::Object(Map::new()),
            other => other,
        }),
        _ => Err(state.into_error(tool)),
    }
}

/// Where a value sits, as a chain of borrowed steps up to the root: the pointer is only built
/// when a problem needs it, and keys are borrowed from the key being parsed instead of copied.
enum Location<'p> {
    Root,
    Key(&'p Location<'p>, &'p str),
    Index(&'p Location<'p>, usize),
}

impl Location<'_> {
    fn pointer(&self) -> String {
        let mut out = String::new();
        self.write_pointer(&mut out);
        out
    }

    fn write_pointer(&self, out: &mut String) {
        match self {
            Location::Root => {}
            Location::Key(parent, key) => {
                parent.write_pointer(out);
                out.push('/');
                for c in key.chars() {
                    match c {
                        '~' => out.push_str("~0"),
                        '/' => out.push_str("~1"),
                        c => out.push(c),
                    }
                }
            }
            Location::Index(parent, index) => {
                parent.write_pointer(out);
                let _ = write!(out, "/{index}");
            }
        }
    }

    /// "the top-level object" or "the object at /a/b".
    fn describe_object(&self) -> String {
        match self {
            Location::Root => "the top-level object".to_owned(),
            other => format!("the object at {}", other.pointer()),
        }
    }
}

/// The parse of one argument text: the problems found so far and the number scanner.
struct State<'a> {
    text: &'a str,
    /// Byte offset the scan for the next number token starts at.
    number_cursor: usize,
    /// Integers read since the scan last moved: passed over when it next moves (for a float to
    /// check, or a failure to place), so that arguments without floats are never scanned.
    integers_behind: usize,
    problems: Vec<InputProblem>,
    unlisted: usize,
    /// Pointer of the innermost value being read when serde_json failed.
    failed_at: Option<String>,
    /// Parsing was stopped by this module (too deep), so serde_json's error adds nothing.
    stopped: bool,
}

impl<'a> State<'a> {
    fn new(text: &'a str) -> Self {
        State {
            text,
            number_cursor: 0,
            integers_behind: 0,
            problems: Vec::new(),
            unlisted: 0,
            failed_at: None,
            stopped: false,
        }
    }

    /// The parsed value, or `None` when parsing had to stop (the reason is in `problems`).
    fn parse(&mut self) -> Option<Value> {
        let text = self.text;
        if text.len() > MAX_ARGUMENT_BYTES {
            self.problem(
                String::new(),
                format!(
                    "the arguments are {} bytes, more than the limit of {MAX_ARGUMENT_BYTES} \
                     bytes; send less data, or pass large content by reference",
                    text.len()
                ),
            );
            return None;
        }
        if text.bytes().all(is_json_whitespace) {
            return Some(Value::Object(Map::new()));
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let seed = ValueSeed {
            state: self,
            at: &Location::Root,
            depth: 0,
        };
        let value = match seed.deserialize(&mut de) {
            Ok(value) => value,
            Err(error) => {
                self.serde_failed(&error);
                return None;
            }
        };
        if let Err(error) = de.end() {
            self.problem(
                String::new(),
                format!(
                    "unexpected text after the end of the JSON value at line {} column {}; send \
                     exactly one JSON value with nothing after it",
                    error.line(),
                    error.column()
                ),
            );
        }
        Some(value)
    }

    fn problem(&mut self, pointer: String, message: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(InputProblem { pointer, message });
        } else {
            self.unlisted += 1;
        }
    }

    fn into_error(mut self, tool: &str) -> InputError {
        if self.unlisted > 0 {
            self.problems.push(InputProblem {
                pointer: String::new(),
                message: format!("{} more problems not listed", self.unlisted),
            });
        }
        InputError {
            tool: tool.to_owned(),
            problems: self.problems,
        }
    }

    /// Remembers where the innermost failing value sits; outer frames see it is already set.
    fn fail_at<E>(&mut self, at: &Location<'_>, error: E) -> E {
        if self.failed_at.is_none() {
            self.failed_at = Some(at.pointer());
        }
        error
    }

    /// Turns serde_json's error into a problem; a number too large for an `f64` gets its own
    /// message, anything else is a syntax error.
    fn serde_failed(&mut self, error: &serde_json::Error) {
        if self.stopped {
            return;
        }
        let pointer = self.failed_at.take().unwrap_or_default();
        let offset = byte_offset(self.text, error.line(), error.column());
        self.catch_up();
        // serde_json reports an out-of-range number after reading at least two of its bytes
        // (`1e400` at its end, `1e99999999999` where the exponent overflows), and other errors
        // at the start of the token ahead, so a missing `:` before `1e400` stays a syntax error.
        if let Some((start, end)) = next_number_token(self.text.as_bytes(), self.number_cursor)
            && (start + 2..=end + 1).contains(&offset)
            && let Some(token) = self.text.get(start..end)
            && let Some(decimal) = Decimal::parse(token)
            && token.parse::<f64>().is_ok_and(f64::is_infinite)
        {
            let message = if decimal.is_integer {
                integer_out_of_range(token)
            } else {
                format!(
                    "the number {} is too large for a 64-bit float (the largest is about \
                     1.8e308); send a smaller number",
                    shown(token)
                )
            };
            self.problem(pointer, message);
            return;
        }
        let message = if error.is_eof() {
            format!(
                "the arguments end too early ({error}); they look cut off: send the complete JSON"
            )
        } else {
            format!(
                "the arguments are not valid JSON ({error}); fix the syntax and send them again"
            )
        };
        self.problem(pointer, message);
    }

    /// Notes the next number token, which serde_json has just read as an integer that fits
    /// `i64` or `u64`: written exactly, nothing to check, so the scan passes over it later.
    fn integer(&mut self) {
        self.integers_behind += 1;
    }

    /// Moves the scan past the integers read since it last moved.
    fn catch_up(&mut self) {
        while self.integers_behind > 0 {
            self.integers_behind -= 1;
            let token = self.next_token();
            debug_assert!(token.is_some(), "the scan lost track of the numbers");
        }
    }

    /// Consumes the next number token, which serde_json has just read as `value`, and checks the
    /// written number is faithful to `value` (the rule is on [`parse_arguments`]).
    fn float(&mut self, at: &Location<'_>, value: f64) {
        let Some(token) = self.next_number() else {
            debug_assert!(false, "the scan lost track of the numbers");
            return;
        };
        let Some(written) = Decimal::parse(token) else {
            return;
        };
        if self.problems.len() >= MAX_PROBLEMS && !written.is_integer {
            // Enough problems are listed already: only the cheap shortest-form comparison runs,
            // so a huge array of bad floats cannot stall the parser on exact expansions (a tie
            // the full check would accept is then counted as a problem).
            let mut buffer = [0u8; 40];
            let shortest = shortest_repr(value, &mut buffer).and_then(Decimal::parse);
            if !shortest.is_some_and(|shortest| shortest.same_value(&written)) {
                self.unlisted += 1;
            }
            return;
        }
        if written.is_integer {
            // An integer reaches `visit_f64` only outside the 64-bit range, or as `-0`.
            if value != 0.0 {
                self.problem(at.pointer(), integer_out_of_range(token));
            }
            return;
        }
        let mut buffer = [0u8; 40];
        let shortest = shortest_repr(value, &mut buffer).and_then(Decimal::parse);
        if shortest.is_some_and(|shortest| {
            shortest.same_value(&written) || written.is_exact_or_tie(value, &shortest)
        }) {
            return;
        }
        self.problem(
            at.pointer(),
            format!(
                "the number {} cannot be represented exactly as a 64-bit float: it would become \
                 {value:?}; send {value:?}, or the value as a string if every digit matters",
                shown(token)
            ),
        );
    }

    /// The next number token after the integers read since the scan last moved.
    fn next_number(&mut self) -> Option<&'a str> {
        self.catch_up();
        self.next_token()
    }

    fn next_token(&mut self) -> Option<&'a str> {
        let (start, end) = next_number_token(self.text.as_bytes(), self.number_cursor)?;
        self.number_cursor = end;
        self.text.get(start..end)
    }
}

/// Deserializes one value at `at`, `depth` levels of arrays and objects below the root.
struct ValueSeed<'s, 'a, 'p> {
    state: &'s mut State<'a>,
    at: &'p Location<'p>,
    depth: usize,
}

impl ValueSeed<'_, '_, '_> {
    /// Stops parsing when a container here would nest deeper than [`MAX_DEPTH`].
    fn enter<E: de::Error>(&mut self) -> Result<(), E> {
        if self.depth < MAX_DEPTH {
            return Ok(());
        }
        self.state.problem(
            self.at.pointer(),
            format!(
                "arrays and objects nest more than {MAX_DEPTH} levels deep here; send flatter \
                 arguments"
            ),
        );
        self.state.stopped = true;
        Err(E::custom("nesting too deep"))
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_, '_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        let ValueSeed { state, at, depth } = self;
        let seed = ValueSeed {
            state: &mut *state,
            at,
            depth,
        };
        // serde_json calls this once the value starts (after any `,` or `:`), so an error here
        // is in this value; one before it is in the separators of the enclosing container.
        deserializer
            .deserialize_any(seed)
            .map_err(|error| state.fail_at(at, error))
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_, '_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        self.state.integer();
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        self.state.integer();
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        self.state.float(self.at, v);
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        self.enter()?;
        let state = self.state;
        let mut items = Vec::new();
        loop {
            let at = Location::Index(self.at, items.len());
            let seed = ValueSeed {
                state: &mut *state,
                at: &at,
                depth: self.depth + 1,
            };
            match seq.next_element_seed(seed) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return Ok(Value::Array(items)),
                Err(error) => return Err(state.fail_at(self.at, error)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut access: A) -> Result<Value, A::Error> {
        self.enter()?;
        let state = self.state;
        let mut map = Map::new();
        // Keys already reported as duplicates, so a key sent three times is one problem.
        let mut reported: Vec<String> = Vec::new();
        loop {
            let key = match access.next_key::<String>() {
                Ok(Some(key)) => key,
                Ok(None) => return Ok(Value::Object(map)),
                Err(error) => return Err(state.fail_at(self.at, error)),
            };
            let at = Location::Key(self.at, &key);
            let seed = ValueSeed {
                state: &mut *state,
                at: &at,
                depth: self.depth + 1,
            };
            let value = match access.next_value_seed(seed) {
                Ok(value) => value,
                Err(error) => return Err(state.fail_at(self.at, error)),
            };
            // The map is the set of keys seen in this object: one lookup, no copy of the key.
            match map.entry(key) {
                Entry::Vacant(entry) => {
                    entry.insert(value);
                }
                Entry::Occupied(entry) => {
                    let key = entry.key();
                    if !reported.contains(key) {
                        state.problem(
                            self.at.pointer(),
                            format!(
                                "duplicate key `{}` in {}; send each key once",
                                shown(key),
                                self.at.describe_object()
                            ),
                        );
                        reported.push(key.clone());
                    }
                }
            }
        }
    }
}

fn is_json_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// The span of the first number token at or after `from`, skipping strings (and the escapes in
/// them).
///
/// Called with `from` just past the previous number, or 0, so it always starts outside a
/// string. serde_json has accepted all text before the number it just read, and in valid JSON a
/// `-` or a digit outside a string can only start a number, so the tokens found here are the
/// numbers serde_json reads, in the same order. On invalid text the answer may be meaningless but
/// the scan never fails.
fn next_number_token(bytes: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from;
    while let Some(&byte) = bytes.get(i) {
        match byte {
            b'"' => {
                i += 1;
                while let Some(&byte) = bytes.get(i) {
                    match byte {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while bytes
                    .get(i)
                    .is_some_and(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                {
                    i += 1;
                }
                return Some((start, i));
            }
            _ => i += 1,
        }
    }
    None
}

/// Rust's shortest round-trip form of `value` in exponent notation (`1.25e-3`), written into
/// `buffer` instead of a fresh `String` (at most 24 bytes for an `f64`).
fn shortest_repr(value: f64, buffer: &mut [u8; 40]) -> Option<&str> {
    use std::io::Write as _;
    let mut rest = &mut buffer[..];
    write!(rest, "{value:e}").ok()?;
    let written = 40 - rest.len();
    std::str::from_utf8(&buffer[..written]).ok()
}

/// A number token split into its parts, digits borrowed from the text.
#[derive(Debug)]
struct Decimal<'t> {
    negative: bool,
    integer: &'t [u8],
    fraction: &'t [u8],
    exponent: i64,
    /// Written without fraction and exponent.
    is_integer: bool,
}

impl<'t> Decimal<'t> {
    /// Parses a JSON number token (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, leading
    /// zeros tolerated), `None` if `token` is not one.
    fn parse(token: &'t str) -> Option<Self> {
        fn digits(bytes: &[u8]) -> usize {
            bytes.iter().take_while(|b| b.is_ascii_digit()).count()
        }
        let bytes = token.as_bytes();
        let (negative, rest) = match bytes.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, bytes),
        };
        let (integer, mut rest) = rest.split_at(digits(rest));
        if integer.is_empty() {
            return None;
        }
        let mut fraction: &[u8] = &[];
        if let Some((b'.', after)) = rest.split_first() {
            let (digits_part, after) = after.split_at(digits(after));
            if digits_part.is_empty() {
                return None;
            }
            fraction = digits_part;
            rest = after;
        }
        let mut exponent = 0i64;
        let mut has_exponent = false;
        if let Some((b'e' | b'E', after)) = rest.split_first() {
            let (exponent_negative, after) = match after.split_first() {
                Some((b'-', after)) => (true, after),
                Some((b'+', after)) => (false, after),
                _ => (false, after),
            };
            let (digits_part, after) = after.split_at(digits(after));
            if digits_part.is_empty() {
                return None;
            }
            // Saturates far beyond any f64 exponent, so a huge exponent stays huge.
            for digit in digits_part {
                exponent = (exponent * 10 + i64::from(digit - b'0')).min(1 << 40);
            }
            if exponent_negative {
                exponent = -exponent;
            }
            has_exponent = true;
            rest = after;
        }
        if !rest.is_empty() {
            return None;
        }
        Some(Decimal {
            negative,
            integer,
            fraction,
            exponent,
            is_integer: fraction.is_empty() && !has_exponent,
        })
    }

    fn digits(&self) -> impl Iterator<Item = u8> + '_ {
        self.integer.iter().chain(self.fraction).copied()
    }

    /// The significant digits (no leading or trailing zeros) as (skip, count) into `digits()`,
    /// and the position of the decimal point relative to the first of them, so the value is
    /// `0.DIGITS × 10^point`; `None` for zero.
    fn normalized(&self) -> Option<(usize, usize, i64)> {
        let total = self.integer.len() + self.fraction.len();
        let leading = self.digits().take_while(|&d| d == b'0').count();
        if leading == total {
            return None;
        }
        let trailing = self
            .fraction
            .iter()
            .rev()
            .chain(self.integer.iter().rev())
            .take_while(|&&d| d == b'0')
            .count();
        let point = (self.integer.len() as i64 - leading as i64).saturating_add(self.exponent);
        Some((leading, total - leading - trailing, point))
    }

    /// The significant digits and the point position (`0.DIGITS × 10^point`); `None` for zero.
    fn significant(&self) -> Option<(Vec<u8>, i64)> {
        let (skip, len, point) = self.normalized()?;
        Some((self.digits().skip(skip).take(len).collect(), point))
    }

    /// Whether `self`, which parses to `value` but differs from `shortest` (Rust's shortest form
    /// of `value`), is still faithful to `value`: its exact binary value digit for digit, or the
    /// other shortest form at an exact tie (as many significant digits, and within half a unit
    /// of its last digit of the exact value).
    ///
    /// Shortest-form printers disagree only at ties: `649428297495764.25` is an `f64`, both
    /// `649428297495764.2` and `.3` are 16-digit forms of it; Rust prints `.3`, ryu (so
    /// serde_json), JavaScript and Python print `.2`. Rare, so this path may allocate.
    fn is_exact_or_tie(&self, value: f64, shortest: &Decimal<'_>) -> bool {
        // Every f64 is a finite decimal of at most 767 significant digits, so 800 print it
        // exactly (and a longer text is neither exact nor shortest).
        const EXACT_DIGITS: usize = 800;
        let (Some((digits, point)), Some((shortest_digits, _))) =
            (self.significant(), shortest.significant())
        else {
            return false;
        };
        if digits.len() > EXACT_DIGITS {
            return false;
        }
        let exact_text = format!("{:.*e}", EXACT_DIGITS, value.abs());
        let Some((exact, exact_point)) = Decimal::parse(&exact_text).and_then(|d| d.significant())
        else {
            return false;
        };
        if (point, &digits) == (exact_point, &exact) {
            return true;
        }
        if digits.len() != shortest_digits.len() {
            return false;
        }
        // `self ± half a unit of its last digit`: the digits with a 5 appended, the last one
        // lowered by one first for the lower bound (it is not 0: trailing zeros are stripped).
        let mut upper = digits;
        upper.push(b'5');
        let mut lower = upper.clone();
        let last = lower.len() - 2;
        lower[last] -= 1;
        let mut lower_point = point;
        if lower[0] == b'0' {
            lower.remove(0);
            lower_point -= 1;
        }
        // Normalized positive decimals order by point, then by digits (no trailing zeros).
        (lower_point, lower.as_slice()) <= (exact_point, exact.as_slice())
            && (exact_point, exact.as_slice()) <= (point, upper.as_slice())
    }

    /// Whether both denote the same decimal value (the sign of zero aside).
    fn same_value(&self, other: &Decimal<'_>) -> bool {
        match (self.normalized(), other.normalized()) {
            (None, None) => true,
            (Some((skip_a, len_a, point_a)), Some((skip_b, len_b, point_b))) => {
                self.negative == other.negative
                    && len_a == len_b
                    && point_a == point_b
                    && self
                        .digits()
                        .skip(skip_a)
                        .take(len_a)
                        .eq(other.digits().skip(skip_b).take(len_b))
            }
            _ => false,
        }
    }
}

fn integer_out_of_range(token: &str) -> String {
    format!(
        "the integer {} is outside the 64-bit range ({} to {}); send a number in that range, or \
         the value as a string if the tool takes one",
        shown(token),
        i64::MIN,
        u64::MAX
    )
}

/// `text` for a message: a bounded prefix (`error::quoted_prefix`), control characters escaped.
fn shown(text: &str) -> String {
    let mut out = String::new();
    for c in crate::error::quoted_prefix(text).chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The byte offset of serde_json's (1-based line, byte column) position in `text`.
fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        text.bytes()
            .enumerate()
            .filter(|&(_, b)| b == b'\n')
            .nth(line - 2)
            .map_or(text.len(), |(i, _)| i + 1)
    };
    line_start + column
}

#[cfg(test)]
mod tests;
