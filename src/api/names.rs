//! Kubernetes' name rules (apimachinery's `validation` package) with its wording: RFC 1123
//! labels and subdomains, qualified names (label, annotation and finalizer keys).

pub const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
pub const QUALIFIED: &str = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
pub const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
pub const DNS_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub const DNS_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length.
fn label_chars(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

pub fn dns_label(s: &str) -> bool {
    s.len() <= 63 && label_chars(s)
}

/// apimachinery's `IsDNS1123Subdomain`: at most 253 characters matching its regex — its
/// dot-separated parts are not held to a label's 63 (a 253-character name without dots is
/// a valid object name).
pub fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(label_chars)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
pub fn name_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// apimachinery's `IsQualifiedName`: the messages, none when valid.
pub fn qualified_name(s: &str) -> Vec<String> {
    let parts: Vec<&str> = s.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => return vec![QUALIFIED.to_string()],
    };
    let mut errs = Vec::new();
    match prefix {
        Some("") => errs.push("prefix part must be non-empty".to_string()),
        Some(p) if !dns_subdomain(p) => errs.push(format!("prefix part {DNS_SUBDOMAIN}")),
        _ => {}
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !name_chars(name) {
        errs.push(NAME_PART.to_string());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_as_apimachinery_judges_them() {
        assert!(
            dns_subdomain(&"a".repeat(253)),
            "253 characters without a dot"
        );
        assert!(!dns_subdomain(&"a".repeat(254)));
        assert!(dns_subdomain(&format!("{}.b", "a".repeat(100))));
        for bad in ["", "a..b", ".a", "a.", "-a", "A", "a_b"] {
            assert!(!dns_subdomain(bad), "{bad:?}");
        }
        assert!(!dns_label(&"a".repeat(64)), "a label keeps its 63");
    }

    #[test]
    fn qualified_names_as_apimachinery_judges_them() {
        for ok in [
            "app",
            "example.com/app",
            "a.b_c-d",
            "koordinator.sh/qosClass",
            "A1",
        ] {
            assert!(qualified_name(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            qualified_name(""),
            vec![
                "name part must be non-empty".to_string(),
                NAME_PART.to_string()
            ]
        );
        assert_eq!(qualified_name("a b"), vec![NAME_PART.to_string()]);
        assert_eq!(qualified_name("a/b/c"), vec![QUALIFIED.to_string()]);
        assert_eq!(
            qualified_name("/x"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert_eq!(
            qualified_name("Bad_Prefix/x"),
            vec![format!("prefix part {DNS_SUBDOMAIN}")]
        );
        assert_eq!(
            qualified_name(&"x".repeat(64)),
            vec!["name part must be no more than 63 characters".to_string()]
        );
    }
}
