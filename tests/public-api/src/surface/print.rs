//! Types, bounds and signatures written as Rust for the surface's lines.

use std::collections::HashMap;

use rustdoc_types::{
    Abi, AssocItemConstraint, AssocItemConstraintKind, Function, FunctionPointer, GenericArg,
    GenericArgs, GenericBound, GenericParamDef, GenericParamDefKind, Generics, Path,
    PreciseCapturingArg, Term, TraitBoundModifier, Type, WherePredicate,
};

use super::{Docs, ItemRef, Target, is_workspace_crate};

/// Writes types, bounds and signatures as Rust, with facade paths for what the facade reaches and
/// definition paths for everything else, and notes the workspace items it had to write by a
/// definition path (those the facade does not reach).
pub(super) struct Printer<'a> {
    pub(super) docs: &'a Docs,
    pub(super) canon: &'a HashMap<ItemRef, String>,
    pub(super) doc: usize,
    pub(super) unnamed: Vec<String>,
}

impl Printer<'_> {
    pub(super) fn path(&mut self, p: &Path) -> String {
        let name = match self.docs.resolve(self.doc, &p.id) {
            Target::Local(r) => match self.canon.get(&r) {
                Some(path) => path.clone(),
                None => {
                    let path = self.docs.def_path(r).unwrap_or_else(|| p.path.clone());
                    self.unnamed.push(path.clone());
                    path
                }
            },
            Target::Foreign { path, krate } => {
                if is_workspace_crate(&krate) {
                    self.unnamed.push(path.clone());
                }
                path
            }
            Target::Missing => p.path.clone(),
        };
        match &p.args {
            Some(args) => format!("{name}{}", self.args(args)),
            None => name,
        }
    }

    pub(super) fn args(&mut self, args: &GenericArgs) -> String {
        match args {
            GenericArgs::AngleBracketed { args, constraints } => {
                let mut parts: Vec<String> = args.iter().map(|a| self.arg(a)).collect();
                parts.extend(constraints.iter().map(|c| self.constraint(c)));
                if parts.is_empty() {
                    String::new()
                } else {
                    format!("<{}>", parts.join(", "))
                }
            }
            GenericArgs::Parenthesized { inputs, output } => {
                let inputs: Vec<String> = inputs.iter().map(|t| self.ty(t)).collect();
                let output = match output {
                    Some(t) => format!(" -> {}", self.ty(t)),
                    None => String::new(),
                };
                format!("({}){output}", inputs.join(", "))
            }
            GenericArgs::ReturnTypeNotation => "(..)".to_owned(),
        }
    }

    pub(super) fn arg(&mut self, arg: &GenericArg) -> String {
        match arg {
            GenericArg::Lifetime(l) => l.clone(),
            GenericArg::Type(t) => self.ty(t),
            GenericArg::Const(c) => c.expr.clone(),
            GenericArg::Infer => "_".to_owned(),
        }
    }

    pub(super) fn constraint(&mut self, c: &AssocItemConstraint) -> String {
        let args = match &c.args {
            Some(args) => self.args(args),
            None => String::new(),
        };
        match &c.binding {
            AssocItemConstraintKind::Equality(term) => {
                format!("{}{args} = {}", c.name, self.term(term))
            }
            AssocItemConstraintKind::Constraint(bounds) => {
                format!("{}{args}: {}", c.name, self.bounds(bounds))
            }
        }
    }

    pub(super) fn term(&mut self, term: &Term) -> String {
        match term {
            Term::Type(t) => self.ty(t),
            Term::Constant(c) => c.expr.clone(),
        }
    }

    pub(super) fn ty(&mut self, ty: &Type) -> String {
        match ty {
            Type::ResolvedPath(p) => self.path(p),
            Type::DynTrait(d) => {
                let mut parts: Vec<String> = d
                    .traits
                    .iter()
                    .map(|t| format!("{}{}", self.hrtb(&t.generic_params), self.path(&t.trait_)))
                    .collect();
                if let Some(l) = &d.lifetime {
                    parts.push(l.clone());
                }
                format!("dyn {}", parts.join(" + "))
            }
            Type::Generic(name) | Type::Primitive(name) => name.clone(),
            Type::FunctionPointer(f) => self.fn_pointer(f),
            Type::Tuple(types) => {
                let types: Vec<String> = types.iter().map(|t| self.ty(t)).collect();
                if types.len() == 1 {
                    format!("({},)", types[0])
                } else {
                    format!("({})", types.join(", "))
                }
            }
            Type::Slice(t) => format!("[{}]", self.ty(t)),
            Type::Array { type_, len } => format!("[{}; {len}]", self.ty(type_)),
            Type::Pat { type_, .. } => self.ty(type_),
            Type::ImplTrait(bounds) => format!("impl {}", self.bounds(bounds)),
            Type::Infer => "_".to_owned(),
            Type::RawPointer { is_mutable, type_ } => format!(
                "*{} {}",
                if *is_mutable { "mut" } else { "const" },
                self.ty(type_)
            ),
            Type::BorrowedRef {
                lifetime,
                is_mutable,
                type_,
            } => {
                let mut s = String::from("&");
                if let Some(l) = lifetime {
                    s.push_str(l);
                    s.push(' ');
                }
                if *is_mutable {
                    s.push_str("mut ");
                }
                s.push_str(&self.ty(type_));
                s
            }
            Type::QualifiedPath {
                name,
                args,
                self_type,
                trait_,
            } => {
                let args = match args {
                    Some(args) => self.args(args),
                    None => String::new(),
                };
                let self_type_text = self.ty(self_type);
                match trait_ {
                    Some(t) => {
                        let t = self.path(t);
                        if matches!(&**self_type, Type::Generic(s) if s == "Self") {
                            format!("Self::{name}{args}")
                        } else {
                            format!("<{self_type_text} as {t}>::{name}{args}")
                        }
                    }
                    None => format!("{self_type_text}::{name}{args}"),
                }
            }
        }
    }

    pub(super) fn fn_pointer(&mut self, f: &FunctionPointer) -> String {
        let inputs: Vec<String> = f.sig.inputs.iter().map(|(_, t)| self.ty(t)).collect();
        let output = match &f.sig.output {
            Some(t) => format!(" -> {}", self.ty(t)),
            None => String::new(),
        };
        format!(
            "{}{}{}fn({}){output}",
            self.hrtb(&f.generic_params),
            if f.header.is_unsafe { "unsafe " } else { "" },
            abi(&f.header.abi),
            inputs.join(", ")
        )
    }

    pub(super) fn hrtb(&mut self, params: &[GenericParamDef]) -> String {
        let params: Vec<String> = params.iter().filter_map(|p| self.param(p)).collect();
        if params.is_empty() {
            String::new()
        } else {
            format!("for<{}> ", params.join(", "))
        }
    }

    pub(super) fn bounds(&mut self, bounds: &[GenericBound]) -> String {
        let bounds: Vec<String> = bounds.iter().map(|b| self.bound(b)).collect();
        bounds.join(" + ")
    }

    pub(super) fn bound(&mut self, bound: &GenericBound) -> String {
        match bound {
            GenericBound::TraitBound {
                trait_,
                generic_params,
                modifier,
            } => {
                let modifier = match modifier {
                    TraitBoundModifier::None => "",
                    TraitBoundModifier::Maybe => "?",
                    TraitBoundModifier::MaybeConst => "~const ",
                };
                format!(
                    "{}{modifier}{}",
                    self.hrtb(generic_params),
                    self.path(trait_)
                )
            }
            GenericBound::Outlives(l) => l.clone(),
            GenericBound::Use(args) => {
                let args: Vec<&str> = args
                    .iter()
                    .map(|a| match a {
                        PreciseCapturingArg::Lifetime(l) => l.as_str(),
                        PreciseCapturingArg::Param(p) => p.as_str(),
                    })
                    .collect();
                format!("use<{}>", args.join(", "))
            }
        }
    }

    pub(super) fn param(&mut self, param: &GenericParamDef) -> Option<String> {
        Some(match &param.kind {
            GenericParamDefKind::Lifetime { outlives } if outlives.is_empty() => param.name.clone(),
            GenericParamDefKind::Lifetime { outlives } => {
                format!("{}: {}", param.name, outlives.join(" + "))
            }
            GenericParamDefKind::Type {
                bounds,
                default,
                is_synthetic,
            } => {
                if *is_synthetic {
                    return None;
                }
                let mut s = param.name.clone();
                if !bounds.is_empty() {
                    s.push_str(&format!(": {}", self.bounds(bounds)));
                }
                if let Some(t) = default {
                    s.push_str(&format!(" = {}", self.ty(t)));
                }
                s
            }
            GenericParamDefKind::Const { type_, default } => {
                let mut s = format!("const {}: {}", param.name, self.ty(type_));
                if let Some(d) = default {
                    s.push_str(&format!(" = {d}"));
                }
                s
            }
        })
    }

    pub(super) fn params(&mut self, generics: &Generics) -> String {
        let params: Vec<String> = generics
            .params
            .iter()
            .filter_map(|p| self.param(p))
            .collect();
        if params.is_empty() {
            String::new()
        } else {
            format!("<{}>", params.join(", "))
        }
    }

    pub(super) fn where_clause(&mut self, generics: &Generics) -> String {
        let predicates: Vec<String> = generics
            .where_predicates
            .iter()
            .map(|w| match w {
                WherePredicate::BoundPredicate {
                    type_,
                    bounds,
                    generic_params,
                } => format!(
                    "{}{}: {}",
                    self.hrtb(generic_params),
                    self.ty(type_),
                    self.bounds(bounds)
                ),
                WherePredicate::LifetimePredicate { lifetime, outlives } => {
                    format!("{lifetime}: {}", outlives.join(" + "))
                }
                WherePredicate::EqPredicate { lhs, rhs } => {
                    format!("{} = {}", self.ty(lhs), self.term(rhs))
                }
            })
            .collect();
        if predicates.is_empty() {
            String::new()
        } else {
            format!(" where {}", predicates.join(", "))
        }
    }

    pub(super) fn function(&mut self, vis: &str, path: &str, f: &Function) -> String {
        let mut s = String::from(vis);
        let header = &f.header;
        if header.is_const {
            s.push_str("const ");
        }
        if header.is_async {
            s.push_str("async ");
        }
        if header.is_unsafe {
            s.push_str("unsafe ");
        }
        s.push_str(abi(&header.abi).as_str());
        let params = self.params(&f.generics);
        let mut inputs: Vec<String> = f
            .sig
            .inputs
            .iter()
            .map(|(name, ty)| self.input(name, ty))
            .collect();
        if f.sig.is_c_variadic {
            inputs.push("...".to_owned());
        }
        s.push_str(&format!("fn {path}{params}({})", inputs.join(", ")));
        if let Some(output) = &f.sig.output {
            s.push_str(&format!(" -> {}", self.ty(output)));
        }
        s.push_str(&self.where_clause(&f.generics));
        s
    }

    pub(super) fn input(&mut self, name: &str, ty: &Type) -> String {
        let is_self = |t: &Type| matches!(t, Type::Generic(s) if s == "Self");
        if name == "self" {
            match ty {
                t if is_self(t) => return "self".to_owned(),
                Type::BorrowedRef {
                    lifetime,
                    is_mutable,
                    type_,
                } if is_self(type_) => {
                    let mut s = String::from("&");
                    if let Some(l) = lifetime {
                        s.push_str(l);
                        s.push(' ');
                    }
                    if *is_mutable {
                        s.push_str("mut ");
                    }
                    s.push_str("self");
                    return s;
                }
                _ => {}
            }
        }
        format!("{name}: {}", self.ty(ty))
    }
}

fn abi(abi: &Abi) -> String {
    match abi {
        Abi::Rust => String::new(),
        Abi::C { .. } => "extern \"C\" ".to_owned(),
        Abi::System { .. } => "extern \"system\" ".to_owned(),
        Abi::Other(name) => format!("extern \"{name}\" "),
        other => format!("extern \"{other:?}\" "),
    }
}
