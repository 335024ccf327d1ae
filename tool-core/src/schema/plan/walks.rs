//! The walks of a value beside its [`Plan`]: the number walk (values that misfit their Rust
//! format) and the defaults walk, and what both remember of the shared nodes they visited.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::*;

/// Which (shared node, value) pairs a walk has visited, with the least depth each was visited
/// at. A pair seen again at that depth or deeper is skipped: the walk below it would repeat
/// what was done (or, for the number walk, find a subset of it, the depth bound cutting it
/// shorter). Seen again shallower, it is walked again (at most [`MAX_DEPTH`] times a pair).
#[derive(Default)]
pub(super) struct Seen(Option<HashMap<(usize, usize), usize>>);

impl Seen {
    /// Whether the walk should go on at `node` and the value at `place` (a value's address for
    /// the number walk, which does not change the value; a place number for the defaults walk,
    /// which does), noting the visit.
    fn first(&mut self, node: usize, place: usize, depth: usize) -> bool {
        // Made on first use: a new map reads a thread-local seed, which most walks need not.
        match self.0.get_or_insert_with(HashMap::new).entry((node, place)) {
            Entry::Occupied(seen) if *seen.get() <= depth => false,
            Entry::Occupied(mut seen) => {
                *seen.get_mut() = depth;
                true
            }
            Entry::Vacant(seen) => {
                seen.insert(depth);
                true
            }
        }
    }
}

#[cfg(test)]
thread_local! {
    /// How many nodes the walks of this thread visited, for the tests that bound it.
    pub(super) static VISITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts one visit (tests only; a walk of over a million visits fails the test that made
/// it, rather than running for as long as an exponential walk would).
fn counted() {
    #[cfg(test)]
    VISITS.with(|visits| {
        assert!(
            visits.get() < 1_000_000,
            "the walk has visited a million nodes"
        );
        visits.set(visits.get() + 1);
    });
}

/// One walk of a value beside the plan, filling in defaults.
pub(super) struct FillWalk<'a> {
    plan: &'a Plan,
    seen: Seen,
    /// The places of the value, numbered: a place is the place of its parent and a step from
    /// it. The defaults walk inserts into objects, which can move their values in memory, so
    /// it cannot tell places apart by address. Numbered only for walks that visit a shared
    /// node; the others use place 0 throughout.
    places: Option<HashMap<(usize, Step<'a>), usize>>,
}

/// A step from a value into one of its children (a key as the plan names it).
#[derive(PartialEq, Eq, Hash)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

impl<'a> FillWalk<'a> {
    /// A walk of `plan` that has visited nothing yet.
    pub(super) fn new(plan: &'a Plan) -> Self {
        FillWalk {
            plan,
            seen: Seen::default(),
            places: None,
        }
    }

    /// The number of the place `step` below `place`.
    fn place(&mut self, place: usize, step: Step<'a>) -> usize {
        let places = self.places.get_or_insert_with(HashMap::new);
        let next = places.len() + 1;
        *places.entry((place, step)).or_insert(next)
    }

    pub(super) fn fill(&mut self, id: usize, value: &mut Value, depth: usize, place: usize) {
        let plan = self.plan;
        let node = &plan.nodes[id];
        if depth > MAX_DEPTH || !node.defaults {
            return;
        }
        if node.shared.defaults && !self.seen.first(id, place, depth) {
            return;
        }
        counted();
        for &part in &node.all_of {
            self.fill(part, value, depth + 1, place);
        }
        // `Option<Struct>` is `anyOf: [{$ref}, {type: null}]` and a tagged enum is `oneOf`
        // objects told apart by a `const` tag: the defaults of the one branch that can hold the
        // value apply. With several candidates (untagged enums) which one matched is unknown,
        // and defaults of the wrong one would add fields, so none apply.
        for branches in [&node.any_of, &node.one_of] {
            if branches.iter().any(|&b| plan.nodes[b].defaults)
                && let Some(only) = plan.only_candidate(branches, value)
            {
                self.fill(only, value, depth + 1, place);
            }
        }
        // Places are numbered only when a shared node can be below.
        let numbered = plan.has_shared_defaults;
        match value {
            Value::Object(object) => {
                let Some(properties) = &node.properties else {
                    return;
                };
                for &i in &node.default_properties {
                    let property = &properties[i];
                    match object.get_mut(&property.name) {
                        Some(present) => {
                            let below = if numbered {
                                self.place(place, Step::Key(&property.name))
                            } else {
                                0
                            };
                            self.fill(property.node, present, depth + 1, below);
                        }
                        None => {
                            if let Some(default) = &property.default {
                                object.insert(property.name.clone(), default.clone());
                            }
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = node.items {
                    for (i, value) in items.iter_mut().enumerate() {
                        let below = if numbered {
                            self.place(place, Step::Index(i))
                        } else {
                            0
                        };
                        self.fill(item, value, depth + 1, below);
                    }
                }
            }
            _ => {}
        }
    }
}

/// One walk of a value beside the plan, looking for numbers that misfit; `detailed` walks note
/// where and why, the others only whether.
pub(super) struct NumberWalk<'a> {
    plan: &'a Plan,
    detailed: bool,
    pointer: String,
    pub(super) problems: Vec<InputProblem>,
    pub(super) misfit: bool,
    seen: Seen,
}

/// A step from a value into one of its children.
#[derive(Clone, Copy)]
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

impl<'a> NumberWalk<'a> {
    pub(super) fn new(plan: &'a Plan, detailed: bool) -> Self {
        NumberWalk {
            plan,
            detailed,
            pointer: String::new(),
            problems: Vec::new(),
            misfit: false,
            seen: Seen::default(),
        }
    }

    fn done(&self) -> bool {
        if self.detailed {
            self.problems.len() >= MAX_PROBLEMS
        } else {
            self.misfit
        }
    }

    /// Visits `value` below `key` (a property name or an array index).
    fn child(&mut self, key: Segment<'_>, id: usize, value: &Value, depth: usize) {
        let len = self.pointer.len();
        if self.detailed {
            match key {
                Segment::Key(key) => push_segment(&mut self.pointer, key),
                Segment::Index(i) => {
                    let _ = write!(self.pointer, "/{i}");
                }
            }
        }
        self.visit(id, value, depth + 1);
        self.pointer.truncate(len);
    }

    pub(super) fn visit(&mut self, id: usize, value: &Value, depth: usize) {
        let plan = self.plan;
        let node = &plan.nodes[id];
        if depth > MAX_DEPTH || !node.numbers || self.done() {
            return;
        }
        // The value is not changed while the walk lasts: its address tells places apart.
        if node.shared.numbers
            && !self
                .seen
                .first(id, std::ptr::from_ref(value) as usize, depth)
        {
            return;
        }
        counted();
        match value {
            Value::Number(number) => {
                if let Format::Number(format) = node.format
                    && let Some(message) = format.misfit(number)
                {
                    self.misfit = true;
                    if self.detailed {
                        self.problems.push(InputProblem {
                            pointer: self.pointer.clone(),
                            message,
                        });
                    }
                }
            }
            Value::Object(object) => {
                if let Some(properties) = &node.properties {
                    if self.detailed {
                        // In the value's order, as the problems are listed.
                        for (key, child) in object {
                            if let Some(property) = node.property(key)
                                && plan.nodes[property.node].numbers
                            {
                                self.child(Segment::Key(key), property.node, child, depth);
                            }
                        }
                    } else {
                        // Whether is all that is asked: only the properties that can misfit.
                        for &i in &node.number_properties {
                            let property = &properties[i];
                            if let Some(child) = object.get(&property.name) {
                                self.child(
                                    Segment::Key(&property.name),
                                    property.node,
                                    child,
                                    depth,
                                );
                            }
                        }
                    }
                }
                self.others(node, object, depth);
            }
            Value::Array(items) => {
                if let Some(item) = node.items {
                    for (i, value) in items.iter().enumerate() {
                        self.child(Segment::Index(i), item, value, depth);
                    }
                }
            }
            _ => {}
        }
        if !matches!(value, Value::Number(_)) || node.format == Format::Absent {
            for branches in [&node.any_of, &node.one_of] {
                if branches.iter().any(|&b| plan.nodes[b].numbers)
                    && let Some(only) = plan.only_candidate(branches, value)
                {
                    self.visit(only, value, depth + 1);
                }
            }
            for &part in &node.all_of {
                self.visit(part, value, depth + 1);
            }
        }
    }

    /// Visits the values of `object` that `node`'s `patternProperties` (every pattern that
    /// matches the key) and `additionalProperties` (keys neither named nor matched) apply to,
    /// in the value's order.
    fn others(&mut self, node: &Node, object: &Map<String, Value>, depth: usize) {
        let plan = self.plan;
        let additional = node.additional.filter(|&n| plan.nodes[n].numbers);
        let patterns = node
            .patterns
            .iter()
            .any(|p| p.applies() && plan.nodes[p.node].numbers);
        if additional.is_none() && !patterns {
            return;
        }
        for (key, child) in object {
            let named = node.property(key).is_some();
            let mut matched = false;
            if !node.patterns.is_empty() && (patterns || !named) {
                let probe = Value::String(key.clone());
                for pattern in &node.patterns {
                    if pattern.matches(&probe) {
                        matched = true;
                        if pattern.applies() && plan.nodes[pattern.node].numbers {
                            self.child(Segment::Key(key), pattern.node, child, depth);
                        }
                    }
                }
            }
            if let Some(values) = additional
                && !named
                && !matched
            {
                self.child(Segment::Key(key), values, child, depth);
            }
        }
    }
}
