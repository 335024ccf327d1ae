//! The plan of an input schema: what the walks beyond the JSON Schema validator need (numbers
//! that must fit the Rust type their `format` names, defaults to fill in), worked out once when
//! the validator is compiled.
//!
//! The plan mirrors the schema: one node per subschema a walk can reach, each `$ref` followed to
//! its node (so recursive schemas are cycles of nodes), each object's properties in a list with
//! their defaults taken out, each `format` classified, each `anyOf`/`oneOf`/`allOf` a list of
//! nodes. Every node also knows whether anything below it can misfit or be defaulted, so a walk
//! skips what cannot. Walking a value then never looks a keyword up in the schema, and allocates
//! only for what it finds (a problem, a default).

use std::collections::HashMap;

use serde_json::{Number, Value};

use super::{MAX_PROBLEMS, push_segment};
use crate::error::InputProblem;

mod walks;

#[cfg(test)]
use walks::VISITS;
use walks::{FillWalk, NumberWalk};

/// Deepest a walk follows a value beside its schema.
const MAX_DEPTH: usize = 64;

/// Most `$ref`s followed from one place before the walks take the schema found as it is.
const MAX_HOPS: usize = 16;

/// The walks' view of a schema: its nodes, the root's first.
pub(super) struct Plan {
    nodes: Vec<Node>,
    /// Whether the defaults walk can reach a node by more than one path (then it numbers the
    /// places of the value it visits).
    has_shared_defaults: bool,
}

/// One subschema, as the walks read it.
struct Node {
    /// Its `format`, if it has one.
    format: Format,
    /// Its `properties` (when that is an object), in the schema's order.
    properties: Option<Box<[Property]>>,
    /// Indices into `properties`, sorted by name: a value's key is looked up by binary search.
    by_name: Box<[usize]>,
    /// Indices into `properties` of those below which a number can misfit.
    number_properties: Box<[usize]>,
    /// Indices into `properties` of those with a default, or with defaults below them.
    default_properties: Box<[usize]>,
    /// `additionalProperties`, when that is a schema object.
    additional: Option<usize>,
    /// `patternProperties`, in the schema's order.
    patterns: Box<[Pattern]>,
    /// `items`, when that is a schema object.
    items: Option<usize>,
    any_of: Box<[usize]>,
    one_of: Box<[usize]>,
    all_of: Box<[usize]>,
    /// The names `required` lists.
    required: Box<[String]>,
    /// The properties whose schema is a `const` (enum tags): index into `properties`, value.
    tags: Box<[(usize, Value)]>,
    /// The JSON types this schema may hold, by `const`, `enum` or `type`.
    admits: Kinds,
    /// Whether a number at or below this node can misfit its `format`.
    numbers: bool,
    /// Whether a default can be filled in at or below this node.
    defaults: bool,
    /// Whether the number walk (`numbers`) or the defaults walk (`defaults`) can reach this node
    /// by more than one path: then the walk notes which values it visited here, and a value
    /// reached here again is not walked again. Without that, a schema whose `allOf` names the
    /// same node twice (or whose branches lead to one node by several paths) is walked a number
    /// of times exponential in its depth.
    shared: Shared,
}

/// Which walks can reach a node by more than one path.
#[derive(Clone, Copy, Default)]
struct Shared {
    numbers: bool,
    defaults: bool,
}

/// One entry of `patternProperties`: the keys it matches, and their schema's node.
struct Pattern {
    /// The pattern as jsonschema compiles it (the regex dialect and engine the validator
    /// matched the keys with), as the validator of `{"pattern": ...}`; `None` when it does not
    /// compile alone, and then it counts as matching every key (so that no key is taken for an
    /// additional one by mistake) without its schema being applied.
    matcher: Option<jsonschema::Validator>,
    node: usize,
}

impl Pattern {
    fn compile(pattern: &str, draft: jsonschema::Draft) -> Option<jsonschema::Validator> {
        jsonschema::options()
            .with_draft(draft)
            .build(&serde_json::json!({ "pattern": pattern }))
            .ok()
    }

    /// Whether `key` (a string value) matches.
    fn matches(&self, key: &Value) -> bool {
        self.matcher.as_ref().is_none_or(|m| m.is_valid(key))
    }

    /// Whether the walks apply this entry's schema to a matching key.
    fn applies(&self) -> bool {
        self.matcher.is_some()
    }
}

/// A property of an object node.
struct Property {
    name: String,
    node: usize,
    /// The `default` beside the property's `$ref`, else the one of the schema it refers to.
    default: Option<Value>,
}

/// A node's `format`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Absent,
    /// A `format` that names no Rust number type (`date-time`, ...): an annotation only.
    Other,
    Number(NumberFormat),
}

/// The Rust number type a `format` names (schemars writes `uint32`, `int64`, `float`, ...).
#[derive(Clone, Copy, PartialEq, Eq)]
enum NumberFormat {
    Integer {
        min: i128,
        max: i128,
        what: &'static str,
    },
    Float,
    Double,
}

impl NumberFormat {
    fn named(format: &str) -> Option<NumberFormat> {
        let integer = |min: i128, max: i128, what| Some(NumberFormat::Integer { min, max, what });
        match format {
            "int8" => integer(i8::MIN.into(), i8::MAX.into(), "an 8-bit signed integer"),
            "uint8" => integer(0, u8::MAX.into(), "an 8-bit unsigned integer"),
            "int16" => integer(i16::MIN.into(), i16::MAX.into(), "a 16-bit signed integer"),
            "uint16" => integer(0, u16::MAX.into(), "a 16-bit unsigned integer"),
            "int32" => integer(i32::MIN.into(), i32::MAX.into(), "a 32-bit signed integer"),
            "uint32" => integer(0, u32::MAX.into(), "a 32-bit unsigned integer"),
            "int64" | "int" => integer(i64::MIN.into(), i64::MAX.into(), "a 64-bit signed integer"),
            "uint64" | "uint" => integer(0, u64::MAX.into(), "a 64-bit unsigned integer"),
            "float" => Some(NumberFormat::Float),
            "double" => Some(NumberFormat::Double),
            _ => None,
        }
    }

    /// Why `number` does not fit this type exactly, if it does not.
    fn misfit(self, number: &Number) -> Option<String> {
        let as_integer = number
            .as_i64()
            .map(i128::from)
            .or_else(|| number.as_u64().map(i128::from));
        match self {
            NumberFormat::Integer { min, max, what } => match as_integer {
                Some(n) if n >= min && n <= max => None,
                Some(n) => Some(format!("{n} does not fit {what} ({min} to {max})")),
                None => Some(format!(
                    "{number} is not a whole number; send {what} without a fraction or exponent"
                )),
            },
            NumberFormat::Float => {
                let exact = match as_integer {
                    Some(n) => (n as f32) as i128 == n && (n as f32).is_finite(),
                    None => number.as_f64().is_some_and(|v| {
                        let narrowed = v as f32;
                        narrowed.is_finite() && f64::from(narrowed) == v
                    }),
                };
                (!exact).then(|| format!("{number} cannot be represented exactly as a 32-bit float; send fewer significant digits"))
            }
            NumberFormat::Double => match as_integer {
                Some(n) if (n as f64) as i128 != n => Some(format!(
                    "{number} cannot be represented exactly as a 64-bit float (integers above 2^53 lose digits); send it as a string if the tool needs it exact"
                )),
                _ => None,
            },
        }
    }
}

/// A set of JSON Schema types (`integer` for whole numbers apart from `number`).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Kinds(u8);

impl Kinds {
    const ALL: Kinds = Kinds(0x7f);
    const NONE: Kinds = Kinds(0);

    /// The type of `value`, alone.
    fn of(value: &Value) -> Kinds {
        Kinds(match value {
            Value::Null => 1,
            Value::Bool(_) => 2,
            Value::Number(n) if n.is_i64() || n.is_u64() => 4,
            Value::Number(_) => 8,
            Value::String(_) => 16,
            Value::Array(_) => 32,
            Value::Object(_) => 64,
        })
    }

    /// What `type: name` admits: `number` admits whole numbers too; a name JSON Schema does
    /// not have admits nothing.
    fn named(name: &str) -> Kinds {
        Kinds(match name {
            "null" => 1,
            "boolean" => 2,
            "integer" => 4,
            "number" => 4 | 8,
            "string" => 16,
            "array" => 32,
            "object" => 64,
            _ => 0,
        })
    }

    fn union(self, other: Kinds) -> Kinds {
        Kinds(self.0 | other.0)
    }

    fn admits(self, value: &Value) -> bool {
        self.0 & Kinds::of(value).0 != 0
    }
}

/// Follows a local `$ref` (`#/$defs/X`, `#/definitions/X`) within `root`, at most
/// [`MAX_HOPS`] times; a `$ref` that does not resolve leaves the schema as it is.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut current = schema;
    for _ in 0..MAX_HOPS {
        let Some(reference) = current.get("$ref").and_then(Value::as_str) else {
            return current;
        };
        let Some(pointer) = reference.strip_prefix('#') else {
            return current;
        };
        match root.pointer(pointer) {
            Some(target) => current = target,
            None => return current,
        }
    }
    current
}

/// Builds a [`Plan`]: one node per schema value reached (after `$ref`s), numbered in the order
/// first reached; nodes are filled from a work list, so a deep schema costs no stack.
struct Builder<'a> {
    root: &'a Value,
    draft: jsonschema::Draft,
    nodes: Vec<Node>,
    ids: HashMap<*const Value, usize>,
    pending: Vec<(usize, &'a Value)>,
}

impl<'a> Builder<'a> {
    /// The node of `schema`, after its `$ref`s: a new one (filled later) if not reached yet.
    fn node_of(&mut self, schema: &'a Value) -> usize {
        let target = resolve(self.root, schema);
        if let Some(&id) = self.ids.get(&(target as *const Value)) {
            return id;
        }
        let id = self.nodes.len();
        self.nodes.push(Node::empty());
        self.ids.insert(target as *const Value, id);
        self.pending.push((id, target));
        id
    }

    fn nodes_of(&mut self, schema: &'a Value, keyword: &str) -> Box<[usize]> {
        match schema.get(keyword).and_then(Value::as_array) {
            Some(branches) => branches.iter().map(|b| self.node_of(b)).collect(),
            None => Box::default(),
        }
    }

    fn build(&mut self, schema: &'a Value) -> Node {
        let root = self.root;
        let mut tags = Vec::new();
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| {
                properties
                    .iter()
                    .enumerate()
                    .map(|(i, (name, property))| {
                        let target = resolve(root, property);
                        if let Some(tag) = target.get("const") {
                            tags.push((i, tag.clone()));
                        }
                        Property {
                            name: name.clone(),
                            node: self.node_of(property),
                            // A `default` beside a `$ref` belongs to the property: it comes first.
                            default: property
                                .get("default")
                                .or_else(|| target.get("default"))
                                .cloned(),
                        }
                    })
                    .collect::<Box<[Property]>>()
            });
        let by_name = match &properties {
            Some(properties) => {
                let mut order: Vec<usize> = (0..properties.len()).collect();
                order.sort_by(|&a, &b| properties[a].name.cmp(&properties[b].name));
                order.into_boxed_slice()
            }
            None => Box::default(),
        };
        let format = match schema.get("format") {
            None => Format::Absent,
            Some(format) => match format.as_str().and_then(NumberFormat::named) {
                Some(number) => Format::Number(number),
                None => Format::Other,
            },
        };
        let admits = if let Some(constant) = schema.get("const") {
            Kinds::of(constant)
        } else if let Some(Value::Array(values)) = schema.get("enum") {
            values
                .iter()
                .fold(Kinds::NONE, |kinds, v| kinds.union(Kinds::of(v)))
        } else {
            match schema.get("type") {
                Some(Value::String(t)) => Kinds::named(t),
                Some(Value::Array(types)) => types
                    .iter()
                    .filter_map(Value::as_str)
                    .fold(Kinds::NONE, |kinds, t| kinds.union(Kinds::named(t))),
                _ => Kinds::ALL,
            }
        };
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let additional = schema
            .get("additionalProperties")
            .filter(|s| s.is_object())
            .map(|s| self.node_of(s));
        let items = schema
            .get("items")
            .filter(|s| s.is_object())
            .map(|s| self.node_of(s));
        let patterns = match schema.get("patternProperties").and_then(Value::as_object) {
            Some(patterns) => patterns
                .iter()
                .map(|(pattern, schema)| Pattern {
                    matcher: Pattern::compile(pattern, self.draft),
                    node: self.node_of(schema),
                })
                .collect(),
            None => Box::default(),
        };
        Node {
            format,
            properties,
            by_name,
            number_properties: Box::default(),
            default_properties: Box::default(),
            additional,
            patterns,
            items,
            any_of: self.nodes_of(schema, "anyOf"),
            one_of: self.nodes_of(schema, "oneOf"),
            all_of: self.nodes_of(schema, "allOf"),
            required,
            tags: tags.into_boxed_slice(),
            admits,
            numbers: false,
            defaults: false,
            shared: Shared::default(),
        }
    }

    /// Marks the nodes at or above a misfit-able number or a default (through cycles too), and
    /// lists each object's properties that lead to one.
    fn mark(&mut self) {
        let count = self.nodes.len();
        let mut number_parents: Vec<Vec<usize>> = vec![Vec::new(); count];
        let mut default_parents: Vec<Vec<usize>> = vec![Vec::new(); count];
        let mut numbers = Vec::new();
        let mut defaults = Vec::new();
        for (id, node) in self.nodes.iter().enumerate() {
            let properties = node.properties.iter().flatten().map(|p| p.node);
            let branches = node.any_of.iter().chain(&node.one_of).chain(&node.all_of);
            for child in properties.chain(node.items).chain(branches.copied()) {
                number_parents[child].push(id);
                default_parents[child].push(id);
            }
            let others = node.patterns.iter().filter(|p| p.applies()).map(|p| p.node);
            for child in others.chain(node.additional) {
                // Defaults are not filled in through `additionalProperties` or
                // `patternProperties`.
                number_parents[child].push(id);
            }
            if matches!(node.format, Format::Number(_)) {
                numbers.push(id);
            }
            if node
                .properties
                .iter()
                .flatten()
                .any(|p| p.default.is_some())
            {
                defaults.push(id);
            }
        }
        let mut marked = vec![false; count];
        spread(&mut numbers, &number_parents, &mut marked);
        for (node, marked) in self.nodes.iter_mut().zip(&marked) {
            node.numbers = *marked;
        }
        let mut marked = vec![false; count];
        spread(&mut defaults, &default_parents, &mut marked);
        for (node, marked) in self.nodes.iter_mut().zip(&marked) {
            node.defaults = *marked;
        }
        let flags: Vec<(bool, bool)> = self.nodes.iter().map(|n| (n.numbers, n.defaults)).collect();
        for node in &mut self.nodes {
            let Some(properties) = &node.properties else {
                continue;
            };
            node.number_properties = (0..properties.len())
                .filter(|&i| flags[properties[i].node].0)
                .collect();
            node.default_properties = (0..properties.len())
                .filter(|&i| properties[i].default.is_some() || flags[properties[i].node].1)
                .collect();
        }
        self.mark_shared();
    }

    /// Marks the nodes each walk can reach by more than one path: those with two or more edges
    /// into them from nodes the walk visits (the root has one from outside). Where every node
    /// has one, the walk's nodes form a tree and no node is visited twice at one value.
    fn mark_shared(&mut self) {
        let count = self.nodes.len();
        let mut into_numbers = vec![0usize; count];
        let mut into_defaults = vec![0usize; count];
        into_numbers[0] = 1;
        into_defaults[0] = 1;
        for node in &self.nodes {
            let branches = node.any_of.iter().chain(&node.one_of).chain(&node.all_of);
            let properties = node.properties.iter().flatten().map(|p| p.node);
            if node.numbers {
                let others = node.patterns.iter().filter(|p| p.applies()).map(|p| p.node);
                let children = properties.clone().chain(others).chain(node.additional);
                for child in children.chain(node.items).chain(branches.clone().copied()) {
                    into_numbers[child] += 1;
                }
            }
            if node.defaults {
                for child in properties.chain(node.items).chain(branches.copied()) {
                    into_defaults[child] += 1;
                }
            }
        }
        for (id, node) in self.nodes.iter_mut().enumerate() {
            node.shared = Shared {
                numbers: node.numbers && into_numbers[id] > 1,
                defaults: node.defaults && into_defaults[id] > 1,
            };
        }
    }
}

/// Marks `seeds` and every node above them through `parents`.
fn spread(seeds: &mut Vec<usize>, parents: &[Vec<usize>], marked: &mut [bool]) {
    for &seed in seeds.iter() {
        marked[seed] = true;
    }
    while let Some(id) = seeds.pop() {
        for &parent in &parents[id] {
            if !marked[parent] {
                marked[parent] = true;
                seeds.push(parent);
            }
        }
    }
}

impl Node {
    fn empty() -> Node {
        Node {
            format: Format::Absent,
            properties: None,
            by_name: Box::default(),
            number_properties: Box::default(),
            default_properties: Box::default(),
            additional: None,
            patterns: Box::default(),
            items: None,
            any_of: Box::default(),
            one_of: Box::default(),
            all_of: Box::default(),
            required: Box::default(),
            tags: Box::default(),
            admits: Kinds::ALL,
            numbers: false,
            defaults: false,
            shared: Shared::default(),
        }
    }

    /// The property named `key`, if this node has one.
    fn property(&self, key: &str) -> Option<&Property> {
        let properties = self.properties.as_deref()?;
        let at = self
            .by_name
            .binary_search_by(|&i| properties[i].name.as_str().cmp(key))
            .ok()?;
        Some(&properties[self.by_name[at]])
    }
}

impl Plan {
    /// The plan of `root`, a whole schema in `draft`.
    pub(super) fn compile(root: &Value, draft: jsonschema::Draft) -> Plan {
        let mut builder = Builder {
            root,
            draft,
            nodes: Vec::new(),
            ids: HashMap::new(),
            pending: Vec::new(),
        };
        builder.node_of(root);
        while let Some((id, schema)) = builder.pending.pop() {
            builder.nodes[id] = builder.build(schema);
        }
        builder.mark();
        Plan {
            has_shared_defaults: builder.nodes.iter().any(|n| n.shared.defaults),
            nodes: builder.nodes,
        }
    }

    /// Whether any number can misfit the type its `format` names (else the walk is skipped).
    pub(super) fn has_numbers(&self) -> bool {
        self.nodes[0].numbers
    }

    /// Whether any default can be filled in (else the walk is skipped).
    pub(super) fn has_defaults(&self) -> bool {
        self.nodes[0].defaults
    }

    /// Numbers that do not fit, exactly, the Rust type their schema's `format` names. JSON
    /// Schema cannot say "fits a `u32`" or "is exactly an `f32`", and serde would otherwise
    /// round or fail without a pointer.
    pub(super) fn number_problems(&self, value: &Value) -> Vec<InputProblem> {
        let mut walk = NumberWalk::new(self, true);
        walk.visit(0, value, 0);
        walk.problems
    }

    /// Whether every number of `value` fits the type its `format` names:
    /// [`Plan::number_problems`] without pointers or messages, stopping at the first misfit.
    pub(super) fn numbers_fit(&self, value: &Value) -> bool {
        let mut walk = NumberWalk::new(self, false);
        walk.visit(0, value, 0);
        !walk.misfit
    }

    /// Fills absent properties that have a `default`, recursively through present objects,
    /// arrays, `allOf`, and the one `anyOf`/`oneOf` branch that can hold the value.
    pub(super) fn apply_defaults(&self, value: &mut Value) {
        let mut walk = FillWalk::new(self);
        walk.fill(0, value, 0, 0);
    }

    /// The one branch of `branches` that may hold `value`, if exactly one may.
    fn only_candidate(&self, branches: &[usize], value: &Value) -> Option<usize> {
        let mut found = None;
        for &branch in branches {
            if self.may_hold(&self.nodes[branch], value) {
                if found.is_some() {
                    return None;
                }
                found = Some(branch);
            }
        }
        found
    }

    /// Whether `node` may hold `value`, judged by `type`, `const` and `enum`, and for objects by
    /// required properties and `const` properties (enum tags); a schema that says none of that
    /// may hold anything.
    fn may_hold(&self, node: &Node, value: &Value) -> bool {
        if let (Value::Object(object), Some(properties)) = (value, &node.properties) {
            let missing_required = node.required.iter().any(|k| !object.contains_key(k));
            let tag_differs = node.tags.iter().any(|(i, tag)| {
                object
                    .get(&properties[*i].name)
                    .is_some_and(|given| given != tag)
            });
            if missing_required || tag_differs {
                return false;
            }
        }
        node.admits.admits(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(schema: &Value) -> Plan {
        Plan::compile(schema, jsonschema::Draft::Draft202012)
    }

    /// The visits of the walks `walk` makes.
    fn visits(walk: impl FnOnce()) -> usize {
        VISITS.with(|visits| visits.set(0));
        walk();
        VISITS.with(std::cell::Cell::get)
    }

    /// `inner` nested `depth` times under `key`.
    fn nested(key: &str, depth: usize, inner: Value) -> Value {
        (0..depth).fold(inner, |value, _| json!({ key: value }))
    }

    #[test]
    fn an_all_of_naming_one_node_twice_is_walked_once_a_value() {
        // Without noting what was visited, each value is walked 2^64 times (the depth bound).
        let plan = plan(&json!({
            "type": "object",
            "allOf": [{ "$ref": "#" }, { "$ref": "#" }],
            "properties": {
                "n": { "type": "integer", "format": "uint8", "default": 1 },
                "next": { "$ref": "#" }
            }
        }));
        let value = json!({ "next": { "next": { "n": 300 } } });
        let mut fit = true;
        let seen = visits(|| fit = plan.numbers_fit(&value));
        assert!(!fit);
        assert!(seen < 20, "{seen} visits");
        let mut problems = Vec::new();
        let seen = visits(|| problems = plan.number_problems(&value));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].pointer, "/next/next/n");
        assert!(seen < 20, "{seen} visits");
        let mut value = json!({ "next": { "next": {} } });
        let seen = visits(|| plan.apply_defaults(&mut value));
        assert_eq!(
            value,
            json!({ "n": 1, "next": { "n": 1, "next": { "n": 1 } } })
        );
        assert!(seen < 20, "{seen} visits");
    }

    #[test]
    fn branches_leading_to_one_node_by_several_paths_walk_each_value_a_bounded_number_of_times() {
        // Each level's `x` is reached from the node itself and through both `allOf` branches:
        // without noting what was visited, 3^60 walks of the deepest value.
        let plan = plan(&json!({
            "type": "object",
            "allOf": [{ "$ref": "#/$defs/B" }, { "$ref": "#/$defs/C" }],
            "properties": {
                "x": { "$ref": "#" },
                "n": { "type": "integer", "format": "uint8", "default": 0 }
            },
            "$defs": {
                "B": { "type": "object", "properties": { "x": { "$ref": "#" } } },
                "C": { "type": "object", "properties": { "x": { "$ref": "#" } } }
            }
        }));
        let deep = nested("x", 60, json!({ "n": 256 }));
        let seen = visits(|| assert!(!plan.numbers_fit(&deep)));
        assert!(seen < 100_000, "{seen} visits");
        let mut problems = Vec::new();
        let seen = visits(|| problems = plan.number_problems(&deep));
        assert!(seen < 100_000, "{seen} visits");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].pointer, format!("{}/n", "/x".repeat(60)));
        let mut value = nested("x", 60, json!({}));
        let seen = visits(|| plan.apply_defaults(&mut value));
        assert!(seen < 100_000, "{seen} visits");
        let mut at = &value;
        for level in 0..=60 {
            assert_eq!(at["n"], 0, "level {level}");
            at = &at["x"];
        }
    }

    #[test]
    fn a_tree_shaped_schema_notes_nothing() {
        // Shared nodes are the exception: the usual schema (no node reached twice) walks as
        // before, without noting places.
        let plan = plan(&json!({
            "type": "object",
            "properties": {
                "a": { "$ref": "#/$defs/Level" },
                "b": { "$ref": "#/$defs/Level" },
                "n": { "type": "integer", "format": "uint8", "default": 0 }
            },
            "$defs": { "Level": { "enum": ["x", "y"] } }
        }));
        assert!(
            plan.nodes
                .iter()
                .all(|n| !n.shared.numbers && !n.shared.defaults)
        );
        assert!(!plan.has_shared_defaults);
        // A recursive schema's node is shared: two paths lead to it.
        let recursive = super::tests::plan(&json!({
            "type": "object",
            "properties": {
                "n": { "type": "integer", "format": "uint8", "default": 0 },
                "children": { "type": "array", "items": { "$ref": "#" } }
            }
        }));
        assert!(recursive.nodes[0].shared.numbers && recursive.nodes[0].shared.defaults);
        let mut value = json!({ "children": [{}, { "children": [{}] }] });
        recursive.apply_defaults(&mut value);
        assert_eq!(
            value,
            json!({ "n": 0, "children": [{ "n": 0 }, { "n": 0, "children": [{ "n": 0 }] }] })
        );
    }
}
