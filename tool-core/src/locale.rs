//! Locales: which of a tool's user-facing texts (`title`, `summary`, `i18n(...)`) a person
//! reading in a given language sees.
//!
//! A tool's `title` and `summary` are written in the registry's *default locale*
//! ([`Registry::default_locale`](crate::Registry::default_locale), `"en"` unless set); `i18n`
//! adds the texts of other locales. A request for a locale resolves by its BCP 47 fallbacks,
//! longest first (`zh-Hans-CN`, `zh-Hans`, `zh`), compared without regard to case and with `_`
//! and `-` alike; the first that is the default locale or a locale of the tool's `i18n` wins:
//!
//! - **title**: that locale's title, else the base title: a tool is never nameless in a UI;
//! - **summary**: that locale's summary; the base summary only when the request resolved to the
//!   default locale; otherwise none (the plugin SDK's rule: a person reading English sees no
//!   summary line rather than one in a language they did not ask for).
//!
//! ```
//! use toolwright_core::locale::{fallbacks, same_locale};
//! assert_eq!(fallbacks("zh-Hans-CN").collect::<Vec<_>>(), ["zh-Hans-CN", "zh-Hans", "zh"]);
//! assert!(same_locale("pt_br", "pt-BR"));
//! ```

use serde::{Deserialize, Serialize};

use crate::descriptor::LocaleText;

/// The default locale of a registry that was not given one.
pub const DEFAULT_LOCALE: &str = "en";

/// A tool's user-facing texts resolved for one requested locale (see the [module](self) for
/// the rule).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolTexts {
    /// The title in the resolved locale, else the base title; `None` only when the tool has no
    /// title at all (show its name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The one-line summary in the resolved locale; `None` when that locale has none (the base
    /// summary is shown only in the default locale).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The locale the request resolved to for this tool (lowercase, `-` between subtags): the
    /// default locale or one of the tool's `i18n` locales; `None` when it matched neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    /// Whether `title` is the base title (in the default locale) standing in for a title the
    /// requested locale lacks: a page may mark it with the default locale's `lang`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub title_fallback: bool,
}

/// Whether `text` is a BCP 47 language tag as far as resolution needs: a language of 2 to 8
/// letters, then subtags of 1 to 8 letters or digits, separated by `-` (or `_`, as `#[tool]`
/// writes them: `pt_br`).
///
/// ```
/// use toolwright_core::locale::is_locale;
/// assert!(is_locale("zh-Hans-CN") && is_locale("en") && is_locale("pt_br"));
/// assert!(!is_locale("") && !is_locale("en-") && !is_locale("english please"));
/// ```
pub fn is_locale(text: &str) -> bool {
    let mut parts = text.split(['-', '_']);
    let language = parts.next().unwrap_or_default();
    (2..=8).contains(&language.len())
        && language.chars().all(|c| c.is_ascii_alphabetic())
        && parts.all(|p| (1..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// Whether `a` and `b` name the same locale: equal but for ASCII case, with `_` and `-` alike.
pub fn same_locale(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes().zip(b.bytes()).all(|(x, y)| {
            let fold = |c: u8| {
                if c == b'_' {
                    b'-'
                } else {
                    c.to_ascii_lowercase()
                }
            };
            fold(x) == fold(y)
        })
}

/// `locale` and each of its prefixes that ends at a subtag boundary, longest first:
/// `zh-Hans-CN`, `zh-Hans`, `zh`.
pub fn fallbacks(locale: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(locale);
    std::iter::from_fn(move || {
        let current = next?;
        next = current.rfind(['-', '_']).map(|end| &current[..end]);
        Some(current)
    })
}

/// `locale` in the form [`ToolTexts::locale`] reports: lowercase, `-` between subtags.
pub fn normalized(locale: &str) -> String {
    locale
        .chars()
        .map(|c| {
            if c == '_' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// A tool's user-facing texts, as [`resolve`] reads them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BaseTexts<'a> {
    pub(crate) title: Option<&'a str>,
    pub(crate) summary: Option<&'a str>,
    pub(crate) i18n: &'static [LocaleText],
}

/// The texts of `base` for `requested` in a registry whose default locale is `default`.
pub(crate) fn resolve(base: BaseTexts<'_>, requested: &str, default: &str) -> ToolTexts {
    for tag in fallbacks(requested) {
        let entry = base.i18n.iter().find(|t| same_locale(t.locale, tag));
        let is_default = same_locale(tag, default);
        if entry.is_none() && !is_default {
            continue;
        }
        let localized_title = entry.and_then(|e| e.title);
        let title = localized_title.or(base.title);
        let summary =
            entry
                .and_then(|e| e.summary)
                .or(if is_default { base.summary } else { None });
        return ToolTexts {
            title: title.map(str::to_owned),
            summary: summary.map(str::to_owned),
            locale: Some(normalized(entry.map_or(default, |e| e.locale))),
            title_fallback: !is_default && localized_title.is_none() && title.is_some(),
        };
    }
    ToolTexts {
        title: base.title.map(str::to_owned),
        summary: None,
        locale: None,
        title_fallback: base.title.is_some(),
    }
}

/// The locales a registry knows: its default and every locale a tool has `i18n` texts in. A
/// request maps to one slot (the longest of its fallbacks the registry knows), and every
/// request of a slot resolves every tool alike, so the localized lists and catalogs are cached
/// per slot: a bounded number of them, however many tags clients send.
#[derive(Debug)]
pub(crate) struct Locales {
    default: Box<str>,
    /// The other locales, normalized, sorted and without duplicates.
    others: Vec<String>,
}

/// Where a request for a locale lands among a registry's [`Locales`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot<'a> {
    /// The default locale: the base texts.
    Default,
    /// The registry's `index`-th other locale, `tag`.
    Other { index: usize, tag: &'a str },
    /// No locale the registry knows: base titles and no summaries.
    Unknown,
}

impl Locales {
    /// The locales of `tools`' texts beside `default`.
    pub(crate) fn new<'t>(
        default: &str,
        i18n: impl IntoIterator<Item = &'t [LocaleText]>,
    ) -> Locales {
        let mut others: Vec<String> = i18n
            .into_iter()
            .flatten()
            .map(|t| normalized(t.locale))
            .filter(|t| !same_locale(t, default))
            .collect();
        others.sort();
        others.dedup();
        Locales {
            default: default.into(),
            others,
        }
    }

    /// The default locale.
    pub(crate) fn default_locale(&self) -> &str {
        &self.default
    }

    /// How many other locales there are (the slots of [`Slot::Other`]).
    pub(crate) fn others(&self) -> usize {
        self.others.len()
    }

    /// The slot of `requested`.
    pub(crate) fn slot(&self, requested: &str) -> Slot<'_> {
        for tag in fallbacks(requested) {
            if same_locale(tag, &self.default) {
                return Slot::Default;
            }
            if let Some(index) = self.others.iter().position(|o| same_locale(o, tag)) {
                return Slot::Other {
                    index,
                    tag: &self.others[index],
                };
            }
        }
        Slot::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZH_BASE: BaseTexts<'static> = BaseTexts {
        title: Some("重启服务"),
        summary: Some("重启一个服务并等待它恢复健康"),
        i18n: &[LocaleText {
            locale: "en",
            title: Some("Restart service"),
            summary: Some("Restarts a service and waits until it is healthy"),
        }],
    };

    const NO_EN_SUMMARY: BaseTexts<'static> = BaseTexts {
        title: Some("查看日志"),
        summary: Some("读取服务最近的日志"),
        i18n: &[LocaleText {
            locale: "en",
            title: Some("Read logs"),
            summary: None,
        }],
    };

    fn texts(title: &str, summary: Option<&str>, locale: Option<&str>) -> ToolTexts {
        ToolTexts {
            title: Some(title.into()),
            summary: summary.map(Into::into),
            locale: locale.map(Into::into),
            title_fallback: false,
        }
    }

    #[test]
    fn the_default_locale_gets_the_base_texts() {
        for request in ["zh", "ZH", "zh-CN", "zh_Hans_CN"] {
            assert_eq!(
                resolve(ZH_BASE, request, "zh"),
                texts("重启服务", Some("重启一个服务并等待它恢复健康"), Some("zh")),
                "{request}"
            );
        }
    }

    #[test]
    fn another_locale_gets_its_own_texts() {
        for request in ["en", "EN", "en-US", "en_GB"] {
            assert_eq!(
                resolve(ZH_BASE, request, "zh"),
                texts(
                    "Restart service",
                    Some("Restarts a service and waits until it is healthy"),
                    Some("en")
                ),
                "{request}"
            );
        }
    }

    #[test]
    fn a_missing_summary_is_no_summary_outside_the_default_locale() {
        assert_eq!(
            resolve(NO_EN_SUMMARY, "en-US", "zh"),
            texts("Read logs", None, Some("en"))
        );
        assert_eq!(
            resolve(NO_EN_SUMMARY, "zh", "zh"),
            texts("查看日志", Some("读取服务最近的日志"), Some("zh"))
        );
    }

    #[test]
    fn an_unknown_locale_gets_the_base_title_and_no_summary() {
        let resolved = resolve(ZH_BASE, "de-AT", "zh");
        assert_eq!(resolved.title.as_deref(), Some("重启服务"));
        assert_eq!(resolved.summary, None);
        assert_eq!(resolved.locale, None);
        assert!(resolved.title_fallback);
    }

    #[test]
    fn a_locale_without_a_title_falls_back_to_the_base_title() {
        const SUMMARY_ONLY: BaseTexts<'static> = BaseTexts {
            title: Some("Deploy"),
            summary: Some("Deploys a build"),
            i18n: &[LocaleText {
                locale: "zh_hans",
                title: None,
                summary: Some("部署一个构建"),
            }],
        };
        let resolved = resolve(SUMMARY_ONLY, "zh-Hans-CN", "en");
        assert_eq!(resolved.title.as_deref(), Some("Deploy"));
        assert_eq!(resolved.summary.as_deref(), Some("部署一个构建"));
        assert_eq!(resolved.locale.as_deref(), Some("zh-hans"));
        assert!(resolved.title_fallback);
        // `zh` alone is not `zh-Hans`: nothing matches.
        assert_eq!(resolve(SUMMARY_ONLY, "zh", "en").summary, None);
    }

    #[test]
    fn a_tool_without_texts_has_none() {
        let bare = BaseTexts {
            title: None,
            summary: None,
            i18n: &[],
        };
        assert_eq!(
            resolve(bare, "en", "en"),
            ToolTexts {
                locale: Some("en".into()),
                ..ToolTexts::default()
            }
        );
        assert_eq!(resolve(bare, "zh", "en"), ToolTexts::default());
    }

    #[test]
    fn fallbacks_truncate_at_subtags() {
        assert_eq!(
            fallbacks("zh-Hans-CN").collect::<Vec<_>>(),
            ["zh-Hans-CN", "zh-Hans", "zh"]
        );
        assert_eq!(fallbacks("pt_br").collect::<Vec<_>>(), ["pt_br", "pt"]);
        assert_eq!(fallbacks("en").collect::<Vec<_>>(), ["en"]);
    }

    #[test]
    fn locales_tell_tags_apart() {
        assert!(is_locale("sr-Latn-RS") && is_locale("de") && !is_locale("x-klingon"));
        assert!(!is_locale("e") && !is_locale("en--us") && !is_locale("中文"));
        assert!(same_locale("zh-hans", "ZH_Hans") && !same_locale("zh", "zh-hans"));
    }

    #[test]
    fn requests_land_in_the_longest_known_slot() {
        let i18n: [&'static [LocaleText]; 2] = [
            ZH_BASE.i18n,
            &[LocaleText {
                locale: "zh_hans",
                title: Some("部署"),
                summary: None,
            }],
        ];
        let locales = Locales::new("zh", i18n);
        assert_eq!(locales.others(), 2);
        assert_eq!(
            locales.slot("zh-Hans-CN"),
            Slot::Other {
                index: 1,
                tag: "zh-hans"
            }
        );
        assert_eq!(locales.slot("zh-TW"), Slot::Default);
        assert_eq!(
            locales.slot("EN-us"),
            Slot::Other {
                index: 0,
                tag: "en"
            }
        );
        assert_eq!(locales.slot("fr"), Slot::Unknown);
    }
}
