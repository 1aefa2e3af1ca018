//! The knowledge tools: search and read, limited to the libraries the request was granted.
//!
//! The knowledge service itself lives elsewhere; the gateway needs only [`KnowledgeAccess`].

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{json, Value};

/// Name of the search tool (the model sees `hearth_knowledge_search`).
pub const SEARCH_TOOL: &str = "knowledge_search";
/// Name of the read tool (the model sees `hearth_knowledge_read`).
pub const READ_TOOL: &str = "knowledge_read";
/// Hits returned when the model does not ask for a number.
pub const DEFAULT_SEARCH_HITS: usize = 8;
/// Most hits one search returns.
pub const MAX_SEARCH_HITS: usize = 25;
/// Most of a document's text one `knowledge_read` hands the model, in bytes (the knowledge base
/// itself reads documents up to `knowledge::MAX_READ_BYTES`).
pub const MODEL_READ_BYTES: usize = 64 * 1024;

use crate::knowledge::MAX_QUERY_BYTES;

/// Why a knowledge tool call was refused; its Display is the sentence the model reads.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeRefusal {
    #[error("No knowledge library is attached to this conversation, so there is nothing to search or read. Ask the user to attach a library.")]
    NoLibrary,
    #[error("knowledge_search needs a non-empty `query`.")]
    EmptyQuery,
    #[error("The query is too long; keep it under {MAX_QUERY_BYTES} bytes.")]
    QueryTooLong,
    #[error("knowledge_read needs a `document_id` from knowledge_search.")]
    NoDocumentId,
    #[error("`{0}` is not a document id from knowledge_search.")]
    BadDocumentId(String),
    #[error("No document {0} in the libraries attached to this conversation.")]
    NoSuchDocument(String),
    #[error("There is no knowledge tool named {0}.")]
    UnknownTool(String),
    #[error(transparent)]
    Knowledge(#[from] crate::knowledge::KnowledgeError),
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KnowledgeHit {
    pub library: String,
    pub document_id: String,
    pub title: String,
    pub snippet: String,
    pub score: f64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KnowledgeDoc {
    pub library: String,
    pub document_id: String,
    pub title: String,
    pub text: String,
    /// The text was cut at the byte bound.
    pub truncated: bool,
}

/// What the gateway needs from the knowledge service. Implementations must never return data from
/// a library outside `libraries`; errors are sentences for the model.
pub trait KnowledgeAccess: Send + Sync {
    fn search(&self, libraries: &[String], query: &str, limit: usize) -> Result<Vec<KnowledgeHit>, KnowledgeRefusal>;
    fn read(&self, libraries: &[String], document_id: &str, max_bytes: usize) -> Result<KnowledgeDoc, KnowledgeRefusal>;
}

/// Tool definitions as JSON Schema objects: (name, description, input schema).
pub fn tool_definitions() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            SEARCH_TOOL,
            "Search the knowledge libraries attached to this conversation. Returns ranked snippets with document ids.",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_HITS, "description": "Most hits to return."}
            }, "required": ["query"]}),
        ),
        (
            READ_TOOL,
            "Read one document of the knowledge libraries attached to this conversation, by the id a search returned.",
            json!({"type": "object", "properties": {
                "document_id": {"type": "string", "description": "Document id from knowledge_search."}
            }, "required": ["document_id"]}),
        ),
    ]
}

/// Run a knowledge tool for a grant's `libraries`; Ok = text for the model, Err = refusal sentence.
pub fn call(access: &dyn KnowledgeAccess, libraries: &[String], tool: &str, args: &serde_json::Map<String, Value>) -> Result<String, KnowledgeRefusal> {
    if libraries.is_empty() {
        return Err(KnowledgeRefusal::NoLibrary);
    }
    match tool {
        SEARCH_TOOL => {
            let query = args.get("query").and_then(Value::as_str).map(str::trim).unwrap_or("");
            if query.is_empty() {
                return Err(KnowledgeRefusal::EmptyQuery);
            }
            if query.len() > MAX_QUERY_BYTES {
                return Err(KnowledgeRefusal::QueryTooLong);
            }
            let limit = args.get("limit").and_then(Value::as_u64).map_or(DEFAULT_SEARCH_HITS, |n| n as usize).clamp(1, MAX_SEARCH_HITS);
            let hits = access.search(libraries, query, limit)?;
            if hits.is_empty() {
                return Ok(format!("No results for \"{query}\" in the attached libraries."));
            }
            let mut out = String::new();
            for (i, h) in hits.iter().take(limit).enumerate() {
                out.push_str(&format!("{}. {} (document_id: {}, library: {})\n   {}\n", i + 1, h.title, h.document_id, h.library, h.snippet));
            }
            Ok(out)
        }
        READ_TOOL => {
            let id = args.get("document_id").and_then(Value::as_str).unwrap_or("").trim();
            if id.is_empty() {
                return Err(KnowledgeRefusal::NoDocumentId);
            }
            let doc = access.read(libraries, id, MODEL_READ_BYTES)?;
            let mut out = format!("# {}\n(document_id: {}, library: {})\n\n{}", doc.title, doc.document_id, doc.library, doc.text);
            if doc.truncated {
                out.push_str(&format!("\n\n[Hearth shows the first {MODEL_READ_BYTES} bytes of this document.]"));
            }
            Ok(out)
        }
        other => Err(KnowledgeRefusal::UnknownTool(other.into())),
    }
}

/// (document id, title, text).
type MemoryDoc = (String, String, String);

/// A knowledge base held in memory: libraries of documents. For tests and the self-test.
#[derive(Debug, Default)]
pub struct InMemoryKnowledge {
    libraries: Mutex<BTreeMap<String, Vec<MemoryDoc>>>,
}

impl InMemoryKnowledge {
    pub fn add(&self, library: &str, document_id: &str, title: &str, text: &str) {
        self.libraries.lock().unwrap().entry(library.into()).or_default().push((document_id.into(), title.into(), text.into()));
    }
}

impl KnowledgeAccess for InMemoryKnowledge {
    fn search(&self, libraries: &[String], query: &str, limit: usize) -> Result<Vec<KnowledgeHit>, KnowledgeRefusal> {
        let needle = query.to_lowercase();
        let all = self.libraries.lock().unwrap();
        let mut hits = Vec::new();
        for lib in libraries {
            for (id, title, text) in all.get(lib).into_iter().flatten() {
                let count = text.to_lowercase().matches(&needle).count();
                if count > 0 {
                    let snippet: String = text.chars().take(160).collect();
                    hits.push(KnowledgeHit { library: lib.clone(), document_id: id.clone(), title: title.clone(), snippet, score: count as f64 });
                }
            }
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit);
        Ok(hits)
    }

    fn read(&self, libraries: &[String], document_id: &str, max_bytes: usize) -> Result<KnowledgeDoc, KnowledgeRefusal> {
        let all = self.libraries.lock().unwrap();
        for lib in libraries {
            if let Some((id, title, text)) = all.get(lib).into_iter().flatten().find(|d| d.0 == document_id) {
                let mut cut = text.len().min(max_bytes);
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                return Ok(KnowledgeDoc { library: lib.clone(), document_id: id.clone(), title: title.clone(), text: text[..cut].into(), truncated: cut < text.len() });
            }
        }
        Err(KnowledgeRefusal::NoSuchDocument(document_id.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kb() -> InMemoryKnowledge {
        let kb = InMemoryKnowledge::default();
        kb.add("public", "d1", "Glossary", "A prism relay bends light.");
        kb.add("secret", "d2", "Salaries", "prism budget: 1M");
        kb
    }

    fn args(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn search_and_read_stay_inside_the_granted_libraries() {
        let kb = kb();
        let libs = vec!["public".to_string()];
        let out = call(&kb, &libs, SEARCH_TOOL, &args(json!({"query": "prism"}))).unwrap();
        assert!(out.contains("Glossary") && !out.contains("Salaries"), "{out}");
        assert!(call(&kb, &libs, READ_TOOL, &args(json!({"document_id": "d1"}))).unwrap().contains("bends light"));
        let refused = call(&kb, &libs, READ_TOOL, &args(json!({"document_id": "d2"}))).unwrap_err();
        assert!(refused.to_string().contains("No document d2"), "{refused}");
    }

    #[test]
    fn no_library_means_a_refusal_not_data() {
        let e = call(&kb(), &[], SEARCH_TOOL, &args(json!({"query": "prism"}))).unwrap_err();
        assert!(matches!(e, KnowledgeRefusal::NoLibrary));
        assert!(call(&kb(), &["public".into()], SEARCH_TOOL, &args(json!({"query": " "}))).is_err());
    }
}
