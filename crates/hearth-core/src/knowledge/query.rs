//! Turning arbitrary user or agent text into a safe FTS5 match expression. Nothing typed may reach
//! FTS5 as syntax: every word becomes a quoted string, so `"`, `*`, `:`, `(`, `AND`, `NEAR` and the
//! like are searched for as text (or dropped when they hold no letters or digits) and never error.

/// Longest query considered; the rest is ignored.
pub const MAX_QUERY_BYTES: usize = 1024;
/// Most words of a query used in the match expression.
pub const MAX_QUERY_TERMS: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchMode {
    /// Every word must occur in the chunk.
    All,
    /// Any word may occur; chunks with more (and rarer) words rank higher.
    Any,
}

/// One word of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The word as a quoted FTS5 string (a prefix search if the word ended in `*`).
    pub quoted: String,
    /// The word as the index stores it, when it is one plain ASCII token (so its frequency can be
    /// looked up); `None` for prefixes, phrases and other scripts.
    pub token: Option<String>,
}

/// The words of `query`, at most [`MAX_QUERY_TERMS`] from its first [`MAX_QUERY_BYTES`].
pub fn terms(query: &str) -> Vec<Term> {
    let mut end = query.len().min(MAX_QUERY_BYTES);
    while !query.is_char_boundary(end) {
        end -= 1;
    }
    query[..end]
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .take(MAX_QUERY_TERMS)
        .map(|word| {
            let prefix = word.ends_with('*');
            let bare = word.trim_end_matches('*');
            let quoted = format!("\"{}\"", bare.replace('"', "\"\""));
            let plain = !prefix && bare.chars().all(|c| c.is_ascii_alphanumeric());
            Term {
                quoted: if prefix { quoted + "*" } else { quoted },
                token: plain.then(|| bare.to_ascii_lowercase()),
            }
        })
        .collect()
}

/// The FTS5 expression joining `terms`, or `None` when there are none.
pub fn expression(terms: &[Term], mode: MatchMode) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    let quoted: Vec<&str> = terms.iter().map(|t| t.quoted.as_str()).collect();
    Some(quoted.join(match mode {
        MatchMode::All => " ",
        MatchMode::Any => " OR ",
    }))
}

/// The FTS5 expression for `query`, or `None` when it holds no searchable word.
pub fn match_expression(query: &str, mode: MatchMode) -> Option<String> {
    expression(&terms(query), mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_and_syntax_is_neutral() {
        assert_eq!(match_expression("ember protocol", MatchMode::All).unwrap(), r#""ember" "protocol""#);
        assert_eq!(match_expression("a AND b", MatchMode::Any).unwrap(), r#""a" OR "AND" OR "b""#);
        assert_eq!(match_expression(r#"say "hi"#, MatchMode::All).unwrap(), r#""say" """hi""#);
        assert_eq!(match_expression("embe*", MatchMode::All).unwrap(), r#""embe"*"#);
        assert_eq!(match_expression("*** : ( ) \"", MatchMode::All), None);
        assert_eq!(match_expression("", MatchMode::All), None);
        let t = terms("Ember foo-bar embe* été");
        let tokens: Vec<Option<&str>> = t.iter().map(|t| t.token.as_deref()).collect();
        assert_eq!(tokens, [Some("ember"), None, None, None]);
    }

    #[test]
    fn long_queries_are_bounded() {
        let q = "word ".repeat(1000);
        let expr = match_expression(&q, MatchMode::Any).unwrap();
        assert_eq!(expr.matches("\"word\"").count(), MAX_QUERY_TERMS);
        let q = "é".repeat(MAX_QUERY_BYTES); // cut lands inside a character
        assert!(match_expression(&q, MatchMode::All).unwrap().len() <= MAX_QUERY_BYTES + 2);
    }
}
