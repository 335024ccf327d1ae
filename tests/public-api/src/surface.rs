//! The facade's surface from the rustdoc JSON of the workspace crates: every item reachable by a
//! public path from `toolwright`, one line each, and the workspace types those lines mention that
//! no public path of the facade reaches.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

mod print;

use print::Printer;
use rustdoc_types::{
    Attribute, Crate, Id, Item, ItemEnum, ItemKind, MacroKind, StructKind, Type, VariantKind,
    Visibility,
};

/// The crates whose types must be nameable through the facade.
fn is_workspace_crate(name: &str) -> bool {
    crate::rustdoc::PACKAGES
        .iter()
        .any(|(_, krate)| *krate == name)
}

/// One item of one crate's JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ItemRef {
    doc: usize,
    id: Id,
}

/// The JSON of the facade (first) and of the workspace crates it re-exports.
pub(crate) struct Docs {
    crates: Vec<Crate>,
    /// Every crate's own items by definition path and kind: how an id in one crate's JSON, which
    /// that JSON knows only by path, is found in the JSON of the crate that defines it.
    by_path: HashMap<(String, ItemKind), ItemRef>,
    /// Every crate's own items by crate, name and kind, for the items whose `paths` entry has
    /// another id than their `index` entry (derive macros, in format 57).
    by_name: HashMap<(String, String, ItemKind), Vec<ItemRef>>,
}

/// What an id in one crate's JSON stands for.
enum Target {
    /// An item whose definition is in one of the loaded JSON files.
    Local(ItemRef),
    /// An item of another crate, by its definition path.
    Foreign { path: String, krate: String },
    /// An id the JSON has no entry for.
    Missing,
}

impl Docs {
    /// Indexes the crates' JSON, the facade's first.
    pub(crate) fn new(crates: Vec<Crate>) -> Docs {
        let mut by_path = HashMap::new();
        let mut by_name: HashMap<_, Vec<ItemRef>> = HashMap::new();
        for (doc, krate) in crates.iter().enumerate() {
            for (id, summary) in &krate.paths {
                if summary.crate_id == 0 && krate.index.contains_key(id) {
                    by_path.insert(
                        (summary.path.join("::"), summary.kind),
                        ItemRef { doc, id: *id },
                    );
                }
            }
            let crate_name = krate.index[&krate.root].name.clone().unwrap_or_default();
            for (id, item) in &krate.index {
                if let (0, Some(name)) = (item.crate_id, &item.name) {
                    by_name
                        .entry((crate_name.clone(), name.clone(), item.inner.item_kind()))
                        .or_default()
                        .push(ItemRef { doc, id: *id });
                }
            }
        }
        Docs {
            crates,
            by_path,
            by_name,
        }
    }

    fn item(&self, r: ItemRef) -> &Item {
        &self.crates[r.doc].index[&r.id]
    }

    fn get(&self, doc: usize, id: &Id) -> Option<&Item> {
        self.crates[doc].index.get(id)
    }

    fn resolve(&self, doc: usize, id: &Id) -> Target {
        let krate = &self.crates[doc];
        if krate.index.get(id).is_some_and(|item| item.crate_id == 0) {
            return Target::Local(ItemRef { doc, id: *id });
        }
        let Some(summary) = krate.paths.get(id) else {
            return Target::Missing;
        };
        let path = summary.path.join("::");
        if let Some(r) = self.by_path.get(&(path.clone(), summary.kind)) {
            return Target::Local(*r);
        }
        let krate = summary.path.first().cloned().unwrap_or_default();
        let name = summary.path.last().cloned().unwrap_or_default();
        match self
            .by_name
            .get(&(krate.clone(), name, summary.kind))
            .map(Vec::as_slice)
        {
            Some([r]) => Target::Local(*r),
            _ => Target::Foreign { path, krate },
        }
    }

    /// An item's path in its own crate.
    fn def_path(&self, r: ItemRef) -> Option<String> {
        self.crates[r.doc]
            .paths
            .get(&r.id)
            .map(|s| s.path.join("::"))
    }
}

/// The listing and the nameability findings.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// One line per item, in order.
    pub(crate) lines: Vec<String>,
    /// Each workspace type that no facade path reaches, with the lines' subjects mentioning it.
    pub(crate) unnameable: BTreeMap<String, BTreeSet<String>>,
    /// Re-exports that could not be followed.
    pub(crate) unresolved: Vec<String>,
}

/// Lists the facade's surface.
pub(crate) fn list(docs: &Docs) -> Listing {
    let mut walk = Walk {
        docs,
        paths: HashMap::new(),
        foreign: Vec::new(),
        unresolved: Vec::new(),
        stack: HashSet::new(),
    };
    let root = ItemRef {
        doc: 0,
        id: docs.crates[0].root,
    };
    let root_name = docs.item(root).name.clone().unwrap_or_default();
    walk.module(root, &root_name);

    let mut canon = HashMap::new();
    for (r, paths) in &mut walk.paths {
        paths.sort_by(|a, b| {
            (a.matches("::").count(), a.as_str()).cmp(&(b.matches("::").count(), b.as_str()))
        });
        paths.dedup();
        canon.insert(*r, paths[0].clone());
    }
    canon.insert(root, root_name.clone());

    let mut out = Emit {
        docs,
        canon: &canon,
        entries: BTreeSet::new(),
        unnameable: BTreeMap::new(),
    };
    for (r, paths) in &walk.paths {
        out.item(*r, &paths[0]);
        let kind = kind_word(docs.item(*r));
        for alias in &paths[1..] {
            out.push(
                alias,
                0,
                format!("pub use {alias} = {kind} {}", paths[0]),
                Vec::new(),
            );
        }
    }
    for (path, target) in &walk.foreign {
        out.push(path, 0, format!("pub use {path} = {target}"), Vec::new());
    }
    out.trait_impls();

    let mut seen = HashSet::new();
    let lines = out
        .entries
        .into_iter()
        .map(|(_, _, line)| line)
        .filter(|line| seen.insert(line.clone()))
        .collect();
    Listing {
        lines,
        unnameable: out.unnameable,
        unresolved: walk.unresolved,
    }
}

/// The walk over the facade's modules.
struct Walk<'a> {
    docs: &'a Docs,
    /// Every facade path of every item reached.
    paths: HashMap<ItemRef, Vec<String>>,
    /// Re-exports of items of other crates: (facade path, what it re-exports).
    foreign: Vec<(String, String)>,
    unresolved: Vec<String>,
    /// The modules being walked (a module re-exported inside itself ends the descent).
    stack: HashSet<ItemRef>,
}

impl Walk<'_> {
    fn module(&mut self, module: ItemRef, prefix: &str) {
        let ItemEnum::Module(m) = &self.docs.item(module).inner else {
            return;
        };
        if !self.stack.insert(module) {
            return;
        }
        for id in &m.items {
            let Some(item) = self.docs.get(module.doc, id) else {
                continue;
            };
            let child = ItemRef {
                doc: module.doc,
                id: *id,
            };
            match &item.inner {
                ItemEnum::Use(u) => {
                    let target = u.id.as_ref().map(|id| self.docs.resolve(module.doc, id));
                    if u.is_glob {
                        match target {
                            Some(Target::Local(r)) => self.module(r, prefix),
                            _ => self.unresolved.push(format!("{prefix}::{}::*", u.source)),
                        }
                        continue;
                    }
                    if is_hidden_name(&u.name) {
                        continue;
                    }
                    let path = format!("{prefix}::{}", u.name);
                    match target {
                        Some(Target::Local(r)) => self.reach(r, path),
                        Some(Target::Foreign { path: target, .. }) => {
                            self.foreign.push((path, target));
                        }
                        Some(Target::Missing) | None => {
                            self.unresolved
                                .push(format!("{path} (`pub use {}`)", u.source));
                        }
                    }
                }
                ItemEnum::Impl(_) => {}
                _ => {
                    let Some(name) = &item.name else { continue };
                    if is_hidden_name(name) || !matches!(item.visibility, Visibility::Public) {
                        continue;
                    }
                    self.reach(child, format!("{prefix}::{name}"));
                }
            }
        }
        self.stack.remove(&module);
    }

    fn reach(&mut self, r: ItemRef, path: String) {
        self.paths.entry(r).or_default().push(path.clone());
        if matches!(self.docs.item(r).inner, ItemEnum::Module(_)) {
            self.module(r, &path);
        }
    }
}

/// `#[doc(hidden)]` items never reach the JSON; names of this form are the convention for
/// support that generated code reaches (`toolwright::__private`), skipped all the same.
fn is_hidden_name(name: &str) -> bool {
    name.starts_with("__")
}

/// The emitter of lines.
struct Emit<'a> {
    docs: &'a Docs,
    canon: &'a HashMap<ItemRef, String>,
    /// (sort path, rank, line).
    entries: BTreeSet<(String, u8, String)>,
    unnameable: BTreeMap<String, BTreeSet<String>>,
}

impl<'a> Emit<'a> {
    fn printer(&self, doc: usize) -> Printer<'a> {
        Printer {
            docs: self.docs,
            canon: self.canon,
            doc,
            unnamed: Vec::new(),
        }
    }

    fn push(&mut self, path: &str, rank: u8, line: String, unnamed: Vec<String>) {
        for ty in unnamed {
            self.unnameable
                .entry(ty)
                .or_default()
                .insert(path.to_owned());
        }
        self.entries.insert((path.to_owned(), rank, line));
    }

    fn item(&mut self, r: ItemRef, path: &str) {
        let item = self.docs.item(r);
        let attrs = attrs(item);
        let mut p = self.printer(r.doc);
        let line = match &item.inner {
            ItemEnum::Module(_) => format!("pub mod {path}"),
            ItemEnum::ExternCrate { name, .. } => format!("pub extern crate {path} = {name}"),
            ItemEnum::Struct(s) => {
                let line = format!(
                    "{attrs}pub struct {path}{}{}",
                    p.params(&s.generics),
                    p.where_clause(&s.generics)
                );
                match &s.kind {
                    StructKind::Unit => {}
                    StructKind::Tuple(fields) => {
                        for (i, field) in fields.iter().enumerate() {
                            if let Some(field) = field {
                                self.field(r.doc, field, &format!("{path}::{i}"));
                            }
                        }
                    }
                    StructKind::Plain { fields, .. } => {
                        for field in fields {
                            self.named_field(r.doc, field, path);
                        }
                    }
                }
                self.inherent(r.doc, &s.impls, path);
                line
            }
            ItemEnum::Union(u) => {
                let line = format!(
                    "{attrs}pub union {path}{}{}",
                    p.params(&u.generics),
                    p.where_clause(&u.generics)
                );
                for field in &u.fields {
                    self.named_field(r.doc, field, path);
                }
                self.inherent(r.doc, &u.impls, path);
                line
            }
            ItemEnum::Enum(e) => {
                let line = format!(
                    "{attrs}pub enum {path}{}{}",
                    p.params(&e.generics),
                    p.where_clause(&e.generics)
                );
                for variant in &e.variants {
                    self.variant(r.doc, variant, path);
                }
                self.inherent(r.doc, &e.impls, path);
                line
            }
            ItemEnum::Variant(_) => {
                // Reached by its own path (`pub use Enum::Variant`): listed with its enum.
                let (line, unnamed) = self.variant_line(r.doc, item, path);
                p.unnamed.extend(unnamed);
                line
            }
            ItemEnum::StructField(ty) => format!("pub field {path}: {}", p.ty(ty)),
            ItemEnum::Function(f) => p.function("pub ", path, f),
            ItemEnum::Trait(t) => {
                let mut line = String::from("pub ");
                if t.is_unsafe {
                    line.push_str("unsafe ");
                }
                if t.is_auto {
                    line.push_str("auto ");
                }
                line.push_str(&format!("trait {path}{}", p.params(&t.generics)));
                if !t.bounds.is_empty() {
                    line.push_str(&format!(": {}", p.bounds(&t.bounds)));
                }
                line.push_str(&p.where_clause(&t.generics));
                for id in &t.items {
                    self.trait_item(r.doc, id, path);
                }
                line
            }
            ItemEnum::TraitAlias(t) => format!(
                "pub trait {path}{} = {}{}",
                p.params(&t.generics),
                p.bounds(&t.params),
                p.where_clause(&t.generics)
            ),
            ItemEnum::TypeAlias(t) => format!(
                "pub type {path}{} = {}{}",
                p.params(&t.generics),
                p.ty(&t.type_),
                p.where_clause(&t.generics)
            ),
            ItemEnum::Constant { type_, .. } => format!("pub const {path}: {}", p.ty(type_)),
            ItemEnum::Static(s) => format!(
                "pub static {}{path}: {}",
                if s.is_mutable { "mut " } else { "" },
                p.ty(&s.type_)
            ),
            ItemEnum::Macro(_) => format!("pub macro {path}!"),
            ItemEnum::ProcMacro(m) => match m.kind {
                MacroKind::Bang => format!("pub macro {path}!"),
                MacroKind::Attr => format!("pub attribute macro {path}"),
                MacroKind::Derive if m.helpers.is_empty() => format!("pub derive macro {path}"),
                MacroKind::Derive => format!(
                    "pub derive macro {path} (helper attributes: {})",
                    m.helpers.join(", ")
                ),
            },
            ItemEnum::Primitive(_) => format!("pub primitive {path}"),
            ItemEnum::ExternType => format!("pub extern type {path}"),
            ItemEnum::AssocConst { type_, .. } => format!("pub const {path}: {}", p.ty(type_)),
            ItemEnum::AssocType { .. } | ItemEnum::Use(_) | ItemEnum::Impl(_) => {
                format!("pub {} {path}", kind_word(item))
            }
        };
        let unnamed = p.unnamed;
        self.push(path, 0, line, unnamed);
    }

    fn named_field(&mut self, doc: usize, id: &Id, parent: &str) {
        let Some(item) = self.docs.get(doc, id) else {
            return;
        };
        let name = item.name.clone().unwrap_or_default();
        self.field(doc, id, &format!("{parent}::{name}"));
    }

    fn field(&mut self, doc: usize, id: &Id, path: &str) {
        let Some(item) = self.docs.get(doc, id) else {
            return;
        };
        let ItemEnum::StructField(ty) = &item.inner else {
            return;
        };
        let mut p = self.printer(doc);
        let line = format!("pub field {path}: {}", p.ty(ty));
        let unnamed = p.unnamed;
        self.push(path, 0, line, unnamed);
    }

    fn variant(&mut self, doc: usize, id: &Id, parent: &str) {
        let Some(item) = self.docs.get(doc, id) else {
            return;
        };
        let path = format!("{parent}::{}", item.name.as_deref().unwrap_or_default());
        let (line, unnamed) = self.variant_line(doc, item, &path);
        self.push(&path, 0, line, unnamed);
        if let ItemEnum::Variant(v) = &item.inner
            && let VariantKind::Struct { fields, .. } = &v.kind
        {
            for field in fields {
                self.named_field(doc, field, &path);
            }
        }
    }

    fn variant_line(&self, doc: usize, item: &Item, path: &str) -> (String, Vec<String>) {
        let mut p = self.printer(doc);
        let ItemEnum::Variant(v) = &item.inner else {
            return (format!("pub variant {path}"), Vec::new());
        };
        let attrs = attrs(item);
        let line = match &v.kind {
            VariantKind::Plain => format!("{attrs}pub variant {path}"),
            VariantKind::Tuple(fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|field| {
                        let ty = field
                            .as_ref()
                            .and_then(|id| self.docs.get(doc, id))
                            .and_then(|f| match &f.inner {
                                ItemEnum::StructField(ty) => Some(ty),
                                _ => None,
                            });
                        match ty {
                            Some(ty) => p.ty(ty),
                            None => "_".to_owned(),
                        }
                    })
                    .collect();
                format!("{attrs}pub variant {path}({})", fields.join(", "))
            }
            VariantKind::Struct { .. } => format!("{attrs}pub variant {path} {{ .. }}"),
        };
        (line, p.unnamed)
    }

    /// The public items of a type's inherent impls.
    fn inherent(&mut self, doc: usize, impls: &[Id], parent: &str) {
        for id in impls {
            let Some(ItemEnum::Impl(imp)) = self.docs.get(doc, id).map(|i| &i.inner) else {
                continue;
            };
            if imp.trait_.is_some() || imp.is_synthetic || imp.blanket_impl.is_some() {
                continue;
            }
            // The impl's bounds are part of every method's signature.
            let mut p = self.printer(doc);
            p.params(&imp.generics);
            p.where_clause(&imp.generics);
            for ty in p.unnamed {
                self.unnameable
                    .entry(ty)
                    .or_default()
                    .insert(parent.to_owned());
            }
            for id in &imp.items {
                let Some(item) = self.docs.get(doc, id) else {
                    continue;
                };
                if !matches!(item.visibility, Visibility::Public) {
                    continue;
                }
                let path = format!("{parent}::{}", item.name.as_deref().unwrap_or_default());
                let mut p = self.printer(doc);
                let line = match &item.inner {
                    ItemEnum::Function(f) => p.function("pub ", &path, f),
                    ItemEnum::AssocConst { type_, .. } => {
                        format!("pub const {path}: {}", p.ty(type_))
                    }
                    ItemEnum::AssocType { type_, .. } => match type_ {
                        Some(ty) => format!("pub type {path} = {}", p.ty(ty)),
                        None => format!("pub type {path}"),
                    },
                    _ => format!("pub {} {path}", kind_word(item)),
                };
                let unnamed = p.unnamed;
                self.push(&path, 0, line, unnamed);
            }
        }
    }

    fn trait_item(&mut self, doc: usize, id: &Id, parent: &str) {
        let Some(item) = self.docs.get(doc, id) else {
            return;
        };
        let path = format!("{parent}::{}", item.name.as_deref().unwrap_or_default());
        let mut p = self.printer(doc);
        let line = match &item.inner {
            ItemEnum::Function(f) => {
                let mut line = p.function("pub ", &path, f);
                if f.has_body {
                    line.push_str(" { .. }");
                }
                line
            }
            ItemEnum::AssocConst { type_, value } => format!(
                "pub const {path}: {}{}",
                p.ty(type_),
                if value.is_some() { " = .." } else { "" }
            ),
            ItemEnum::AssocType {
                generics,
                bounds,
                type_,
            } => {
                let mut line = format!("pub type {path}{}", p.params(generics));
                if !bounds.is_empty() {
                    line.push_str(&format!(": {}", p.bounds(bounds)));
                }
                line.push_str(&p.where_clause(generics));
                if let Some(ty) = type_ {
                    line.push_str(&format!(" = {}", p.ty(ty)));
                }
                line
            }
            _ => format!("pub {} {path}", kind_word(item)),
        };
        let unnamed = p.unnamed;
        self.push(&path, 0, line, unnamed);
    }

    /// Trait impls, from every crate, for a type the facade reaches or of a trait it reaches
    /// (derived ones included; auto-trait and blanket impls left out).
    fn trait_impls(&mut self) {
        let docs = self.docs;
        for (doc, krate) in docs.crates.iter().enumerate() {
            for item in krate.index.values() {
                let ItemEnum::Impl(imp) = &item.inner else {
                    continue;
                };
                let Some(trait_) = &imp.trait_ else { continue };
                if item.crate_id != 0 || imp.is_synthetic || imp.blanket_impl.is_some() {
                    continue;
                }
                // `derive(PartialEq)`'s unstable marker: noise.
                if let Target::Foreign { path, .. } = docs.resolve(doc, &trait_.id)
                    && path == "core::marker::StructuralPartialEq"
                {
                    continue;
                }
                let reached = |id: &Id| match docs.resolve(doc, id) {
                    Target::Local(r) => self.canon.get(&r).cloned(),
                    _ => None,
                };
                let sort = head_id(&imp.for_)
                    .and_then(reached)
                    .or_else(|| reached(&trait_.id));
                let Some(sort) = sort else { continue };

                let mut p = self.printer(doc);
                let mut line = String::new();
                if imp.is_unsafe {
                    line.push_str("unsafe ");
                }
                line.push_str(&format!("impl{} ", p.params(&imp.generics)));
                if imp.is_negative {
                    line.push('!');
                }
                line.push_str(&format!(
                    "{} for {}{}",
                    p.path(trait_),
                    p.ty(&imp.for_),
                    p.where_clause(&imp.generics)
                ));
                // Associated types of the impl can name types too (`type Output = ...`).
                for id in &imp.items {
                    if let Some(ItemEnum::AssocType {
                        type_: Some(ty), ..
                    }) = docs.get(doc, id).map(|i| &i.inner)
                    {
                        p.ty(ty);
                    }
                }
                let unnamed = p.unnamed;
                for ty in unnamed {
                    self.unnameable.entry(ty).or_default().insert(line.clone());
                }
                self.entries.insert((sort, 1, line));
            }
        }
    }
}

/// The item a type is about, through references, pointers, slices and arrays.
fn head_id(ty: &Type) -> Option<&Id> {
    match ty {
        Type::ResolvedPath(p) => Some(&p.id),
        Type::BorrowedRef { type_, .. }
        | Type::RawPointer { type_, .. }
        | Type::Slice(type_)
        | Type::Array { type_, .. } => head_id(type_),
        _ => None,
    }
}

/// Attributes worth a line's attention.
fn attrs(item: &Item) -> &'static str {
    if item
        .attrs
        .iter()
        .any(|a| matches!(a, Attribute::NonExhaustive))
    {
        "#[non_exhaustive] "
    } else {
        ""
    }
}

fn kind_word(item: &Item) -> &'static str {
    match &item.inner {
        ItemEnum::Module(_) => "mod",
        ItemEnum::ExternCrate { .. } => "extern crate",
        ItemEnum::Use(_) => "use",
        ItemEnum::Union(_) => "union",
        ItemEnum::Struct(_) => "struct",
        ItemEnum::StructField(_) => "field",
        ItemEnum::Enum(_) => "enum",
        ItemEnum::Variant(_) => "variant",
        ItemEnum::Function(_) => "fn",
        ItemEnum::Trait(_) | ItemEnum::TraitAlias(_) => "trait",
        ItemEnum::Impl(_) => "impl",
        ItemEnum::TypeAlias(_) | ItemEnum::AssocType { .. } => "type",
        ItemEnum::Constant { .. } | ItemEnum::AssocConst { .. } => "const",
        ItemEnum::Static(_) => "static",
        ItemEnum::ExternType => "extern type",
        ItemEnum::Macro(_) => "macro",
        ItemEnum::ProcMacro(m) => match m.kind {
            MacroKind::Bang => "macro",
            MacroKind::Attr => "attribute macro",
            MacroKind::Derive => "derive macro",
        },
        ItemEnum::Primitive(_) => "primitive",
    }
}
