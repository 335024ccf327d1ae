//! The descriptor fields every tool's expansion writes (name, texts, effect, policies, schemas),
//! and the check that its templates show no sensitive field (C25).

use super::*;

/// The descriptor fields of the attribute's keys that every kind of tool has; a field at its
/// default is left out (`DEFAULTS` has it).
pub(super) fn common_fields(input: &Input<'_>, tw: &Tw, names: &Names) -> TokenStream {
    let Input {
        attrs,
        sig,
        description,
        ..
    } = input;
    let some = |value: &dyn ToTokens| quote!(::core::option::Option::Some(#value));
    // Coerced to the fn pointer type in a typed `let` spanned at the path: a fn of another
    // signature is a "mismatched types" error there, showing the signature to write.
    let describe = match attrs.description.as_ref().map(|g| &g.value) {
        Some(Description::Fn(path)) => {
            let span = path.span();
            let tw = tw.at(span);
            let value = quote_spanned!(span=> ::core::option::Option::Some({
                let __describe: #tw::DescribeFn = #path;
                __describe
            }));
            Some(quote!(describe: #value,))
        }
        _ => None,
    };
    let enabled = attrs.enabled.as_ref().map(|g| {
        let path = &g.value;
        let value = quote_spanned!(path.span()=> ::core::option::Option::Some(#path));
        quote!(enabled: #value,)
    });
    let toolset = attrs.toolset.as_ref().map(|g| {
        let set = some(&g.value.value());
        quote!(toolset: #set,)
    });
    let title = attrs.title.as_ref().map(|g| {
        let title = some(&g.value);
        quote!(title: #title,)
    });
    let summary = attrs.summary.as_ref().map(|g| {
        let summary = some(&g.value);
        quote!(summary: #summary,)
    });
    let i18n = attrs.i18n.as_ref().map(|g| {
        let locales = g.value.iter().map(|locale| {
            let code = locale.locale.to_string();
            let title = option_str(locale.title.as_ref());
            let summary = option_str(locale.summary.as_ref());
            quote!(#tw::LocaleText { locale: #code, title: #title, summary: #summary })
        });
        quote!(i18n: &[#(#locales),*],)
    });
    let effect = Ident::new(
        match attrs
            .effect
            .as_ref()
            .expect("checked: effect is present")
            .value
        {
            Effect::Read => "Read",
            Effect::Write => "Write",
            Effect::Money => "Money",
            Effect::Public => "Public",
        },
        Span::call_site(),
    );
    let flag = |given: bool, field: &str| {
        let field = Ident::new(field, Span::call_site());
        given.then(|| quote!(#field: true,))
    };
    let untrusted = flag(Attrs::flag(&attrs.untrusted), "untrusted");
    let user_only = flag(Attrs::flag(&attrs.user_only), "user_only");
    let deferred = flag(Attrs::flag(&attrs.deferred), "deferred");
    let subagents = attrs
        .subagents
        .as_ref()
        .is_some_and(|g| !g.value)
        .then(|| quote!(subagents: false,));
    let input_retries = attrs.input_retries().map(|n| {
        let n = some(&n);
        quote!(input_retries: #n,)
    });
    let location = quote_spanned! {sig.ident.span()=>
        #tw::Location {
            file: ::core::file!(),
            line: ::core::line!(),
            column: ::core::column!(),
            module_path: ::core::module_path!(),
        }
    };
    let Names { fn_name, name, .. } = names;
    let description = LitStr::new(description, Span::call_site());
    quote! {
        fn_name: #fn_name,
        name: #name,
        #toolset
        description: #description,
        #describe
        #title
        #summary
        #i18n
        effect: #tw::Effect::#effect,
        #untrusted
        #user_only
        #deferred
        #subagents
        #input_retries
        #enabled
        location: #location,
    }
}

/// C25: labels and approval prompts are stored with the call and shown to people (in the
/// interface, the journal, the approval queue), where the runtime cannot redact a value the
/// template already formatted into text. One assertion per placeholder, at the template.
pub(super) fn c25_templates_hide_sensitive(
    attrs: &Attrs,
    tw: &Tw,
    sensitive_fields: impl Fn() -> TokenStream,
    args_text: impl Fn() -> String,
) -> Vec<TokenStream> {
    let label = attrs.label.as_ref().map(|l| &l.value);
    let labels = label
        .into_iter()
        .flat_map(|l| [l.start.as_ref(), l.complete.as_ref()])
        .map(|text| (text, "a label"));
    let prompt = attrs
        .approval
        .as_ref()
        .map(|a| (a.prompt.as_ref(), "an approval prompt"));
    let mut assertions = Vec::new();
    for (text, shown_in) in labels.chain(prompt) {
        let Some(TextOrPath::Template(template)) = text else {
            continue;
        };
        let span = template.span();
        let tw = tw.at(span);
        let mut seen: Vec<&str> = Vec::new();
        for name in &template.fields {
            if seen.contains(&name.as_str()) {
                continue;
            }
            seen.push(name);
            let args_text = args_text();
            let sensitive_fields = sensitive_fields();
            // Braces doubled: the message is the format string of `assert!`.
            let message = LitStr::new(
                &format!(
                    "`{{{{{name}}}}}` shows the sensitive field `{name}` of `{args_text}` in {shown_in}; labels and approval prompts are stored and shown to people: leave it out of the template (the approver sees the input with sensitive fields redacted)"
                ),
                span,
            );
            assertions.push(quote_spanned! {span=>
                const _: () = ::core::assert!(!#tw::has_field(#sensitive_fields, #name), #message);
            });
        }
    }
    assertions
}
