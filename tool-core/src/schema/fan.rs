//! How much jsonschema's error listing can cost on a value: the guard in front of
//! `Validator::iter_errors`.
//!
//! jsonschema's `is_valid` and `validate` (the first error) stay cheap on any schema, but
//! `iter_errors` follows every path through the schema: where branches lead back to one
//! subschema by several paths (`{"allOf": [{"$ref": "#/$defs/B"}, {"$ref": "#/$defs/C"}],
//! "properties": {"x": {"$ref": "#"}}}` with `B` and `C` also naming `x`), the paths multiply
//! with every level of the value, and listing the errors of a value 30 levels deep would take
//! longer than anyone waits: a remote server's schema could stall every invalid call. The fan
//! is the schema's graph as jsonschema's applicators see it (each `$ref` a step, not resolved
//! away); where it is a tree, every subschema is reached by one path and the listing is as
//! cheap as the value is big. Otherwise, before listing, [`Fan::within`] counts the visits
//! the listing can make, stopping at a budget; over it, the caller lists the first error only.

use std::collections::HashMap;

use serde_json::Value;

/// Most subschema visits the error listing may make on one value (counted over, not under,
/// what jsonschema does).
pub(super) const BUDGET: usize = 100_000;

/// Deepest the count follows a value beside its schema; deeper counts as over the budget.
const MAX_DEPTH: usize = 256;

/// The applicator graph of a schema.
pub(super) struct Fan {
    nodes: Vec<FanNode>,
    /// Whether some subschema is reached by more than one edge (or the root by any).
    shared: bool,
}

/// One subschema (a JSON object of the schema; `$ref`s are edges, not resolved).
#[derive(Default)]
struct FanNode {
    /// Applied to the same value: `$ref`, `$dynamicRef`, `$recursiveRef`, `allOf`, `anyOf`,
    /// `oneOf`, `not`, `if`, `then`, `else`, `dependentSchemas`, `dependencies`.
    same: Vec<usize>,
    /// `properties`, sorted by name.
    properties: Vec<(String, usize)>,
    /// Applied to every value of an object whatever its key (`patternProperties`, counted as
    /// if every pattern matched, and `propertyNames`).
    every_value: Vec<usize>,
    /// Applied to the values of keys `properties` does not name (`additionalProperties`,
    /// `unevaluatedProperties`).
    unnamed: Vec<usize>,
    /// Applied to every item of an array (`items`, `prefixItems`, `additionalItems`,
    /// `contains`, `unevaluatedItems`).
    items: Vec<usize>,
}

struct Builder<'a> {
    root: &'a Value,
    nodes: Vec<FanNode>,
    ids: HashMap<*const Value, usize>,
    edges_in: Vec<usize>,
    pending: Vec<(usize, &'a Value)>,
    /// `$anchor` and `$dynamicAnchor` names, to the subschema that declares them.
    anchors: HashMap<&'a str, &'a Value>,
}

impl<'a> Builder<'a> {
    /// The node of `schema` (an object; other schemas apply no subschema and get none).
    fn node_of(&mut self, schema: &'a Value) -> Option<usize> {
        if !schema.is_object() {
            return None;
        }
        let id = match self.ids.get(&std::ptr::from_ref(schema)) {
            Some(&id) => id,
            None => {
                let id = self.nodes.len();
                self.nodes.push(FanNode::default());
                self.edges_in.push(0);
                self.ids.insert(std::ptr::from_ref(schema), id);
                self.pending.push((id, schema));
                id
            }
        };
        self.edges_in[id] += 1;
        Some(id)
    }

    /// The local target of a reference (`#`, `#/json/pointer`, `#anchor`), if it has one.
    fn target(&self, reference: &str) -> Option<&'a Value> {
        let fragment = reference.strip_prefix('#')?;
        if fragment.is_empty() || fragment.starts_with('/') {
            self.root.pointer(fragment)
        } else {
            self.anchors.get(fragment).copied()
        }
    }

    fn build(&mut self, schema: &'a Value) -> FanNode {
        let mut node = FanNode::default();
        let Value::Object(map) = schema else {
            return node;
        };
        for (key, value) in map {
            let mut one = |builder: &mut Self, into: fn(&mut FanNode) -> &mut Vec<usize>, v| {
                if let Some(id) = builder.node_of(v) {
                    into(&mut node).push(id);
                }
            };
            match key.as_str() {
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    if let Some(target) = value.as_str().and_then(|r| self.target(r)) {
                        one(self, |n| &mut n.same, target);
                    }
                }
                "allOf" | "anyOf" | "oneOf" => {
                    for branch in value.as_array().into_iter().flatten() {
                        one(self, |n| &mut n.same, branch);
                    }
                }
                "not" | "if" | "then" | "else" => one(self, |n| &mut n.same, value),
                "dependentSchemas" | "dependencies" => {
                    for dependent in value.as_object().into_iter().flat_map(|m| m.values()) {
                        one(self, |n| &mut n.same, dependent);
                    }
                }
                "properties" => {
                    for (name, property) in value.as_object().into_iter().flatten() {
                        if let Some(id) = self.node_of(property) {
                            node.properties.push((name.clone(), id));
                        }
                    }
                }
                "patternProperties" => {
                    for pattern in value.as_object().into_iter().flat_map(|m| m.values()) {
                        one(self, |n| &mut n.every_value, pattern);
                    }
                }
                "propertyNames" => one(self, |n| &mut n.every_value, value),
                "additionalProperties" | "unevaluatedProperties" => {
                    one(self, |n| &mut n.unnamed, value);
                }
                "items" | "prefixItems" | "additionalItems" | "contains" | "unevaluatedItems" => {
                    match value {
                        Value::Array(tuple) => {
                            for item in tuple {
                                one(self, |n| &mut n.items, item);
                            }
                        }
                        single => one(self, |n| &mut n.items, single),
                    }
                }
                _ => {}
            }
        }
        node.properties.sort_by(|a, b| a.0.cmp(&b.0));
        node
    }
}

/// Every `$anchor` and `$dynamicAnchor` of `schema`, to the object that declares it.
fn anchors<'a>(schema: &'a Value, found: &mut HashMap<&'a str, &'a Value>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match schema {
        Value::Object(map) => {
            for key in ["$anchor", "$dynamicAnchor"] {
                if let Some(name) = map.get(key).and_then(Value::as_str) {
                    found.entry(name).or_insert(schema);
                }
            }
            for value in map.values() {
                anchors(value, found, depth + 1);
            }
        }
        Value::Array(values) => {
            for value in values {
                anchors(value, found, depth + 1);
            }
        }
        _ => {}
    }
}

impl Fan {
    /// The fan of `root`, a whole schema.
    pub(super) fn compile(root: &Value) -> Fan {
        let mut found = HashMap::new();
        anchors(root, &mut found, 0);
        let mut builder = Builder {
            root,
            nodes: Vec::new(),
            ids: HashMap::new(),
            edges_in: Vec::new(),
            pending: Vec::new(),
            anchors: found,
        };
        builder.node_of(root);
        while let Some((id, schema)) = builder.pending.pop() {
            builder.nodes[id] = builder.build(schema);
        }
        Fan {
            shared: builder.edges_in.iter().any(|&n| n > 1),
            nodes: builder.nodes,
        }
    }

    /// Whether the error listing of `value` stays within [`BUDGET`] visits: at once where no
    /// subschema is reached by two paths, else by counting.
    pub(super) fn within(&self, value: &Value) -> bool {
        if !self.shared || self.nodes.is_empty() {
            return true;
        }
        let mut left = BUDGET;
        self.count(0, value, 0, &mut left)
    }

    /// Counts the visits below node `id` at `value` against `left`; false once over.
    fn count(&self, id: usize, value: &Value, depth: usize, left: &mut usize) -> bool {
        if *left == 0 || depth > MAX_DEPTH {
            return false;
        }
        *left -= 1;
        let node = &self.nodes[id];
        for &same in &node.same {
            if !self.count(same, value, depth + 1, left) {
                return false;
            }
        }
        match value {
            Value::Object(object) => {
                for (key, child) in object {
                    let named = node
                        .properties
                        .binary_search_by(|(name, _)| name.as_str().cmp(key))
                        .ok()
                        .map(|at| node.properties[at].1);
                    let unnamed = if named.is_some() {
                        &[][..]
                    } else {
                        &node.unnamed[..]
                    };
                    for &below in named.iter().chain(&node.every_value).chain(unnamed) {
                        if !self.count(below, child, depth + 1, left) {
                            return false;
                        }
                    }
                }
            }
            Value::Array(items) => {
                for item in items {
                    for &below in &node.items {
                        if !self.count(below, item, depth + 1, left) {
                            return false;
                        }
                    }
                }
            }
            _ => {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(depth: usize) -> Value {
        (0..depth).fold(json!({ "n": 1 }), |value, _| json!({ "x": value }))
    }

    #[test]
    fn a_tree_of_subschemas_needs_no_count() {
        let fan = Fan::compile(&json!({
            "type": "object",
            "properties": {
                "a": { "$ref": "#/$defs/A" },
                "b": { "type": "array", "items": { "type": "integer" } }
            },
            "$defs": { "A": { "allOf": [{ "type": "object" }, { "required": ["n"] }] } }
        }));
        assert!(!fan.shared);
        assert!(fan.within(&json!({ "b": vec![1; 200_000] })));
    }

    #[test]
    fn paths_that_multiply_with_the_values_depth_are_over_the_budget() {
        let fan = Fan::compile(&json!({
            "type": "object",
            "allOf": [{ "$ref": "#/$defs/B" }, { "$ref": "#/$defs/C" }],
            "properties": { "x": { "$ref": "#" }, "n": { "type": "integer" } },
            "$defs": {
                "B": { "type": "object", "properties": { "x": { "$ref": "#" } } },
                "C": { "type": "object", "properties": { "x": { "$ref": "#" } } }
            }
        }));
        assert!(fan.shared);
        assert!(fan.within(&nested(5)));
        assert!(!fan.within(&nested(30)));
    }

    #[test]
    fn a_recursive_schema_is_within_the_budget_for_ordinary_values() {
        let fan = Fan::compile(&json!({
            "$ref": "#/$defs/Node",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "children": { "type": "array", "items": { "$ref": "#/$defs/Node" } },
                        "tag": { "$ref": "#/$defs/Tag" },
                        "other": { "$ref": "#/$defs/Tag" }
                    }
                },
                "Tag": { "$anchor": "tag", "enum": ["a", "b"] }
            }
        }));
        assert!(fan.shared);
        let mut value = json!({ "tag": "a" });
        for _ in 0..50 {
            value = json!({ "children": [value.clone(), { "other": "b" }] });
        }
        assert!(fan.within(&value));
    }
}
