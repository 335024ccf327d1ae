//! The workspace's own sources as the structure checks read them (`tests/layers.rs`,
//! `tests/lints.rs`): a crate's modules, the `crate::`, `super::` and `self::` paths each one
//! uses, its fns with their sizes, and the assignments it makes.
//!
//! Counting rule for sizes: a line counts when it is neither blank nor a comment (its first
//! characters other than spaces are not `//`, which covers `///` and `//!`); `#[cfg(test)]`
//! items (test modules, test-only fns) are left out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::Visit;

/// One module of a crate: its path from the crate root (`""` for the root,
/// `pipeline::decide`), the file it lives in and its items.
#[derive(Debug)]
pub(crate) struct Module {
    /// The path from the crate root, `::`-separated; empty for the root.
    pub(crate) path: String,
    /// The file.
    pub(crate) file: PathBuf,
    /// The items of the module (an inline module's own items).
    pub(crate) items: Vec<syn::Item>,
    /// The names of its child modules.
    pub(crate) children: BTreeSet<String>,
}

/// Every module of the crate whose root is `lib` (a `lib.rs`), test modules left out.
///
/// # Panics
///
/// When a file cannot be read or parsed, or a declared module has no file.
#[must_use]
pub(crate) fn modules(lib: &Path) -> Vec<Module> {
    let mut found = Vec::new();
    let file = parse(lib);
    let dir = lib.parent().expect("lib.rs has a directory").to_path_buf();
    collect(
        String::new(),
        lib.to_path_buf(),
        &dir,
        file.items,
        &mut found,
    );
    found
}

/// The crate root of source `text` (its inline modules included), as if read from
/// `file`; for checking the checks.
///
/// # Panics
///
/// When `text` does not parse.
#[must_use]
pub(crate) fn modules_of(text: &str, file: &Path) -> Vec<Module> {
    let parsed = syn::parse_file(text).expect("the text parses");
    let mut found = Vec::new();
    let dir = file.parent().unwrap_or(file).to_path_buf();
    collect(
        String::new(),
        file.to_path_buf(),
        &dir,
        parsed.items,
        &mut found,
    );
    found
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", file.display()));
    syn::parse_file(&text)
        .unwrap_or_else(|error| panic!("cannot parse {}: {error}", file.display()))
}

/// Adds module `path` (in `file`, whose child modules' files are in `dir`) with `items`, and its
/// child modules.
fn collect(
    path: String,
    file: PathBuf,
    dir: &Path,
    items: Vec<syn::Item>,
    found: &mut Vec<Module>,
) {
    let mut kept = Vec::new();
    let mut children = BTreeSet::new();
    for item in items {
        if is_test(item_attrs(&item)) {
            continue;
        }
        if let syn::Item::Mod(module) = &item {
            let name = module.ident.to_string();
            let child = join(&path, &name);
            let _ = children.insert(name.clone());
            if let Some((_, inner)) = &module.content {
                collect(child, file.clone(), &dir.join(&name), inner.clone(), found);
                continue;
            }
            // `name.rs` beside this file, or `name/mod.rs`; its children are in `name/`.
            let flat = dir.join(format!("{name}.rs"));
            let child_file = if flat.exists() {
                flat
            } else {
                let nested = dir.join(&name).join("mod.rs");
                assert!(
                    nested.exists(),
                    "module `{child}` has no file in {}",
                    dir.display()
                );
                nested
            };
            let parsed = parse(&child_file);
            collect(child, child_file, &dir.join(&name), parsed.items, found);
            continue;
        }
        kept.push(item);
    }
    found.push(Module {
        path,
        file,
        items: kept,
        children,
    });
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}::{name}")
    }
}

/// Whether `attrs` hold `#[cfg(test)]` (alone, not `cfg(not(test))` or `cfg(any(test, ...))`).
#[must_use]
pub(crate) fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The modules of a crate by path.
pub(crate) type Crate<'a> = std::collections::BTreeMap<String, &'a Module>;

/// The modules `module` of `krate` uses: every `crate::`, `super::` and `self::` path in its
/// code (in `use` lists, grouped ones included, and inline, in macro invocations too) and every
/// `use` of a child module, resolved to the module that defines what it names (through the
/// `use` re-exports of the modules on the way, such as a crate root's).
#[must_use]
pub(crate) fn uses(module: &Module, krate: &Crate<'_>) -> BTreeSet<String> {
    let mut paths = Paths::default();
    for item in &module.items {
        paths.visit_item(item);
    }
    let mut used = BTreeSet::new();
    for path in paths.found {
        if let Some(absolute) = absolute(module, &path)
            && let Some(target) = defining_module(&absolute, krate, 0)
            && target != module.path
        {
            let _ = used.insert(target);
        }
    }
    used
}

/// The module that defines what the absolute path `path` names: its longest module prefix,
/// or, when the next segment is a name that module re-exports with `use`, where that leads.
fn defining_module(path: &[String], krate: &Crate<'_>, depth: usize) -> Option<String> {
    let (n, module) = (0..=path.len())
        .rev()
        .find_map(|n| krate.get(&path[..n].join("::")).map(|m| (n, *m)))?;
    if depth < 8
        && let Some(name) = path.get(n)
        && let Some(target) = reexport(module, name)
    {
        let mut next = target;
        next.extend(path[n + 1..].iter().cloned());
        if let Some(found) = defining_module(&next, krate, depth + 1) {
            return Some(found);
        }
    }
    Some(module.path.clone())
}

/// Where `module`'s `use` of `name` (a re-export, or an import the path goes through) leads,
/// as an absolute path, when it is into the crate.
fn reexport(module: &Module, name: &str) -> Option<Vec<String>> {
    for item in &module.items {
        let syn::Item::Use(item) = item else { continue };
        let mut flat = Vec::new();
        flatten_named(&item.tree, &mut Vec::new(), &mut flat);
        for (bound, path) in flat {
            if bound == name {
                return absolute(module, &path);
            }
        }
    }
    None
}

/// The paths a `use` tree names, with the name each binds.
fn flatten_named(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(String, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            flatten_named(&path.tree, prefix, out);
            let _ = prefix.pop();
        }
        syn::UseTree::Name(name) => {
            let mut full = prefix.clone();
            let bound = if name.ident == "self" {
                prefix.last().cloned().unwrap_or_default()
            } else {
                full.push(name.ident.to_string());
                name.ident.to_string()
            };
            out.push((bound, full));
        }
        syn::UseTree::Rename(rename) => {
            let mut full = prefix.clone();
            full.push(rename.ident.to_string());
            out.push((rename.rename.to_string(), full));
        }
        syn::UseTree::Glob(_) => {}
        syn::UseTree::Group(group) => {
            for tree in &group.items {
                flatten_named(tree, prefix, out);
            }
        }
    }
}

/// The absolute form (segments from the crate root) of a path used in `module`. `None` for
/// paths into other crates and std.
fn absolute(module: &Module, path: &[String]) -> Option<Vec<String>> {
    let mut absolute: Vec<String> = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "super" | "self" => module
            .path
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        first if module.children.contains(first) => module
            .path
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => return None,
    };
    let mut rest = path;
    if matches!(path[0].as_str(), "crate" | "self") {
        rest = &path[1..];
    }
    while let Some(first) = rest.first() {
        if first == "super" {
            let _ = absolute.pop();
            rest = &rest[1..];
        } else {
            break;
        }
    }
    absolute.extend(rest.iter().cloned());
    Some(absolute)
}

/// Every path of the code, as segments.
#[derive(Default)]
struct Paths {
    found: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.found
            .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut flat = Vec::new();
        flatten(&item.tree, &mut Vec::new(), &mut flat);
        self.found.extend(flat);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Macro arguments are tokens to syn: paths are read from them as token sequences.
        scan_tokens(mac.tokens.clone(), &mut self.found);
        syn::visit::visit_macro(self, mac);
    }

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {
        // Doc comments and attributes name no module the code uses.
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(super)`: no use of a module.
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        if !is_test(&function.attrs) {
            syn::visit::visit_impl_item_fn(self, function);
        }
    }
}

/// The paths a `use` tree names, as segments.
fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            flatten(&path.tree, prefix, out);
            let _ = prefix.pop();
        }
        syn::UseTree::Name(name) => {
            let mut full = prefix.clone();
            if name.ident != "self" {
                full.push(name.ident.to_string());
            }
            out.push(full);
        }
        syn::UseTree::Rename(rename) => {
            let mut full = prefix.clone();
            full.push(rename.ident.to_string());
            out.push(full);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(group) => {
            for tree in &group.items {
                flatten(tree, prefix, out);
            }
        }
    }
}

/// Paths starting with `crate`, `super` or `self` in a token stream.
fn scan_tokens(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(group) => scan_tokens(group.stream(), out),
            TokenTree::Ident(ident)
                if ["crate", "super", "self"].contains(&ident.to_string().as_str()) =>
            {
                let mut path = vec![ident.to_string()];
                let mut j = i + 1;
                while is_path_separator(tokens.get(j..).unwrap_or(&[])) {
                    match tokens.get(j + 2) {
                        Some(TokenTree::Ident(next)) => {
                            path.push(next.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if path.len() > 1 {
                    out.push(path);
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

fn is_path_separator(tokens: &[TokenTree]) -> bool {
    matches!(
        (tokens.first(), tokens.get(1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':'
    )
}

/// A fn of the code with its size.
#[derive(Debug)]
pub(crate) struct FnSize {
    /// `module::Type::name` or `module::name`.
    pub(crate) name: String,
    /// The line of its `fn`.
    pub(crate) line: usize,
    /// Its lines that are neither blank nor comments, from its `fn` line to its closing brace.
    pub(crate) lines: usize,
}

/// The fns of `module` (free fns, methods, trait fns with bodies), test-only ones left out,
/// measured in `text`, the text of the module's file.
#[must_use]
pub(crate) fn fns(module: &Module, text: &str) -> Vec<FnSize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut sizes = Fns {
        module: &module.path,
        lines: &lines,
        owner: Vec::new(),
        found: Vec::new(),
    };
    for item in &module.items {
        sizes.visit_item(item);
    }
    sizes.found
}

struct Fns<'a> {
    module: &'a str,
    lines: &'a [&'a str],
    owner: Vec<String>,
    found: Vec<FnSize>,
}

impl Fns<'_> {
    fn record(&mut self, name: &syn::Ident, sig: Span, body: Span) {
        let first = sig.start().line;
        let last = body.end().line;
        let mut full = self.module.to_owned();
        for part in self.owner.iter().chain(std::iter::once(&name.to_string())) {
            full = join(&full, part);
        }
        self.found.push(FnSize {
            name: full,
            line: first,
            lines: code_lines(&self.lines[first.saturating_sub(1)..last.min(self.lines.len())]),
        });
    }
}

impl<'ast> Visit<'ast> for Fns<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_fn(&mut self, function: &'ast syn::ItemFn) {
        use syn::spanned::Spanned;
        self.record(
            &function.sig.ident,
            function.sig.span(),
            function.block.span(),
        );
        syn::visit::visit_item_fn(self, function);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        use quote::ToTokens;
        let owner = item.self_ty.to_token_stream().to_string().replace(' ', "");
        self.owner.push(owner);
        syn::visit::visit_item_impl(self, item);
        let _ = self.owner.pop();
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        use syn::spanned::Spanned;
        if is_test(&function.attrs) {
            return;
        }
        self.record(
            &function.sig.ident,
            function.sig.span(),
            function.block.span(),
        );
        syn::visit::visit_impl_item_fn(self, function);
    }

    fn visit_trait_item_fn(&mut self, function: &'ast syn::TraitItemFn) {
        use syn::spanned::Spanned;
        if let Some(body) = &function.default {
            self.record(&function.sig.ident, function.sig.span(), body.span());
        }
        syn::visit::visit_trait_item_fn(self, function);
    }
}

/// How many of `lines` are neither blank nor comments.
#[must_use]
pub(crate) fn code_lines(lines: &[&str]) -> usize {
    lines
        .iter()
        .filter(|line| {
            let line = line.trim_start();
            !line.is_empty() && !line.starts_with("//")
        })
        .count()
}

/// The code lines of a file with `text` that count: the whole file but its `#[cfg(test)]`
/// items.
///
/// # Panics
///
/// When `text` does not parse.
#[must_use]
pub(crate) fn file_lines(text: &str) -> usize {
    use syn::spanned::Spanned;
    let lines: Vec<&str> = text.lines().collect();
    let file = syn::parse_file(text).expect("parsed before");
    let mut excluded = 0;
    for item in &file.items {
        if is_test(item_attrs(item)) {
            let span = item.span();
            let (first, last) = (span.start().line, span.end().line);
            excluded += code_lines(&lines[first.saturating_sub(1)..last.min(lines.len())]);
        }
    }
    code_lines(&lines) - excluded
}

/// The state types only `tool-runtime`'s `transition` module may assign.
pub(crate) const STATE_TYPES: [&str; 4] =
    ["TurnStatus", "CallState", "RequestStatus", "TaskStatus"];

/// Where `module` writes a turn's, call's, request's or task's state: assignments to a field
/// named `status` or `state`, assignments of a value of a [`STATE_TYPES`] type, and struct
/// fields `status`/`state` initialized with one. Returns each write's line and its text.
#[must_use]
pub(crate) fn state_writes(module: &Module) -> Vec<(usize, String)> {
    let mut writes = StateWrites::default();
    for item in &module.items {
        writes.visit_item(item);
    }
    writes.found
}

#[derive(Default)]
struct StateWrites {
    found: Vec<(usize, String)>,
}

impl StateWrites {
    fn note(&mut self, node: &dyn quote::ToTokens) {
        use syn::spanned::Spanned;
        let text = node.to_token_stream().to_string();
        self.found.push((node.span().start().line, text));
    }
}

/// Whether `expr` names one of [`STATE_TYPES`] (as a path segment anywhere in it).
fn names_state_type(expr: &syn::Expr) -> bool {
    #[derive(Default)]
    struct Finder(bool);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_path(&mut self, path: &'ast syn::Path) {
            if path
                .segments
                .iter()
                .any(|s| STATE_TYPES.contains(&s.ident.to_string().as_str()))
            {
                self.0 = true;
            }
            syn::visit::visit_path(self, path);
        }
    }
    let mut finder = Finder::default();
    finder.visit_expr(expr);
    finder.0
}

fn is_state_field(member: &syn::Member) -> bool {
    matches!(member, syn::Member::Named(name) if name == "status" || name == "state")
}

impl<'ast> Visit<'ast> for StateWrites {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        if !is_test(&function.attrs) {
            syn::visit::visit_impl_item_fn(self, function);
        }
    }

    fn visit_expr_assign(&mut self, assign: &'ast syn::ExprAssign) {
        let to_state_field =
            matches!(&*assign.left, syn::Expr::Field(field) if is_state_field(&field.member));
        if to_state_field || names_state_type(&assign.right) {
            self.note(assign);
        }
        syn::visit::visit_expr_assign(self, assign);
    }

    fn visit_field_value(&mut self, field: &'ast syn::FieldValue) {
        if is_state_field(&field.member) && names_state_type(&field.expr) {
            self.note(field);
        }
        syn::visit::visit_field_value(self, field);
    }
}
