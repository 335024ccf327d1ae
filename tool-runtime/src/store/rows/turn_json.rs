//! A turn record's JSON and, cut out of it, the JSON of the closed step it carries: a write
//! puts the step in the turn's row and in its step history, and encodes it once for both.
//!
//! The record is written through a [`Formatter`] that notes where the value of its top-level
//! `last_step` key begins and ends; the step's JSON is those bytes. serde_json writes a value
//! the same way wherever it stands, so they are exactly what encoding the step alone writes
//! (checked in debug builds at every write, and by the tests below).

use std::cell::Cell;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, Serializer};

use super::StoreError;
use crate::record::TurnRecord;

/// The record's JSON, and its closed step's index and where that step's JSON is in it, when
/// it has one.
type EncodedTurn = (String, Option<(i64, Range<usize>)>);

/// The length of the last record encoded: the next one starts with room for as much, so that
/// a record of many results is not copied as its buffer doubles (records of one process are
/// much alike in size; a wrong guess costs one allocation of the wrong size).
static LAST_LEN: AtomicUsize = AtomicUsize::new(0);

/// Encodes `record`, and gives where its closed step's JSON is in it (a write binds that slice:
/// the step is not copied).
pub(in crate::store) fn encode_turn(record: &TurnRecord) -> Result<EncodedTurn, StoreError> {
    let at = Cell::new(0);
    let mut located = Located::default();
    let room = LAST_LEN.load(Ordering::Relaxed).clamp(512, 1 << 20);
    let mut out = Vec::with_capacity(room);
    let mut serializer = Serializer::with_formatter(
        Counted {
            out: &mut out,
            at: &at,
        },
        Locator {
            at: &at,
            found: &mut located,
            depth: 0,
            key: Key::Other,
        },
    );
    record
        .serialize(&mut serializer)
        .map_err(|error| encoding(&record.id, &error))?;
    LAST_LEN.store(out.len() + out.len() / 8, Ordering::Relaxed);
    let json = String::from_utf8(out).map_err(|error| encoding(&record.id, &error))?;
    let Some(step) = &record.last_step else {
        return Ok((json, None));
    };
    // A step that is not found is an error, never a write that leaves the history behind.
    let cut = located
        .range
        .map(|(start, end)| start..end)
        .filter(|range| json.get(range.clone()).is_some())
        .ok_or_else(|| {
            StoreError::Backend(format!(
                "cannot encode record `{}`: its last step is not where it was written",
                record.id
            ))
        })?;
    debug_assert_eq!(
        serde_json::to_string(step).ok().as_deref(),
        json.get(cut.clone())
    );
    Ok((json, Some((i64::from(step.index), cut))))
}

fn encoding(id: &str, error: &dyn std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("cannot encode record `{id}`: {error}"))
}

/// A writer into `out` that keeps `at` at the number of bytes written.
struct Counted<'a> {
    out: &'a mut Vec<u8>,
    at: &'a Cell<usize>,
}

impl io::Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(buf);
        self.at.set(self.out.len());
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.write(buf).map(drop)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where the top-level `last_step` value lies, once written.
#[derive(Default)]
struct Located {
    range: Option<(usize, usize)>,
}

/// What the key being written at the top level is, as far as written.
#[derive(Clone, Copy, PartialEq)]
enum Key {
    /// Not `last_step`, or not at the top level.
    Other,
    /// The first `n` bytes of `last_step` so far.
    Prefix(usize),
    /// `last_step`'s value is being written, from this byte on.
    Value(usize),
}

const LAST_STEP: &str = "last_step";

/// serde_json's compact output, noting the bytes of the top-level `last_step` value.
struct Locator<'a> {
    at: &'a Cell<usize>,
    found: &'a mut Located,
    /// How many objects and arrays the writer is inside.
    depth: usize,
    key: Key,
}

impl Formatter for Locator<'_> {
    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth += 1;
        CompactFormatter.begin_array(writer)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth -= 1;
        CompactFormatter.end_array(writer)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth += 1;
        CompactFormatter.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth -= 1;
        CompactFormatter.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if self.depth == 1 {
            self.key = Key::Prefix(0);
        }
        CompactFormatter.begin_object_key(writer, first)
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if let Key::Prefix(n) = self.key {
            self.key = match LAST_STEP.get(n..) {
                Some(rest) if rest.starts_with(fragment) => Key::Prefix(n + fragment.len()),
                _ => Key::Other,
            };
        }
        CompactFormatter.write_string_fragment(writer, fragment)
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: serde_json::ser::CharEscape,
    ) -> io::Result<()> {
        if matches!(self.key, Key::Prefix(_)) {
            self.key = Key::Other;
        }
        CompactFormatter.write_char_escape(writer, char_escape)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        CompactFormatter.begin_object_value(writer)?;
        if self.depth == 1 {
            self.key = match self.key {
                Key::Prefix(n) if n == LAST_STEP.len() => Key::Value(self.at.get()),
                _ => Key::Other,
            };
        }
        Ok(())
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if self.depth == 1
            && let Key::Value(start) = self.key
        {
            self.found.range = Some((start, self.at.get()));
            self.key = Key::Other;
        }
        CompactFormatter.end_object_value(writer)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};
    use toolwright_core::ToolError;

    use super::*;
    use crate::record::{CallResult, ClosedStep, TurnStatus};
    use crate::store::conformance::fixtures;

    /// A waiting turn whose parked call's input has a `last_step` key of its own, written
    /// before the record's.
    fn turn() -> TurnRecord {
        let mut record = fixtures::turn("t1", "s1", TurnStatus::Waiting, &["r1"]);
        if let Some(step) = record.pending.as_mut() {
            step.calls[0].input = json!({ "last_step": { "index": 1 } });
        }
        record
    }

    fn result(call_id: &str, output: Value) -> Arc<CallResult> {
        Arc::new(CallResult {
            call_id: call_id.into(),
            tool: "read_logs".into(),
            is_error: false,
            projection: None,
            output,
            error: None,
            ends_turn: false,
            label: None,
            model_usage: None,
        })
    }

    /// Outputs that hold what a scan for the key could mistake: a `last_step` key of their
    /// own (nested, and at their top), escapes, quotes and non-ASCII text.
    fn awkward() -> Vec<Arc<CallResult>> {
        vec![
            result(
                "c1",
                json!({ "last_step": { "index": 9 }, "a": [1, { "last_step": null }] }),
            ),
            result(
                "c\"2",
                json!("last_step\": {\"index\": 3} \\ \u{1F600} \u{7}"),
            ),
            result("c3", json!([{ "last_step": "}" }, "{", "]"])),
            Arc::new(CallResult::failed(
                "c4",
                "t",
                ToolError::new("no \"last_step\""),
            )),
        ]
    }

    fn check(record: &TurnRecord) {
        let (json, step) = encode_turn(record).unwrap();
        assert_eq!(json, serde_json::to_string(record).unwrap());
        match &record.last_step {
            Some(closed) => {
                let (index, cut) = step.expect("the step is found");
                let cut = &json[cut];
                assert_eq!(index, i64::from(closed.index));
                assert_eq!(cut, serde_json::to_string(closed).unwrap());
                let read: ClosedStep = serde_json::from_str(cut).unwrap();
                assert_eq!(&read, closed);
            }
            None => assert!(step.is_none()),
        }
    }

    #[test]
    fn the_step_cut_from_the_record_is_the_step_encoded_alone() {
        let mut record = turn();
        check(&record);
        record.last_step = Some(ClosedStep {
            index: 7,
            results: awkward(),
            requests: Vec::new(),
        });
        check(&record);
        record.last_step = Some(ClosedStep {
            index: 0,
            results: Vec::new(),
            requests: Vec::new(),
        });
        check(&record);
    }

    #[test]
    fn keys_that_only_begin_like_last_step_are_not_it() {
        let mut record = turn();
        record.last_step = Some(ClosedStep {
            index: 2,
            results: vec![result(
                "c1",
                json!({ "last": 1, "last_steps": 2, "last_ste": 3 }),
            )],
            requests: Vec::new(),
        });
        check(&record);
    }
}
