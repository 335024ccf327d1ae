//! Property tests of `json::parse_arguments` over generated documents: valid ones parse exactly as
//! serde_json parses them, injected duplicates and inexact numbers are rejected at the right
//! pointer, and truncated or damaged text never panics and never parses differently.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Map, Value};
use toolwright_core::InputError;
use toolwright_core::json::{MAX_DEPTH, parse_arguments};

/// xorshift64*: deterministic, so a failure names the seed that reproduces it.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// What a generated document carries besides valid content.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Inject {
    Nothing,
    /// One key sent twice in one object (possibly spelled with different escapes).
    Duplicate,
    /// One number that cannot be kept exactly.
    BadNumber,
}

struct Generator {
    rng: Rng,
    out: String,
    /// Escaped pointer segments of the value being written.
    path: Vec<String>,
    inject: Inject,
    /// Pointer of the injected problem, once injected.
    injected_at: Option<String>,
}

const STRING_CHARS: &[char] = &[
    'a', 'b', 'z', '0', '1', '9', '-', '+', '.', 'e', 'E', ' ', '"', '\\', '/', '~', '\n', '\t',
    '\r', '\u{0}', '\u{8}', '\u{c}', '\u{1f}', '\u{7f}', 'é', '€', '😀', '\u{2028}', '{', '}', '[',
    ']', ',', ':',
];
const KEY_CHARS: &[char] = &['a', 'b', 'k', '~', '/', '1', 'é', '"', '😀'];

impl Generator {
    fn new(seed: u64, inject: Inject) -> Self {
        Generator {
            rng: Rng::new(seed),
            out: String::new(),
            path: Vec::new(),
            inject,
            injected_at: None,
        }
    }

    fn document(&mut self) {
        self.space();
        if self.rng.chance(85) {
            self.object(0);
        } else {
            self.value(0);
        }
        self.space();
    }

    fn pointer(&self) -> String {
        self.path.iter().map(|s| format!("/{s}")).collect()
    }

    fn wants(&mut self, kind: Inject, percent: usize) -> bool {
        self.inject == kind && self.injected_at.is_none() && self.rng.chance(percent)
    }

    fn space(&mut self) {
        while self.rng.chance(15) {
            let space = self.rng.pick(&[" ", "\n", "\t", "\r", "  "]);
            self.out.push_str(space);
        }
    }

    fn value(&mut self, depth: usize) {
        let kinds = if depth >= 5 { 4 } else { 7 };
        match self.rng.below(kinds) {
            0 => self.literal(),
            1 => {
                let text = self.random_text(STRING_CHARS, 12);
                self.string(&text);
            }
            2 => self.integer(),
            3 => self.float(),
            4 | 5 => self.object(depth),
            _ => self.array(depth),
        }
    }

    fn literal(&mut self) {
        let literal = self.rng.pick(&["null", "true", "false"]);
        self.out.push_str(literal);
    }

    fn random_text(&mut self, chars: &[char], max: usize) -> String {
        let len = self.rng.below(max + 1);
        (0..len).map(|_| self.rng.pick(chars)).collect()
    }

    /// Writes `text` as a JSON string, each character in one of its valid spellings.
    fn string(&mut self, text: &str) {
        self.out.push('"');
        for c in text.chars() {
            let escape = self.rng.chance(20);
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '/' if escape => self.out.push_str("\\/"),
                '\n' if !escape => self.out.push_str("\\n"),
                '\t' if !escape => self.out.push_str("\\t"),
                '\r' if !escape => self.out.push_str("\\r"),
                '\u{8}' if !escape => self.out.push_str("\\b"),
                '\u{c}' if !escape => self.out.push_str("\\f"),
                c if (c as u32) < 0x20 || escape => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        if self.rng.chance(50) {
                            let _ = write!(self.out, "\\u{unit:04x}");
                        } else {
                            let _ = write!(self.out, "\\u{unit:04X}");
                        }
                    }
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    fn integer(&mut self) {
        if self.wants(Inject::BadNumber, 30) {
            return self.bad_number();
        }
        let n: i128 = match self.rng.below(6) {
            0 => self.rng.below(100) as i128,
            1 => -(self.rng.below(100) as i128),
            2 => self.rng.next() as i64 as i128,
            3 => self.rng.next() as i128,
            4 => self.rng.pick(&[
                u64::MAX as i128,
                i64::MIN as i128,
                i64::MAX as i128,
                (1 << 53) + 1,
                -(1 << 53) - 1,
            ]),
            _ => {
                self.out.push_str("-0");
                return;
            }
        };
        let _ = write!(self.out, "{n}");
    }

    fn float(&mut self) {
        if self.wants(Inject::BadNumber, 30) {
            return self.bad_number();
        }
        let value = self.random_f64();
        let (negative, digits, point) = shortest(value);
        self.spell_decimal(negative, &digits, point);
    }

    fn random_f64(&mut self) -> f64 {
        loop {
            let value = match self.rng.below(6) {
                0 => f64::from_bits(self.rng.next()),
                1 => (self.rng.below(200_001) as f64 - 100_000.0) / 100.0,
                2 => self.rng.next() as f64,
                3 => f64::from_bits(self.rng.next() >> 12),
                4 => self.rng.pick(&[
                    0.0,
                    -0.0,
                    f64::MAX,
                    f64::MIN,
                    f64::MIN_POSITIVE,
                    f64::EPSILON,
                    5e-324,
                    0.1,
                    0.3,
                    1e22,
                    1e23,
                    9007199254740992.0,
                ]),
                _ => {
                    let scale = 10f64.powi(self.rng.below(41) as i32 - 20);
                    (self.rng.next() >> 11) as f64 * scale
                }
            };
            if value.is_finite() {
                return value;
            }
        }
    }

    /// Writes `0.DIGITS × 10^point` with a fraction or an exponent (or both), leading and
    /// trailing zeros, `e`/`E`, an explicit `+` and zero-padded exponents chosen at random: every
    /// spelling denotes the same decimal value.
    fn spell_decimal(&mut self, negative: bool, digits: &str, point: i64) {
        if negative {
            self.out.push('-');
        }
        let zero = digits == "0";
        let integer_digits = if zero {
            self.rng.below(2)
        } else {
            self.rng.below(digits.len() + 3)
        };
        let exponent;
        let mut has_point = false;
        if integer_digits == 0 {
            let zeros = self.rng.below(3);
            self.out.push_str("0.");
            self.out.extend(std::iter::repeat_n('0', zeros));
            self.out.push_str(digits);
            exponent = point + zeros as i64;
            has_point = true;
        } else {
            let padded = format!(
                "{digits}{}",
                "0".repeat(integer_digits.saturating_sub(digits.len()))
            );
            let (whole, fraction) = padded.split_at(integer_digits);
            self.out.push_str(whole);
            let trailing = self.rng.below(3);
            if !fraction.is_empty() || trailing > 0 || self.rng.chance(50) {
                self.out.push('.');
                self.out.push_str(fraction);
                self.out.extend(std::iter::repeat_n('0', trailing));
                if fraction.is_empty() && trailing == 0 {
                    self.out.push('0');
                }
                has_point = true;
            }
            exponent = point - integer_digits as i64;
        }
        if exponent != 0 || !has_point || self.rng.chance(30) {
            self.out.push(self.rng.pick(&['e', 'E']));
            if exponent >= 0 && self.rng.chance(30) {
                self.out.push('+');
            }
            if exponent < 0 {
                self.out.push('-');
            }
            self.out.extend(std::iter::repeat_n('0', self.rng.below(3)));
            let _ = write!(self.out, "{}", exponent.unsigned_abs());
        }
    }

    fn bad_number(&mut self) {
        self.injected_at = Some(self.pointer());
        let sign = if self.rng.chance(50) { "-" } else { "" };
        match self.rng.below(7) {
            // Just past the 64-bit range on either side.
            0 => {
                let n = u64::MAX as u128 + 1 + self.rng.below(1000) as u128;
                let _ = write!(self.out, "{n}");
            }
            1 => {
                let n = (1u128 << 63) + 1 + self.rng.below(1000) as u128;
                let _ = write!(self.out, "-{n}");
            }
            // Long integers, past even the f64 range for the longest.
            2 => {
                let len = 21 + self.rng.below(400);
                self.out.push_str(sign);
                self.out.push(self.rng.pick(&['1', '5', '9']));
                for _ in 1..len {
                    let digit = self.rng.pick(&['0', '3', '7']);
                    self.out.push(digit);
                }
            }
            // Overflow: at least 1e309, sometimes with an exponent past i32.
            3 => {
                let (_, digits, _) = shortest(self.random_f64().abs().max(1.0));
                let exponent = if self.rng.chance(20) {
                    99_999_999_999
                } else {
                    309 + self.rng.below(2000) as i64
                };
                let _ = write!(self.out, "{sign}{}", &digits[..1]);
                if digits.len() > 1 {
                    let _ = write!(self.out, ".{}", &digits[1..]);
                }
                let _ = write!(self.out, "e{exponent}");
            }
            // Underflow to zero.
            4 => {
                let exponent = 400 + self.rng.below(5000);
                let _ = write!(self.out, "{sign}{}.5e-{exponent}", 1 + self.rng.below(9));
            }
            // More significant digits than any shortest form has (17 at most).
            5 => {
                let (negative, mut digits, point) = shortest(self.random_f64());
                if digits == "0" {
                    digits = "1".to_owned();
                }
                while digits.len() < 17 {
                    digits.push('0');
                }
                digits.push_str(&"0".repeat(self.rng.below(4)));
                digits.push(self.rng.pick(&['1', '4', '9']));
                self.spell_decimal(negative, &digits, point);
            }
            // An odd integer above 2^53 written as a float: never an f64.
            _ => {
                let n = (1u64 << 53) + 2 * self.rng.below(1 << 20) as u64 + 1;
                let _ = write!(self.out, "{sign}{n}.0");
            }
        }
    }

    fn object(&mut self, depth: usize) {
        self.out.push('{');
        self.space();
        let mut keys: BTreeSet<String> = BTreeSet::new();
        let len = self.rng.below(6);
        let mut written = 0;
        for _ in 0..len {
            let duplicate = !keys.is_empty() && self.wants(Inject::Duplicate, 25);
            let key = if duplicate {
                self.injected_at = Some(self.pointer());
                let index = self.rng.below(keys.len());
                keys.iter().nth(index).cloned().unwrap_or_default()
            } else {
                let key = self.random_text(KEY_CHARS, 3);
                if !keys.insert(key.clone()) {
                    continue;
                }
                key
            };
            if written > 0 {
                self.out.push(',');
                self.space();
            }
            written += 1;
            self.string(&key);
            self.space();
            self.out.push(':');
            self.space();
            self.path.push(key.replace('~', "~0").replace('/', "~1"));
            self.value(depth + 1);
            self.path.pop();
            self.space();
        }
        self.out.push('}');
    }

    fn array(&mut self, depth: usize) {
        self.out.push('[');
        self.space();
        let len = self.rng.below(6);
        for index in 0..len {
            if index > 0 {
                self.out.push(',');
                self.space();
            }
            self.path.push(index.to_string());
            self.value(depth + 1);
            self.path.pop();
            self.space();
        }
        self.out.push(']');
    }
}

/// `value`'s shortest round-trip digits (no leading or trailing zeros; `"0"` for zero) and the
/// point position: `value = ±0.DIGITS × 10^point`.
fn shortest(value: f64) -> (bool, String, i64) {
    let text = format!("{value:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap();
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (negative, digits, exponent.parse::<i64>().unwrap() + 1)
}

/// serde_json's reading of `text`, with this module's two normalizations (empty and `null` are
/// `{}`).
fn serde_reading(text: &str) -> Result<Value, serde_json::Error> {
    if text.trim_matches([' ', '\t', '\n', '\r']).is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(text).map(|value| match value {
        Value::Null => Value::Object(Map::new()),
        other => other,
    })
}

/// Problems only this parser finds in text serde_json accepts.
fn is_strict_only(message: &str) -> bool {
    message.starts_with("duplicate key ")
        || message.starts_with("the number ")
        || message.starts_with("the integer ")
        || message.starts_with("arrays and objects nest more than")
}

/// The invariant for any text: no panic; accepted text reads as serde_json reads it; text
/// serde_json rejects is rejected; text serde_json accepts is rejected only for a strict rule.
fn check_consistent(text: &str) -> Result<Value, InputError> {
    let ours = parse_arguments("t", text);
    match (&ours, serde_reading(text)) {
        (Ok(value), Ok(theirs)) => assert_eq!(value, &theirs, "{text:?}"),
        (Ok(value), Err(error)) => {
            panic!("{text:?}: accepted as {value}, but serde_json says {error}")
        }
        (Err(error), Ok(_)) => assert!(
            error.problems.iter().all(|p| is_strict_only(&p.message)),
            "{text:?}: {error}"
        ),
        (Err(error), Err(_)) => assert!(!error.problems.is_empty(), "{text:?}"),
    }
    ours
}

fn generate(seed: u64, inject: Inject) -> (String, Option<String>) {
    // Regenerate until the wanted problem was placed (not every document has a number).
    for attempt in 0.. {
        let mut generator = Generator::new(seed.wrapping_add(attempt << 40), inject);
        generator.document();
        if inject == Inject::Nothing || generator.injected_at.is_some() {
            return (generator.out, generator.injected_at);
        }
    }
    unreachable!()
}

fn count_floats(value: &Value) -> usize {
    match value {
        Value::Number(n) => usize::from(n.is_f64()),
        Value::Array(items) => items.iter().map(count_floats).sum(),
        Value::Object(map) => map.values().map(count_floats).sum(),
        _ => 0,
    }
}

#[test]
fn valid_documents_parse_exactly_as_serde_json_parses_them() {
    let mut floats = 0usize;
    for seed in 0..12_000 {
        let (text, _) = generate(seed, Inject::Nothing);
        let ours = parse_arguments("t", &text)
            .unwrap_or_else(|error| panic!("seed {seed}: {text:?}\n{error}"));
        assert_eq!(ours, serde_reading(&text).unwrap(), "seed {seed}: {text:?}");
        // What serde_json writes (shortest floats) is accepted back unchanged.
        let written = serde_json::to_string(&ours).unwrap();
        assert_eq!(
            parse_arguments("t", &written).unwrap(),
            ours,
            "seed {seed}: {written}"
        );
        floats += count_floats(&ours);
    }
    assert!(
        floats > 10_000,
        "the generator writes too few decimals: {floats}"
    );
}

#[test]
fn a_duplicated_key_is_rejected_at_its_object() {
    for seed in 0..4_000 {
        let (text, at) = generate(seed, Inject::Duplicate);
        let error = check_consistent(&text).unwrap_err();
        assert_eq!(error.problems.len(), 1, "seed {seed}: {text:?}\n{error}");
        let problem = &error.problems[0];
        assert_eq!(Some(&problem.pointer), at.as_ref(), "seed {seed}: {text:?}");
        assert!(
            problem.message.starts_with("duplicate key `")
                && problem.message.ends_with("; send each key once"),
            "{}",
            problem.message
        );
    }
}

#[test]
fn an_inexact_number_is_rejected_at_its_pointer() {
    for seed in 0..4_000 {
        let (text, at) = generate(seed, Inject::BadNumber);
        let error = parse_arguments("t", &text).unwrap_err();
        assert_eq!(error.problems.len(), 1, "seed {seed}: {text:?}\n{error}");
        let problem = &error.problems[0];
        assert_eq!(
            Some(&problem.pointer),
            at.as_ref(),
            "seed {seed}: {text:?}\n{error}"
        );
        assert!(
            problem.message.starts_with("the number ")
                || problem.message.starts_with("the integer "),
            "seed {seed}: {text:?}\n{error}"
        );
        // serde_json accepts most of these by rounding (its "number out of range" aside).
        match serde_reading(&text) {
            Ok(_) => {}
            Err(theirs) => assert!(
                theirs.to_string().starts_with("number out of range"),
                "seed {seed}: {text:?}: {theirs}"
            ),
        }
    }
}

#[test]
fn damaged_documents_are_rejected_or_read_as_serde_json_reads_them() {
    const GARBAGE: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\\",
        " ",
        "0",
        "-",
        "1e400",
        ".",
        "e",
        "x",
        "\u{0}",
        "é",
        "\\u",
        "\\ud800",
        "null",
        "tru",
        "\"a\":1",
        "18446744073709551616",
        "\n",
    ];
    let mut accepted = 0usize;
    for seed in 0..6_000 {
        let (text, _) = generate(seed, Inject::Nothing);
        let mut rng = Rng::new(seed ^ 0xDEAD_BEEF);
        let boundaries: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect();
        let mut at = || boundaries[rng.below(boundaries.len())];
        let (cut, insert_at, remove_at) = (at(), at(), at());
        let mut rng = Rng::new(seed ^ 0xF00D);
        let garbage = rng.pick(GARBAGE);

        // Truncated.
        accepted += usize::from(check_consistent(&text[..cut]).is_ok());
        // Garbage inserted, appended, prepended.
        let inserted = format!("{}{garbage}{}", &text[..insert_at], &text[insert_at..]);
        accepted += usize::from(check_consistent(&inserted).is_ok());
        let _ = check_consistent(&format!("{text}{garbage}"));
        let _ = check_consistent(&format!("{garbage}{text}"));
        // One character removed.
        let mut removed = text.clone();
        if remove_at < text.len() {
            removed.remove(remove_at);
        }
        accepted += usize::from(check_consistent(&removed).is_ok());
    }
    // Some damage leaves valid JSON (a cut after a complete number, a removed space).
    assert!(accepted > 500, "{accepted}");
}

#[test]
fn random_token_soup_never_panics() {
    const TOKENS: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\"k\"",
        "\\",
        "\\\"",
        " ",
        "\t",
        "0",
        "1",
        "-",
        "+",
        ".",
        "e",
        "E",
        "5",
        "1e400",
        "1e-400",
        "9007199254740993.0",
        "18446744073709551616",
        "null",
        "true",
        "false",
        "\\u",
        "\\ud800",
        "\\udc00",
        "\u{0}",
        "\u{1f}",
        "é",
        "😀",
    ];
    let mut rng = Rng::new(7);
    for _ in 0..30_000 {
        let len = rng.below(24);
        let text: String = (0..len).map(|_| rng.pick(TOKENS)).collect();
        let _ = check_consistent(&text);
    }
}

#[test]
fn nesting_at_the_limit_and_beyond() {
    let mut rng = Rng::new(11);
    for _ in 0..200 {
        let depth = MAX_DEPTH - 3 + rng.below(7);
        let mut text = String::new();
        let mut closers = Vec::new();
        for _ in 0..depth {
            if rng.chance(50) {
                text.push_str("[1, ");
                closers.push("]");
            } else {
                text.push_str("{\"k\": ");
                closers.push("}");
            }
        }
        text.push_str("2.5");
        text.extend(closers.into_iter().rev());
        let result = check_consistent(&text);
        assert_eq!(result.is_ok(), depth <= MAX_DEPTH, "{depth}: {result:?}");
        if let Err(error) = result {
            assert!(
                error.problems[0]
                    .message
                    .starts_with("arrays and objects nest more than 100 levels")
            );
        }
    }
}
